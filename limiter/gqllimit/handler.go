package gqllimit

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// Budget is a cost budget per caller: burst points at once, refilled at
// limit points per period, charged each operation's cost. Callers are told
// apart by API key and tenant (identity.Config.APIKeys, given through
// WithIdentity), and by client address without a key; with WithIdentity, a
// request sending an X-API-Key that the Resolver does not know is answered
// 401 once charged to its address. Without WithIdentity no API key is
// configured: the header is the application's own, and a request sending
// it is limited by its address like any other.
func Budget(limit int64, period time.Duration, burst int64) *limiter.Policy {
	return &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: limit, Period: period, Burst: burst,
		Key: []string{identity.PartTenant, identity.PartAPIKey}}
}

// Handler serves srv behind a cost budget in one call: it installs the
// extension in srv and wraps srv in the middleware, with an in-process
// store and Automatic Persisted Queries served by costgate (what it prices
// is the text that runs; gqlgen's own AutomaticPersistedQuery, which
// `gqlgen init` installs, then never sees a hash and may stay). The
// subscriptions of srv's websocket and SSE transports keep working, each
// charged when it starts (see Limits.MaxSubscriptions). policy is Budget's,
// or any token_bucket of your own.
//
//	http.Handle("/query", gqllimit.Handler(srv, gqllimit.Budget(50, time.Second, 1000)))
//
// Handler panics on a programmer's error (a nil policy, one that does not
// validate or is not a token_bucket, a shared store without WithIdentity),
// as regexp.MustCompile does: its arguments are the program's constants.
// Nothing a request carries makes it panic. A budget read from a config file
// belongs in New, which returns errors.
func Handler(srv *handler.Server, policy *limiter.Policy, opts ...Option) http.Handler {
	l, err := newForHandler(policy, opts)
	if err != nil {
		panic(fmt.Sprintf("gqllimit: %v", err))
	}
	return l.Handler(srv)
}

func newForHandler(policy *limiter.Policy, opts []Option) (*Limiter, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.store == nil {
		o.store = memstore.New(nil)
	}
	var errs []error
	ids := o.ids
	if ids == nil {
		var err error
		if ids, err = identity.NewForStore(identity.Config{}, o.store); err != nil {
			errs = append(errs, fmt.Errorf("WithStore without WithIdentity: %w", err))
		}
	}
	var limOpts []limiter.Option
	if o.logger != nil {
		limOpts = append(limOpts, limiter.WithLogger(o.logger))
	}
	lim, err := limiter.New(o.store, limOpts...)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	l, err := New(Config{Limiter: lim, Identity: ids, Policy: policy, Limits: o.limits, Logger: o.logger,
		PersistedQueries: NewPersistedQueryCache(0, 0), TrustedDocuments: o.trusted})
	if err != nil {
		return nil, err
	}
	l.keyless = o.ids == nil // no API key configured: X-API-Key is the application's own header
	return l, nil
}
