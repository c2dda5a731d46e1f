package config

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/costgate/costgate/internal/gqlpolicy"

	"github.com/redis/go-redis/v9"
	"golang.org/x/net/http/httpguts"

	"github.com/costgate/costgate/internal/check"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/redisstore"
)

// Validate checks the whole config and reports every problem found: what the
// file itself gets wrong (a name that refers to nothing, a store with two
// deployments), and what the libraries refuse, each against its line.
func (c *Config) Validate() error {
	if c.src == nil {
		c.src = newSource("config")
	}
	v := &validator{c: c}
	v.listen()
	v.server()
	v.store()
	v.identity()
	v.policies()
	v.routes()
	v.graphql()
	v.costs()
	v.cors()
	v.gateway()
	v.envoy()
	v.endingPolicies()
	v.admin()
	slices.SortStableFunc(v.errs, func(a, b *Error) int {
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
	errs []*Error
}

func (v *validator) fail(field, format string, args ...any) {
	src := v.c.src
	e := &Error{File: src.name, Field: field, Reason: fmt.Sprintf(format, args...)}
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

// reported is the config path a field mapping returns for a library error
// that repeats one the config reported itself: it is dropped.
const reported = ""

// library reports a library's refusal against the config's field: field
// maps each of the library's FieldErrors onto the config's path (reported
// to drop it); one it does not know goes to fallback.
func (v *validator) library(err error, fallback string, field func(*limiter.FieldError) (path string, ok bool)) {
	for _, e := range limiter.Errors(err) {
		var fe *limiter.FieldError
		var pe *limiter.PolicyError
		switch {
		case errors.As(e, &fe):
			path, ok := field(fe)
			switch {
			case !ok:
				v.fail(fallback, "%s: %s", fe.Field, fe.Reason)
			case path != reported:
				v.fail(path, "%s", fe.Reason)
			}
		case errors.As(e, &pe):
			v.fail(v.c.entryPath("policies", pe.Policy)+"."+pe.Field, "%s", pe.Reason)
		default:
			v.fail(fallback, "%v", e)
		}
	}
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
	if m := v.c.Metrics.Listen; m != "" {
		if _, port, err := net.SplitHostPort(m); err != nil {
			v.fail("metrics.listen", "want host:port such as \"127.0.0.1:9090\", got %q", m)
		} else if port != "0" && (m == v.c.Listen || m == v.c.GRPCListen) {
			v.fail("metrics.listen", "%q is another listener's address: /metrics needs its own", m)
		}
	}
}

func (v *validator) server() {
	if n := v.c.Server.MaxConnsPerIP; n < 0 {
		v.fail("server.max_conns_per_ip", "must not be negative, got %d (0 takes the default, a quarter of the open-file limit)", n)
	}
}

func (v *validator) store() {
	s := v.c.Store
	if s.Gateways < 1 {
		v.fail("store.gateways", "must be at least 1, got %d", s.Gateways)
	}
	if s.Memory.MaxKeys < 0 {
		v.fail("store.memory.max_keys", "must not be negative, got %d", s.Memory.MaxKeys)
	}
	if s.KeyPrefix == "" {
		v.fail("store.key_prefix", "must not be empty (default %q)", redisstore.DefaultKeyPrefix)
	} else {
		v.library((&redisstore.Options{KeyPrefix: s.KeyPrefix}).Validate(), "store", func(fe *limiter.FieldError) (string, bool) {
			return "store.key_prefix", fe.Field == "KeyPrefix"
		})
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
	if id.HashKey == "" && v.c.Store.Redis != nil && v.c.src.name != DemoName {
		// The built-in demo config, pointed at Redis with -redis, runs with a
		// public demo key (the server warns): its API keys are public too.
		why := ""
		if origin, ok := v.c.src.origins["store.redis"]; ok {
			why = " (the store is Redis because of " + origin + ")"
		}
		v.fail("identity.hash_key", "required with a Redis store: every gateway must hash identities alike%s", why)
	}
	for i, s := range id.TrustedProxies {
		if _, err := parsePrefix(s); err != nil {
			v.fail(fmt.Sprintf("identity.trusted_proxies[%d]", i), "want a CIDR such as 10.0.0.0/8 or an IP, got %q", s)
		}
	}
	cfg := v.c.identityConfig(nil)
	if len(cfg.HashKey) == 0 {
		// With no key the server makes one up (memory store), or the rule
		// above applies: only a key given in the file can be too short.
		cfg.HashKey = make([]byte, identity.MinHashKeyLen)
	}
	keys := sortedKeys(id.APIKeys)
	v.library(cfg.Validate(), "identity", func(fe *limiter.FieldError) (string, bool) {
		switch fe.Field {
		case "HashKey":
			return "identity.hash_key", true
		case "APIKeyHeader":
			return "identity.api_key_header", true
		case "Plans":
			return "plans", true
		}
		switch p := fe.Path; {
		case len(p) == 2 && p[0] == "Plans":
			name, ok := p[1].(limiter.MapKey)
			return v.c.entryPath("plans", string(name)), ok
		case len(p) >= 2 && p[0] == "APIKeys":
			// identity numbers the keys in sorted order; the file names them
			// by position: map one onto the other without naming the secret.
			n, ok := p[1].(int)
			if !ok || n < 0 || n >= len(keys) {
				return "", false
			}
			path := v.c.entryPath("identity.api_keys", keys[n])
			if len(p) == 3 {
				path += "." + strings.ToLower(fmt.Sprint(p[2]))
			}
			return path, true
		}
		return "", false
	})
}

// policies checks each policy as the identity that will apply it does.
func (v *validator) policies() {
	idcfg := v.c.identityConfig(nil)
	for _, name := range sortedKeys(v.c.Policies) {
		pc := v.c.Policies[name]
		field := v.c.entryPath("policies", name)
		p := pc.policy(name)
		if v.c.src.given[field+".burst"] && pc.Burst < 1 {
			v.fail(field+".burst", "must be at least 1, got %d (leave it out for burst = limit)", pc.Burst)
			p.Burst = 0 // reported; let the library look at the rest
		}
		err := idcfg.CheckPolicy(p)
		var pe *limiter.PolicyError
		if errors.As(err, &pe) && pe.Field == "name" {
			v.fail(field, "policy names are %s", pe.Reason)
			continue
		}
		v.library(err, field, func(*limiter.FieldError) (string, bool) { return "", false })
	}
}

func (v *validator) routes() {
	if len(v.c.Routes) == 0 {
		return
	}
	routes := make([]routelimit.Route, len(v.c.Routes))
	unknown := false
	for i, rc := range v.c.Routes {
		field := fmt.Sprintf("routes[%d]", i)
		routes[i].Pattern = rc.Match
		if rc.Match == "" {
			v.fail(field+".match", `required: "METHOD /path" or "/path"`)
		} else if _, p, prefix, err := routelimit.ParseRoute(rc.Match); err == nil && !prefix && p == v.c.GraphQL.Path {
			v.fail(field+".match", "%s is the GraphQL path: it is configured under graphql, not routes", p)
		}
		for j, name := range rc.Policies {
			if _, ok := v.c.Policies[name]; !ok {
				v.fail(fmt.Sprintf("%s.policies[%d]", field, j), "unknown policy %q%s", name, v.known())
				unknown = true
				routes[i].Policies = append(routes[i].Policies, nil)
				continue
			}
			routes[i].Policies = append(routes[i].Policies, &limiter.Policy{Name: name})
		}
	}
	v.library(routelimit.ValidateRoutes(routes), "routes", func(fe *limiter.FieldError) (string, bool) {
		p := fe.Path
		if len(p) < 3 || p[0] != "Routes" {
			if fe.Field == "Routes" && unknown {
				// "no route has a policy" would only echo the unknown names
				// above, and on an earlier line, so it would be read first.
				return reported, true
			}
			return "routes", fe.Field == "Routes"
		}
		i, _ := p[1].(int)
		switch {
		case len(p) == 3 && p[2] == "Pattern" && v.c.Routes[i].Match == "":
			return reported, true // a missing match
		case len(p) == 3 && p[2] == "Pattern":
			return fmt.Sprintf("routes[%d].match", i), true
		case len(p) == 4 && p[2] == "Policies":
			j, _ := p[3].(int)
			if routes[i].Policies[j] == nil {
				return reported, true // an unknown name
			}
			return fmt.Sprintf("routes[%d].policies[%d]", i, j), true
		}
		return "", false
	})
}

// known lists the defined policies for an "unknown policy" message.
func (v *validator) known() string {
	if len(v.c.Policies) == 0 {
		return " (policies defines none)"
	}
	return " (defined: " + strings.Join(sortedKeys(v.c.Policies), ", ") + ")"
}

// graphqlFields maps gqllimit.Limits onto the config.
var graphqlFields = map[string]string{
	"Mode": "graphql.mode", "MaxCost": "graphql.max_cost", "MaxDepth": "graphql.max_depth",
	"MaxAliases": "graphql.max_aliases", "MaxFields": "graphql.max_fields",
	"MaxTokens": "graphql.max_tokens", "MaxBodyBytes": "graphql.max_body_bytes",
	"MaxSubscriptions": "graphql.max_subscriptions", "RejectionCost": "graphql.rejection_cost",
}

func (v *validator) graphql() {
	g := v.c.GraphQL
	if g.Path == "" {
		return // no GraphQL served
	}
	v.graphqlMetrics()
	if !strings.HasPrefix(g.Path, "/") || strings.ContainsAny(g.Path, "*{}?# ") {
		v.fail("graphql.path", "want a plain path such as /graphql, got %q", g.Path)
	}
	switch pc, ok := v.c.Policies[g.Policy]; {
	case g.Policy == "":
		v.fail("graphql.policy", `required while graphql.path is set: the token_bucket charged each operation's cost (graphql.path: "" serves no GraphQL)`)
	case !ok:
		v.fail("graphql.policy", "unknown policy %q%s; define it, or set graphql.path: \"\" to serve no GraphQL", g.Policy, v.known())
	default:
		if err := gqlpolicy.Check(pc.policy(g.Policy)); err != nil {
			var pe *limiter.PolicyError
			errors.As(err, &pe)
			v.fail("graphql.policy", "policy %q is a %s", g.Policy, pe.Reason)
		} else if len(pc.RefundStatus) > 0 {
			v.fail("graphql.policy", "policy %q has refund_status, which REST routes and login apply; GraphQL refunds what an operation did not cost (graphql.refund)", g.Policy)
		}
	}
	if _, ok := graphqlModes[g.Mode]; !ok {
		v.fail("graphql.mode", "unknown mode %q (enforce or measure)", g.Mode)
	}
	if e := g.SubscriptionEvents; e != SubscriptionEventsCharge && e != SubscriptionEventsFree {
		v.fail("graphql.subscription_events", "unknown value %q (charge: each event costs what it ran; free: only the opening is charged)", e)
	}
	limits := v.c.graphqlLimits()
	v.library(limits.Validate(), "graphql", func(fe *limiter.FieldError) (string, bool) {
		p, ok := graphqlFields[fe.Field]
		return p, ok
	})
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"default_list_size", g.DefaultListSize},
		{"mutation_cost", g.MutationCost},
		{"introspection_cost", g.IntrospectionCost},
		{"input_object_cost", g.InputObjectCost},
	} {
		if f.value < 0 {
			v.fail("graphql."+f.name, "must not be negative, got %d", f.value)
		}
	}
	switch {
	case g.Schema != "" && g.Upstream == "":
		v.fail("graphql.upstream", "required with graphql.schema (proxy mode needs both)")
	case g.Schema == "" && g.Upstream != "":
		v.fail("graphql.schema", "required with graphql.upstream (proxy mode needs both)")
	}
	switch {
	case g.UpstreamTimeout <= 0:
		v.fail("graphql.upstream_timeout", "must be positive, got %s", g.UpstreamTimeout)
	case g.UpstreamTimeout >= WriteTimeout:
		v.fail("graphql.upstream_timeout", "must be below the server's write deadline (%s), got %s: a client would get an empty reply instead of 504 UPSTREAM_TIMEOUT", WriteTimeout, g.UpstreamTimeout)
	}
	if g.MaxResponseBytes < 0 {
		v.fail("graphql.max_response_bytes", "must not be negative (0: no bound, replies are streamed), got %d", g.MaxResponseBytes)
	}
	if g.SchemaRefresh < 0 {
		v.fail("graphql.schema_refresh", "must not be negative, got %s (0: at start only)", g.SchemaRefresh)
	}
	for _, name := range sortedKeys(g.IntrospectionHeaders) {
		field := v.c.entryPath("graphql.introspection_headers", name)
		if !httpguts.ValidHeaderFieldName(name) {
			v.fail(field, "want an HTTP header name, got %q", name)
		}
		if strings.ContainsFunc(g.IntrospectionHeaders[name], func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }) {
			v.fail(field, "the value holds a control character (it is not shown: it may be a secret)")
		}
	}
	if td := g.TrustedDocuments; td != nil {
		if td.File == "" {
			v.fail("graphql.trusted_documents.file", "required: Apollo's persisted query manifest, or a {\"id\": \"document\"} map (Relay, GraphQL Codegen)")
		}
		if _, ok := trustModes[td.Mode]; !ok {
			v.fail("graphql.trusted_documents.mode", "unknown mode %q (enforce or log)", td.Mode)
		}
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

func (v *validator) cors() {
	for i, o := range v.c.CORS.AllowedOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			v.fail(fmt.Sprintf("cors.allowed_origins[%d]", i), `want an origin such as "https://app.example.com", or "*", got %q`, o)
		}
	}
}

func (v *validator) gateway() {
	if h := v.c.Gateway.UsernameHeader; h != "" && !httpguts.ValidHeaderFieldName(h) {
		v.fail("gateway.username_header", "want an HTTP header name such as X-Login-User, got %q", h)
	}
}

// envoy checks grpc_listen and the descriptor trees; the check service
// owns the rules of a tree, reported here against the file's lines.
func (v *validator) envoy() {
	c := v.c
	if c.GRPCListen != "" {
		if _, port, err := net.SplitHostPort(c.GRPCListen); err != nil {
			v.fail("grpc_listen", "want host:port such as \":8081\", got %q", c.GRPCListen)
		} else if c.GRPCListen == c.Listen && port != "0" { // port 0: each gets a free port
			v.fail("grpc_listen", "%q is listen's address too: the gRPC service needs its own", c.GRPCListen)
		}
		if len(c.Identity.TrustedProxies) == 0 {
			v.fail("grpc_listen", "identity.trusted_proxies is empty: no Envoy could call; list the addresses Envoy calls from")
		}
		if len(c.Envoy.Domains) == 0 {
			v.fail("grpc_listen", "envoy.domains is empty: the rate-limit service would limit nothing")
		}
	}
	if len(c.Envoy.Domains) == 0 {
		return
	}
	policies := map[string]*limiter.Policy{}
	unknown := false
	var walk func(field string, ds []EnvoyDescriptor)
	walk = func(field string, ds []EnvoyDescriptor) {
		for i, d := range ds {
			f := fmt.Sprintf("%s[%d]", field, i)
			for j, name := range d.Policies {
				pc, ok := c.Policies[name]
				if !ok {
					v.fail(fmt.Sprintf("%s.policies[%d]", f, j), "unknown policy %q%s", name, v.known())
					unknown = true
					continue
				}
				policies[name] = pc.policy(name)
			}
			walk(f+".descriptors", d.Descriptors)
		}
	}
	for _, name := range sortedKeys(c.Envoy.Domains) {
		walk(c.entryPath("envoy.domains", name), c.Envoy.Domains[name])
	}
	// Policies are validated under policies; here only how the tree uses them.
	err := check.ValidateDomains(c.EnvoyDomains(policies), nil)
	for _, e := range limiter.Errors(err) {
		var de *check.DescriptorError
		var fe *limiter.FieldError
		switch {
		case errors.As(e, &de):
			field := c.entryPath("envoy.domains", de.Domain)
			for k, n := range de.Path {
				if k > 0 {
					field += ".descriptors"
				}
				field += fmt.Sprintf("[%d]", n)
			}
			if de.Field != "" {
				field += "." + de.Field
			}
			v.fail(field, "%s", de.Reason)
		case errors.As(e, &fe) && unknown:
			// "limits nothing" because the unknown names were left out: said above.
		case errors.As(e, &fe):
			v.fail("envoy.domains", "%s", fe.Reason)
		default:
			v.fail("envoy.domains", "%v", e)
		}
	}
}

// endingPolicies refuses, while a gateway door is served, the policies
// that act when a response has ended (algorithm: concurrency,
// refund_status) on routes and Envoy descriptors: the door answers a check
// before the request is served and never sees its response, so a hold it
// took would never be released, and a charge never refunded. Without
// trusted proxies or grpc_listen the door is not served (it answers 403).
func (v *validator) endingPolicies() {
	c := v.c
	var why string
	switch {
	case c.ServesCheck():
		why = "identity.trusted_proxies is set, so /v1/check answers the gateways listed there; gateway.check: false turns it off"
	case c.GRPCListen != "":
		why = "grpc_listen serves Envoy's rate-limit service"
	default:
		return
	}
	reason := func(name string) string {
		what := "has refund_status, refunded by the response's status"
		if c.Policies[name].Algorithm == limiter.Concurrency {
			what = "is a concurrency policy, whose hold is released when the response has ended"
		}
		return fmt.Sprintf("policy %q %s, and the gateway door is served (%s): a gateway's check never sees the response. Limit these routes in a costgate that serves no gateway door, or use a rate policy here", name, what, why)
	}
	ends := func(name string) bool {
		pc, ok := c.Policies[name]
		return ok && (pc.Algorithm == limiter.Concurrency || len(pc.RefundStatus) > 0)
	}
	for i, rc := range c.Routes {
		for j, name := range rc.Policies {
			if ends(name) {
				v.fail(fmt.Sprintf("routes[%d].policies[%d]", i, j), "%s", reason(name))
			}
		}
	}
	var walk func(field string, ds []EnvoyDescriptor)
	walk = func(field string, ds []EnvoyDescriptor) {
		for i, d := range ds {
			f := fmt.Sprintf("%s[%d]", field, i)
			for j, name := range d.Policies {
				if ends(name) {
					v.fail(fmt.Sprintf("%s.policies[%d]", f, j), "%s", reason(name))
				}
			}
			walk(f+".descriptors", d.Descriptors)
		}
	}
	for _, name := range sortedKeys(c.Envoy.Domains) {
		walk(c.entryPath("envoy.domains", name), c.Envoy.Domains[name])
	}
}

// Warnings lists what is legal but probably a mistake, for the log at start.
func (c *Config) Warnings() []string {
	var out []string
	if len(c.Plans) > 0 {
		for _, key := range sortedKeys(c.Identity.APIKeys) {
			plan := c.Identity.APIKeys[key].Plan
			if _, ok := c.Plans[plan]; !ok {
				out = append(out, c.warning(c.entryPath("identity.api_keys", key)+".plan",
					fmt.Sprintf("plan %q is not in plans: multiplier 1", plan)))
			}
		}
	}
	used := map[string]bool{}
	if c.GraphQL.Path != "" {
		used[c.GraphQL.Policy] = true
	}
	for _, r := range c.Routes {
		for _, p := range r.Policies {
			used[p] = true
		}
	}
	var envoyUses func(ds []EnvoyDescriptor)
	envoyUses = func(ds []EnvoyDescriptor) {
		for _, d := range ds {
			for _, p := range d.Policies {
				used[p] = true
			}
			envoyUses(d.Descriptors)
		}
	}
	for _, ds := range c.Envoy.Domains {
		envoyUses(ds)
	}
	if len(c.Envoy.Domains) > 0 && c.GRPCListen == "" {
		out = append(out, "envoy.domains: grpc_listen is not set: nothing serves Envoy's rate-limit service")
	}
	for _, name := range sortedKeys(c.Policies) {
		if !used[name] {
			out = append(out, fmt.Sprintf("%s: no route or envoy descriptor uses it", c.entryPath("policies", name)))
		}
	}
	if c.src != nil && c.GraphQL.Path != "" {
		for _, f := range []struct {
			name  string
			value int64
			def   int64
		}{
			{"max_cost", c.GraphQL.MaxCost, gqllimit.DefaultMaxCost},
			{"max_depth", int64(c.GraphQL.MaxDepth), gqllimit.DefaultMaxDepth},
			{"max_aliases", int64(c.GraphQL.MaxAliases), gqllimit.DefaultMaxAliases},
			{"max_fields", int64(c.GraphQL.MaxFields), gqllimit.DefaultMaxFields},
			{"max_tokens", int64(c.GraphQL.MaxTokens), gqllimit.DefaultMaxTokens},
			{"max_body_bytes", c.GraphQL.MaxBodyBytes, gqllimit.DefaultMaxBodyBytes},
			{"max_subscriptions", int64(c.GraphQL.MaxSubscriptions), gqllimit.DefaultMaxSubscriptions},
			{"rejection_cost", c.GraphQL.RejectionCost, gqllimit.DefaultRejectionCost},
		} {
			if f.value == 0 && c.src.given["graphql."+f.name] {
				out = append(out, fmt.Sprintf("graphql.%s: 0 takes the default, %d (there is no way to turn it off)", f.name, f.def))
			}
		}
	}
	if c.GraphQL.Schema != SchemaIntrospect && c.src != nil {
		for _, f := range []string{"graphql.schema_refresh", "graphql.introspection_headers"} {
			if c.src.given[f] {
				out = append(out, f+": only read with graphql.schema: introspect")
			}
		}
	}
	if c.Server.MaxConnsPerIP == 0 && c.src != nil && c.src.given["server.max_conns_per_ip"] {
		out = append(out, "server.max_conns_per_ip: 0 takes the default, a quarter of the open-file limit")
	}
	return out
}

// warning is field's warning, with the file and line where the file has them.
func (c *Config) warning(field, reason string) string {
	if c.src == nil {
		return field + ": " + reason
	}
	e := Error{File: c.src.name, Field: field, Reason: reason}
	for p := field; p != "" && e.Line == 0; p = c.src.parent(p) {
		e.Line = c.src.lines[p]
	}
	return e.Error()
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

// redactURLError is err without the URL it may quote: a Redis URL can carry
// a password.
func redactURLError(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return "invalid URL: " + uerr.Err.Error()
	}
	return err.Error()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
