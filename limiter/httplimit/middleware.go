package httplimit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/limiter"
)

// DefaultMaxBodyBytes bounds a login body read for its username.
const DefaultMaxBodyBytes = 64 << 10

// APIKey is what the key table knows of an API key.
type APIKey struct {
	Tenant string
	Plan   string
}

// Route applies policies to the requests it matches.
type Route struct {
	// Method matches the request method; empty matches any.
	Method string
	// Path matches the URL path exactly, or as a prefix when Prefix is set
	// ("/api/*" in the config is Path "/api/", Prefix true).
	Path   string
	Prefix bool
	// Pattern names the route in the `route` key part when the router cannot
	// resolve the chi pattern (the config's match string).
	Pattern string
	// Policies are charged in order, all or nothing.
	Policies []*limiter.Policy
}

// Matches reports whether r is a request for this route.
func (rt *Route) Matches(r *http.Request) bool {
	if rt.Method != "" && rt.Method != r.Method {
		return false
	}
	if rt.Prefix {
		return strings.HasPrefix(r.URL.Path, rt.Path)
	}
	return r.URL.Path == rt.Path
}

// Config configures a Middleware. Limiter and HashKey are required.
type Config struct {
	Limiter *limiter.Limiter
	// Routes are matched in order; the first match applies. A request no
	// route matches is not limited.
	Routes []Route
	// TrustedProxies are the peers whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix
	// APIKeyHeader carries the API key (default X-API-Key).
	APIKeyHeader string
	// APIKeys is the key table. A key not in it answers 401.
	APIKeys map[string]APIKey
	// Plans multiply a policy's limit and burst; a plan not listed has 1.
	Plans map[string]int64
	// HashKey keys the hash applied to API keys, addresses and usernames
	// before they become part of a store key. Gateways sharing a store must
	// share it.
	HashKey []byte
	// MaxBodyBytes bounds a login body read for its username (default 64 KiB).
	MaxBodyBytes int64
	// Router, when set, resolves the chi route pattern for the `route` key part.
	Router chi.Routes
	// Clock returns the time for X-RateLimit-Reset (default time.Now).
	Clock func() time.Time
}

// Middleware limits HTTP requests by the policies of their route.
type Middleware struct {
	cfg     Config
	hash    hasher
	keyHash map[string]string // API key -> its hash, for the keys of the table
	scaled  sync.Map          // planPolicy -> *limiter.Policy
}

type planPolicy struct {
	p    *limiter.Policy
	plan string
}

// New checks cfg and returns a Middleware.
func New(cfg Config) (*Middleware, error) {
	if cfg.Limiter == nil {
		return nil, errors.New("httplimit: Config.Limiter is required")
	}
	if len(cfg.HashKey) == 0 {
		return nil, errors.New("httplimit: Config.HashKey is required")
	}
	if cfg.APIKeyHeader == "" {
		cfg.APIKeyHeader = "X-API-Key"
	}
	cfg.APIKeyHeader = http.CanonicalHeaderKey(cfg.APIKeyHeader) // once, not per request
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	for name, mult := range cfg.Plans {
		if mult < 1 {
			return nil, fmt.Errorf("httplimit: plan %q: multiplier must be at least 1, got %d", name, mult)
		}
	}
	for i, rt := range cfg.Routes {
		for _, p := range rt.Policies {
			for plan := range cfg.Plans {
				if err := scale(p, cfg.Plans[plan]).Validate(); err != nil {
					return nil, fmt.Errorf("httplimit: route %d, plan %q: %w", i, plan, err)
				}
			}
		}
	}
	m := &Middleware{cfg: cfg, hash: newHasher(cfg.HashKey), keyHash: make(map[string]string, len(cfg.APIKeys))}
	for k := range cfg.APIKeys {
		m.keyHash[k] = m.hash.hash(PartAPIKey, k)
	}
	return m, nil
}

// Identity is who a request is limited as.
type Identity struct {
	// IP is the client address (IPv6 grouped by /64).
	IP netip.Prefix
	// APIKey is the API key when the table knows it, else "".
	APIKey string
	// UnknownKey reports an API key the table does not know (or one that
	// cannot be a key); the request is then limited as anonymous and answered 401.
	UnknownKey bool
	// Tenant and Plan come from the key table; "anonymous" without a key.
	Tenant, Plan string
	// Username is the normalized login username, when read.
	Username string
	// Route is the method and route pattern.
	Route string
}

// Identify resolves a request's identity (without reading its body).
func (m *Middleware) Identify(r *http.Request) Identity {
	id := Identity{IP: ClientIP(r, m.cfg.TrustedProxies), Tenant: Anonymous, Plan: Anonymous}
	if v, present := r.Header[m.cfg.APIKeyHeader]; present {
		key := ""
		if len(v) == 1 {
			key = v[0]
		}
		info, ok := m.cfg.APIKeys[key]
		if ok && validAPIKey(key) {
			id.APIKey, id.Tenant, id.Plan = key, info.Tenant, info.Plan
		} else {
			id.UnknownKey = true
		}
	}
	return id
}

