// Package config is the server's configuration file: a strict YAML decoder
// (every error with its file, line and field), the built-in demo config, and
// the mapping of the file onto the libraries' own configurations. The
// libraries own the defaults and the rules; this package only maps the file
// onto them and reports their refusals against the file's lines.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/gqlproxy"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redisstore"
)

// demoYAML is the built-in demo config, the YAML block of docs/configuration.md's "The config file". Demo
// parses it with the same parser as a file, so the two cannot drift.
const demoYAML = `listen: ":8080"
# server: {max_conns_per_ip: 5000}   # default: a quarter of the open-file limit
store:
  # redis:                                   # absent: the in-memory store
  #   url: redis://127.0.0.1:6379/0          # exactly one of url, cluster, sentinel
  #   cluster: ["127.0.0.1:7001", "127.0.0.1:7002"]
  #   sentinel: {master: mymaster, addrs: ["127.0.0.1:26379"]}
  #   timeout: 50ms
  #   allow_eviction: false                # true: run over a Redis whose maxmemory-policy evicts (docs/redis.md)
  # memory: {max_keys: 1048576}            # the in-memory store's key cap
  gateways: 1           # instances sharing the store; on_store_error: local grants limit/gateways
  key_prefix: "rl:"
identity:
  api_key_header: X-API-Key
  trusted_proxies: []                    # e.g. ["10.0.0.0/8"]: peers whose X-Forwarded-For is believed
  api_keys:
    demo-free: {tenant: acme, plan: free}
    demo-enterprise: {tenant: bigco, plan: enterprise}
plans: {anonymous: 1, free: 1, enterprise: 10}
policies:
  api:        {algorithm: token_bucket, limit: 1000, period: 1m, burst: 150, key: [tenant, api_key], on_store_error: allow}
  streams:    {algorithm: concurrency,  limit: 5,    key: [tenant, api_key], on_store_error: allow}
  login_ip:   {algorithm: sliding_log,  limit: 10,   period: 5m, key: [ip],       on_store_error: deny, refund_status: [2xx]}
  login_user: {algorithm: sliding_log,  limit: 10,   period: 5m, key: [username], on_store_error: deny, refund_status: [2xx]}
  graphql:    {algorithm: token_bucket, limit: 50,   period: 1s, burst: 1000, key: [tenant, api_key], on_store_error: allow}
routes:
  - {match: "POST /login",    policies: [login_ip, login_user]}
  - {match: "GET /api/ticks", policies: [api, streams]}
  - {match: "/api/*",         policies: [api]}
graphql:
  path: /graphql
  policy: graphql
  schema: ""          # proxy mode: SDL file of the upstream, with @cost/@listSize, or introspect
  upstream: ""        # proxy mode: URL to forward priced operations to
  mode: enforce       # or measure
  max_cost: 1000
  default_list_size: 10
  mutation_cost: 10
  introspection: true
  introspection_cost: 1
  max_depth: 15
  max_aliases: 30
  max_fields: 1000
  max_tokens: 15000
  max_body_bytes: 1048576
  refund: true
  input_object_cost: 0  # weight of each input object value in the arguments (Apollo and IBM count 1)
  rejection_cost: 1     # charged for a request refused before it runs (it does not parse, breaks a limit, does not validate)
  persisted_queries: true # Automatic Persisted Queries: clients may send a registered query's sha256 alone
  # upstream_timeout: 20s  # proxy mode: below the 30 s write deadline, so a client gets 504, never an empty reply
  # forward_api_key: true
  # max_response_bytes: 0  # 0: replies are streamed, memory bounded either way
  # max_subscriptions: 10  # open subscriptions per key (embedded), in each process
  # subscription_events: charge  # embedded: each event costs what it ran; free: only the opening is charged
  # costs: {}             # schema coordinate -> cost settings over the schema's directives, or a file path
  # schema_refresh: 5m     # with schema: introspect; 0: at start only
  # introspection_headers: {}  # sent with the introspection query (never a client's headers)
  # trusted_documents: {file: persisted-documents.json, mode: enforce}  # only the listed operations run; or mode: log (docs/trusted-documents.md)
# cors: {allowed_origins: []}   # browser clients; rate-limit headers are exposed to them
# metrics: {listen: ""}         # /metrics on a listener of its own; "": the main one, to loopback clients only
admin:                # the admin API and console, on a listener of their own (docs/operators.md)
  listen: "127.0.0.1:9091"
  tokens: {oncall: "${COSTGATE_ADMIN_TOKEN}"}   # name -> token; or tokens_file: "name token" lines. The demo, unset: a random token, printed once
`

