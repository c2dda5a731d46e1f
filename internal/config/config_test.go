package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
)

func TestDemoConfig(t *testing.T) {
	c := Demo()
	if got, want := c.Source(), "built-in demo config"; got != want {
		t.Errorf("Source() = %q, want %q", got, want)
	}
	if got, want := c.Listen, ":8080"; got != want {
		t.Errorf("listen = %q, want %q", got, want)
	}
	if got, want := c.Store, (StoreConfig{Gateways: 1, KeyPrefix: "rl:", Memory: MemoryConfig{MaxKeys: 1 << 20}}); !reflect.DeepEqual(got, want) {
		t.Errorf("store = %+v, want %+v (the in-memory store)", got, want)
	}
	wantIdentity := IdentityConfig{
		APIKeyHeader: "X-API-Key",
		APIKeys: map[string]APIKeyConfig{
			"demo-free":       {Tenant: "acme", Plan: "free"},
			"demo-enterprise": {Tenant: "bigco", Plan: "enterprise"},
		},
	}
	if got := c.Identity; len(got.TrustedProxies) != 0 || got.HashKey != "" ||
		got.APIKeyHeader != wantIdentity.APIKeyHeader || !reflect.DeepEqual(got.APIKeys, wantIdentity.APIKeys) {
		t.Errorf("identity = %+v, want %+v (no trusted proxies, no hash key)", got, wantIdentity)
	}
	if got := c.TrustedPrefixes(); len(got) != 0 {
		t.Errorf("TrustedPrefixes() = %v, want none", got)
	}
	if got, want := c.Plans, map[string]int64{"anonymous": 1, "free": 1, "enterprise": 10}; !reflect.DeepEqual(got, want) {
		t.Errorf("plans = %v, want %v", got, want)
	}

	wantPolicies := map[string]*limiter.Policy{
		"api": {Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150,
			Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailAllow},
		"streams": {Name: "streams", Algorithm: limiter.Concurrency, Limit: 5,
			Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailAllow},
		"login_ip": {Name: "login_ip", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute,
			Key: []string{"ip"}, OnStoreError: limiter.FailDeny, RefundStatus: []string{"2xx"}},
		"login_user": {Name: "login_user", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute,
			Key: []string{"username"}, OnStoreError: limiter.FailDeny, RefundStatus: []string{"2xx"}},
		"graphql": {Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 50, Period: time.Second, Burst: 1000,
			Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailAllow},
	}
	policies := c.LimiterPolicies()
	if !reflect.DeepEqual(policies, wantPolicies) {
		for name, p := range policies {
			t.Logf("got %s: %+v", name, *p)
		}
		t.Errorf("LimiterPolicies() differs from the demo config docs/configuration.md shows")
	}

	wantRoutes := []routelimit.Route{
		{Pattern: "POST /login", Policies: []*limiter.Policy{wantPolicies["login_ip"], wantPolicies["login_user"]}},
		{Pattern: "GET /api/ticks", Policies: []*limiter.Policy{wantPolicies["api"], wantPolicies["streams"]}},
		{Pattern: "/api/*", Policies: []*limiter.Policy{wantPolicies["api"]}},
	}
	if got := c.HTTPRoutes(policies); !reflect.DeepEqual(got, wantRoutes) {
		t.Errorf("HTTPRoutes() = %+v, want %+v", got, wantRoutes)
	}

	wantGraphQL := GraphQLConfig{
		Path: "/graphql", Policy: "graphql", Mode: "enforce", MaxCost: 1000, DefaultListSize: 10,
		MutationCost: 10, Introspection: true, IntrospectionCost: 1, MaxDepth: 15, MaxAliases: 30,
		MaxFields: 1000, MaxTokens: 15000, MaxBodyBytes: 1048576, RejectionCost: 1, MaxSubscriptions: 10, SubscriptionEvents: "charge", Refund: true, PersistedQueries: true,
		UpstreamTimeout: 20 * time.Second, ForwardAPIKey: true, SchemaRefresh: 5 * time.Minute,
	}
	if got := c.GraphQL; !reflect.DeepEqual(got, wantGraphQL) {
		t.Errorf("graphql = %+v, want %+v", got, wantGraphQL)
	}
	if got := c.Warnings(); len(got) != 0 {
		t.Errorf("Warnings() = %q, want none", got)
	}
}

func TestDemoConfigIsFresh(t *testing.T) {
	a := Demo()
	a.Identity.APIKeys["stolen"] = APIKeyConfig{Tenant: "x", Plan: "y"}
	a.Routes[0].Policies[0] = "changed"
	b := Demo()
	if _, ok := b.Identity.APIKeys["stolen"]; ok {
		t.Error("Demo() shares its api_keys map between calls")
	}
	if got, want := b.Routes[0].Policies[0], "login_ip"; got != want {
		t.Errorf("second Demo() routes[0].policies[0] = %q, want %q", got, want)
	}
}

func TestLoadConfigEmptyPathIsDemo(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatalf("Load(\"\") error: %v", err)
	}
	if !reflect.DeepEqual(c, Demo()) {
		t.Error("Load(\"\") is not the demo config")
	}
}

// TestParseConfigDefaults: a file gets every scalar default but none of the
// demo's maps and lists, and the memory store.
func TestParseConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, wantListen string
	}{
		{"listen only", "listen: \":9000\"\n" + noGraphQL, ":9000"},
		{"nothing but GraphQL off", noGraphQL, ":8080"},
		{"comments", "# nothing here\n" + noGraphQL, ":8080"},
		{"document marker", "---\n" + noGraphQL, ":8080"},
		{"null sections", "store:\nidentity:\nlisten:\n" + noGraphQL, ":8080"},
		{"byte order mark", "\ufefflisten: \":9000\"\n" + noGraphQL, ":9000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("costgate.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse error: %v", err)
			}
			if got := c.Listen; got != tc.wantListen {
				t.Errorf("listen = %q, want %q", got, tc.wantListen)
			}
			if got, want := c.Store, (StoreConfig{Gateways: 1, KeyPrefix: "rl:", Memory: MemoryConfig{MaxKeys: 1 << 20}}); !reflect.DeepEqual(got, want) {
				t.Errorf("store = %+v, want %+v", got, want)
			}
			if got, want := c.Identity.APIKeyHeader, "X-API-Key"; got != want {
				t.Errorf("identity.api_key_header = %q, want %q", got, want)
			}
			if n := len(c.Identity.APIKeys); n != 0 {
				t.Errorf("got %d api keys, want none", n)
			}
			if n := len(c.Identity.TrustedProxies); n != 0 {
				t.Errorf("got %d trusted proxies, want none", n)
			}
			if n := len(c.Plans); n != 0 {
				t.Errorf("got %d plans, want none (a plan not listed has multiplier 1)", n)
			}
			if got := c.PlanMultiplier("enterprise"); got != 1 {
				t.Errorf("PlanMultiplier(enterprise) = %d, want 1", got)
			}
			if n := len(c.Policies); n != 0 {
				t.Errorf("got %d policies, want none", n)
			}
			if n := len(c.Routes); n != 0 {
				t.Errorf("got %d routes, want none", n)
			}
			want := Demo().GraphQL
			want.Path = "" // the file turned GraphQL off
			if got := c.GraphQL; !reflect.DeepEqual(got, want) {
				t.Errorf("graphql = %+v, want %+v", got, want)
			}
		})
	}
}

