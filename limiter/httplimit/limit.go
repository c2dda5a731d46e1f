package httplimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/costgate/costgate/internal/loggate"

	"github.com/costgate/costgate/internal/jsonerror"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// KeyFunc returns what a request is limited by: requests with one key share
// one count. An error, or an empty key, refuses the request (500, logged)
// rather than count it with others.
type KeyFunc func(r *http.Request) (string, error)

// ErrNoKey is what a KeyFunc returns when the request carries nothing to
// key it by; match it with errors.Is.
var ErrNoKey = errors.New("no rate-limit key")

// KeyByIP keys by the client address: the TCP peer, or the right-most
// untrusted X-Forwarded-For hop when the peer is a proxy the Resolver
// trusts (identity.ClientIP), IPv6 grouped by /64.
func KeyByIP(r *http.Request) (string, error) {
	var c identity.Client
	if id := identity.FromContext(r.Context()); id != nil {
		c = id.Client()
	} else {
		c = identity.ClientIP(r, nil)
	}
	if c.Addr.IsValid() {
		return "ip:" + c.Addr.String(), nil
	}
	return "ip-text:" + c.Text, nil
}

// KeyByAPIKey keys by the API key the Resolver knows, or by the client
// address for a request without one (or with one it does not know, which
// LimitByAPIKey answers 401 once charged).
func KeyByAPIKey(r *http.Request) (string, error) {
	if id := identity.FromContext(r.Context()); id != nil && id.APIKey != "" {
		return "api_key:" + id.APIKey, nil
	}
	return KeyByIP(r)
}

// KeyByEndpoint keys by the method and chi's route pattern (the path when
// chi has not routed the request): one count per endpoint, shared by every
// caller. Combine it with another key through Keys.
func KeyByEndpoint(r *http.Request) (string, error) {
	return r.Method + " " + routelimit.RoutePattern(r, r.URL.Path), nil
}

// KeyFromContext keys by the string an earlier middleware stored in the
// request's context under ctxKey (a user id put there by authentication).
// The limiter must run after that middleware: a request whose context has
// no non-empty string under ctxKey is refused (500, logged), never counted
// with the others.
func KeyFromContext(ctxKey any) KeyFunc {
	return func(r *http.Request) (string, error) {
		if v, ok := r.Context().Value(ctxKey).(string); ok && v != "" {
			return v, nil
		}
		return "", fmt.Errorf("%w: the context holds no string under %v (does the middleware that sets it run before the limiter?)", ErrNoKey, ctxKey)
	}
}

// Keys keys by every key of fns together (KeyByIP and KeyByEndpoint: one
// count per caller and endpoint); the first error refuses the request.
func Keys(fns ...KeyFunc) KeyFunc {
	return func(r *http.Request) (string, error) {
		key := ""
		for _, f := range fns {
			k, err := f(r)
			if err != nil {
				return "", err
			}
			if k == "" {
				return "", ErrNoKey
			}
			key += fmt.Sprintf("%d:%s", len(k), k) // length-prefixed: no two lists join alike
		}
		return key, nil
	}
}

// LimitByIP limits each client address to limit requests per period; it
// is Limit keyed by KeyByIP.
//
//	r.Use(httplimit.LimitByIP(100, time.Minute))
func LimitByIP(limit int, period time.Duration, opts ...Option) func(http.Handler) http.Handler {
	return mustLimit(limit, period, KeyByIP, "ip", false, opts)
}

// LimitByAPIKey limits each API key (in X-API-Key) that keys knows to
// limit requests per period, and each client without a key by its address.
// A key that keys does not know is answered 401 after it was charged to
// its sender's address, so that guessing keys is limited too. With
// WithIdentity, keys is nil: the Resolver's own APIKeys apply.
func LimitByAPIKey(limit int, period time.Duration, keys identity.Lookup, opts ...Option) func(http.Handler) http.Handler {
	return mustLimit(limit, period, KeyByAPIKey, "api_key", true, append(opts, withAPIKeys(keys)))
}

// Limit limits each key that key returns to limit requests per period. The
// middleware limits every request it sees: under r.With or r.Group it
// limits that route or group, no Route needed. Each response carries the
// rate-limit headers; a denial is 429 with Retry-After (as [Middleware]'s).
//
// Limit, LimitByIP and LimitByAPIKey check their arguments when called and
// panic on a programmer's error (a limit or period below 1, a nil key
// function, a shared store without a shared hash key), as regexp.MustCompile
// does: they return a middleware, to fit r.Use in one line, and their
// arguments are the program's constants, so the first run finds the
// mistake. Nothing a request carries makes them panic. A limit read from a
// config file belongs in New, which returns errors.
func Limit(limit int, period time.Duration, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	return mustLimit(limit, period, key, "key", false, opts)
}

func mustLimit(limit int, period time.Duration, key KeyFunc, name string, apiKeys bool, opts []Option) func(http.Handler) http.Handler {
	o := options{name: name, algorithm: limiter.SlidingWindow, logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	l, err := newKeyed(limit, period, key, apiKeys, o)
	if err != nil {
		panic(fmt.Sprintf("httplimit: %v", err))
	}
	return l.handler
}

// keyed is a middleware of one policy, keyed by a KeyFunc.
type keyed struct {
	lim     *limiter.Limiter
	ids     *identity.Resolver
	policy  *limiter.Policy
	key     KeyFunc
	apiKeys bool // answer 401 to an unknown API key
	logger  *slog.Logger
	gate    loggate.Gate
}

func newKeyed(limit int, period time.Duration, key KeyFunc, apiKeys bool, o options) (*keyed, error) {
	p := &limiter.Policy{Name: o.name, Algorithm: o.algorithm, Limit: int64(limit), Period: period, Key: []string{"key"}}
	var errs []error
	if err := p.Validate(); err != nil {
		errs = append(errs, err)
	}
	if key == nil {
		errs = append(errs, &limiter.FieldError{Field: "key", Reason: "nil KeyFunc"})
	}
	store := o.store
	if store == nil {
		store = memstore.New(nil)
	}
	ids, err := o.resolver(store, apiKeys)
	if err != nil {
		errs = append(errs, err)
	}
	lim, err := limiter.New(store, limiter.WithLogger(o.logger))
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &keyed{lim: lim, ids: ids, policy: p, key: key, apiKeys: apiKeys, logger: o.logger}, nil
}

// resolver is the Resolver given, or one of the middleware's own;
// byAPIKey says LimitByAPIKey asks, whose keys one of them must know.
func (o *options) resolver(store limiter.Store, byAPIKey bool) (*identity.Resolver, error) {
	switch {
	case o.ids != nil && o.apiKeys != nil:
		return nil, &limiter.FieldError{Field: "WithIdentity", Reason: "LimitByAPIKey's keys and WithIdentity both say who pays: put the keys in identity.Config.APIKeys and pass nil"}
	case o.ids != nil:
		return o.ids, nil
	case byAPIKey && o.apiKeys == nil:
		return nil, &limiter.FieldError{Field: "keys", Reason: "LimitByAPIKey needs an identity.Lookup (an identity.Table, or your key store), or WithIdentity"}
	}
	ids, err := identity.NewForStore(identity.Config{APIKeys: o.apiKeys}, store)
	if err != nil {
		return nil, fmt.Errorf("WithStore without WithIdentity: %w", err)
	}
	return ids, nil
}

func (l *keyed) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, r, err := l.ids.Attach(r)
		if err != nil {
			jsonerror.LookupFailed(w)
			return
		}
		key, err := l.key(r)
		if err == nil && key == "" {
			err = fmt.Errorf("%w: the key function returned an empty key", ErrNoKey)
		}
		if err != nil {
			l.refuse(w, r, err)
			return
		}
		var buf [1]limiter.Decision
		reqs := [1]limiter.Request{{Policy: l.policy, Key: l.ids.Hash("key", key), Cost: 1}}
		decisions, ok := l.lim.AppendAllowAll(r.Context(), buf[:0], reqs[:])
		if !routelimit.Answer(w, r, time.Now(), decisions, ok, nil) {
			return
		}
		if l.apiKeys && id.UnknownKey {
			jsonerror.UnknownAPIKey(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers a request that cannot be keyed: counting it with others
// would let one caller spend everyone's limit.
func (l *keyed) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if suppressed, ok := l.gate.Pass(time.Now()); ok {
		l.logger.Error("httplimit: request refused: it cannot be keyed", "policy", l.policy.Name, "path", r.URL.Path, "err", err, "suppressed", suppressed)
	}
	jsonerror.Write(w, http.StatusInternalServerError, jsonerror.Body{Error: "rate_limit_key_missing",
		Message: "the rate limit cannot tell who is calling; the server's log says why"})
}

// withAPIKeys gives LimitByAPIKey's own Resolver the API keys.
func withAPIKeys(keys identity.Lookup) Option { return func(o *options) { o.apiKeys = keys } }
