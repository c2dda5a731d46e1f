package identity

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/costgate/costgate/internal/names"

	"github.com/costgate/costgate/internal/keyparts"

	"github.com/costgate/costgate/internal/jsonerror"
	"github.com/costgate/costgate/limiter"
	"golang.org/x/net/http/httpguts"
)

// Key parts a policy's Key may name, besides header:NAME and the names of
// Config.Parts. A request that has no value for api_key, header:NAME or an
// application's part is keyed by its client address in that place, never by
// an empty value: a missing header can never put every caller into one
// bucket. Every part enters a store key only through a keyed hash
// (HMAC-SHA-256 with Config.HashKey): no secret or personal data reaches
// Redis.
const (
	// PartIP is the client address ([ClientIP]); IPv6 grouped by /64.
	PartIP = "ip"
	// PartAPIKey is the key from the API-key header, when the Lookup knows
	// it; a caller without one is anonymous and its address stands in. A key
	// the Lookup does not know marks the identity UnknownKey: the doors
	// answer 401 after charging the request to the anonymous identity, so
	// guessing keys is itself limited, and no state is keyed by a guessed
	// key.
	PartAPIKey = "api_key"
	// PartTenant and PartPlan are what the Lookup says of the key;
	// "anonymous" without one.
	PartTenant = "tenant"
	PartPlan   = "plan"
	// PartUsername is the login username, read by httplimit from a JSON body
	// (NFKC, case folded, so "Alice" and "ＡＬＩＣＥ" are one user).
	PartUsername = "username"
	// PartRoute is the method and route pattern the request matched.
	PartRoute = "route"
	// PartHeaderPrefix starts a key part taken from a request header:
	// "header:X-Org-Id".
	PartHeaderPrefix = "header:"
)

// builtinParts lists the key parts every Resolver knows, in a stable order.
func builtinParts() []string {
	return []string{PartIP, PartAPIKey, PartTenant, PartPlan, PartUsername, PartRoute}
}

// Anonymous is the tenant and plan of a request without an API key.
const Anonymous = "anonymous"

// DefaultAPIKeyHeader carries the API key unless Config.APIKeyHeader says otherwise.
const DefaultAPIKeyHeader = "X-API-Key"

// MinHashKeyLen is the shortest Config.HashKey accepted: a guessable key
// would let anyone who reads the store reverse hashed addresses.
const MinHashKeyLen = 16

// PartFunc is a key part of the application's own, a function of the
// request (its headers, or what earlier middleware put in its context: a
// JWT subject, a user id). ok false means the request has none: the client
// address stands in.
type PartFunc func(r *http.Request) (value string, ok bool)

// Config configures a Resolver. HashKey is required; the zero value of every
// other field takes the default its comment gives.
type Config struct {
	// HashKey keys the hash applied to identities before they become part
	// of a store key; at least MinHashKeyLen bytes. Gateways sharing a store
	// must share it.
	HashKey []byte
	// TrustedProxies are the peers whose forwarded headers are believed
	// (see ClientIP). Default none: the TCP peer is the client.
	TrustedProxies []netip.Prefix
	// APIKeyHeader carries the API key (default X-API-Key).
	APIKeyHeader string
	// APIKeys tells what a key stands for: a Table, or a lookup of the
	// application's own. nil knows no key: a request that sends one is
	// answered 401, one that sends none is anonymous.
	APIKeys Lookup
	// Plans multiply a policy's limit and burst by plan name; a plan not
	// listed has 1.
	Plans map[string]int64
	// Parts are key parts of the application's own, by the name policies
	// use in their Key. A name must not be a built-in part or start with
	// "header:".
	Parts map[string]PartFunc
	// Overrides, when set, are the operators' overrides that Request
	// applies (by the store key it builds, and by the caller's tenant).
	Overrides *limiter.Overrides
}