// PolicyFor returns p scaled by the multiplier of plan.
func (m *Middleware) PolicyFor(p *limiter.Policy, plan string) *limiter.Policy {
	mult, ok := m.cfg.Plans[plan]
	if !ok || mult == 1 {
		return p
	}
	k := planPolicy{p, plan}
	if v, ok := m.scaled.Load(k); ok {
		return v.(*limiter.Policy)
	}
	v, _ := m.scaled.LoadOrStore(k, scale(p, mult))
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

// Key builds the store key of p for id: its key parts, each identity part
// hashed, joined by ':'. A request without a (known) API key stands in its
// client address for api_key.
func (m *Middleware) Key(p *limiter.Policy, id Identity) string {
	var b strings.Builder
	for i, part := range p.Key {
		if i > 0 {
			b.WriteByte(':')
		}
		switch part {
		case PartIP:
			b.WriteString(m.hash.hash(PartIP, id.IP.String()))
		case PartAPIKey:
			if h, ok := m.keyHash[id.APIKey]; ok {
				b.WriteString(h)
			} else {
				b.WriteString(m.hash.hash(PartIP, id.IP.String()))
			}
		case PartTenant:
			b.WriteString(id.Tenant)
		case PartPlan:
			b.WriteString(id.Plan)
		case PartUsername:
			b.WriteString(m.hash.hash(PartUsername, id.Username))
		case PartRoute:
			b.WriteString(id.Route)
		default:
			b.WriteString(part) // validated by the config; a literal otherwise
		}
	}
	return b.String()
}

// Handler limits the requests that match a route; it fits chi.Router.Use.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt := m.match(r)
		if rt == nil {
			next.ServeHTTP(w, r)
			return
		}
		id := m.Identify(r)
		id.Route = m.routeName(r, rt)
		if needs(rt.Policies, PartUsername) {
			name, status, msg := m.readUsername(r)
			if status != 0 {
				writeError(w, status, errorBody{Error: errorCode(status), Message: msg})
				return
			}
			id.Username = name
		}
		decisions, ok := m.Check(r.Context(), rt.Policies, id, 1)
		SetHeaders(w.Header(), m.cfg.Clock(), decisions)
		if !ok {
			WriteDenied(w, decisions[len(decisions)-1])
			return
		}
		if id.UnknownKey {
			writeError(w, http.StatusUnauthorized, errorBody{Error: "unauthorized", Message: "unknown API key"})
			return
		}
		if delay := maxDelay(decisions); delay > 0 {
			// leaky_bucket shapes: the request waits for the queue ahead of it,
			// at most burst/limit·period, as the policy admitted it.
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Check charges cost to every policy for id, all or nothing, each scaled by
// id's plan. It returns the decisions made and whether the request may go on.
func (m *Middleware) Check(ctx context.Context, policies []*limiter.Policy, id Identity, cost int64) ([]limiter.Decision, bool) {
	reqs := make([]limiter.Request, len(policies))
	for i, p := range policies {
		reqs[i] = limiter.Request{Policy: m.PolicyFor(p, id.Plan), Key: m.Key(p, id), Cost: cost}
	}
	return m.cfg.Limiter.AllowAll(ctx, reqs)
}

func (m *Middleware) match(r *http.Request) *Route {
	for i := range m.cfg.Routes {
		if m.cfg.Routes[i].Matches(r) {
			return &m.cfg.Routes[i]
		}
	}
	return nil
}

func (m *Middleware) routeName(r *http.Request, rt *Route) string {
	if !needs(rt.Policies, PartRoute) {
		return ""
	}
	if m.cfg.Router != nil {
		rctx := chi.NewRouteContext()
		if m.cfg.Router.Match(rctx, r.Method, r.URL.Path) {
			if pattern := rctx.RoutePattern(); pattern != "" {
				return r.Method + " " + pattern
			}
		}
	}
	return r.Method + " " + rt.Pattern
}

func needs(policies []*limiter.Policy, part string) bool {
	for _, p := range policies {
		for _, k := range p.Key {
			if k == part {
				return true
			}
		}
	}
	return false
}

// readUsername reads the JSON login body for its username and puts the body
// back for the handler. It returns a status and message when the body
// cannot be limited by username.
func (m *Middleware) readUsername(r *http.Request) (string, int, string) {
	if r.Body == nil {
		return "", http.StatusBadRequest, `the body must be a JSON object with a "username"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.cfg.MaxBodyBytes+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return "", http.StatusBadRequest, "could not read the body"
	}
	if int64(len(body)) > m.cfg.MaxBodyBytes {
		return "", http.StatusRequestEntityTooLarge, "the body is larger than " + strconv.FormatInt(m.cfg.MaxBodyBytes, 10) + " bytes"
	}
	var login struct {
		Username *string `json:"username"`
	}
	// JSON is UTF-8; encoding/json would quietly turn bad bytes into U+FFFD.
	if !utf8.Valid(body) || json.Unmarshal(body, &login) != nil || login.Username == nil {
		return "", http.StatusBadRequest, `the body must be a JSON object with a "username" string`
	}
	name, ok := NormalizeUsername(*login.Username)
	if !ok {
		return "", http.StatusBadRequest, "the username is empty"
	}
	return name, 0, ""
}

func maxDelay(ds []limiter.Decision) time.Duration {
	var d time.Duration
	for _, x := range ds {
		d = max(d, x.Delay)
	}
	return d
}
