package gqllimit

import (
	"log/slog"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

// Option configures Handler. New takes a Config instead.
type Option func(*options)

type options struct {
	store   limiter.Store
	ids     *identity.Resolver
	limits  Limits
	logger  *slog.Logger
	trusted *TrustedDocuments
}

// WithStore keeps the budgets in store (default: an in-process memstore of
// its own). A store other processes share (redisstore) needs a hash key
// they share as well: pass WithIdentity too.
func WithStore(store limiter.Store) Option { return func(o *options) { o.store = store } }

// WithIdentity says who pays: its API keys, plans, trusted proxies and hash
// key; an X-API-Key (its APIKeyHeader) it does not know is answered 401.
// Share the one httplimit uses, so that a request is resolved once. The
// default knows no API key and trusts no proxy, with a random hash key:
// every caller is its client address, and an X-API-Key the application
// sends for its own use is left to it.
func WithIdentity(ids *identity.Resolver) Option { return func(o *options) { o.ids = ids } }

// WithLimits sets the static limits (max cost, depth, aliases, ...); a zero
// field takes its default.
func WithLimits(l Limits) Option { return func(o *options) { o.limits = l } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithTrustedDocuments lets only the listed operations run (see
// [TrustedDocuments]): Handler checks every document of the list against
// srv's schema when it installs the extension, and panics on one that
// could never run, naming it.
func WithTrustedDocuments(td TrustedDocuments) Option {
	return func(o *options) { o.trusted = &td }
}