// noGraphQL turns GraphQL off, for files about something else.
const noGraphQL = "graphql: {path: \"\"}\n"

// A file that serves GraphQL must name the policy that charges it: without
// one, GraphQL would be served unlimited, in silence.
func TestParseConfigRefusesUnlimitedGraphQL(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty file", "", `bad.yaml: graphql.policy: unknown policy "graphql" (policies defines none); define it, or set graphql.path: "" to serve no GraphQL`},
		{"routes but no graphql section", apiPolicy + "routes:\n  - {match: \"/api/*\", policies: [api]}\n",
			`bad.yaml: graphql.policy: unknown policy "graphql" (defined: api); define it, or set graphql.path: "" to serve no GraphQL`},
		{"explicit empty policy", apiPolicy + "graphql: {policy: \"\"}\n", `bad.yaml:3: graphql.policy: required while graphql.path is set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseConfigGraphQLPolicyDefault(t *testing.T) {
	const yaml = "policies:\n  graphql: {algorithm: token_bucket, limit: 5, period: 1s, key: [ip]}\n"
	c, err := Parse("costgate.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse error: %v", err)
	}
	if got, want := c.GraphQL.Policy, "graphql"; got != want {
		t.Errorf("graphql.policy = %q, want %q (the default, now that the policy exists)", got, want)
	}
}

func TestLoadConfigFiles(t *testing.T) {
	t.Run("production", func(t *testing.T) {
		c, err := Load(filepath.Join("testdata", "config", "production.yaml"))
		if err != nil {
			t.Fatalf("Load error: %v", err)
		}
		want := &RedisConfig{URL: "redis://redis.internal:6379/2", Timeout: 20 * time.Millisecond}
		if got := c.Store.Redis; !reflect.DeepEqual(got, want) {
			t.Errorf("store.redis = %+v, want %+v", got, want)
		}
		if got, want := c.Store.Gateways, 4; got != want {
			t.Errorf("store.gateways = %d, want %d", got, want)
		}
		if got, want := c.Listen, "0.0.0.0:9090"; got != want {
			t.Errorf("listen = %q, want %q", got, want)
		}
		wantPrefixes := []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"),
			netip.MustParsePrefix("192.168.1.7/32"),
			netip.MustParsePrefix("fd00::/8"),
		}
		if got := c.TrustedPrefixes(); !slices.Equal(got, wantPrefixes) {
			t.Errorf("TrustedPrefixes() = %v, want %v", got, wantPrefixes)
		}
		if got, want := c.GraphQL.Schema, filepath.Join("testdata", "config", "upstream.graphql"); got != want {
			t.Errorf("graphql.schema = %q, want %q (relative to the file)", got, want)
		}
		if got, want := c.GraphQL.Mode, "measure"; got != want {
			t.Errorf("graphql.mode = %q, want %q", got, want)
		}
		if c.GraphQL.Introspection || c.GraphQL.Refund {
			t.Errorf("graphql.introspection, refund = %t, %t, want false, false", c.GraphQL.Introspection, c.GraphQL.Refund)
		}
		if got, want := c.GraphQL.MaxDepth, 15; got != want {
			t.Errorf("graphql.max_depth = %d, want the default %d", got, want)
		}
		if got, want := c.PlanMultiplier("gold"), int64(5); got != want {
			t.Errorf("PlanMultiplier(gold) = %d, want %d", got, want)
		}
		if got, want := c.PlanMultiplier("platinum"), int64(1); got != want {
			t.Errorf("PlanMultiplier(platinum) = %d, want %d", got, want)
		}
		wantWarnings := []string{filepath.Join("testdata", "config", "production.yaml") + `:15: identity.api_keys[#2].plan: plan "platinum" is not in plans: multiplier 1`}
		if got := c.Warnings(); !slices.Equal(got, wantWarnings) {
			t.Errorf("Warnings() = %q, want %q", got, wantWarnings)
		}
		policies := c.LimiterPolicies()
		wantAPI := &limiter.Policy{Name: "api", Algorithm: limiter.LeakyBucket, Limit: 100, Period: time.Second,
			Burst: 20, Key: []string{"tenant"}, Mode: limiter.Shadow, OnStoreError: limiter.FailLocal}
		if got := policies["api"]; !reflect.DeepEqual(got, wantAPI) {
			t.Errorf("policy api = %+v, want %+v", got, wantAPI)
		}
		rules := c.HTTPRoutes(policies)
		if got, want := len(rules), 3; got != want {
			t.Fatalf("got %d routes, want %d", got, want)
		}
		if got := rules[0].Policies; len(got) != 0 {
			t.Errorf("routes[0].policies = %v, want none (an exemption)", got)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		c, err := Load(filepath.Join("testdata", "config", "cluster.yaml"))
		if err != nil {
			t.Fatalf("Load error: %v", err)
		}
		want := &RedisConfig{Cluster: []string{"10.0.0.1:7001", "10.0.0.2:7001", "[fd00::3]:7001"}, Timeout: 50 * time.Millisecond}
		if got := c.Store.Redis; !reflect.DeepEqual(got, want) {
			t.Errorf("store.redis = %+v, want %+v", got, want)
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		c, err := Load(filepath.Join("testdata", "config", "sentinel.yaml"))
		if err != nil {
			t.Fatalf("Load error: %v", err)
		}
		want := &RedisConfig{
			Sentinel: &SentinelConfig{Master: "mymaster", Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}},
			Timeout:  time.Second,
		}
		if got := c.Store.Redis; !reflect.DeepEqual(got, want) {
			t.Errorf("store.redis = %+v, want %+v", got, want)
		}
	})
	t.Run("anchors and merge keys", func(t *testing.T) {
		c, err := Load(filepath.Join("testdata", "config", "merge.yaml"))
		if err != nil {
			t.Fatalf("Load error: %v", err)
		}
		want := map[string]PolicyConfig{
			"login_ip": {Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute, Key: []string{"ip"},
				OnStoreError: limiter.FailDeny},
			"login_user": {Algorithm: limiter.SlidingLog, Limit: 20, Period: 5 * time.Minute, Key: []string{"username"},
				OnStoreError: limiter.FailDeny},
		}
		if got := c.Policies; !reflect.DeepEqual(got, want) {
			t.Errorf("policies = %+v, want %+v", got, want)
		}
		if got, want := c.Routes[1].Policies, []string{"login_ip", "login_user"}; !slices.Equal(got, want) {
			t.Errorf("routes[1].policies = %q, want %q", got, want)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join("testdata", "config", "nope.yaml"))
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Load error = %v, want one wrapping os.ErrNotExist", err)
		}
	})
}