// DemoName stands for the file name in messages about the built-in config.
const DemoName = "built-in demo config"

// Defaults the server itself owns; every other default is the library's.
const (
	DefaultListen = ":8080"
	// WriteTimeout is the server's write deadline: the whole answer must be
	// written within it (graphql.upstream_timeout is below it).
	WriteTimeout = 30 * time.Second
	// OpenFilesPerConn is the share of the open-file limit one client
	// address may hold by default: a quarter (5,000 of 20,000 descriptors).
	OpenFilesPerConn = 4
	// MaxDefaultConnsPerIP bounds the default under an unlimited open-file limit.
	MaxDefaultConnsPerIP = 1 << 20
	// MinHashKeyLen is the shortest identity.hash_key accepted.
	MinHashKeyLen = identity.MinHashKeyLen
)

// Config is the server's configuration, field for field the YAML of docs/configuration.md.
// Build one with Parse, Load or Demo; they validate it. It maps the file
// onto the libraries' configurations (see build.go), which own the
// defaults and the rules.
type Config struct {
	// Listen is the address to serve on (default ":8080").
	Listen string       `yaml:"listen"`
	Server ServerConfig `yaml:"server"`
	Store  StoreConfig  `yaml:"store"`
	// Identity says who pays.
	Identity IdentityConfig `yaml:"identity"`
	// Plans multiply a policy's limit and burst, by plan name. A plan not
	// listed has multiplier 1. Empty unless the file gives it.
	Plans map[string]int64 `yaml:"plans"`
	// Policies by name. Empty unless the file gives them.
	Policies map[string]PolicyConfig `yaml:"policies"`
	// Routes are matched in order, first match wins. Empty unless the file gives them.
	Routes  []RouteConfig `yaml:"routes"`
	GraphQL GraphQLConfig `yaml:"graphql"`
	CORS    CORSConfig    `yaml:"cors"`
	// GRPCListen serves Envoy's rate-limit gRPC service
	// (envoy.service.ratelimit.v3.RateLimitService) on host:port; "" serves
	// none. It requires envoy.domains.
	GRPCListen string `yaml:"grpc_listen"`
	// Gateway configures /v1/check, the forward-auth check for nginx,
	// Traefik and Envoy's ext_authz.
	Gateway GatewayConfig `yaml:"gateway"`
	// Envoy maps the descriptors of Envoy's rate-limit filter to policies,
	// for grpc_listen.
	Envoy EnvoyConfig `yaml:"envoy"`
	// Metrics says where /metrics is served.
	Metrics MetricsConfig `yaml:"metrics"`
	// Admin serves the admin API and console (admin.go).
	Admin AdminConfig `yaml:"admin"`

	src *source
}

// ServerConfig bounds what one client can hold of the server.
type ServerConfig struct {
	// MaxConnsPerIP is the most connections one client address holds at
	// once; 0 (the default) is a quarter of the process's open-file limit.
	MaxConnsPerIP int `yaml:"max_conns_per_ip"`
}

// StoreConfig selects the store: Redis when Redis is set, else process memory.
type StoreConfig struct {
	// Redis is nil for the in-memory store.
	Redis  *RedisConfig `yaml:"redis"`
	Memory MemoryConfig `yaml:"memory"`
	// Gateways is the number of instances sharing the store (default 1);
	// on_store_error: local grants limit/gateways.
	Gateways int `yaml:"gateways"`
	// KeyPrefix starts every Redis key (default "rl:").
	KeyPrefix string `yaml:"key_prefix"`
}

// MemoryConfig is the in-memory store.
type MemoryConfig struct {
	// MaxKeys caps the keys held (default 1,048,576).
	MaxKeys int `yaml:"max_keys"`
}

// RedisConfig names one Redis deployment: exactly one of URL, Cluster, Sentinel.
type RedisConfig struct {
	// URL is a go-redis URL: redis://, rediss:// or unix://.
	URL string `yaml:"url"`
	// Cluster lists seed addresses (host:port) of a Redis Cluster.
	Cluster  []string        `yaml:"cluster"`
	Sentinel *SentinelConfig `yaml:"sentinel"`
	// Timeout bounds every store call (default 50ms).
	Timeout time.Duration `yaml:"timeout"`
	// AllowEviction starts the server over a Redis whose maxmemory-policy
	// evicts keys (anything but noeviction), with a warning; without it
	// such a Redis refuses the start (redisstore.Options.AllowEviction).
	AllowEviction bool `yaml:"allow_eviction"`
}

