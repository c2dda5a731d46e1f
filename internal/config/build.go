package config

import (
	"net/http"
	"net/netip"
	"slices"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/check"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/gqlproxy"
	"github.com/costgate/costgate/limiter/identity"
)

// The mapping of the file onto the libraries' configurations: field for
// field, nothing added. The server builds its parts from these.

// LimiterPolicies returns the policies as limiter policies by name, Name set, at
// plan multiplier 1 (the identity scales them by plan).
func (c *Config) LimiterPolicies() map[string]*limiter.Policy {
	out := make(map[string]*limiter.Policy, len(c.Policies))
	for name, pc := range c.Policies {
		out[name] = pc.policy(name)
	}
	return out
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
		LocalCache:   pc.LocalCache,
		Sync:         pc.Sync,
		Lease:        pc.Lease,
		RefundStatus: statusStrings(pc.RefundStatus),
	}
}

func statusStrings(ss []Status) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// IdentityConfig is the identity section, with hashKey as the hash key
// (the file's, or one the server made up for the memory store).
func (c *Config) IdentityConfig(hashKey []byte) identity.Config {
	return c.identityConfig(hashKey)
}

func (c *Config) identityConfig(hashKey []byte) identity.Config {
	if hashKey == nil && c.Identity.HashKey != "" {
		hashKey = []byte(c.Identity.HashKey)
	}
	keys := make(identity.Table, len(c.Identity.APIKeys))
	for k, v := range c.Identity.APIKeys {
		keys[k] = identity.APIKey{Tenant: v.Tenant, Plan: v.Plan}
	}
	return identity.Config{
		HashKey:        hashKey,
		TrustedProxies: c.TrustedPrefixes(),
		APIKeyHeader:   c.Identity.APIKeyHeader,
		APIKeys:        keys,
		Plans:          c.Plans,
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

// PlanMultiplier is the factor the plan applies to limit and burst: its
// entry in plans, else 1.
func (c *Config) PlanMultiplier(plan string) int64 {
	if m, ok := c.Plans[plan]; ok {
		return m
	}
	return 1
}

// HTTPRoutes returns the routes with their policies taken from policies
// (as Policies returns them), in config order.
func (c *Config) HTTPRoutes(policies map[string]*limiter.Policy) []routelimit.Route {
	out := make([]routelimit.Route, len(c.Routes))
	for i, rc := range c.Routes {
		out[i].Pattern = rc.Match
		for _, name := range rc.Policies {
			out[i].Policies = append(out[i].Policies, policies[name])
		}
	}
	return out
}

// graphqlModes maps graphql.mode onto gqllimit's mode: measuring is
// charging in shadow mode.
var graphqlModes = map[string]limiter.Mode{"": "", "enforce": limiter.Enforce, "measure": limiter.Shadow}

// graphqlLimits is the graphql section as gqllimit's limits.
func (c *Config) graphqlLimits() gqllimit.Limits {
	g := c.GraphQL
	l := gqllimit.Limits{
		Mode:             graphqlModes[g.Mode],
		MaxCost:          g.MaxCost,
		MaxDepth:         g.MaxDepth,
		MaxAliases:       g.MaxAliases,
		MaxFields:        g.MaxFields,
		MaxTokens:        g.MaxTokens,
		MaxBodyBytes:     g.MaxBodyBytes,
		MaxSubscriptions: g.MaxSubscriptions,
		RejectionCost:    g.RejectionCost,
		NoRefund:         !g.Refund,
		NoIntrospection:  !g.Introspection,
	}
	l.FreeSubscriptionEvents = g.SubscriptionEvents == SubscriptionEventsFree
	return l
}

// GraphQLLimits is the graphql section as gqllimit's limits.
func (c *Config) GraphQLLimits() gqllimit.Limits { return c.graphqlLimits() }

// trustModes maps graphql.trusted_documents.mode onto gqllimit's.
var trustModes = map[string]gqllimit.TrustMode{"": gqllimit.TrustEnforce, "enforce": gqllimit.TrustEnforce, "log": gqllimit.TrustLog}

// TrustedDocuments is graphql.trusted_documents as gqllimit's, nil when the
// file gives none; the caller sets the hooks.
func (c *Config) TrustedDocuments() *gqllimit.TrustedDocuments {
	td := c.GraphQL.TrustedDocuments
	if td == nil {
		return nil
	}
	return &gqllimit.TrustedDocuments{File: td.File, Mode: trustModes[td.Mode]}
}

// ComplexityOptions is the graphql section's pricing.
func (c *Config) ComplexityOptions() []complexity.Option {
	g := c.GraphQL
	opts := []complexity.Option{
		complexity.WithDefaultListSize(int(g.DefaultListSize)),
		complexity.WithMutationCost(int(g.MutationCost)),
		complexity.WithIntrospectionCost(int(g.IntrospectionCost)),
		complexity.WithInputObjectCost(int(g.InputObjectCost)),
	}
	if costs := c.Costs(); costs != nil {
		opts = append(opts, complexity.WithCosts(costs))
	}
	return opts
}

// ConnsPerIP is server.max_conns_per_ip; 0 takes the default for a process
// allowed openFiles descriptors.
func (c *Config) ConnsPerIP(openFiles uint64) int {
	if c.Server.MaxConnsPerIP > 0 {
		return c.Server.MaxConnsPerIP
	}
	return DefaultConnsPerIP(openFiles)
}

// DefaultConnsPerIP is a quarter of openFiles, at least 1: a burst from one
// busy address is served wherever a plain Go server would serve it, and
// one address still cannot take every descriptor.
func DefaultConnsPerIP(openFiles uint64) int {
	return int(max(1, min(openFiles/OpenFilesPerConn, MaxDefaultConnsPerIP)))
}

// ProxyConfig is the graphql section as the proxy's configuration; the
// caller sets Limiter and Logger.
func (c *Config) ProxyConfig() gqlproxy.Config {
	g := c.GraphQL
	return gqlproxy.Config{Upstream: g.Upstream, Timeout: g.UpstreamTimeout, StripAPIKey: !g.ForwardAPIKey, MaxResponseBytes: g.MaxResponseBytes}
}

// IntrospectsSchema reports whether proxy mode reads the upstream's schema
// by introspection (graphql.schema: introspect).
func (c *Config) IntrospectsSchema() bool {
	return c.ProxyMode() && c.GraphQL.Schema == SchemaIntrospect
}

// IntrospectionHeader is graphql.introspection_headers as an http.Header.
func (c *Config) IntrospectionHeader() http.Header {
	h := make(http.Header, len(c.GraphQL.IntrospectionHeaders))
	for k, v := range c.GraphQL.IntrospectionHeaders {
		h.Set(k, v)
	}
	return h
}

// ProxyMode reports whether GraphQL is served by proxying an upstream.
func (c *Config) ProxyMode() bool { return c.GraphQL.Path != "" && c.GraphQL.Upstream != "" }

// EnvoyDomains returns the envoy section as the check service's descriptor
// trees, with their policies taken from policies (as LimiterPolicies
// returns them). A name policies lacks is left out (Validate reports it).
func (c *Config) EnvoyDomains(policies map[string]*limiter.Policy) map[string][]check.Descriptor {
	out := make(map[string][]check.Descriptor, len(c.Envoy.Domains))
	for name, ds := range c.Envoy.Domains {
		out[name] = envoyDescriptors(ds, policies)
	}
	return out
}

func envoyDescriptors(ds []EnvoyDescriptor, policies map[string]*limiter.Policy) []check.Descriptor {
	out := make([]check.Descriptor, len(ds))
	for i, d := range ds {
		out[i] = check.Descriptor{Key: d.Key, Value: d.Value, Part: d.Part, Descriptors: envoyDescriptors(d.Descriptors, policies)}
		for _, name := range d.Policies {
			if p, ok := policies[name]; ok {
				out[i].Policies = append(out[i].Policies, p)
			}
		}
	}
	return out
}