// TestParseConfigReportsEveryProblem: one error, one line per problem, in file order.
func TestParseConfigReportsEveryProblem(t *testing.T) {
	name := filepath.Join("testdata", "config", "broken.yaml")
	_, err := Load(name)
	if err == nil {
		t.Fatal("LoadConfig succeeded, want an error")
	}
	want := []string{
		name + ":3: store.gateways: must be at least 1, got 0",
		name + ":7: policies.api.limit: must be at least 1, got 0",
		name + `:9: policies.api.key[1]: unknown key part "user" (one of ip, api_key, tenant, plan, username, route, header:NAME)`,
		name + `:11: routes[0].policies[1]: unknown policy "nope" (defined: api)`,
		name + `:13: graphql.policy: unknown policy "missing" (defined: api); define it, or set graphql.path: "" to serve no GraphQL`,
		name + ":14: graphql.max_depth: must not be negative, got -1 (0 takes the default)",
	}
	if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
		t.Errorf("got error lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %T is not a *Error", err)
	}
	if got, want := *ce, (Error{File: name, Line: 3, Field: "store.gateways", Reason: "must be at least 1, got 0"}); got != want {
		t.Errorf("first Error = %+v, want %+v", got, want)
	}
}

// A valid policy block for the error cases to refer to.
const apiPolicy = "policies:\n  api: {algorithm: token_bucket, limit: 100, period: 1m, key: [ip]}\n"

// gqlPolicy defines the policy graphql.policy names by default.
const gqlPolicy = "policies:\n  graphql: {algorithm: token_bucket, limit: 100, period: 1s, key: [ip]}\n"

// badConfigs are broken files with a substring their error must contain:
// the file, the line, the field and the reason.
var badConfigs = []struct {
	name    string
	yaml    string
	want    string
	notWant string // a secret the message must not repeat
}{
	// YAML itself.
	{"syntax error", "listen: [", "bad.yaml:1: YAML: sequence end token ']' not found", ""},
	{"bad indentation", "store:\n  gateways: 1\n key_prefix: x\n", "bad.yaml:3: YAML:", ""},
	{"duplicate key", "listen: a\nlisten: b\n", `bad.yaml:2: YAML: mapping key "listen" already defined`, ""},
	{"two documents", "listen: \":1\"\n---\nlisten: \":2\"\n", "bad.yaml:3: one YAML document expected, found a second", ""},
	{"not a mapping", "- listen\n", "bad.yaml:1: want a mapping, got a list", ""},
	{"unknown alias", "listen: *addr\n", "bad.yaml:1: listen: unknown alias *addr", ""},
	{"self-referencing anchor", "routes: &r [*r]\n", "bad.yaml:1: routes[0]: unknown alias *r", ""},
	{"tag", "listen: !!str 8080\n", "bad.yaml:1: listen: YAML tags such as !!str are not supported", ""},
	{"complex key", "? [a]\n: 1\n", "bad.yaml:2: YAML: found an invalid key for this map", ""},

	// Unknown keys.
	{"unknown top-level key", "lisen: \":8080\"\n", "bad.yaml:1: lisen: unknown key (want one of listen, server, store, identity, plans, policies, routes, graphql, cors, grpc_listen, gateway, envoy, metrics, admin)", ""},
	{"unknown store key", "store:\n  gateway: 2\n", "bad.yaml:2: store.gateway: unknown key (want one of redis, memory, gateways, key_prefix)", ""},
	{"unknown policy key", "policies:\n  api: {algorithm: token_bucket, limit: 1, period: 1s, key: [ip], burts: 5}\n",
		"bad.yaml:2: policies.api.burts: unknown key (want one of algorithm, limit, period, burst, key, mode, on_store_error, local_cache, sync, lease, refund_status)", ""},
	{"unknown graphql key", "graphql:\n  max_complexity: 5\n", "bad.yaml:2: graphql.max_complexity: unknown key", ""},
	{"unknown key in merged mapping", "policies:\n  api:\n    <<: {limt: 5}\n", "policies.api.limt: unknown key", ""},

	// Wrong types.
	{"string for integer", "store: {gateways: two}\n", `bad.yaml:1: store.gateways: want an integer, got string "two"`, ""},
	{"quoted integer", "policies:\n  api: {algorithm: token_bucket, limit: \"1000\", period: 1m, key: [ip]}\n",
		`bad.yaml:2: policies.api.limit: want an integer, got string "1000"`, ""},
	{"float for integer", "policies:\n  api: {algorithm: token_bucket, limit: 1.5, period: 1m, key: [ip]}\n",
		"bad.yaml:2: policies.api.limit: want an integer, got number 1.5", ""},
	{"integer overflow", "store: {gateways: 9223372036854775808}\n", "bad.yaml:1: store.gateways: integer 9223372036854775808 out of range", ""},
	{"string for boolean", "graphql: {introspection: \"yes\"}\n", `bad.yaml:1: graphql.introspection: want true or false, got string "yes"`, ""},
	{"list for string", "listen: [a]\n", "bad.yaml:1: listen: want a string, got a list", ""},
	{"string for list", "identity: {trusted_proxies: 10.0.0.0/8}\n", `bad.yaml:1: identity.trusted_proxies: want a list, got string "10.0.0.0/8"`, ""},
	{"scalar for mapping", "policies: api\n", `bad.yaml:1: policies: want a mapping, got string "api"`, ""},
	{"duration without unit", "policies:\n  api: {algorithm: token_bucket, limit: 1, period: 60, key: [ip]}\n",
		"bad.yaml:2: policies.api.period: want a duration such as 50ms or 1m, got integer 60", ""},
	{"bad duration", "store:\n  redis:\n    url: redis://localhost\n    timeout: soon\n",
		`bad.yaml:4: store.redis.timeout: want a duration such as 50ms or 1m, got string "soon"`, ""},

	// listen and store.
	{"listen without port", "listen: \"8080\"\n", `bad.yaml:1: listen: want host:port such as ":8080", got "8080"`, ""},
	{"gateways zero", "store: {gateways: 0}\n", "bad.yaml:1: store.gateways: must be at least 1, got 0", ""},
	{"key prefix with brace", "store: {key_prefix: \"rl:{x}\"}\n", `bad.yaml:1: store.key_prefix: must not contain { or }, got "rl:{x}"`, ""},
	{"key prefix empty", "store: {key_prefix: \"\"}\n", `bad.yaml:1: store.key_prefix: must not be empty`, ""},
	{"redis url scheme", "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis: {url: \"http://localhost:6379\"}\n",
		"bad.yaml:3: store.redis.url: redis: invalid URL scheme: http", ""},
	{"redis url password not echoed", "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis: {url: \"redis://u:hunter2@host:port/0\"}\n",
		"bad.yaml:3: store.redis.url: invalid URL: invalid port", "hunter2"},
	{"redis url database", "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis: {url: \"redis://localhost/zero\"}\n",
		`bad.yaml:3: store.redis.url: redis: invalid database number: "zero"`, ""},
	{"redis url and cluster", "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis: {url: \"redis://a\", cluster: [\"b:1\"]}\n",
		"bad.yaml:3: store.redis: exactly one of url, cluster or sentinel, got url and cluster", ""},
	{"redis with none", "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis: {timeout: 1s}\n",
		"bad.yaml:3: store.redis: one of url, cluster or sentinel is required", ""},
	{"redis negative timeout", "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis: {url: \"redis://a\", timeout: -1s}\n",
		"bad.yaml:3: store.redis.timeout: must be positive, got -1s", ""},
	{"redis zero timeout", "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis: {url: \"redis://a\", timeout: 0s}\n",
		"bad.yaml:3: store.redis.timeout: must be positive, got 0s", ""},
	{"metrics listen without port", "metrics: {listen: \"127.0.0.1\"}\n",
		`bad.yaml:1: metrics.listen: want host:port such as "127.0.0.1:9090", got "127.0.0.1"`, ""},
	{"metrics listen on the main address", "listen: \":9000\"\nmetrics: {listen: \":9000\"}\n",
		`bad.yaml:2: metrics.listen: ":9000" is another listener's address: /metrics needs its own`, ""},
	{"cluster address without port", "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis:\n    cluster: [\"10.0.0.1:7001\", \"10.0.0.2\"]\n",
		`bad.yaml:4: store.redis.cluster[1]: want host:port, got "10.0.0.2"`, ""},
	{"sentinel without master", "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis:\n    sentinel: {addrs: [\"a:26379\"]}\n",
		"bad.yaml:4: store.redis.sentinel.master: required", ""},
	{"sentinel without addrs", "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis:\n    sentinel: {master: m}\n",
		"bad.yaml:4: store.redis.sentinel.addrs: required", ""},

	// identity and plans.
	{"hash key missing with redis", "store:\n  redis: {url: \"redis://localhost\"}\n",
		"bad.yaml: identity.hash_key: required with a Redis store: every gateway must hash identities alike", ""},
	{"hash key too short", "identity:\n  hash_key: tiny-secret\n", "bad.yaml:2: identity.hash_key: must be at least 16 bytes, got 11", "tiny-secret"},
	{"bad CIDR", "identity:\n  trusted_proxies: [\"10.0.0.0/8\", \"10.0.0.0/33\"]\n",
		`bad.yaml:2: identity.trusted_proxies[1]: want a CIDR such as 10.0.0.0/8 or an IP, got "10.0.0.0/33"`, ""},
	{"host name as proxy", "identity:\n  trusted_proxies:\n    - proxy.internal\n",
		`bad.yaml:3: identity.trusted_proxies[0]: want a CIDR such as 10.0.0.0/8 or an IP, got "proxy.internal"`, ""},
	{"header name", "identity: {api_key_header: \"X API Key\"}\n", `bad.yaml:1: identity.api_key_header: want an HTTP header name, got "X API Key"`, ""},
	{"api key without tenant", "identity:\n  api_keys:\n    sk-live-secret: {plan: free}\n",
		"bad.yaml:3: identity.api_keys[#1].tenant: required", "sk-live-secret"},
	{"api key without plan", "identity:\n  api_keys:\n    a: {tenant: t, plan: p}\n    sk-live-secret: {tenant: acme}\n",
		"bad.yaml:4: identity.api_keys[#2].plan: required", "sk-live-secret"},
	{"api key wrong type", "identity:\n  api_keys:\n    sk-live-secret: {tenant: 5, plan: p}\n",
		"bad.yaml:3: identity.api_keys[#1].tenant: want a string, got integer 5", "sk-live-secret"},
	{"api key anonymous tenant", "identity:\n  api_keys:\n    k: {tenant: anonymous, plan: free}\n",
		`bad.yaml:3: identity.api_keys[#1].tenant: "anonymous" is the tenant of requests without a key`, ""},
	{"plan multiplier zero", "plans: {free: 1, gold: 0}\n", "bad.yaml:1: plans.gold: multiplier must be at least 1, got 0", ""},
	{"plan multiplier negative", "plans:\n  gold: -2\n", "bad.yaml:2: plans.gold: multiplier must be at least 1, got -2", ""},

	// Policies.
	{"unknown algorithm", "policies:\n  api: {algorithm: gcra, limit: 1, period: 1s, key: [ip]}\n",
		`bad.yaml:2: policies.api.algorithm: unknown algorithm "gcra"`, ""},
	{"missing algorithm", "policies:\n  api: {limit: 1, period: 1s, key: [ip]}\n", "bad.yaml:2: policies.api.algorithm: missing", ""},
	{"zero limit", "policies:\n  api:\n    algorithm: token_bucket\n    limit: 0\n    period: 1s\n    key: [ip]\n",
		"bad.yaml:4: policies.api.limit: must be at least 1, got 0", ""},
	{"missing limit", "policies:\n  api:\n    algorithm: token_bucket\n    period: 1s\n    key: [ip]\n",
		"bad.yaml:2: policies.api.limit: must be at least 1, got 0", ""},
	{"negative limit", "policies:\n  api: {algorithm: token_bucket, limit: -5, period: 1s, key: [ip]}\n",
		"bad.yaml:2: policies.api.limit: must be at least 1, got -5", ""},
	{"negative period", "policies:\n  api: {algorithm: token_bucket, limit: 5, period: -1m, key: [ip]}\n",
		"bad.yaml:2: policies.api.period: must be positive, got -1m0s", ""},
	{"missing period", "policies:\n  api: {algorithm: token_bucket, limit: 5, key: [ip]}\n",
		"bad.yaml:2: policies.api.period: must be positive, got 0s", ""},
	{"burst zero", "policies:\n  api: {algorithm: token_bucket, limit: 5, period: 1s, burst: 0, key: [ip]}\n",
		"bad.yaml:2: policies.api.burst: must be at least 1, got 0", ""},
	{"burst negative", "policies:\n  api: {algorithm: token_bucket, limit: 5, period: 1s, burst: -1, key: [ip]}\n",
		"bad.yaml:2: policies.api.burst: must be at least 1, got -1", ""},
	{"burst on a window", "policies:\n  login: {algorithm: sliding_log, limit: 5, period: 1s, burst: 9, key: [ip]}\n",
		"bad.yaml:2: policies.login.burst: only token_bucket and leaky_bucket take a burst", ""},
	{"sync on sliding_log", "policies:\n  login: {algorithm: sliding_log, limit: 5, period: 1m, key: [ip], sync: 100ms}\n",
		"bad.yaml:2: policies.login.sync: sliding_log stays exact", ""},
	{"sync on leaky_bucket", "policies:\n  shape: {algorithm: leaky_bucket, limit: 5, period: 1s, key: [ip], sync: 100ms}\n",
		"bad.yaml:2: policies.shape.sync: leaky_bucket shapes traffic with one queue", ""},
	{"sync over the period", "policies:\n  api: {algorithm: token_bucket, limit: 5, period: 1s, key: [ip], sync: 2s}\n",
		"bad.yaml:2: policies.api.sync: must be at most the period (1s), got 2s", ""},
	{"negative sync", "policies:\n  api: {algorithm: token_bucket, limit: 5, period: 1s, key: [ip], sync: -1s}\n",
		"bad.yaml:2: policies.api.sync: must be positive, got -1s", ""},
	{"unknown mode", "policies:\n  api: {algorithm: token_bucket, limit: 5, period: 1s, key: [ip], mode: dry}\n",
		`bad.yaml:2: policies.api.mode: unknown mode "dry"`, ""},
	{"unknown on_store_error", "policies:\n  api: {algorithm: token_bucket, limit: 5, period: 1s, key: [ip], on_store_error: open}\n",
		`bad.yaml:2: policies.api.on_store_error: unknown value "open"`, ""},
	{"limit past 2^53", "policies:\n  api: {algorithm: token_bucket, limit: 9007199254740991, period: 1h, key: [ip]}\n",
		"bad.yaml:2: policies.api.limit: 9007199254740991 × period 1h0m0s", ""},
	{"plan pushes limit past 2^53", "plans: {big: 10}\npolicies:\n  api: {algorithm: token_bucket, limit: 1000000, period: 1h, key: [ip]}\n",
		`bad.yaml:3: policies.api.limit: with plan "big" (×10): 10000000 × period 1h0m0s`, ""},
	{"bad policy name", "policies:\n  \"api v2\": {algorithm: token_bucket, limit: 5, period: 1s, key: [ip]}\n",
		`bad.yaml:2: policies["api v2"]: policy names are letters, digits`, ""},
	{"missing key", "policies:\n  api: {algorithm: token_bucket, limit: 5, period: 1s}\n",
		"bad.yaml:2: policies.api.key: required: the parts that tell callers apart", ""},
	{"unknown key part", "policies:\n  api: {algorithm: token_bucket, limit: 5, period: 1s, key: [ip, user]}\n",
		`bad.yaml:2: policies.api.key[1]: unknown key part "user"`, ""},
	{"repeated key part", "policies:\n  api:\n    algorithm: token_bucket\n    limit: 5\n    period: 1s\n    key:\n      - ip\n      - ip\n",
		`bad.yaml:8: policies.api.key[1]: key part "ip" repeated`, ""},

	// Routes.
	{"route with unknown policy", apiPolicy + "routes:\n  - {match: \"/a\", policies: [api]}\n  - {match: \"/b\", policies: [api, apii]}\n",
		`bad.yaml:5: routes[1].policies[1]: unknown policy "apii" (defined: api)`, ""},
	{"route with no policies defined", "routes:\n  - {match: \"/a\", policies: [api]}\n",
		`bad.yaml:2: routes[0].policies[0]: unknown policy "api" (policies defines none)`, ""},
	{"route policy twice", apiPolicy + "routes:\n  - {match: \"/a\", policies: [api, api]}\n",
		`bad.yaml:4: routes[0].policies[1]: policy "api" listed twice`, ""},
	{"route without match", apiPolicy + "routes:\n  - policies: [api]\n", `bad.yaml:4: routes[0].match: required`, ""},
	{"route lower-case method", "routes:\n  - match: \"get /x\"\n",
		`bad.yaml:2: routes[0].match: "get /x": method "get": want an upper-case HTTP method`, ""},
	{"route relative path", "routes:\n  - match: \"api/*\"\n", `bad.yaml:2: routes[0].match: "api/*": path "api/*" must start with /`, ""},
	{"route star inside", "routes:\n  - match: \"/a/*/b\"\n", `bad.yaml:2: routes[0].match: "/a/*/b": * may only end the path, as /*`, ""},
	{"route star without slash", "routes:\n  - match: \"/api*\"\n", `bad.yaml:2: routes[0].match: "/api*": * may only end the path`, ""},
	{"route three words", "routes:\n  - match: \"GET /a b\"\n", `bad.yaml:2: routes[0].match: "GET /a b": want "METHOD /path" or "/path"`, ""},
	{"route path parameter", "routes:\n  - match: \"/products/{id}\"\n", `bad.yaml:2: routes[0].match: "/products/{id}": path parameters are not supported`, ""},
	{"route unclean path", "routes:\n  - match: \"/a//b\"\n", `bad.yaml:2: routes[0].match: "/a//b": path is not clean (want "/a/b")`, ""},
	{"duplicate route", "routes:\n  - match: /api/*\n  - match: /api/*\n", `bad.yaml:3: routes[1].match: duplicate route "/api/*": route 0 has it`, ""},
	{"shadowed route", "routes:\n  - match: /api/*\n  - match: GET /api/products\n",
		`bad.yaml:3: routes[1].match: never matches: route 0 ("/api/*") comes first`, ""},
	{"route on the GraphQL path", "routes:\n  - match: POST /graphql\n",
		"bad.yaml:2: routes[0].match: /graphql is the GraphQL path: it is configured under graphql, not routes", ""},

	// GraphQL.
	{"graphql policy unknown", apiPolicy + "graphql:\n  policy: gql\n", `bad.yaml:4: graphql.policy: unknown policy "gql" (defined: api)`, ""},
	{"graphql policy given, none defined", "graphql: {policy: graphql}\n",
		`bad.yaml:1: graphql.policy: unknown policy "graphql" (policies defines none)`, ""},
	{"graphql policy not a token bucket", "policies:\n  g: {algorithm: sliding_window, limit: 5, period: 1s, key: [ip]}\ngraphql:\n  policy: g\n",
		`bad.yaml:4: graphql.policy: policy "g" is a sliding_window; GraphQL needs a token_bucket (refunds need one)`, ""},
	{"graphql mode", "graphql:\n  mode: observe\n", `bad.yaml:2: graphql.mode: unknown mode "observe" (enforce or measure)`, ""},
	{"graphql negative max_depth", "graphql:\n  max_depth: -1\n", "bad.yaml:2: graphql.max_depth: must not be negative, got -1", ""},
	{"graphql subscription_events", "graphql:\n  subscription_events: never\n", `bad.yaml:2: graphql.subscription_events: unknown value "never" (charge: each event costs what it ran; free: only the opening is charged)`, ""},
	{"graphql negative max_subscriptions", "graphql:\n  max_subscriptions: -1\n", "bad.yaml:2: graphql.max_subscriptions: must not be negative, got -1", ""},
	{"graphql negative rejection_cost", "graphql:\n  rejection_cost: -1\n", "bad.yaml:2: graphql.rejection_cost: must not be negative, got -1", ""},
	{"server max_conns_per_ip negative", "server: {max_conns_per_ip: -1}\n", "bad.yaml:1: server.max_conns_per_ip: must not be negative", ""},
	{"memory max_keys negative", "store: {memory: {max_keys: -5}}\n", "bad.yaml:1: store.memory.max_keys: must not be negative, got -5", ""},
	{"graphql negative input_object_cost", "graphql: {input_object_cost: -1}\n", "bad.yaml:1: graphql.input_object_cost: must not be negative, got -1", ""},
	{"cors origin with a path", "cors: {allowed_origins: [\"https://app.example.com/x\"]}\n", `bad.yaml:1: cors.allowed_origins[0]: want an origin such as "https://app.example.com", or "*"`, ""},
	{"graphql negative max_body_bytes", "graphql:\n  max_body_bytes: -1\n", "bad.yaml:2: graphql.max_body_bytes: must not be negative, got -1", ""},
	{"graphql negative mutation_cost", "graphql: {mutation_cost: -10}\n", "bad.yaml:1: graphql.mutation_cost: must not be negative, got -10", ""},
	{"schema without upstream", "graphql:\n  schema: upstream.graphql\n", "bad.yaml:1: graphql.upstream: required with graphql.schema", ""},
	{"upstream without schema", "graphql:\n  upstream: http://localhost:4000/graphql\n", "bad.yaml:1: graphql.schema: required with graphql.upstream", ""},
	// A client waiting on an upstream past the write deadline would get an empty reply.
	{"upstream timeout at the write deadline", gqlPolicy + "graphql: {upstream_timeout: 30s}\n", "bad.yaml:3: graphql.upstream_timeout: must be below the server's write deadline (30s), got 30s", ""},
	{"upstream timeout zero", gqlPolicy + "graphql: {upstream_timeout: 0s}\n", "graphql.upstream_timeout: must be positive", ""},
	{"negative max response bytes", gqlPolicy + "graphql: {max_response_bytes: -1}\n", "bad.yaml:3: graphql.max_response_bytes: must not be negative", ""},
	{"upstream not http", "graphql:\n  schema: s.graphql\n  upstream: ftp://host/graphql\n",
		"bad.yaml:3: graphql.upstream: want an http:// or https:// URL with a host", ""},
	{"graphql path", "graphql:\n  path: graphql\n", `bad.yaml:2: graphql.path: want a plain path such as /graphql, got "graphql"`, ""},
	{"trusted documents without a file", gqlPolicy + "graphql:\n  trusted_documents: {mode: enforce}\n",
		"bad.yaml:4: graphql.trusted_documents.file: required", ""},
	{"trusted documents mode", gqlPolicy + "graphql:\n  trusted_documents: {file: pq.json, mode: strict}\n",
		`bad.yaml:4: graphql.trusted_documents.mode: unknown mode "strict" (enforce or log)`, ""},
	{"trusted documents unknown key", gqlPolicy + "graphql:\n  trusted_documents: {path: pq.json}\n",
		"bad.yaml:4: graphql.trusted_documents.path: unknown key (want one of file, mode)", ""},
}

func TestParseErrors(t *testing.T) {
	for _, tc := range badConfigs {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("ParseConfig succeeded (%+v), want an error containing %q", c, tc.want)
			}
			if got := err.Error(); !strings.Contains(got, tc.want) {
				t.Errorf("got error\n%s\nwant it to contain\n%s", got, tc.want)
			}
			if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("error repeats the secret %q:\n%s", tc.notWant, err)
			}
		})
	}
}

// TestParseConfigAccepts covers what is legal although it may look wrong.
func TestParseConfigAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		check      func(t *testing.T, c *Config)
	}{
		{"api key plan not in plans", "identity:\n  api_keys:\n    k: {tenant: acme, plan: gold}\n" + noGraphQL, func(t *testing.T, c *Config) {
			if got := c.PlanMultiplier("gold"); got != 1 {
				t.Errorf("PlanMultiplier(gold) = %d, want 1", got)
			}
		}},
		{"sync on a token bucket", "policies:\n  api: {algorithm: token_bucket, limit: 100, period: 1s, key: [ip], sync: 100ms}\n" + noGraphQL, func(t *testing.T, c *Config) {
			if got := c.Policies["api"].policy("api").Sync; got != 100*time.Millisecond {
				t.Errorf("Sync = %s, want 100ms", got)
			}
		}},
		{"rejection cost", gqlPolicy + "graphql: {rejection_cost: 5}\n", func(t *testing.T, c *Config) {
			if got := c.GraphQLLimits().RejectionCost; got != 5 {
				t.Errorf("RejectionCost = %d, want 5", got)
			}
		}},
		{"free subscription events", gqlPolicy + "graphql: {subscription_events: free}\n", func(t *testing.T, c *Config) {
			if !c.GraphQLLimits().FreeSubscriptionEvents {
				t.Errorf("subscription_events: free does not reach gqllimit: %+v", c.GraphQLLimits())
			}
		}},
		// 0 means the library's default, as an absent limit does; the log says so.
		{"zero graphql limits", gqlPolicy + "graphql: {max_cost: 0, max_depth: 0, max_tokens: 0, introspection_cost: 0}\n", func(t *testing.T, c *Config) {
			if l := c.GraphQLLimits(); l.MaxCost != 0 || l.MaxDepth != 0 || l.MaxTokens != 0 {
				t.Errorf("limits = %+v, want zeros (gqllimit's defaults)", l)
			}
			want := []string{"graphql.max_cost: 0 takes the default, 1000 (there is no way to turn it off)",
				"graphql.max_depth: 0 takes the default, 15 (there is no way to turn it off)",
				"graphql.max_tokens: 0 takes the default, 15000 (there is no way to turn it off)"}
			if got := c.Warnings(); !slices.Equal(got, want) {
				t.Errorf("Warnings() = %q, want %q", got, want)
			}
		}},
		{"proxy settings", gqlPolicy + "graphql: {upstream_timeout: 5s, forward_api_key: false, max_response_bytes: 1048576}\n", func(t *testing.T, c *Config) {
			pc := c.ProxyConfig()
			if pc.Timeout != 5*time.Second || !pc.StripAPIKey || pc.MaxResponseBytes != 1<<20 {
				t.Errorf("ProxyConfig() = %+v, want a 5s timeout, the API key stripped, 1 MiB", pc)
			}
			if d := Demo().ProxyConfig(); d.Timeout != 20*time.Second || d.StripAPIKey || d.MaxResponseBytes != 0 {
				t.Errorf("default ProxyConfig() = %+v, want 20s, the API key forwarded, no bound", d)
			}
		}},
		{"null redis is the memory store", "store:\n  redis:\n" + noGraphQL, func(t *testing.T, c *Config) {
			if c.Store.Redis != nil {
				t.Errorf("store.redis = %+v, want nil", c.Store.Redis)
			}
		}},
		{"hash key with the memory store", "identity: {hash_key: 0123456789abcdef}\n" + noGraphQL, func(t *testing.T, c *Config) {
			if got, want := c.Identity.HashKey, "0123456789abcdef"; got != want {
				t.Errorf("identity.hash_key = %q, want %q", got, want)
			}
		}},
		{"method route after a method-less one elsewhere", apiPolicy + noGraphQL + "routes:\n  - {match: /api/a, policies: [api]}\n  - match: GET /api/*\n  - match: /api/*\n", nil},
		{"unix socket redis", "identity: {hash_key: 0123456789abcdef}\nstore: {redis: {url: \"unix:///run/redis.sock\"}}\n" + noGraphQL, nil},
		{"header and app key parts", "policies:\n  org: {algorithm: token_bucket, limit: 5, period: 1s, key: [\"header:X-Org-Id\", route]}\n" + noGraphQL, nil},
		{"persisted queries on unless turned off", gqlPolicy + "graphql: {persisted_queries: false}\n", func(t *testing.T, c *Config) {
			if c.GraphQL.PersistedQueries {
				t.Errorf("graphql.persisted_queries = true, want false")
			}
			if d, err := Parse("ok.yaml", []byte(gqlPolicy)); err != nil || !d.GraphQL.PersistedQueries {
				t.Errorf("without the key: persisted_queries = %v (%v), want true", d != nil && d.GraphQL.PersistedQueries, err)
			}
		}},
		{"integers in other notations", gqlPolicy + "store: {gateways: 0x2}\ngraphql: {max_body_bytes: 1_000_000}\n", func(t *testing.T, c *Config) {
			if c.Store.Gateways != 2 || c.GraphQL.MaxBodyBytes != 1000000 {
				t.Errorf("gateways, max_body_bytes = %d, %d, want 2, 1000000", c.Store.Gateways, c.GraphQL.MaxBodyBytes)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("ok.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse error: %v", err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// TestParseConfigAliasExpansion: aliases cannot make a small file cost
// exponential time or unbounded memory.
func TestParseConfigAliasExpansion(t *testing.T) {
	t.Run("merge chain", func(t *testing.T) {
		// Each policy merges nine copies of the one before: 9^29 if expanded.
		var b strings.Builder
		b.WriteString(noGraphQL + "policies:\n  p0: &a0 {algorithm: token_bucket, limit: 1, period: 1s, key: [ip]}\n")
		for i := 1; i < 30; i++ {
			fmt.Fprintf(&b, "  p%d: &a%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9), ", "))
		}
		c, err := Parse("merge.yaml", []byte(b.String()))
		if err != nil {
			t.Fatalf("Parse error: %v", err)
		}
		if got, want := c.Policies["p29"].Limit, int64(1); got != want {
			t.Errorf("policies.p29.limit = %d, want %d", got, want)
		}
	})
	t.Run("list of aliases", func(t *testing.T) {
		// 200 policies each keyed by the same 1000-entry list: 200,000 nodes
		// from a file of about 1,600.
		var b strings.Builder
		b.WriteString("identity:\n  trusted_proxies: &parts [" + strings.Repeat("ip, ", 999) + "ip]\npolicies:\n")
		for i := range 200 {
			fmt.Fprintf(&b, "  p%d: {key: *parts}\n", i)
		}
		_, err := Parse("big.yaml", []byte(b.String()))
		if want := "the document is too large once aliases are expanded"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse error = %.200v, want it to contain %q", err, want)
		}
	})
}

func TestConfigResolve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flagVal string
		flagSet bool
		env     string
		want    string
	}{
		{"flag beats env", ":7000", true, ":6000", ":7000"},
		{"env when flag not set", "", false, ":6000", ":6000"},
		{"flag default ignored when not set", ":1", false, ":6000", ":6000"},
		{"neither", "", false, "", ""},
		{"flag set empty clears env", "", true, ":6000", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Resolve(tc.flagVal, tc.flagSet, tc.env); got != tc.want {
				t.Errorf("resolve(%q, %t, %q) = %q, want %q", tc.flagVal, tc.flagSet, tc.env, got, tc.want)
			}
		})
	}
}

// TestConfigApplyOverrides: a flag beats its environment variable, which beats the
// config file, which beats the default.
func TestConfigApplyOverrides(t *testing.T) {
	const (
		fileListen = "listen: \":9000\"\n" + noGraphQL
		fileRedis  = "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis: {url: \"redis://file:6379/1\", timeout: 20ms}\n" + noGraphQL
		fileClust  = "identity: {hash_key: 0123456789abcdef}\nstore:\n  redis: {cluster: [\"a:1\", \"b:1\"]}\n" + noGraphQL
	)
	for _, tc := range []struct {
		name       string
		file       string // "" for the demo config
		addrFlag   string
		addrSet    bool
		addrEnv    string
		redisFlag  string
		redisSet   bool
		redisEnv   string
		wantListen string
		wantRedis  *RedisConfig // nil: the memory store
		wantErr    string
	}{
		{name: "default", wantListen: ":8080"},
		{name: "file beats default", file: fileListen, wantListen: ":9000"},
		{name: "env beats file", file: fileListen, addrEnv: ":7000", wantListen: ":7000"},
		{name: "flag beats env", file: fileListen, addrFlag: ":6000", addrSet: true, addrEnv: ":7000", wantListen: ":6000"},
		{name: "empty flag keeps the file", file: fileListen, addrFlag: "", addrSet: true, addrEnv: ":7000", wantListen: ":9000"},
		{name: "file redis", file: fileRedis, wantListen: ":8080",
			wantRedis: &RedisConfig{URL: "redis://file:6379/1", Timeout: 20 * time.Millisecond}},
		{name: "env redis replaces the block", file: fileRedis, redisEnv: "redis://env:6379/0", wantListen: ":8080",
			wantRedis: &RedisConfig{URL: "redis://env:6379/0", Timeout: 50 * time.Millisecond}},
		{name: "flag redis beats env", file: fileRedis, redisFlag: "redis://flag:6379/0", redisSet: true, redisEnv: "redis://env:6379/0",
			wantListen: ":8080", wantRedis: &RedisConfig{URL: "redis://flag:6379/0", Timeout: 50 * time.Millisecond}},
		{name: "redis replaces a cluster", file: fileClust, redisFlag: "redis://flag:6379/0", redisSet: true,
			wantListen: ":8080", wantRedis: &RedisConfig{URL: "redis://flag:6379/0", Timeout: 50 * time.Millisecond}},
		// The demo config runs on Redis with a public demo hash key (the server warns).
		{name: "demo with redis runs without a hash key", redisFlag: "redis://flag:6379/0", redisSet: true,
			wantListen: ":8080", wantRedis: &RedisConfig{URL: "redis://flag:6379/0", Timeout: 50 * time.Millisecond}},
		{name: "bad addr", file: fileListen, addrEnv: "9000",
			wantErr: `costgate.yaml: listen (from -addr or COSTGATE_ADDR): want host:port such as ":8080", got "9000"`},
		{name: "bad redis url", file: fileRedis, redisFlag: "http://x", redisSet: true,
			wantErr: "costgate.yaml: store.redis.url (from -redis or COSTGATE_REDIS_URL): redis: invalid URL scheme: http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Demo()
			if tc.file != "" {
				var err error
				if c, err = Parse("costgate.yaml", []byte(tc.file)); err != nil {
					t.Fatalf("Parse error: %v", err)
				}
			}
			err := c.ApplyOverrides(Resolve(tc.addrFlag, tc.addrSet, tc.addrEnv), Resolve(tc.redisFlag, tc.redisSet, tc.redisEnv))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ApplyOverrides error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ApplyOverrides error: %v", err)
			}
			if got := c.Listen; got != tc.wantListen {
				t.Errorf("listen = %q, want %q", got, tc.wantListen)
			}
			if got := c.Store.Redis; !reflect.DeepEqual(got, tc.wantRedis) {
				t.Errorf("store.redis = %+v, want %+v", got, tc.wantRedis)
			}
		})
	}
}

// FuzzParseConfig: no input panics; an accepted config is consistent; an
// error names the file.
func FuzzParse(f *testing.F) {
	f.Add(demoYAML)
	for _, tc := range badConfigs {
		f.Add(tc.yaml)
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "config", "*.yaml"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Fuzz(func(t *testing.T, data string) {
		c, err := Parse("fuzz.yaml", []byte(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not start with the file name: %q", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Validate of an accepted config: %v", err)
		}
		for _, r := range c.HTTPRoutes(c.LimiterPolicies()) {
			routelimit.Matches(r.Pattern, "GET", "/api/x")
		}
		if got, want := len(c.TrustedPrefixes()), len(c.Identity.TrustedProxies); got != want {
			t.Fatalf("TrustedPrefixes has %d entries, trusted_proxies %d", got, want)
		}
		c.Warnings()
		_ = c.ApplyOverrides("127.0.0.1:1", "redis://127.0.0.1:1/0")
	})
}

// server.max_conns_per_ip: a value given is the cap; 0 or none is a quarter
// of the open-file limit (5,000 with 20,000 descriptors, 64 with 256).
func TestConnsPerIP(t *testing.T) {
	for _, tc := range []struct {
		yaml      string
		openFiles uint64
		want      int
	}{
		{"", 20000, 5000},
		{"", 256, 64},
		{"", 3, 1},
		{"", ^uint64(0), MaxDefaultConnsPerIP}, // RLIM_INFINITY
		{"server: {max_conns_per_ip: 0}\n", 1024, 256},
		{"server: {max_conns_per_ip: 10}\n", 20000, 10},
		{"server: {max_conns_per_ip: 10000}\n", 256, 10000},
	} {
		cfg, err := Parse("test.yaml", []byte(tc.yaml+"graphql: {path: \"\"}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.ConnsPerIP(tc.openFiles); got != tc.want {
			t.Errorf("%q with %d open files: ConnsPerIP = %d, want %d", tc.yaml, tc.openFiles, got, tc.want)
		}
	}
}

// graphql.trusted_documents: a relative file is the config file's
// directory's, the mode defaults to enforce; without the key there are none.
func TestTrustedDocumentsConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "costgate.yaml")
	yaml := "policies:\n  graphql: {algorithm: token_bucket, limit: 1, period: 1s, key: [ip]}\ngraphql:\n  trusted_documents: {file: clients/pq.json}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	td := c.TrustedDocuments()
	if td == nil || td.File != filepath.Join(dir, "clients", "pq.json") || td.Mode != gqllimit.TrustEnforce {
		t.Errorf("TrustedDocuments() = %+v, want %s in enforce mode", td, filepath.Join(dir, "clients", "pq.json"))
	}
	c, err = Parse("log.yaml", []byte(strings.Replace(yaml, "{file: clients/pq.json}", "{file: /srv/pq.json, mode: log}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if td := c.TrustedDocuments(); td == nil || td.File != "/srv/pq.json" || td.Mode != gqllimit.TrustLog {
		t.Errorf("TrustedDocuments() = %+v, want /srv/pq.json in log mode", td)
	}
	if td := Demo().TrustedDocuments(); td != nil {
		t.Errorf("the demo config has trusted documents: %+v", td)
	}
}
