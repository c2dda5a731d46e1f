package routelimit

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/costgate/costgate/internal/keyparts"

	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/internal/jsonerror"
	"github.com/costgate/costgate/internal/username"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
	"github.com/costgate/costgate/limiter/identity"
)

// Config configures a Middleware: httplimit.Config, whose fields it has
// and where they are documented, for the doors inside costgate.
type Config struct {
	Limiter      *limiter.Limiter
	Identity     *identity.Resolver
	Routes       []Route
	MaxBodyBytes int64
	Clock        func() time.Time
}

// Validate reports every problem of c, joined: each is a *limiter.FieldError
// naming the field (Routes[1].Pattern), or the *limiter.PolicyError of a
// route's policy.
func (c *Config) Validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &limiter.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Limiter == nil {
		fail("Limiter", "required")
	}
	if c.Identity == nil {
		fail("Identity", "required: it says who pays (identity.New)")
	}
	if c.MaxBodyBytes < 0 {
		fail("MaxBodyBytes", "must not be negative, got %d", c.MaxBodyBytes)
	}
	if err := ValidateRoutes(c.Routes); err != nil {
		errs = append(errs, err)
	}
	if c.Identity != nil {
		for _, rt := range c.Routes {
			for _, p := range rt.Policies {
				if p != nil {
					if err := c.Identity.CheckPolicy(p); err != nil {
						errs = append(errs, err)
					}
					if c.Limiter != nil {
						if err := c.Limiter.CheckPolicy(p); err != nil {
							errs = append(errs, err)
						}
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// ValidateRoutes reports every problem of a route list, joined, as
// *limiter.FieldError values: no routes, none with a policy, a pattern that
// does not parse, a route an earlier one shadows, a nil policy or one
// listed twice. It does not validate the policies themselves.
func ValidateRoutes(routes []Route) error {
	var errs []error
	fail := func(format string, args []any, path ...any) {
		errs = append(errs, limiter.FieldAt(fmt.Sprintf(format, args...), path...))
	}
	if len(routes) == 0 {
		fail(`empty: the middleware would limit nothing (Route{Pattern: "/*", ...} limits every request)`, nil, "Routes")
	}
	rules := make([]*rule, len(routes))
	charged := false
	for i, rt := range routes {
		r, err := parseRule(rt.Pattern)
		if err != nil {
			fail("%v", []any{err}, "Routes", i, "Pattern")
		} else {
			rules[i] = &r
			for j, earlier := range rules[:i] {
				if earlier == nil || !earlier.covers(r) {
					continue
				}
				if *earlier == r {
					fail("duplicate route %q: route %d has it", []any{rt.Pattern, j}, "Routes", i, "Pattern")
				} else {
					fail("never matches: route %d (%q) comes first and matches every request it would (first match wins)", []any{j, routes[j].Pattern}, "Routes", i, "Pattern")
				}
				break
			}
		}
		for j, p := range rt.Policies {
			if p == nil {
				fail("nil policy", nil, "Routes", i, "Policies", j)
				continue
			}
			charged = true
			for _, q := range rt.Policies[:j] {
				if q != nil && q.Name == p.Name {
					fail("policy %q listed twice", []any{p.Name}, "Routes", i, "Policies", j)
					break
				}
			}
		}
	}
	if len(routes) > 0 && !charged {
		fail("no route has a policy: the middleware would limit nothing", nil, "Routes")
	}
	return errors.Join(errs...)
}

// Middleware limits HTTP requests by the policies of the route they match.
type Middleware struct {
	cfg    Config
	id     *identity.Resolver
	routes []compiled
}

type compiled struct {
	Route
	rule
	byUsername    bool              // a policy keys by username: the body is read
	withoutUser   []*limiter.Policy // the policies that do not key by username
	needsRoute    bool
	fallbackRoute string // the route part when chi has not routed the request
	// ends: a policy acts when the response has ended (a concurrency hold,
	// refund_status), so the response's status is recorded and the
	// request's ticket ended.
	ends bool
}

// New checks cfg and returns a Middleware.
func New(cfg Config) (*Middleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = username.DefaultMaxBodyBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	m := &Middleware{cfg: cfg, id: cfg.Identity}
	for _, rt := range cfg.Routes {
		r, _ := parseRule(rt.Pattern)
		c := compiled{Route: rt, rule: r,
			byUsername: keyparts.Needs(rt.Policies, identity.PartUsername),
			needsRoute: keyparts.Needs(rt.Policies, identity.PartRoute)}
		for _, p := range rt.Policies {
			if !keyparts.Needs([]*limiter.Policy{p}, identity.PartUsername) {
				c.withoutUser = append(c.withoutUser, p)
			}
			c.ends = c.ends || p.EndsWithResponse()
		}
		c.fallbackRoute = r.path
		if r.prefix {
			c.fallbackRoute += "*"
		}
		m.routes = append(m.routes, c)
	}
	return m, nil
}

// Handler limits the requests that match a route; it fits chi.Router.Use
// and r.With. Used after chi has routed the request (in a Group or With),
// the `route` key part is chi's route pattern; used before, it is the
// matched Route's path. A path NormalizePath refuses is answered 400.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// chi itself routes the path exactly, but what reaches a route may be
		// another spelling of it (middleware.StripSlashes rewrites the path
		// chi routes, other routers fold case): matching the normalised path
		// charges every spelling, and costs nothing on a path already normal.
		rt, err := m.match(r.Method, r.URL.EscapedPath())
		if err != nil {
			jsonerror.Write(w, http.StatusBadRequest, jsonerror.Body{Error: errorCode(http.StatusBadRequest), Message: err.Error()})
			return
		}
		if rt == nil || len(rt.Policies) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		id, r, err := m.id.Attach(r)
		if err != nil {
			jsonerror.LookupFailed(w)
			return
		}
		if rt.ends {
			m.serveEnding(w, r, id, rt, next)
			return
		}
		if !m.limit(w, r, id, rt, nil, nil) {
			return
		}
		if id.UnknownKey {
			jsonerror.UnknownAPIKey(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveEnding serves a request of a route with policies that act when its
// response has ended: its concurrency holds are released, and its
// refund_status charges refunded, once whatever ends it (the handler
// returning, the client gone, a panic), after the handler returned and off
// its path, with the status it answered.
func (m *Middleware) serveEnding(w http.ResponseWriter, r *http.Request, id *identity.Identity, rt *compiled, next http.Handler) {
	rec := &statusRecorder{ResponseWriter: w}
	var ticket *limiter.Ticket
	returned := false
	defer func() {
		if !returned {
			rec.status = 0 // a panic: whatever it wrote, no answer of its own
		}
		ticket.End(rec.status)
	}()
	switch {
	case !m.limit(rec, r, id, rt, nil, &ticket):
	case id.UnknownKey:
		jsonerror.UnknownAPIKey(rec)
	default:
		next.ServeHTTP(rec, r)
		if rec.status == 0 && !rec.hijacked {
			rec.status = http.StatusOK // returned without writing: net/http answers 200
		}
	}
	returned = true
}

// EndingPolicy returns the first policy of the routes that acts when its
// response has ended (limiter.Policy.EndsWithResponse), or nil. Doors that
// never see a response (a gateway's check) refuse such routes.
func (m *Middleware) EndingPolicy() *limiter.Policy {
	for i := range m.routes {
		for _, p := range m.routes[i].Policies {
			if p.EndsWithResponse() {
				return p
			}
		}
	}
	return nil
}

// Match returns the route a request for method and urlPath matches, or nil.
// urlPath is the path as the request sent it (%-escaped, without the
// query); it is normalised (NormalizePath) and the method compared without
// case before any route is matched. Servers that do not normalise (Express,
// chi) read some paths as another route: /api/..;/login is /login to a
// servlet container, under /api/ to them. So the path is also read as they
// read it (only a "/" sent as such separates segments), and when one
// reading names a route with policies, that route is charged. A path the
// two readings put on two such routes, or that does not normalise, is an
// error: answer 400, never serve the request unlimited.
func (m *Middleware) Match(method, urlPath string) (*Route, error) {
	c, err := m.match(method, urlPath)
	if c == nil {
		return nil, err
	}
	return &c.Route, nil
}

func (m *Middleware) match(method, urlPath string) (*compiled, error) {
	p, err := NormalizePath(urlPath)
	if err != nil {
		return nil, err
	}
	method = normalizeMethod(method)
	rt := m.first(method, p)
	if p == urlPath {
		return rt, nil // already normal: every reading is this one
	}
	literal := m.first(method, literalPath(urlPath))
	switch {
	case !literal.charges() || literal == rt:
		return rt, nil
	case !rt.charges():
		return literal, nil
	}
	return nil, fmt.Errorf("path %q is %q to some servers and %q to others: refused, as it cannot be charged as one route",
		truncate(urlPath), rt.Pattern, literal.Pattern)
}

// first is the first route that matches a normalised method and path.
func (m *Middleware) first(method, urlPath string) *compiled {
	for i := range m.routes {
		if m.routes[i].matches(method, urlPath) {
			return &m.routes[i]
		}
	}
	return nil
}

func (c *compiled) charges() bool { return c != nil && len(c.Policies) > 0 }

// Limit charges the request's route policies to id, writes the rate-limit
// headers, and answers a denial (429, or 503 when the store is down and a
// policy fails closed) or a request it cannot limit (a bad login body). It
// reports whether the request may go on; the caller still answers 401 for
// id.UnknownKey. rt must come from Match.
func (m *Middleware) Limit(w http.ResponseWriter, r *http.Request, id *identity.Identity, route *Route) bool {
	rt := m.compiledFor(route)
	if rt == nil {
		return true
	}
	return m.limit(w, r, id, rt, nil, nil)
}

// LimitUsername is Limit with the login username given (a gateway passes
// it in a header) instead of read from the body: it is normalised, and
// refused, exactly as a body's is.
func (m *Middleware) LimitUsername(w http.ResponseWriter, r *http.Request, id *identity.Identity, route *Route, username string) bool {
	rt := m.compiledFor(route)
	if rt == nil {
		return true
	}
	return m.limit(w, r, id, rt, &username, nil)
}

// RefuseUsername answers a login whose username cannot be read (a gateway
// sent two) as a refused username is answered: 400 with reason, after the
// route's policies that do not key by username were charged (the denial
// instead, when they deny). It reports false, or true when the route does
// not key by username.
func (m *Middleware) RefuseUsername(w http.ResponseWriter, r *http.Request, id *identity.Identity, route *Route, reason string) bool {
	rt := m.compiledFor(route)
	if rt == nil || !rt.byUsername {
		return m.Limit(w, r, id, route)
	}
	m.routeKeyPart(r, id, rt)
	return m.charge(w, r, id, rt.withoutUser, &username.Error{Status: http.StatusBadRequest, Reason: reason}, nil)
}

// RouteName is the route key part of a request for method matched by route
// when no router has routed it (a gateway's check): the route's method (or
// the request's, in upper case, for a route of every method) and the
// route's path, so that every spelling of a path is charged to one key.
func (m *Middleware) RouteName(method string, route *Route) string {
	if rt := m.compiledFor(route); rt != nil {
		return rt.routeMethod(method) + " " + rt.fallbackRoute
	}
	return normalizeMethod(method) + " " + route.Pattern
}

// limit is Limit; given, when not nil, is the login username as given.
// ticket, when not nil, receives the granted request's ticket.
func (m *Middleware) limit(w http.ResponseWriter, r *http.Request, id *identity.Identity, rt *compiled, given *string, ticket **limiter.Ticket) bool {
	m.routeKeyPart(r, id, rt)
	if rt.byUsername && id.Username == "" {
		var name string
		var uerr *username.Error
		if given != nil {
			name, uerr = normalizeUsername(*given)
		} else {
			name, uerr = readUsername(r, m.cfg.MaxBodyBytes)
		}
		if uerr != nil {
			// Refused, but charged to the policies that do not key by
			// username: sending bad names costs the sender its attempts.
			return m.charge(w, r, id, rt.withoutUser, uerr, ticket)
		}
		id.Username = name
	}
	return m.charge(w, r, id, rt.Policies, nil, ticket)
}

func (m *Middleware) routeKeyPart(r *http.Request, id *identity.Identity, rt *compiled) {
	if rt.needsRoute && id.Route == "" {
		id.Route = rt.routeMethod(r.Method) + " " + RoutePattern(r, rt.fallbackRoute)
	}
}

// charge charges policies to id and answers a denial, or userErr (a
// refused username) when they allow; it reports whether the request may go
// on. ticket, when not nil, receives what the request's end must do.
func (m *Middleware) charge(w http.ResponseWriter, r *http.Request, id *identity.Identity, policies []*limiter.Policy, userErr *username.Error, ticket **limiter.Ticket) bool {
	var buf [4]limiter.Decision // a route rarely has more: no allocation
	var stack [4]limiter.Request
	reqs := m.requests(stack[:0], policies, id, 1)
	decisions, ok := m.cfg.Limiter.AppendAllowAll(r.Context(), buf[:0], reqs)
	if ok && ticket != nil {
		*ticket = m.cfg.Limiter.Ticket(reqs, decisions)
	}
	return Answer(w, r, m.cfg.Clock(), decisions, ok, userErr)
}

// Answer writes the rate-limit headers of decisions and answers a denial,
// or userErr when they allow; it reports whether the request may go on,
// once a leaky bucket's turn came.
func Answer(w http.ResponseWriter, r *http.Request, now time.Time, decisions []limiter.Decision, ok bool, userErr *username.Error) bool {
	header.Set(w.Header(), now, decisions)
	if !ok {
		WriteDenied(w, decisions[len(decisions)-1])
		return false
	}
	if userErr != nil {
		msg := userErr.Reason
		if userErr.TooLong {
			msg = "the username is " + msg
		}
		jsonerror.Write(w, userErr.Status, jsonerror.Body{Error: errorCode(userErr.Status), Message: msg})
		return false
	}
	if delay := maxDelay(decisions); delay > 0 {
		// leaky_bucket shapes: the request waits for the queue ahead of it,
		// at most burst/limit·period, as the policy admitted it.
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return false
		}
	}
	return true
}

func (m *Middleware) compiledFor(rt *Route) *compiled {
	for i := range m.routes {
		if &m.routes[i].Route == rt {
			return &m.routes[i]
		}
	}
	return nil
}

// requests are the requests charging cost to every policy for id, each
// scaled by id's plan, appended to dst (the caller's buffer).
func (m *Middleware) requests(dst []limiter.Request, policies []*limiter.Policy, id *identity.Identity, cost int64) []limiter.Request {
	for _, p := range policies {
		dst = append(dst, m.id.Request(p, id, cost))
	}
	return dst
}

// readUsername reads the login body's username; the error says how to answer.
func readUsername(r *http.Request, maxBody int64) (string, *username.Error) {
	name, err := username.Read(r, maxBody)
	if err == nil {
		return name, nil
	}
	var ue *username.Error
	if !errors.As(err, &ue) {
		ue = &username.Error{Status: http.StatusBadRequest, Reason: err.Error()}
	}
	if ue.TooLong {
		ue = &username.Error{Status: ue.Status, TooLong: true, Reason: "the username is " + ue.Reason}
	}
	return "", ue
}

// normalizeUsername is a given username as the limits take it; the error
// says how to answer.
func normalizeUsername(s string) (string, *username.Error) {
	name, err := username.Normalize(s)
	if err == nil {
		return name, nil
	}
	var ue *username.Error
	if !errors.As(err, &ue) {
		ue = &username.Error{Status: http.StatusBadRequest, Reason: err.Error()}
	}
	return "", &username.Error{Status: ue.Status, TooLong: ue.TooLong, Reason: "the username is " + ue.Reason}
}

// RoutePattern is chi's route pattern when chi has routed the request.
func RoutePattern(r *http.Request, fallback string) string {
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		if p := rctx.RoutePattern(); p != "" {
			return p
		}
	}
	return fallback
}

func maxDelay(ds []limiter.Decision) time.Duration {
	var d time.Duration
	for _, x := range ds {
		d = max(d, x.Delay)
	}
	return d
}
