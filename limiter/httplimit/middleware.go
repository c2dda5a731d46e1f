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
	// normalised (see the package doc), so without case and trailing
	// slashes. This is the config file's `match` syntax.
	Pattern string
	// Policies are charged in order, all or nothing. An empty list exempts
	// the route from later, broader routes.
	Policies []*limiter.Policy
}

// Middleware limits HTTP requests by the policies of the route they match.
type Middleware struct {
	engine *routelimit.Middleware
}

// New checks cfg and returns a Middleware.
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
// matched Route's path. A path that does not normalise (see the package
// doc) is answered 400.
func (m *Middleware) Handler(next http.Handler) http.Handler { return m.engine.Handler(next) }

// Error codes of the JSON error bodies.
const (
	CodeRateLimit        = routelimit.CodeRateLimit        // "rate_limit": 429, a policy denied
	CodeConcurrencyLimit = routelimit.CodeConcurrencyLimit // "concurrency_limit": 429, a concurrency policy has every place held
	CodeUnavailable      = routelimit.CodeUnavailable      // "rate_limiter_unavailable": 503, the store failed and the policy fails closed
)