// Validate reports every problem of c, joined; each is a *limiter.FieldError.
func (c *Config) Validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &limiter.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(c.HashKey) == 0:
		fail("HashKey", "required: it keys the hash of API keys, addresses and usernames (%d+ bytes, the same on every gateway)", MinHashKeyLen)
	case len(c.HashKey) < MinHashKeyLen:
		fail("HashKey", "must be at least %d bytes, got %d", MinHashKeyLen, len(c.HashKey))
	}
	if c.APIKeyHeader != "" && !httpguts.ValidHeaderFieldName(c.APIKeyHeader) {
		fail("APIKeyHeader", "want an HTTP header name, got %q", c.APIKeyHeader)
	}
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			errs = append(errs, limiter.FieldAt("invalid prefix", "TrustedProxies", i))
		}
	}
	for _, name := range sortedKeys(c.Plans) {
		switch m := c.Plans[name]; {
		case name == "":
			fail("Plans", "a plan name must not be empty")
		case m < 1:
			errs = append(errs, limiter.FieldAt(fmt.Sprintf("multiplier must be at least 1, got %d", m), "Plans", limiter.MapKey(name)))
		}
	}
	for _, name := range sortedKeys(c.Parts) {
		reason := ""
		switch {
		case c.Parts[name] == nil:
			reason = "nil function"
		case isBuiltin(name) || strings.HasPrefix(name, PartHeaderPrefix):
			reason = "the name of a built-in key part"
		case !names.Valid(name):
			reason = "letters, digits, '_', '-' and '.' only"
		}
		if reason != "" {
			errs = append(errs, limiter.FieldAt(reason, "Parts", limiter.MapKey(name)))
		}
	}
	if t, ok := c.APIKeys.(Table); ok {
		for i, key := range sortedKeys(t) {
			// An API key is a secret: errors name it by its position in
			// sorted order, APIKeys[#1] in Field and index 0 in Path.
			keyErr := func(sub, reason string) {
				e := &limiter.FieldError{Field: fmt.Sprintf("APIKeys[#%d]", i+1), Path: []any{"APIKeys", i}, Reason: reason}
				if sub != "" {
					e.Field, e.Path = e.Field+"."+sub, append(e.Path, sub)
				}
				errs = append(errs, e)
			}
			k := t[key]
			if !validAPIKey(key) {
				keyErr("", fmt.Sprintf("an API key is 1 to %d visible ASCII characters", maxAPIKeyLen))
			}
			for _, f := range []struct{ name, value string }{{"Tenant", k.Tenant}, {"Plan", k.Plan}} {
				switch f.value {
				case "":
					keyErr(f.name, "required")
				case Anonymous:
					keyErr(f.name, fmt.Sprintf("%q is the %s of requests without a key", Anonymous, strings.ToLower(f.name)))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Resolver works out who a request is and builds the store keys of
// policies for it. Safe for concurrent use.
type Resolver struct {
	cfg      Config
	header   string // the canonical API-key header
	hash     hasher
	ipHashes addressHashes
	keyHash  map[string]string // hashes of a Table's keys, computed once
	scaled   sync.Map          // planPolicy -> *limiter.Policy
	keys     sync.Map          // keyOf -> the store key of a Table's key
}

type planPolicy struct {
	p    *limiter.Policy
	plan string
}

// New checks cfg and returns a Resolver.
func New(cfg Config) (*Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	if cfg.APIKeyHeader == "" {
		cfg.APIKeyHeader = DefaultAPIKeyHeader
	}
	r := &Resolver{cfg: cfg, header: http.CanonicalHeaderKey(cfg.APIKeyHeader), hash: newHasher(cfg.HashKey)}
	r.ipHashes.seed = maphash.MakeSeed()
	if t, ok := cfg.APIKeys.(Table); ok {
		r.keyHash = make(map[string]string, len(t))
		for k := range t {
			r.keyHash[k] = r.hash.hash(PartAPIKey, k)
		}
	}
	return r, nil
}

// APIKeyHeader is the canonical name of the header carrying the API key:
// a door that learns the key elsewhere (a gateway's descriptor) sets it
// there before Resolve.
func (res *Resolver) APIKeyHeader() string { return res.header }

// Identity is who one request is limited as. It belongs to that request:
// the doors fill in Username and Route as they learn them.
type Identity struct {
	// APIKey is the API key when the Lookup knows it, else "".
	APIKey string
	// UnknownKey reports an API key the Lookup does not know (or one that
	// cannot be a key); the request is limited as anonymous and answered 401.
	UnknownKey bool
	// Tenant and Plan come from the Lookup; "anonymous" without a key.
	Tenant, Plan string
	// Username is the normalised login username, once read.
	Username string
	// Route is the method and route pattern the request matched.
	Route string

	req     *http.Request
	header  http.Header
	trusted []netip.Prefix
	// client is worked out on first use: a caller known by its API key
	// under a policy keyed by the key alone never needs it.
	client     Client
	clientDone bool
	// hashes computed for this request, reused by every policy's key
	ipHash, keyHash string
}

// Client is the client address (see ClientIP).
func (id *Identity) Client() Client {
	if !id.clientDone {
		if id.req != nil {
			id.client = ClientIP(id.req, id.trusted)
		}
		id.clientDone = true
	}
	return id.client
}

// Anonymous reports a request without a known API key.
func (id *Identity) Anonymous() bool { return id.APIKey == "" }

type ctxKey struct{}

// FromContext returns the identity stored in ctx, or nil.
func FromContext(ctx context.Context) *Identity {
	id, _ := ctx.Value(ctxKey{}).(*Identity)
	return id
}

// Resolve returns who r is: the identity already in its context (resolved
// by an earlier door), or a new one. It does not read the body. A Lookup
// error is returned beside an anonymous identity.
func (res *Resolver) Resolve(r *http.Request) (*Identity, error) {
	if id := FromContext(r.Context()); id != nil {
		return id, nil
	}
	id := &Identity{}
	return id, res.fill(id, r)
}

func (res *Resolver) fill(id *Identity, r *http.Request) error {
	*id = Identity{Tenant: Anonymous, Plan: Anonymous, req: r, header: r.Header, trusted: res.cfg.TrustedProxies}
	v, present := r.Header[res.header]
	if !present {
		return nil
	}
	key := ""
	if len(v) == 1 {
		key = v[0]
	}
	if !validAPIKey(key) || res.cfg.APIKeys == nil {
		id.UnknownKey = true
		return nil
	}
	k, ok, err := res.cfg.APIKeys.LookupAPIKey(r.Context(), key)
	switch {
	case err != nil:
		return fmt.Errorf("identity: API key lookup: %w", err)
	case !ok:
		id.UnknownKey = true
	default:
		id.APIKey, id.Tenant, id.Plan = key, k.Tenant, k.Plan
		if id.Tenant == "" {
			id.Tenant = Anonymous
		}
		if id.Plan == "" {
			id.Plan = Anonymous
		}
	}
	return nil
}

// idContext carries an identity: one allocation holds the context node and
// the identity, the door's whole cost of remembering who the caller is.
type idContext struct {
	context.Context
	id Identity
}

func (c *idContext) Value(key any) any {
	if key == (ctxKey{}) {
		return &c.id
	}
	return c.Context.Value(key)
}

// Attach resolves r (or finds its identity) and returns it with a request
// whose context carries it, for the handlers after this door.
func (res *Resolver) Attach(r *http.Request) (*Identity, *http.Request, error) {
	if id := FromContext(r.Context()); id != nil {
		return id, r, nil
	}
	c := &idContext{Context: r.Context()}
	err := res.fill(&c.id, r)
	r = r.WithContext(c)
	c.id.req = r
	return &c.id, r, err
}

// Middleware resolves every request once and stores its identity in the
// context, for the doors and handlers after it (FromContext). A failed API
// key lookup answers 503.
func (res *Resolver) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, r, err := res.Attach(r)
		if err != nil {
			jsonerror.LookupFailed(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// CheckPolicy reports whether p can be applied by this Resolver (see
// Config.CheckPolicy).
func (res *Resolver) CheckPolicy(p *limiter.Policy) error { return res.cfg.CheckPolicy(p) }

// CheckPolicy reports whether p can be applied by a Resolver of c: p is
// valid, its Key is not empty and names only parts c knows, and it stays
// valid when each plan multiplies it. The error is a *limiter.PolicyError.
func (c *Config) CheckPolicy(p *limiter.Policy) error {
	if p == nil {
		return &limiter.PolicyError{Field: "policy", Reason: "nil"}
	}
	// The key is checked even when the policy is refused for another
	// field, so that a config lists both problems at once.
	var errs []error
	if err := p.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(p.Key) == 0 {
		// Without a key every caller would share one bucket; that must be said.
		errs = append(errs, &limiter.PolicyError{Policy: p.Name, Field: "key",
			Reason: "required: the parts that tell callers apart, e.g. [ip] or [tenant, api_key] ([route] for one limit that every caller shares)"})
	}
	for i, part := range p.Key {
		if part != "" && !c.knows(part) {
			errs = append(errs, &limiter.PolicyError{Policy: p.Name, Field: fmt.Sprintf("key[%d]", i), Reason: fmt.Sprintf("unknown key part %q (%s)", part, c.partList())})
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, plan := range sortedKeys(c.Plans) {
		mult := c.Plans[plan]
		if mult <= 1 {
			continue
		}
		if p.Limit > limiter.MaxExact/mult || p.Capacity() > limiter.MaxExact/mult {
			return &limiter.PolicyError{Policy: p.Name, Field: "limit", Reason: fmt.Sprintf("times plan %q (×%d) exceeds 2^53", plan, mult)}
		}
		if err := scale(p, mult).Validate(); err != nil {
			var pe *limiter.PolicyError
			if errors.As(err, &pe) {
				return &limiter.PolicyError{Policy: p.Name, Field: pe.Field, Reason: fmt.Sprintf("with plan %q (×%d): %s", plan, mult, pe.Reason)}
			}
			return err
		}
	}
	return nil
}

func (c *Config) knows(part string) bool {
	if isBuiltin(part) {
		return true
	}
	if name, ok := strings.CutPrefix(part, PartHeaderPrefix); ok {
		return httpguts.ValidHeaderFieldName(name)
	}
	_, ok := c.Parts[part]
	return ok
}

func (c *Config) partList() string {
	parts := append(builtinParts(), "header:NAME")
	parts = append(parts, sortedKeys(c.Parts)...)
	return "one of " + strings.Join(parts, ", ")
}

// Request is what charging cost to id under p asks of the limiter: p
// scaled by id's plan, the store key of p for id, and the operators'
// override that applies (Config.Overrides), if any.
func (res *Resolver) Request(p *limiter.Policy, id *Identity, cost int64) limiter.Request {
	r := limiter.Request{Policy: res.policyFor(p, id.Plan), Key: res.Key(p, id), Cost: cost, Tenant: id.Tenant, Caller: id}
	res.cfg.Overrides.ApplyTo(&r)
	return r
}

// policyFor returns p scaled by the multiplier of plan (p itself for 1).
func (res *Resolver) policyFor(p *limiter.Policy, plan string) *limiter.Policy {
	mult, ok := res.cfg.Plans[plan]
	if !ok || mult == 1 {
		return p
	}
	k := planPolicy{p, plan}
	if v, ok := res.scaled.Load(k); ok {
		return v.(*limiter.Policy)
	}
	v, _ := res.scaled.LoadOrStore(k, scale(p, mult))
	return v.(*limiter.Policy)
}

func scale(p *limiter.Policy, mult int64) *limiter.Policy {
	s := *p
	s.Limit *= mult
	if p.IsBucket() {
		s.Burst = p.Capacity() * mult
	}
	return &s
}

// Key builds the store key of p for id: its key parts joined by ':', every
// identity part hashed. A part the request has no value for (api_key of an
// anonymous caller, a missing header, an application part that reports
// none) is the client address in its place.
func (res *Resolver) Key(p *limiter.Policy, id *Identity) string {
	// A key of the table under a policy keyed only by what the table says
	// of it has one store key for ever: built once, then looked up.
	cacheable := id.APIKey != "" && res.keyHash != nil && tableOnly(p)
	if cacheable {
		if k, ok := res.keys.Load(keyOf{p, id.APIKey}); ok {
			return k.(string)
		}
	}
	k := res.buildKey(p, id)
	if cacheable {
		if _, known := res.keyHash[id.APIKey]; known {
			res.keys.Store(keyOf{p, id.APIKey}, k)
		}
	}
	return k
}

// keyOf names a cached store key.
type keyOf struct {
	p      *limiter.Policy
	apiKey string
}

// tableOnly reports a policy keyed by nothing but the API key, its tenant and plan.
func tableOnly(p *limiter.Policy) bool {
	for _, part := range p.Key {
		switch part {
		case PartAPIKey, PartTenant, PartPlan:
		default:
			return false
		}
	}
	return true
}

func (res *Resolver) buildKey(p *limiter.Policy, id *Identity) string {
	var b strings.Builder
	b.Grow(len(p.Key) * 24) // a hashed part is 22 bytes: one allocation
	for i, part := range p.Key {
		if i > 0 {
			b.WriteByte(':')
		}
		switch part {
		case PartIP:
			b.WriteString(res.ipHash(id))
		case PartAPIKey:
			b.WriteString(res.apiKeyHash(id))
		case PartTenant:
			b.WriteString(res.plain(PartTenant, id.Tenant))
		case PartPlan:
			b.WriteString(res.plain(PartPlan, id.Plan))
		case PartUsername:
			if id.Username == "" {
				b.WriteString(res.ipHash(id))
			} else {
				b.WriteString(res.hash.hash(PartUsername, id.Username))
			}
		case PartRoute:
			b.WriteString(routeText(id.Route))
		default:
			b.WriteString(res.otherPart(part, id))
		}
	}
	return b.String()
}

func (res *Resolver) ipHash(id *Identity) string {
	if id.ipHash == "" {
		if c := id.Client(); c.Addr.IsValid() {
			id.ipHash = res.ipHashes.get(c.Addr, func() string { return res.hash.hash(PartIP, c.Addr.String()) })
		} else {
			id.ipHash = res.hash.hash(PartIP, "text:"+c.Text)
		}
	}
	return id.ipHash
}

func (res *Resolver) apiKeyHash(id *Identity) string {
	if id.APIKey == "" {
		return res.ipHash(id)
	}
	if id.keyHash == "" {
		if h, ok := res.keyHash[id.APIKey]; ok {
			id.keyHash = h
		} else {
			id.keyHash = res.hash.hash(PartAPIKey, id.APIKey)
		}
	}
	return id.keyHash
}

func (res *Resolver) otherPart(part string, id *Identity) string {
	if name, ok := strings.CutPrefix(part, PartHeaderPrefix); ok {
		if v := strings.Join(id.header.Values(name), ", "); keyparts.IsHeaderValue(v) {
			return res.hash.hash(PartHeaderPrefix+strings.ToLower(name), v)
		}
		return res.ipHash(id)
	}
	if f := res.cfg.Parts[part]; f != nil && id.req != nil {
		if v, ok := f(id.req); ok {
			return res.hash.hash(part, v)
		}
	}
	return res.ipHash(id)
}

// plain writes a tenant or plan as it is when it is a plain word, so that
// store keys stay readable, else hashed: a Lookup of the application's own
// may return any text, and a ':' or a brace would make keys ambiguous.
func (res *Resolver) plain(part, s string) string {
	if names.Valid(s) {
		return s
	}
	return res.hash.hash(part, s)
}

// routeText keeps a route pattern readable in a key, braces (chi's
// parameters) turned into parentheses: a brace would end Redis Cluster's hash
// tag early and put every caller of the route into one slot.
func routeText(s string) string {
	if !strings.ContainsAny(s, "{}") {
		return s
	}
	return strings.NewReplacer("{", "(", "}", ")").Replace(s)
}

func isBuiltin(part string) bool {
	switch part {
	case PartIP, PartAPIKey, PartTenant, PartPlan, PartUsername, PartRoute:
		return true
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