// SentinelConfig is a Sentinel-managed master.
type SentinelConfig struct {
	Master string   `yaml:"master"`
	Addrs  []string `yaml:"addrs"`
}

// IdentityConfig says who a request is.
type IdentityConfig struct {
	// APIKeyHeader carries the API key (default "X-API-Key").
	APIKeyHeader string `yaml:"api_key_header"`
	// TrustedProxies are CIDRs (or single IPs) of peers whose forwarded
	// headers are believed. Empty unless the file gives them.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// APIKeys maps each API key to its tenant and plan. Empty unless the file gives them.
	APIKeys map[string]APIKeyConfig `yaml:"api_keys"`
	// HashKey is the secret of the keyed hash applied to API keys, IPs and
	// usernames before they enter a store key. Required with a Redis store,
	// so that every gateway hashes identities alike; with the memory store
	// an empty key means a random per-process one.
	HashKey string `yaml:"hash_key"`
}

// APIKeyConfig is what an API key stands for.
type APIKeyConfig struct {
	Tenant string `yaml:"tenant"`
	Plan   string `yaml:"plan"`
}

// PolicyConfig is one policy as written; Policies turns it into a
// limiter.Policy.
type PolicyConfig struct {
	Algorithm limiter.Algorithm `yaml:"algorithm"`
	Limit     int64             `yaml:"limit"`
	Period    time.Duration     `yaml:"period"`
	// Burst is the capacity of the buckets; absent means Limit.
	Burst        int64            `yaml:"burst"`
	Key          []string         `yaml:"key"`
	Mode         limiter.Mode     `yaml:"mode"`
	OnStoreError limiter.FailMode `yaml:"on_store_error"`
	// LocalCache remembers a denied key in process until its retry-after and
	// denies it without a round trip (off by default).
	LocalCache bool `yaml:"local_cache"`
	// Sync makes the policy local-first: each gateway decides in process and
	// reconciles with the store every Sync (absent: a round trip per check).
	Sync time.Duration `yaml:"sync"`
	// Lease is, for algorithm: concurrency, the longest a hold lives
	// unrenewed (default 30s): the bound on the holds of a gateway that died.
	Lease time.Duration `yaml:"lease"`
	// RefundStatus lists response statuses (2xx, or 404) whose requests are
	// refunded when the response has ended: [2xx] counts failures only.
	RefundStatus []Status `yaml:"refund_status"`
}

// Status is a response status in refund_status: a class (2xx) or a code,
// written as a number (404) or a string ("404").
type Status string

// RouteConfig applies policies to the requests its match selects.
type RouteConfig struct {
	// Match is "METHOD /path" or "/path"; the path may end in "/*".
	Match string `yaml:"match"`
	// Policies are charged in this order, all or nothing. An empty list
	// exempts the route from later, broader rules.
	Policies []string `yaml:"policies"`
}

// GraphQLConfig is the GraphQL endpoint and its cost limits. A limit of 0
// takes the library's default, as an absent one does.
type GraphQLConfig struct {
	// Path serves GraphQL; "" serves none.
	Path string `yaml:"path"`
	// Policy is the token_bucket charged each operation's cost; required
	// while Path is set.
	Policy string `yaml:"policy"`
	// Schema (an SDL file) and Upstream (a URL) together select proxy mode.
	Schema            string `yaml:"schema"`
	Upstream          string `yaml:"upstream"`
	Mode              string `yaml:"mode"`
	MaxCost           int64  `yaml:"max_cost"`
	DefaultListSize   int64  `yaml:"default_list_size"`
	MutationCost      int64  `yaml:"mutation_cost"`
	Introspection     bool   `yaml:"introspection"`
	IntrospectionCost int64  `yaml:"introspection_cost"`
	MaxDepth          int    `yaml:"max_depth"`
	MaxAliases        int    `yaml:"max_aliases"`
	MaxFields         int    `yaml:"max_fields"`
	MaxTokens         int    `yaml:"max_tokens"`
	MaxBodyBytes      int64  `yaml:"max_body_bytes"`
	// RejectionCost is charged for a request refused before it runs
	// (default 1), or what reading it cost when that is more.
	RejectionCost int64 `yaml:"rejection_cost"`
	// MaxSubscriptions bounds the subscriptions one key has open at once,
	// embedded (default 10), counted in each process.
	MaxSubscriptions int   `yaml:"max_subscriptions"`
	Refund           bool  `yaml:"refund"`
	InputObjectCost  int64 `yaml:"input_object_cost"`
	// Metrics bounds the per-operation metrics.
	Metrics GraphQLMetricsConfig `yaml:"metrics"`
	// PersistedQueries serves Automatic Persisted Queries (Apollo's
	// extensions.persistedQuery protocol), embedded and in proxy mode.
	PersistedQueries bool `yaml:"persisted_queries"`
	// UpstreamTimeout bounds one call to the upstream in proxy mode, to its
	// reply's last byte (default 20s). It must be below the server's write
	// deadline (WriteTimeout), so that a client gets 504, not an empty reply.
	UpstreamTimeout time.Duration `yaml:"upstream_timeout"`
	// ForwardAPIKey forwards the API-key header to the upstream (default true).
	ForwardAPIKey bool `yaml:"forward_api_key"`
	// MaxResponseBytes bounds the upstream's reply (0: no bound, the reply
	// is streamed); a reply over it is 502 UPSTREAM_ERROR.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// Costs maps schema coordinates to cost settings over the schema's own
	// directives, inline or in a file (costs: costs.yaml); embedded and in
	// proxy mode.
	Costs *CostsConfig `yaml:"costs"`
	// SchemaRefresh is how often a schema read by introspection (schema:
	// introspect) is read again (default 5m; 0: at start only).
	SchemaRefresh time.Duration `yaml:"schema_refresh"`
	// IntrospectionHeaders are sent with the introspection query, and
	// nothing else is: never a client's headers.
	IntrospectionHeaders map[string]string `yaml:"introspection_headers"`
	// TrustedDocuments, when given, are the operations clients may run
	// (docs/trusted-documents.md); embedded and in proxy mode.
	TrustedDocuments *TrustedDocumentsConfig `yaml:"trusted_documents"`
	// SubscriptionEvents is charge (default: each event of a subscription
	// is charged its actual cost as it is sent) or free (a subscription
	// costs its price when it opens, whatever its events cost), embedded.
	SubscriptionEvents string `yaml:"subscription_events"`
}

// TrustedDocumentsConfig is graphql.trusted_documents.
type TrustedDocumentsConfig struct {
	// File is Apollo's persisted query manifest, or a {"id": "document"}
	// map (Relay, GraphQL Codegen); a relative path is the config file's
	// directory's. It is read at start, on SIGHUP and when it changes.
	File string `yaml:"file"`
	// Mode is enforce (the default: only the listed documents run) or log
	// (others run, logged and counted).
	Mode string `yaml:"mode"`
}

// The values of graphql.subscription_events.
const (
	SubscriptionEventsCharge = "charge"
	SubscriptionEventsFree   = "free"
)

// SchemaIntrospect, as graphql.schema, reads the upstream's schema by
// introspection instead of from an SDL file.
const SchemaIntrospect = "introspect"

// DefaultSchemaRefresh is graphql.schema_refresh's default.
const DefaultSchemaRefresh = 5 * time.Minute

// GatewayConfig configures /v1/check.
type GatewayConfig struct {
	// UsernameHeader is the header a gateway passes the login username in,
	// for policies keyed by username (normalised and limited as the
	// username of a JSON login body). "": the body is read, when the
	// gateway forwards one.
	UsernameHeader string `yaml:"username_header"`
	// Check serves /v1/check to the peers in identity.trusted_proxies
	// (default true). false turns the forward-auth door off, for a costgate
	// that trusts a load balancer's X-Forwarded-For but answers no gateway's
	// check: its routes may then use refund_status and concurrency policies,
	// which need to see the response end.
	Check *bool `yaml:"check"`
}

// ServesCheck reports whether /v1/check answers gateways: trusted proxies
// are listed and gateway.check is not false.
func (c *Config) ServesCheck() bool {
	return len(c.Identity.TrustedProxies) > 0 && (c.Gateway.Check == nil || *c.Gateway.Check)
}

// EnvoyConfig maps Envoy's rate-limit descriptors to policies.
type EnvoyConfig struct {
	// Domains maps each domain (the domain of Envoy's rate-limit filter) to
	// its descriptor tree, shaped like envoyproxy/ratelimit's config.
	// Empty unless the file gives it.
	Domains map[string][]EnvoyDescriptor `yaml:"domains"`
}

// EnvoyDescriptor is one level of a descriptor tree: an entry's key and
// value, the key part its value supplies, the policies a descriptor ending
// here is charged, and the levels below.
type EnvoyDescriptor struct {
	Key string `yaml:"key"`
	// Value matches exactly; a trailing * matches a prefix; "" any value.
	Value string `yaml:"value"`
	// Part is the identity key part the entry's value is: ip, api_key,
	// username, route or header:NAME.
	Part        string            `yaml:"part"`
	Policies    []string          `yaml:"policies"`
	Descriptors []EnvoyDescriptor `yaml:"descriptors"`
}

// MetricsConfig says where /metrics is served. Metrics name GraphQL
// operations, a tenant's business: on the main listener /metrics answers
// only a client whose address, after the trusted-proxy walk, is loopback.
type MetricsConfig struct {
	// Listen serves /metrics on a listener of its own (host:port, e.g.
	// "127.0.0.1:9090"), and no longer on the main one; "" (the default):
	// the main listener, to loopback clients only.
	Listen string `yaml:"listen"`
}

// CORSConfig lets browser clients on other origins call the server.
type CORSConfig struct {
	// AllowedOrigins are origins ("https://app.example.com") allowed to
	// call, or "*" for any. Empty: no cross-origin access.
	AllowedOrigins []string `yaml:"allowed_origins"`
}

// source remembers where each field came from, for messages.
type source struct {
	name string
	// lines maps a field path to the line of its key (or list item).
	lines map[string]int
	// given holds the paths of fields the file set to a non-null value.
	given map[string]bool
	// parents maps a path to its parent, for the nearest known line.
	parents map[string]string
	// entries maps parent+"\x00"+key to the entry's path (API keys are redacted).
	entries map[string]string
	// origins names the flag and variable that replaced a field.
	origins map[string]string
}

func newSource(name string) *source {
	return &source{
		name:    name,
		lines:   map[string]int{},
		given:   map[string]bool{},
		parents: map[string]string{},
		entries: map[string]string{},
		origins: map[string]string{},
	}
}

// Error is one problem in a config: the file, the line when known, the
// field path (such as policies.api.limit or routes[1].policies[0]) and the
// reason.
type Error struct {
	File   string
	Line   int
	Field  string
	Reason string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Reason)
	return b.String()
}

// maxErrors caps how many problems one error reports.
const maxErrors = 20

// joinErrors returns errs as one error, one line each, the first maxErrors of them.
func joinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, 0, min(len(errs), maxErrors)+1)
	for _, e := range errs[:min(len(errs), maxErrors)] {
		out = append(out, e)
	}
	if n := len(errs) - maxErrors; n > 0 {
		out = append(out, fmt.Errorf("%s: %d more errors", errs[0].File, n))
	}
	return errors.Join(out...)
}

// Demo returns the built-in demo config of docs/configuration.md: the in-memory store,
// no trusted proxies, two demo API keys. Each call returns a fresh copy.
func Demo() *Config {
	c, err := parse(DemoName, []byte(demoYAML), false)
	if err != nil {
		// demoYAML is a constant, and TestDemo parses it.
		panic("costgate: the built-in demo config is invalid: " + err.Error())
	}
	return c
}

// IsDemo reports whether c is the built-in demo config.
func (c *Config) IsDemo() bool { return c.src != nil && c.src.name == DemoName }

