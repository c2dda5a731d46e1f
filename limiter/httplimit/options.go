package httplimit

import (
	"log/slog"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

// Option configures the one-call middlewares (Limit, LimitByIP,
// LimitByAPIKey). New takes a Config instead.
type Option func(*options)

type options struct {
	store     limiter.Store
	ids       *identity.Resolver
	algorithm limiter.Algorithm
	name      string
	logger    *slog.Logger
	apiKeys   identity.Lookup // LimitByAPIKey's
}

// WithStore keeps the state in store (default: an in-process memstore of
// its own). A store other processes share (redisstore) needs a hash key
// they share as well: pass WithIdentity too.
func WithStore(store limiter.Store) Option { return func(o *options) { o.store = store } }

// WithIdentity says who pays and hashes the keys with its HashKey (default:
// a Resolver of the middleware's own, trusting no proxy, knowing no API
// key, hashing with a random key drawn at start). Share the application's
// Resolver to trust its proxies or to share a store between processes.
func WithIdentity(ids *identity.Resolver) Option { return func(o *options) { o.ids = ids } }

// WithAlgorithm sets the algorithm (default limiter.SlidingWindow: at most
// the limit in any period, near enough, as httprate counts).
// limiter.TokenBucket grants the limit at once and refills it over period.
func WithAlgorithm(a limiter.Algorithm) Option { return func(o *options) { o.algorithm = a } }

// WithName names the policy in RateLimit-Policy, in 429 bodies and in the
// store's keys (default "ip", "api_key" or "key"). Middlewares sharing a
// store and a name share their counts.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithLogger sets where a request that cannot be keyed is logged (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }
