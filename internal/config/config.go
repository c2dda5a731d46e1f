package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
)

// demoYAML is the built-in demo config, the YAML block of SPEC §5. DemoConfig
// parses it with the same parser as a file, so the two cannot drift.
const demoYAML = `listen: ":8080"
store:
  # redis:                                   # absent: the in-memory store
  #   url: redis://127.0.0.1:6379/0          # exactly one of url, cluster, sentinel
  #   cluster: ["127.0.0.1:7001", "127.0.0.1:7002"]
  #   sentinel: {master: mymaster, addrs: ["127.0.0.1:26379"]}
  #   timeout: 50ms
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
  login_ip:   {algorithm: sliding_log,  limit: 10,   period: 5m, key: [ip],       on_store_error: deny}
  login_user: {algorithm: sliding_log,  limit: 10,   period: 5m, key: [username], on_store_error: deny}
  graphql:    {algorithm: token_bucket, limit: 50,   period: 1s, burst: 1000, key: [tenant, api_key], on_store_error: allow}
routes:
  - {match: "POST /login", policies: [login_ip, login_user]}
  - {match: "/api/*",      policies: [api]}
graphql:
  path: /graphql
  policy: graphql
  schema: ""          # proxy mode: SDL file of the upstream, with @cost/@listSize
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
`

// demoName stands for the file name in messages about the built-in config.
const demoName = "built-in demo config"

// Defaults of the scalars, as SPEC §5 shows them.
const (
	DefaultListen       = ":8080"
	DefaultAPIKeyHeader = "X-API-Key"
	DefaultGraphQLPath  = "/graphql"
	// DefaultStoreTimeout bounds every Redis call unless store.redis.timeout says otherwise.
	DefaultStoreTimeout = limiter.DefaultTimeout
	// MinHashKeyLen is the shortest identity.hash_key accepted: a guessable
	// key would let anyone who reads Redis reverse hashed IPs.
	MinHashKeyLen = 16
)

// The GraphQL modes.
const (
	GraphQLEnforce = "enforce"
	GraphQLMeasure = "measure"
)

// Anonymous is the tenant and the plan of a request without an API key.
const Anonymous = "anonymous"

// keyParts are the parts a policy key may be built from (SPEC §3).
var keyParts = []string{"ip", "api_key", "tenant", "plan", "username", "route"}

// Config is the server's configuration, field for field the YAML of SPEC §5.
// Build one with ParseConfig, LoadConfig or DemoConfig; they validate it.
type Config struct {
	// Listen is the address to serve on (default ":8080").
	Listen   string         `yaml:"listen"`
	Store    StoreConfig    `yaml:"store"`
	Identity IdentityConfig `yaml:"identity"`
	// Plans multiply a policy's limit and burst, by plan name. A plan not
	// listed has multiplier 1. Empty unless the file gives it.
	Plans map[string]int64 `yaml:"plans"`
	// Policies by name. Empty unless the file gives them.
	Policies map[string]PolicyConfig `yaml:"policies"`
	// Routes are matched in order, first match wins. Empty unless the file gives them.
	Routes  []RouteConfig `yaml:"routes"`
	GraphQL GraphQLConfig `yaml:"graphql"`

	src *source
}

// StoreConfig selects the store: Redis when Redis is set, else process memory.
type StoreConfig struct {
	// Redis is nil for the in-memory store.
	Redis *RedisConfig `yaml:"redis"`
	// Gateways is the number of instances sharing the store (default 1);
	// on_store_error: local grants limit/gateways.
	Gateways int `yaml:"gateways"`
	// KeyPrefix starts every Redis key (default "rl:").
	KeyPrefix string `yaml:"key_prefix"`
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
	// TrustedProxies are CIDRs (or single IPs) of peers whose
	// X-Forwarded-For is believed. Empty unless the file gives them.
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

// PolicyConfig is one policy as written; Config.Policies turns it into a
// limiter.Policy.
type PolicyConfig struct {
	Algorithm limiter.Algorithm `yaml:"algorithm"`
	Limit     int64             `yaml:"limit"`
	Period    time.Duration     `yaml:"period"`
	// Burst is the capacity of the buckets; 0 (absent) means Limit.
	Burst        int64            `yaml:"burst"`
	Key          []string         `yaml:"key"`
	Mode         limiter.Mode     `yaml:"mode"`
	OnStoreError limiter.FailMode `yaml:"on_store_error"`
}

// RouteConfig applies policies to the requests its match selects.
type RouteConfig struct {
	// Match is "METHOD /path" or "/path"; the path may end in "/*".
	Match string `yaml:"match"`
	// Policies are charged in this order, all or nothing. An empty list
	// exempts the route from later, broader rules.
	Policies []string `yaml:"policies"`
}

// GraphQLConfig is the GraphQL endpoint and its cost limits. A limit of 0
// disables that check, but for max_tokens and max_body_bytes, which are
// always on.
type GraphQLConfig struct {
	Path string `yaml:"path"`
	// Policy is the token_bucket charged each operation's cost. A file
	// that neither sets it nor defines a policy named "graphql" leaves it
	// empty: operations are priced and bounded, not throttled.
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
	Refund            bool   `yaml:"refund"`
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

// ConfigError is one problem in a config: the file, the line when known, the
// field path (such as policies.api.limit or routes[1].policies[0]) and the
// reason.
type ConfigError struct {
	File   string
	Line   int
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
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
func joinErrors(errs []*ConfigError) error {
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

// DemoConfig returns the built-in demo config of SPEC §5: the in-memory
// store, no trusted proxies, two demo API keys. Each call returns a fresh copy.
func DemoConfig() *Config {
	c, err := parseConfig(demoName, []byte(demoYAML), false)
	if err != nil {
		// demoYAML is a constant, and TestDemoConfig parses it.
		panic("costgate: the built-in demo config is invalid: " + err.Error())
	}
	return c
}

// LoadConfig reads and validates the config file at path; "" means the
// built-in demo config. A relative graphql.schema is resolved against the
// file's directory.
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		return DemoConfig(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := ParseConfig(path, data)
	if err != nil {
		return nil, err
	}
	if s := c.GraphQL.Schema; s != "" && !filepath.IsAbs(s) {
		c.GraphQL.Schema = filepath.Join(filepath.Dir(path), s)
	}
	return c, nil
}

// ParseConfig parses and validates a config file; name is used in messages.
// Every scalar the file leaves out takes its SPEC default; maps and lists are
// empty unless the file gives them; the store is memory unless store.redis
// is set. The error lists every problem found, one per line.
func ParseConfig(name string, data []byte) (*Config, error) {
	return parseConfig(name, data, true)
}

func parseConfig(name string, data []byte, fromFile bool) (*Config, error) {
	c := defaultConfig()
	c.src = newSource(name)
	// goccy/go-yaml keeps a byte order mark as part of the first key.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, joinErrors([]*ConfigError{syntaxError(name, err)})
	}
	var body ast.Node
	for _, doc := range file.Docs {
		if doc == nil || isNil(doc.Body) {
			continue
		}
		if body != nil {
			return nil, joinErrors([]*ConfigError{{File: name, Line: line(doc.Body), Reason: "one YAML document expected, found a second"}})
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
		c.Store.Redis.Timeout = DefaultStoreTimeout
	}
	if fromFile && !c.src.given["graphql.policy"] {
		if _, ok := c.Policies["graphql"]; !ok {
			// The default names a policy only the demo defines: a file
			// without one gets priced, unthrottled GraphQL, not an error.
			c.GraphQL.Policy = ""
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// defaultConfig is every scalar at its default, every map and list empty.
func defaultConfig() *Config {
	return &Config{
		Listen: DefaultListen,
		Store: StoreConfig{
			Gateways:  1,
			KeyPrefix: redisstore.DefaultKeyPrefix,
		},
		Identity: IdentityConfig{APIKeyHeader: DefaultAPIKeyHeader},
		GraphQL: GraphQLConfig{
			Path:              DefaultGraphQLPath,
			Policy:            "graphql",
			Mode:              GraphQLEnforce,
			MaxCost:           1000,
			DefaultListSize:   10,
			MutationCost:      10,
			Introspection:     true,
			IntrospectionCost: 1,
			MaxDepth:          15,
			MaxAliases:        30,
			MaxFields:         1000,
			MaxTokens:         15000,
			MaxBodyBytes:      1 << 20,
			Refund:            true,
		},
	}
}

func syntaxError(name string, err error) *ConfigError {
	var yerr yaml.Error
	if errors.As(err, &yerr) {
		ce := &ConfigError{File: name, Reason: "YAML: " + yerr.GetMessage()}
		if tk := yerr.GetToken(); tk != nil && tk.Position != nil {
			ce.Line = tk.Position.Line
		}
		return ce
	}
	return &ConfigError{File: name, Reason: "YAML: " + err.Error()}
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
		c.Store.Redis = &RedisConfig{URL: redisURL, Timeout: DefaultStoreTimeout}
		c.src.origins["store.redis"] = "-redis or COSTGATE_REDIS_URL"
	}
	return c.Validate()
}

// resolve picks an override: the flag when it was set on the command line
// (even to ""), else the environment variable. "" means no override: the
// config file, or the default, stands.
func resolve(flagVal string, flagSet bool, env string) string {
	if flagSet {
		return flagVal
	}
	return env
}

// PlanMultiplier is the factor the plan applies to limit and burst: its
// entry in plans, else 1.
func (c *Config) PlanMultiplier(plan string) int64 {
	if m, ok := c.Plans[plan]; ok {
		return m
	}
	return 1
}

// LimiterPolicies returns the policies as validated limiter policies by
// name, Name set, at plan multiplier 1 (see PlanMultiplier).
func (c *Config) LimiterPolicies() (map[string]*limiter.Policy, error) {
	out := make(map[string]*limiter.Policy, len(c.Policies))
	for name, pc := range c.Policies {
		p := pc.policy(name)
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		out[name] = p
	}
	return out, nil
}

// policy is pc as a limiter.Policy named name.
func (pc PolicyConfig) policy(name string) *limiter.Policy {
	return &limiter.Policy{
		Name:         name,
		Algorithm:    pc.Algorithm,
		Limit:        pc.Limit,
		Period:       pc.Period,
		Burst:        pc.Burst,
		Key:          slices.Clone(pc.Key),
		Mode:         pc.Mode,
		OnStoreError: pc.OnStoreError,
	}
}

// TrustedPrefixes returns identity.trusted_proxies as prefixes; a single IP
// is a /32 or /128. Entries that do not parse (Validate reports them) are left out.
func (c *Config) TrustedPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(c.Identity.TrustedProxies))
	for _, s := range c.Identity.TrustedProxies {
		if p, err := parsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("ParseAddr(%q): IP with a zone", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// RouteRule is a parsed route: requests whose method (when set) and path
// match are charged Policies.
type RouteRule struct {
	// Method is "" for every method.
	Method string
	// Path is the exact path, or with Prefix the prefix, ending in "/",
	// that "/api/*" stands for.
	Path     string
	Prefix   bool
	Policies []string
}

// Matches reports whether the rule selects a request. A prefix rule
// "/api/*" matches "/api/" and every path below it, not "/api" (as chi does).
func (r RouteRule) Matches(method, urlPath string) bool {
	if r.Method != "" && r.Method != method {
		return false
	}
	if r.Prefix {
		return strings.HasPrefix(urlPath, r.Path)
	}
	return urlPath == r.Path
}

// covers reports whether every request b matches is matched by r.
func (r RouteRule) covers(b RouteRule) bool {
	if r.Method != "" && r.Method != b.Method {
		return false
	}
	if r.Prefix {
		return strings.HasPrefix(b.Path, r.Path)
	}
	return !b.Prefix && r.Path == b.Path
}

// RouteRules returns the routes parsed, in config order (first match wins).
func (c *Config) RouteRules() ([]RouteRule, error) {
	out := make([]RouteRule, 0, len(c.Routes))
	for i, rc := range c.Routes {
		r, err := ParseRouteMatch(rc.Match)
		if err != nil {
			return nil, fmt.Errorf("config: routes[%d].match: %w", i, err)
		}
		r.Policies = slices.Clone(rc.Policies)
		out = append(out, r)
	}
	return out, nil
}

// ParseRouteMatch parses a route match, "METHOD /path" or "/path", where
// the path may end in "/*" to match everything below it.
func ParseRouteMatch(s string) (RouteRule, error) {
	var r RouteRule
	f := strings.Fields(s)
	switch len(f) {
	case 1:
		r.Path = f[0]
	case 2:
		r.Method, r.Path = f[0], f[1]
	default:
		return r, fmt.Errorf(`%q: want "METHOD /path" or "/path"`, s)
	}
	if r.Method != "" && strings.ContainsFunc(r.Method, func(c rune) bool { return c < 'A' || c > 'Z' }) {
		return r, fmt.Errorf("%q: method %q: want an upper-case HTTP method such as GET or POST", s, r.Method)
	}
	p := r.Path
	if !strings.HasPrefix(p, "/") {
		return r, fmt.Errorf("%q: path %q must start with /", s, p)
	}
	if strings.HasSuffix(p, "/*") {
		r.Prefix = true
		p = strings.TrimSuffix(p, "*")
	}
	switch {
	case strings.Contains(p, "*"):
		return r, fmt.Errorf("%q: * may only end the path, as /*", s)
	case strings.ContainsAny(p, "{}"):
		return r, fmt.Errorf("%q: path parameters are not supported; match a prefix with /*", s)
	case strings.ContainsAny(p, "?#"):
		return r, fmt.Errorf("%q: a path has no query or fragment", s)
	case strings.ContainsFunc(p, unicode.IsControl):
		return r, fmt.Errorf("%q: control character in path", s)
	}
	if trimmed := strings.TrimSuffix(p, "/"); trimmed != "" && path.Clean(trimmed) != trimmed {
		return r, fmt.Errorf("%q: path is not clean (want %q)", s, path.Clean(trimmed))
	}
	r.Path = p
	return r, nil
}

// redactURLError is err without the URL it may quote: a Redis URL can carry
// a password.
func redactURLError(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return "invalid URL: " + uerr.Err.Error()
	}
	return err.Error()
}

// Warnings lists what is legal but probably a mistake, for the log.
func (c *Config) Warnings() []string {
	var out []string
	if len(c.Plans) > 0 {
		for _, key := range sortedKeys(c.Identity.APIKeys) {
			plan := c.Identity.APIKeys[key].Plan
			if _, ok := c.Plans[plan]; !ok {
				out = append(out, fmt.Sprintf("%s.plan: plan %q is not in plans: multiplier 1",
					c.entryPath("identity.api_keys", key), plan))
			}
		}
	}
	used := map[string]bool{c.GraphQL.Policy: true}
	for _, r := range c.Routes {
		for _, p := range r.Policies {
			used[p] = true
		}
	}
	for _, name := range sortedKeys(c.Policies) {
		if !used[name] {
			out = append(out, fmt.Sprintf("%s: no route uses it", c.entryPath("policies", name)))
		}
	}
	return out
}

// Validate checks the whole config and reports every problem found.
func (c *Config) Validate() error {
	if c.src == nil {
		c.src = newSource("config")
	}
	v := &validator{c: c}
	v.listen()
	v.store()
	v.identity()
	v.plans()
	v.policies()
	v.routes()
	v.graphql()
	slices.SortStableFunc(v.errs, func(a, b *ConfigError) int {
		// Known lines first, in file order; the rest keep their order.
		if (a.Line == 0) != (b.Line == 0) {
			return cmp.Compare(b.Line, a.Line)
		}
		return cmp.Compare(a.Line, b.Line)
	})
	return joinErrors(v.errs)
}

type validator struct {
	c    *Config
	errs []*ConfigError
}

func (v *validator) fail(field, format string, args ...any) {
	src := v.c.src
	e := &ConfigError{File: src.name, Field: field, Reason: fmt.Sprintf(format, args...)}
	for p := field; p != ""; p = src.parent(p) {
		if origin, ok := src.origins[p]; ok {
			// The file's line would point at what the override replaced.
			e.Field += " (from " + origin + ")"
			v.errs = append(v.errs, e)
			return
		}
	}
	for p := field; p != ""; p = src.parent(p) {
		if l, ok := src.lines[p]; ok && l > 0 {
			e.Line = l
			break
		}
	}
	v.errs = append(v.errs, e)
}

// parent is the path p belongs to: as the decoder recorded it, else by
// cutting the last segment (a field the file left out).
func (s *source) parent(p string) string {
	if q, ok := s.parents[p]; ok {
		return q
	}
	return parentPath(p)
}

// parentPath strips the last segment of a path.
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// entryPath is the path of a map entry as the decoder named it.
func (c *Config) entryPath(parent, key string) string {
	if c.src != nil {
		if p, ok := c.src.entries[parent+"\x00"+key]; ok {
			return p
		}
	}
	if parent == "identity.api_keys" {
		return parent + "[redacted]"
	}
	return childPath(parent, key)
}

func (v *validator) listen() {
	if _, _, err := net.SplitHostPort(v.c.Listen); err != nil {
		v.fail("listen", "want host:port such as \":8080\", got %q", v.c.Listen)
	}
}

func (v *validator) store() {
	s := v.c.Store
	if s.Gateways < 1 {
		v.fail("store.gateways", "must be at least 1, got %d", s.Gateways)
	}
	switch {
	case s.KeyPrefix == "":
		v.fail("store.key_prefix", "must not be empty (default %q)", redisstore.DefaultKeyPrefix)
	case strings.ContainsAny(s.KeyPrefix, "{}"):
		// A brace would become every key's hash tag: one Cluster slot for all.
		v.fail("store.key_prefix", "must not contain { or }, got %q", s.KeyPrefix)
	}
	r := s.Redis
	if r == nil {
		return
	}
	var set []string
	if r.URL != "" {
		set = append(set, "url")
	}
	if len(r.Cluster) > 0 {
		set = append(set, "cluster")
	}
	if r.Sentinel != nil {
		set = append(set, "sentinel")
	}
	switch len(set) {
	case 0:
		v.fail("store.redis", "one of url, cluster or sentinel is required")
	case 1:
	default:
		v.fail("store.redis", "exactly one of url, cluster or sentinel, got %s", strings.Join(set, " and "))
	}
	if r.URL != "" {
		if _, err := redis.ParseURL(r.URL); err != nil {
			v.fail("store.redis.url", "%s", redactURLError(err))
		}
	}
	for i, a := range r.Cluster {
		v.hostPort(fmt.Sprintf("store.redis.cluster[%d]", i), a)
	}
	if sn := r.Sentinel; sn != nil {
		if sn.Master == "" {
			v.fail("store.redis.sentinel.master", "required: the name of the master")
		}
		if len(sn.Addrs) == 0 {
			v.fail("store.redis.sentinel.addrs", "required: at least one sentinel host:port")
		}
		for i, a := range sn.Addrs {
			v.hostPort(fmt.Sprintf("store.redis.sentinel.addrs[%d]", i), a)
		}
	}
	if r.Timeout <= 0 {
		v.fail("store.redis.timeout", "must be positive, got %s", r.Timeout)
	}
}

func (v *validator) hostPort(field, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		v.fail(field, "want host:port, got %q", addr)
	}
}

func (v *validator) identity() {
	id := v.c.Identity
	if !isToken(id.APIKeyHeader) {
		v.fail("identity.api_key_header", "want an HTTP header name, got %q", id.APIKeyHeader)
	}
	switch {
	case id.HashKey == "" && v.c.Store.Redis != nil && v.c.src.name != demoName:
		// The built-in demo config, pointed at Redis with -redis, runs with a
		// public demo key (the server warns): its API keys are public too.
		why := ""
		if origin, ok := v.c.src.origins["store.redis"]; ok {
			why = " (the store is Redis because of " + origin + ")"
		}
		v.fail("identity.hash_key", "required with a Redis store: every gateway must hash identities alike%s", why)
	case id.HashKey != "" && len(id.HashKey) < MinHashKeyLen:
		// Never echo the secret.
		v.fail("identity.hash_key", "must be at least %d bytes, got %d", MinHashKeyLen, len(id.HashKey))
	}
	for i, s := range id.TrustedProxies {
		if _, err := parsePrefix(s); err != nil {
			v.fail(fmt.Sprintf("identity.trusted_proxies[%d]", i), "want a CIDR such as 10.0.0.0/8 or an IP, got %q", s)
		}
	}
	for _, key := range sortedKeys(id.APIKeys) {
		field := v.c.entryPath("identity.api_keys", key)
		ak := id.APIKeys[key]
		if strings.TrimSpace(key) == "" {
			v.fail(field, "an API key must not be empty")
		}
		switch ak.Tenant {
		case "":
			v.fail(field+".tenant", "required")
		case Anonymous:
			v.fail(field+".tenant", "%q is the tenant of requests without a key", Anonymous)
		}
		switch ak.Plan {
		case "":
			v.fail(field+".plan", "required")
		case Anonymous:
			v.fail(field+".plan", "%q is the plan of requests without a key", Anonymous)
		}
	}
}

func (v *validator) plans() {
	for _, name := range sortedKeys(v.c.Plans) {
		field := v.c.entryPath("plans", name)
		if name == "" {
			v.fail(field, "a plan name must not be empty")
		}
		if m := v.c.Plans[name]; m < 1 {
			v.fail(field, "multiplier must be at least 1, got %d", m)
		}
	}
}

func (v *validator) policies() {
	var maxPlan string
	var maxMult int64 = 1
	for _, name := range sortedKeys(v.c.Plans) {
		if m := v.c.Plans[name]; m > maxMult {
			maxPlan, maxMult = name, m
		}
	}
	for _, name := range sortedKeys(v.c.Policies) {
		pc := v.c.Policies[name]
		field := v.c.entryPath("policies", name)
		if !isPolicyName(name) {
			// The name goes into Redis keys, headers and metric labels.
			v.fail(field, "policy names are letters, digits, '_', '-' and '.', got %q", name)
			continue
		}
		p := pc.policy(name)
		if v.c.src.given[field+".burst"] && pc.Burst < 1 {
			v.fail(field+".burst", "must be at least 1, got %d (leave it out for burst = limit)", pc.Burst)
			p.Burst = 0 // reported; let Validate look at the rest
		}
		if err := p.Validate(); err != nil {
			v.policyError(name, field, err, "")
		} else if maxMult > 1 && p.Limit > 0 {
			// Plans multiply limit and burst: the largest must still validate.
			scaled := *p
			if p.Limit > limiter.MaxExact/maxMult || p.Burst > limiter.MaxExact/maxMult {
				v.fail(field+".limit", "times plan %q (×%d) exceeds 2^53", maxPlan, maxMult)
			} else {
				scaled.Limit *= maxMult
				scaled.Burst *= maxMult
				if err := scaled.Validate(); err != nil {
					v.policyError(name, field, err, fmt.Sprintf("with plan %q (×%d): ", maxPlan, maxMult))
				}
			}
		}
		v.key(field+".key", pc.Key)
	}
}

// policyError turns a limiter.Policy.Validate message, `policy "NAME": FIELD:
// REASON`, into an error on policies.NAME.FIELD.
func (v *validator) policyError(name, field string, err error, prefix string) {
	msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("policy %q: ", name))
	if f, reason, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(f, " \"") {
		v.fail(field+"."+f, "%s%s", prefix, reason)
		return
	}
	v.fail(field, "%s%s", prefix, msg)
}

func (v *validator) key(field string, parts []string) {
	if len(parts) == 0 {
		v.fail(field, "required: a list of %s ([route] for one limit all clients share)", strings.Join(keyParts, ", "))
		return
	}
	for i, part := range parts {
		if !slices.Contains(keyParts, part) {
			v.fail(fmt.Sprintf("%s[%d]", field, i), "unknown key part %q (one of %s)", part, strings.Join(keyParts, ", "))
		} else if slices.Index(parts, part) < i {
			v.fail(fmt.Sprintf("%s[%d]", field, i), "key part %q repeated", part)
		}
	}
}

func (v *validator) routes() {
	rules := make([]*RouteRule, len(v.c.Routes))
	for i, rc := range v.c.Routes {
		field := fmt.Sprintf("routes[%d]", i)
		r, err := ParseRouteMatch(rc.Match)
		switch {
		case rc.Match == "":
			v.fail(field+".match", `required: "METHOD /path" or "/path"`)
		case err != nil:
			v.fail(field+".match", "%v", err)
		case !r.Prefix && r.Path == v.c.GraphQL.Path:
			v.fail(field+".match", "%s is the GraphQL path: it is configured under graphql, not routes", r.Path)
		default:
			rules[i] = &r
			for j, earlier := range rules[:i] {
				if earlier == nil || !earlier.covers(r) {
					continue
				}
				if earlier.Method == r.Method && earlier.Path == r.Path && earlier.Prefix == r.Prefix {
					v.fail(field+".match", "duplicate route %q: routes[%d] has it", rc.Match, j)
				} else {
					v.fail(field+".match", "never matches: routes[%d] (%q) comes first and matches every request it would (first match wins)",
						j, v.c.Routes[j].Match)
				}
				break
			}
		}
		for j, name := range rc.Policies {
			pf := fmt.Sprintf("%s.policies[%d]", field, j)
			if _, ok := v.c.Policies[name]; !ok {
				v.fail(pf, "unknown policy %q%s", name, v.known())
			} else if slices.Index(rc.Policies, name) < j {
				v.fail(pf, "policy %q listed twice", name)
			}
		}
	}
}

// known lists the defined policies for an "unknown policy" message.
func (v *validator) known() string {
	if len(v.c.Policies) == 0 {
		return " (policies defines none)"
	}
	return " (defined: " + strings.Join(sortedKeys(v.c.Policies), ", ") + ")"
}

func (v *validator) graphql() {
	g := v.c.GraphQL
	if !strings.HasPrefix(g.Path, "/") || strings.ContainsAny(g.Path, "*{}?# ") {
		v.fail("graphql.path", "want a plain path such as /graphql, got %q", g.Path)
	}
	if g.Policy != "" {
		if pc, ok := v.c.Policies[g.Policy]; !ok {
			v.fail("graphql.policy", "unknown policy %q%s", g.Policy, v.known())
		} else if pc.Algorithm != limiter.TokenBucket {
			v.fail("graphql.policy", "policy %q is a %s; it must be a token_bucket (refunds need one)", g.Policy, pc.Algorithm)
		}
	}
	switch g.Mode {
	case GraphQLEnforce, GraphQLMeasure:
	default:
		v.fail("graphql.mode", "want enforce or measure, got %q", g.Mode)
	}
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"max_cost", g.MaxCost},
		{"default_list_size", g.DefaultListSize},
		{"mutation_cost", g.MutationCost},
		{"introspection_cost", g.IntrospectionCost},
		{"max_depth", int64(g.MaxDepth)},
		{"max_aliases", int64(g.MaxAliases)},
		{"max_fields", int64(g.MaxFields)},
		{"max_tokens", int64(g.MaxTokens)},
		{"max_body_bytes", g.MaxBodyBytes},
	} {
		if f.value < 0 {
			v.fail("graphql."+f.name, "must not be negative, got %d", f.value)
		}
	}
	// The parser's token limit and the body limit are always on.
	if g.MaxTokens == 0 {
		v.fail("graphql.max_tokens", "must be at least 1: the parser's token limit is always on")
	}
	if g.MaxBodyBytes == 0 {
		v.fail("graphql.max_body_bytes", "must be at least 1: the body limit is always on")
	}
	switch {
	case g.Schema != "" && g.Upstream == "":
		v.fail("graphql.upstream", "required with graphql.schema (proxy mode needs both)")
	case g.Schema == "" && g.Upstream != "":
		v.fail("graphql.schema", "required with graphql.upstream (proxy mode needs both)")
	}
	if g.Upstream != "" {
		u, err := url.Parse(g.Upstream)
		switch {
		case err != nil:
			v.fail("graphql.upstream", "%s", redactURLError(err))
		case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
			v.fail("graphql.upstream", "want an http:// or https:// URL with a host")
		}
	}
}

func isPolicyName(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.')
	})
}

// isToken reports whether s is an RFC 9110 token, as header names are.
func isToken(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c))
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// expansion bounds the nodes decoded, aliases expanded, to this many times
// the nodes in the file: aliases can otherwise grow a small file exponentially.
const expansion = 16

// decoder fills a Config from goccy/go-yaml's AST. Decoding by hand rather
// than with yaml.Unmarshal gives every error its YAML path and line, refuses
// "1000" and 1.5 where an integer belongs (Unmarshal converts both), and
// tells an absent field (keep the default) from one set to zero.
type decoder struct {
	src     *source
	aliases map[*ast.AliasNode]ast.Node
	// merged caches the pairs of mappings merged in with "<<", so that a
	// chain of merges over aliases costs its size, not its expansion.
	merged map[ast.Node][]pair
	errs   []*ConfigError
	budget int
}

func (d *decoder) fail(field string, at ast.Node, format string, args ...any) {
	d.errs = append(d.errs, &ConfigError{File: d.src.name, Line: line(at), Field: field, Reason: fmt.Sprintf(format, args...)})
}

// collectAnchors resolves every alias to the anchor most recently completed
// before it, so that an anchor cannot refer to itself. It returns the number
// of nodes under n.
func (d *decoder) collectAnchors(n ast.Node, anchors map[string]ast.Node) int {
	if isNil(n) {
		return 0
	}
	count := 1
	switch n := n.(type) {
	case *ast.MappingNode:
		for _, mv := range n.Values {
			count += d.collectAnchors(mv, anchors)
		}
	case *ast.MappingValueNode:
		count += d.collectAnchors(n.Key, anchors)
		count += d.collectAnchors(n.Value, anchors)
	case *ast.MappingKeyNode:
		count += d.collectAnchors(n.Value, anchors)
	case *ast.SequenceNode:
		for _, e := range n.Values {
			count += d.collectAnchors(e, anchors)
		}
	case *ast.TagNode:
		count += d.collectAnchors(n.Value, anchors)
	case *ast.AnchorNode:
		count += d.collectAnchors(n.Value, anchors)
		if name, ok := nodeName(n.Name); ok {
			anchors[name] = n.Value
		}
	case *ast.AliasNode:
		if name, ok := nodeName(n.Value); ok {
			if target, ok := anchors[name]; ok {
				d.aliases[n] = target
			}
		}
	}
	return count
}

func nodeName(n ast.Node) (string, bool) {
	if isNil(n) || n.GetToken() == nil {
		return "", false
	}
	return n.GetToken().Value, true
}

// resolve looks through anchors and aliases; ok is false after an error.
func (d *decoder) resolve(field string, n ast.Node) (ast.Node, bool) {
	for range 64 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			target, ok := d.aliases[v]
			if !ok {
				name, _ := nodeName(v.Value)
				d.fail(field, v, "unknown alias *%s", name)
				return nil, false
			}
			n = target
		case *ast.TagNode:
			tag := "!!str"
			if v.Start != nil {
				tag = v.Start.Value
			}
			d.fail(field, v, "YAML tags such as %s are not supported (quote a string instead)", tag)
			return nil, false
		default:
			if isNil(n) {
				return nil, true
			}
			return n, true
		}
		if isNil(n) {
			return nil, true
		}
	}
	d.fail(field, n, "anchors and aliases nest too deep")
	return nil, false
}

var durationType = reflect.TypeFor[time.Duration]()

// decode sets v from n. A null leaves v as it is (its default, or empty),
// except that it clears a pointer. at is the node whose line the field gets.
func (d *decoder) decode(field string, at, n ast.Node, v reflect.Value) {
	if !d.spend(1, field, n) {
		return
	}
	if at == nil {
		at = n
	}
	if field != "" {
		d.src.lines[field] = line(at)
	}
	n, ok := d.resolve(field, n)
	if !ok {
		return
	}
	if n == nil || n.Type() == ast.NullType {
		if v.Kind() == reflect.Pointer {
			v.SetZero()
		}
		return
	}
	d.src.given[field] = true
	if v.Type() == durationType {
		s, ok := d.scalarString(n)
		dur, err := time.ParseDuration(s)
		if !ok || err != nil {
			d.fail(field, n, "want a duration such as 50ms or 1m, got %s", describe(n))
			return
		}
		v.SetInt(int64(dur))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.budget++ // the pointee is the same node, not one more
		d.decode(field, at, n, v.Elem())
	case reflect.Struct:
		d.decodeStruct(field, n, v)
	case reflect.Map:
		d.decodeMap(field, n, v)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.fail(field, n, "want a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
		for i, e := range seq.Values {
			elem := fmt.Sprintf("%s[%d]", field, i)
			d.src.parents[elem] = field
			d.decode(elem, e, e, s.Index(i))
		}
		v.Set(s)
	case reflect.String:
		s, ok := d.scalarString(n)
		if !ok {
			d.fail(field, n, "want a string, got %s", describe(n))
			return
		}
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		i, ok := n.(*ast.IntegerNode)
		if !ok {
			d.fail(field, n, "want an integer, got %s", describe(n))
			return
		}
		var x int64
		switch iv := i.Value.(type) {
		case int64:
			x = iv
		case uint64: // how goccy/go-yaml stores a non-negative integer
			x, ok = int64(iv), iv <= math.MaxInt64
		default:
			ok = false
		}
		if !ok || v.OverflowInt(x) {
			d.fail(field, n, "integer %s out of range", i.GetToken().Value)
			return
		}
		v.SetInt(x)
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.fail(field, n, "want true or false, got %s", describe(n))
			return
		}
		v.SetBool(b.Value)
	default:
		d.fail(field, n, "cannot decode into %s", v.Type())
	}
}

// spend takes n from the node budget; false once it is exhausted.
func (d *decoder) spend(n int, field string, at ast.Node) bool {
	if d.budget < 0 {
		return false
	}
	if d.budget -= n; d.budget < 0 {
		d.fail(field, at, "the document is too large once aliases are expanded")
		return false
	}
	return true
}

// scalarString is the text of a string scalar (plain, quoted or block).
func (d *decoder) scalarString(n ast.Node) (string, bool) {
	switch n := n.(type) {
	case *ast.StringNode:
		return n.Value, true
	case *ast.LiteralNode:
		if n.Value == nil {
			return "", true
		}
		return n.Value.Value, true
	}
	return "", false
}

// pair is one key and value of a mapping, merge keys expanded.
type pair struct {
	key   string
	at    ast.Node
	value ast.Node
}

// pairs returns the entries of a mapping. Entries merged in with "<<" come
// after the mapping's own and are dropped when it has the key already, as
// YAML merge keys require; the first mapping merged wins over later ones.
func (d *decoder) pairs(field string, n ast.Node, depth int) ([]pair, bool) {
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		d.fail(field, n, "want a mapping, got %s", describe(n))
		return nil, false
	}
	if depth > 16 {
		d.fail(field, n, "merge keys nest too deep")
		return nil, false
	}
	if !d.spend(len(values), field, n) {
		return nil, false
	}
	var own, merged []pair
	seen := map[string]bool{}
	for _, mv := range values {
		if mv == nil || isNil(mv.Key) {
			continue
		}
		if mv.Key.IsMergeKey() {
			src, ok := d.resolve(field, mv.Value)
			if !ok {
				return nil, false
			}
			var sources []ast.Node
			if seq, isSeq := src.(*ast.SequenceNode); isSeq {
				for _, e := range seq.Values {
					if e, ok := d.resolve(field, e); !ok {
						return nil, false
					} else if e != nil {
						sources = append(sources, e)
					}
				}
			} else if src != nil && src.Type() != ast.NullType {
				sources = append(sources, src)
			}
			for _, s := range sources {
				ps, cached := d.merged[s]
				if !cached {
					if ps, ok = d.pairs(field, s, depth+1); !ok {
						return nil, false
					}
					d.merged[s] = ps
				}
				merged = append(merged, ps...)
			}
			continue
		}
		key, ok := keyText(mv.Key)
		if !ok {
			d.fail(field, mv.Key, "a key must be a scalar, got %s", describe(mv.Key))
			return nil, false
		}
		seen[key] = true
		own = append(own, pair{key: key, at: mv.Key, value: mv.Value})
	}
	for _, p := range merged {
		if !seen[p.key] {
			seen[p.key] = true
			own = append(own, p)
		}
	}
	return own, true
}

func keyText(n ast.Node) (string, bool) {
	if k, ok := n.(*ast.MappingKeyNode); ok {
		n = k.Value
	}
	switch k := n.(type) {
	case *ast.StringNode:
		return k.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode, *ast.InfinityNode, *ast.NanNode:
		if tk := k.GetToken(); tk != nil {
			return tk.Value, true
		}
	}
	return "", false
}

func (d *decoder) decodeStruct(field string, n ast.Node, v reflect.Value) {
	ps, ok := d.pairs(field, n, 0)
	if !ok {
		return
	}
	t := v.Type()
	var names []string
	index := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !t.Field(i).IsExported() {
			continue
		}
		names = append(names, name)
		index[name] = i
	}
	for _, p := range ps {
		child := childPath(field, p.key)
		d.src.parents[child] = field
		i, ok := index[p.key]
		if !ok {
			d.fail(child, p.at, "unknown key (want one of %s)", strings.Join(names, ", "))
			continue
		}
		d.decode(child, p.at, p.value, v.Field(i))
	}
}

func (d *decoder) decodeMap(field string, n ast.Node, v reflect.Value) {
	ps, ok := d.pairs(field, n, 0)
	if !ok {
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(v.Type(), len(ps)))
	}
	for i, p := range ps {
		child := childPath(field, p.key)
		if field == "identity.api_keys" {
			// An API key is a secret: messages name it by position.
			child = fmt.Sprintf("%s[#%d]", field, i+1)
		}
		d.src.parents[child] = field
		d.src.entries[field+"\x00"+p.key] = child
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(child, p.at, p.value, elem)
		v.SetMapIndex(reflect.ValueOf(p.key).Convert(v.Type().Key()), elem)
	}
}

// childPath is parent.key, or parent["key"] when key is not a plain word.
func childPath(parent, key string) string {
	if key == "" || strings.ContainsFunc(key, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
	}) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// describe names a node's kind and value for "want X, got Y" messages.
func describe(n ast.Node) string {
	if isNil(n) {
		return "nothing"
	}
	switch n := n.(type) {
	case *ast.StringNode:
		return "string " + strconv.Quote(truncate(n.Value))
	case *ast.LiteralNode:
		return "a block string"
	case *ast.IntegerNode:
		return "integer " + truncate(n.GetToken().Value)
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "number " + truncate(n.GetToken().Value)
	case *ast.BoolNode:
		return "boolean " + strconv.FormatBool(n.Value)
	case *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	}
	return n.Type().String()
}

func truncate(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// line is the 1-based line of a node, 0 when unknown.
func line(n ast.Node) int {
	if isNil(n) {
		return 0
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return 0
	}
	return tk.Position.Line
}

// isNil reports a nil node, including a typed nil inside the interface.
func isNil(n ast.Node) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