// Load reads and validates the config file at path; "" means the built-in
// demo config. A relative graphql.schema is resolved against the file's
// directory.
func Load(path string) (*Config, error) {
	if path == "" {
		return Demo(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if s := c.GraphQL.Schema; s != "" && s != SchemaIntrospect && !filepath.IsAbs(s) {
		c.GraphQL.Schema = filepath.Join(filepath.Dir(path), s)
	}
	if td := c.GraphQL.TrustedDocuments; td != nil && td.File != "" && !filepath.IsAbs(td.File) {
		td.File = filepath.Join(filepath.Dir(path), td.File)
	}
	if err := c.loadCostsFile(filepath.Dir(path)); err != nil {
		return nil, err
	}
	c.resolveAdminPaths(filepath.Dir(path))
	return c, nil
}

// Parse parses and validates a config file; name is used in messages.
// Every scalar the file leaves out takes its default; maps and lists are
// empty unless the file gives them; the store is memory unless store.redis
// is set. The error lists every problem found, one per line.
func Parse(name string, data []byte) (*Config, error) {
	return parse(name, data, true)
}

func parse(name string, data []byte, fromFile bool) (*Config, error) {
	c := defaults()
	c.src = newSource(name)
	// goccy/go-yaml keeps a byte order mark as part of the first key.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, joinErrors([]*Error{syntaxError(name, err)})
	}
	var body ast.Node
	for _, doc := range file.Docs {
		if doc == nil || isNil(doc.Body) {
			continue
		}
		if body != nil {
			return nil, joinErrors([]*Error{{File: name, Line: line(doc.Body), Reason: "one YAML document expected, found a second"}})
		}
		body = doc.Body
	}
	d := &decoder{src: c.src, aliases: map[*ast.AliasNode]ast.Node{}, merged: map[ast.Node][]pair{}}
	d.budget = expansion*d.collectAnchors(body, map[string]ast.Node{}) + 1024
	if body != nil {
		d.decode("", nil, body, reflect.ValueOf(c).Elem())
	}
	if len(d.errs) > 0 {
		return nil, joinErrors(d.errs)
	}
	if !fromFile {
		clear(c.src.lines) // the user cannot see the built-in file's lines
	}
	if c.Store.Redis != nil && !c.src.given["store.redis.timeout"] {
		c.Store.Redis.Timeout = limiter.DefaultTimeout
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// defaults is every scalar at its default, every map and list empty. The
// numbers are the libraries' own.
func defaults() *Config {
	c := &Config{
		Listen: DefaultListen,
		Store: StoreConfig{
			Gateways:  1,
			KeyPrefix: redisstore.DefaultKeyPrefix,
			Memory:    MemoryConfig{MaxKeys: memstore.DefaultMaxKeys},
		},
		Identity: IdentityConfig{APIKeyHeader: identity.DefaultAPIKeyHeader},
		GraphQL: GraphQLConfig{
			Path:              "/graphql",
			Policy:            "graphql",
			Mode:              "enforce",
			MaxCost:           gqllimit.DefaultMaxCost,
			DefaultListSize:   complexity.DefaultListSize,
			MutationCost:      complexity.DefaultMutationCost,
			Introspection:     true,
			IntrospectionCost: complexity.DefaultIntrospectionCost,
			MaxDepth:          gqllimit.DefaultMaxDepth,
			MaxAliases:        gqllimit.DefaultMaxAliases,
			MaxFields:         gqllimit.DefaultMaxFields,
			MaxTokens:         gqllimit.DefaultMaxTokens,
			MaxBodyBytes:      gqllimit.DefaultMaxBodyBytes,
			MaxSubscriptions:  gqllimit.DefaultMaxSubscriptions,
			RejectionCost:     gqllimit.DefaultRejectionCost,
			Refund:            true,
			PersistedQueries:  true,
			UpstreamTimeout:   gqlproxy.DefaultTimeout,
			ForwardAPIKey:     true,
			SchemaRefresh:     DefaultSchemaRefresh,
		},
	}
	c.GraphQL.SubscriptionEvents = SubscriptionEventsCharge
	return c
}

func syntaxError(name string, err error) *Error {
	var yerr yaml.Error
	if errors.As(err, &yerr) {
		ce := &Error{File: name, Reason: "YAML: " + yerr.GetMessage()}
		if tk := yerr.GetToken(); tk != nil && tk.Position != nil {
			ce.Line = tk.Position.Line
		}
		return ce
	}
	return &Error{File: name, Reason: "YAML: " + err.Error()}
}

// Source names where the config came from: the file, or the built-in demo config.
func (c *Config) Source() string {
	if c.src == nil {
		return ""
	}
	return c.src.name
}

// ApplyOverrides applies the -addr and -redis values (flag, else environment
// variable, as resolve picks them) over the file: a non-empty addr replaces
// listen, a non-empty redisURL replaces the whole store.redis block (its
// timeout back at the default). The result is validated again.
func (c *Config) ApplyOverrides(addr, redisURL string) error {
	if c.src == nil {
		c.src = newSource("config")
	}
	if addr != "" {
		c.Listen = addr
		c.src.origins["listen"] = "-addr or COSTGATE_ADDR"
	}
	if redisURL != "" {
		c.Store.Redis = &RedisConfig{URL: redisURL, Timeout: limiter.DefaultTimeout}
		c.src.origins["store.redis"] = "-redis or COSTGATE_REDIS_URL"
	}
	return c.Validate()
}

// Resolve picks an override: the flag when it was set on the command line
// (even to ""), else the environment variable. "" means no override: the
// config file, or the default, stands.
func Resolve(flagVal string, flagSet bool, env string) string {
	if flagSet {
		return flagVal
	}
	return env
}
