package httplimit

import (
	"fmt"
	"net/http"
	"time"

	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

// Config configures a Middleware. Limiter, Identity and at least one Route
// with a policy are required; the zero value of every other field takes
// the default its comment gives.
type Config struct {
	Limiter *limiter.Limiter
	// Identity says who pays. It may be shared with gqllimit: an identity
	// resolved by one door is reused by the next (identity.FromContext).
	Identity *identity.Resolver
	// Routes are matched in order; the first match applies. A request no
	// route matches is not limited.
	Routes []Route
	// MaxBodyBytes bounds a login body read for its username (default 64 KiB).
	MaxBodyBytes int64
	// Clock returns the time for X-RateLimit-Reset (default time.Now).
	Clock func() time.Time
}

// engine is c in the terms of the middleware's implementation.
func (c *Config) engine() routelimit.Config {
	routes := make([]routelimit.Route, len(c.Routes))
	for i, rt := range c.Routes {
		routes[i] = routelimit.Route(rt)
	}
	return routelimit.Config{Limiter: c.Limiter, Identity: c.Identity, Routes: routes, MaxBodyBytes: c.MaxBodyBytes, Clock: c.Clock}
}

// Validate reports every problem of c, joined: each is a *limiter.FieldError
// naming the field (Routes[1].Pattern, with its Path), or the
// *limiter.PolicyError of a route's policy.
func (c *Config) Validate() error {
	cfg := c.engine()
	return cfg.Validate()
}

// Route applies policies to the requests its pattern matches.
type Route struct {
	// Pattern is "METHOD /path" or "/path" (any method). A path ending in
	// "/*" matches that directory and everything below it ("/api/*" matches
	// "/api", "/api/" and "/api/products/7", not "/apis"); any other path
	// matches that path and its format suffixes ("/login" matches "/login"
	// and "/login.json"). Both are compared with the request's path
	// normalised (docs/gateways.md, "Path normalisation": decoded, dot
	// segments resolved, ;parameters removed), so without case and trailing
	// slashes. This is the config file's `match` syntax.
	Pattern string
	// Policies are charged in order, all or nothing. An empty list exempts
	// the route from later, broader routes.
	Policies []*limiter.Policy
}

// Middleware limits HTTP requests by the policies of the route they match.
// Each policy of the route is charged for the request's identity, in order
// and all or nothing: a request one policy denies consumes nothing from the
// others. Every limited response carries X-RateLimit-Limit, -Remaining,
// -Reset and the IETF draft's RateLimit-Policy and RateLimit (package
// header's Set);
// a denial is 429 with Retry-After and a JSON body ([CodeRateLimit]), a store
// outage on a policy that fails closed 503 ([CodeUnavailable]). A
// leaky_bucket policy holds a request for its turn while its queue has room
// instead of refusing it; a shadow-mode policy never denies and sends no
// headers.
type Middleware struct {
	engine *routelimit.Middleware
}

// New checks cfg and returns a Middleware. It refuses, with the field and
// the reason ([Config.Validate]), what would limit nothing or fail later: no
// routes, a route without policies, a policy without a key or that does not
// validate, a route an earlier one shadows.
//
// The caller is worked out by cfg.Identity, shared with the other doors
// (gqllimit, the gateway check): once per request, then read back from the
// context. A route whose policies key by username reads the JSON login
// body's "username" for it, without consuming the body; a username over 256
// bytes, or a body naming "username" twice or in another letter case, is
// refused with 400 after being charged to the route's other policies. An
// unknown API key answers 401 after being charged to the anonymous identity
// (the client address), so that guessing keys is limited too.
func New(cfg Config) (*Middleware, error) {
	m, err := routelimit.New(cfg.engine())
	if err != nil {
		return nil, fmt.Errorf("httplimit: %w", err)
	}
	return &Middleware{engine: m}, nil
}

// Handler limits the requests that match a route; it fits chi.Router.Use
// and r.With. Used after chi has routed the request (in a Group or With),
// the `route` key part is chi's route pattern; used before, it is the
// matched Route's path. The path is matched normalised, and also as a
// server that does not normalise reads it (docs/gateways.md, "Path
// normalisation"); a path that does not decode, or that the two readings
// put on two different limited routes, is answered 400.
func (m *Middleware) Handler(next http.Handler) http.Handler { return m.engine.Handler(next) }

// Error codes of the JSON error bodies.
const (
	CodeRateLimit        = routelimit.CodeRateLimit        // "rate_limit": 429, a policy denied
	CodeConcurrencyLimit = routelimit.CodeConcurrencyLimit // "concurrency_limit": 429, a concurrency policy has every place held
	CodeUnavailable      = routelimit.CodeUnavailable      // "rate_limiter_unavailable": 503, the store failed and the policy fails closed
)
