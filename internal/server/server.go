// Package server is costgate's stand-alone server: it builds the store,
// the limiter, the identity, the REST and GraphQL limits and the routes from
// a config, serves them, and rebuilds them from a new config on reload
// without dropping limiter state.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/check"
	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/demo"
	"github.com/costgate/costgate/internal/jsonerror"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/gqlproxy"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/playground"
)

// Server is the server's handler and what it holds. Its handler is built
// from a config and swapped whole on Reload.
type Server struct {
	logger  *slog.Logger
	metrics *metrics
	serving atomic.Bool

	mu    sync.Mutex // serialises Reload and Close
	state *state
	cfg   *config.Config
	// started is the config the server started with: its listen and
	// grpc_listen stay in effect until a restart.
	started *config.Config
	handler atomic.Pointer[http.Handler]
	// rls is Envoy's rate-limit service of the config in effect; nil
	// without envoy.domains.
	rls atomic.Pointer[check.RateLimitService]
	// conns is the connection cap of the config in effect, read by the
	// listeners at each accept.
	conns atomic.Pointer[ConnLimit]
	// schemas reads the upstream's schema by introspection for the config
	// in effect (nil unless graphql.schema: introspect); build leaves the
	// new config's in nextSchemas until it takes effect.
	schemas, nextSchemas *schemaSource
	// trusted counts the trusted documents of the config in effect (nil
	// without any); build leaves the new config's in nextTrusted.
	trusted     atomic.Pointer[trustedCount]
	nextTrusted *trustedCount
	// streams ends when the server stops serving: its websocket
	// connections and SSE streams end with it, so that shutdown does not
	// wait on them (and their subscriptions free their slots).
	streams    context.Context
	endStreams context.CancelFunc
	// admin is the admin API and console (admin.go), served by ServeAdmin.
	admin *adminParts
}

// New builds the server for cfg.
func New(cfg *config.Config, logger *slog.Logger) (*Server, error) {
	s := &Server{logger: logger, metrics: newMetrics()}
	s.streams, s.endStreams = context.WithCancel(context.Background())
	s.metrics.operations = newOperationMetrics(s.metrics.registry)
	s.metrics.registry.MustRegister(newStoreStateCollector(s), s.trustedGauge())
	if err := s.newAdmin(cfg); err != nil {
		return nil, err
	}
	st, err := newState(cfg, s.metrics, logger, s.denials())
	if err != nil {
		return nil, err
	}
	h, rls, err := s.build(cfg, st)
	if err != nil {
		s.nextSchemas = nil
		st.close()
		return nil, err
	}
	s.swapSchemas()
	s.state, s.cfg, s.started = st, cfg, cfg
	s.trusted.Store(s.nextTrusted)
	s.handler.Store(&h)
	s.rls.Store(rls)
	s.conns.Store(connLimitOf(cfg, openFileLimit()))
	s.serving.Store(true)
	for _, w := range cfg.Warnings() {
		logger.Warn("config: "+w, "config", cfg.Source())
	}
	return s, nil
}

// ServeHTTP serves with the handler of the config in effect.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isStream(r) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(s.streams, cancel)()
		r = r.WithContext(ctx)
		if r.Header.Get("Upgrade") == "" {
			w = &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
		}
	}
	(*s.handler.Load()).ServeHTTP(w, r)
}

// streamWriter keeps an SSE stream open past the server's read and write
// timeouts (docs/configuration.md, "Connections"), which bound a request and a write, not a
// subscription: from its first write, by when the request has been read,
// the connection has no read deadline, and each write gets WriteTimeout of
// its own, so that a client that stops reading is still cut off.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (w *streamWriter) extend() {
	if !w.started {
		w.started = true
		_ = w.rc.SetReadDeadline(time.Time{})
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
}

func (w *streamWriter) WriteHeader(code int) { w.extend(); w.ResponseWriter.WriteHeader(code) }

func (w *streamWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

func (w *streamWriter) Flush() { w.extend(); _ = w.rc.Flush() }

// Unwrap lets http.ResponseController reach the connection.
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isStream reports a request that may stay open for as long as its client
// likes: a websocket upgrade, or an SSE subscription.
func isStream(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" || strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// StoreName is "memory" or "redis".
func (s *Server) StoreName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.name
}

// Reload applies cfg: the handler, Envoy's service and the connection cap
// (its trusted-proxy exemption included) are rebuilt from it. The store,
// and with it every bucket, is kept unless the store section or the hash
// key changed. listen and grpc_listen take effect at the next start (a
// change is logged). On error the config in effect stays.
func (s *Server) Reload(cfg *config.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, fresh := s.state, false
	if !st.sameStore(cfg) {
		var err error
		if st, err = newState(cfg, s.metrics, s.logger, s.denials()); err != nil {
			return err
		}
		fresh = true
	}
	h, rls, err := s.build(cfg, st)
	if err != nil {
		s.nextSchemas = nil
		if fresh {
			st.close()
		}
		return err
	}
	s.swapSchemas()
	s.logRestartKeys(cfg)
	if err := s.setAdminTokens(cfg); err != nil {
		s.logger.Error("config: the admin tokens could not be applied; the old ones stay", "err", err)
	}
	if fresh {
		s.logger.Warn("config: the store section or hash key changed: limiter state starts afresh")
		old := s.state
		defer old.close()
	}
	s.state, s.cfg = st, cfg
	s.trusted.Store(s.nextTrusted)
	s.handler.Store(&h)
	s.rls.Store(rls)
	s.conns.Store(connLimitOf(cfg, openFileLimit()))
	for _, w := range cfg.Warnings() {
		s.logger.Warn("config: "+w, "config", cfg.Source())
	}
	return nil
}

// logRestartKeys logs each key of cfg that differs from what the server
// started with and that only a restart applies: listen and grpc_listen.
func (s *Server) logRestartKeys(cfg *config.Config) {
	for _, k := range []struct{ key, inEffect, next string }{
		{"listen", s.started.Listen, cfg.Listen},
		{"grpc_listen", s.started.GRPCListen, cfg.GRPCListen},
		{"metrics.listen", s.started.Metrics.Listen, cfg.Metrics.Listen},
		{"admin.listen", s.started.Admin.Listen, cfg.Admin.Listen},
	} {
		if k.next != k.inEffect {
			s.logger.Warn("config: "+k.key+" changed; it takes effect at the next start", k.key, k.inEffect, "new", k.next)
		}
	}
}

// SetServing(false) marks the server as stopping: readiness fails, and open
// websocket connections and SSE streams end.
func (s *Server) SetServing(ok bool) {
	s.serving.Store(ok)
	if !ok {
		s.endStreams()
	}
}

// Close releases the store.
func (s *Server) Close() {
	s.endStreams()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.schemas != nil {
		s.schemas.stop()
	}
	s.state.close()
}

// build makes the handler of cfg over st, and Envoy's rate-limit service
// when the config maps descriptors.
func (s *Server) build(cfg *config.Config, st *state) (http.Handler, *check.RateLimitService, error) {
	s.nextTrusted = nil // graphql sets it when the config has trusted documents
	idc := cfg.IdentityConfig(st.hashKey)
	idc.Overrides = st.overrides // the operators' overrides, read by every check
	ids, err := identity.New(idc)
	if err != nil {
		return nil, nil, err
	}
	policies := cfg.LimiterPolicies()
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	if len(cfg.CORS.AllowedOrigins) > 0 {
		r.Use(newCORS(cfg.CORS.AllowedOrigins, cfg.Identity.APIKeyHeader).handler)
	}

	var rest *routelimit.Middleware
	var chk http.Handler
	if len(cfg.Routes) > 0 {
		if rest, err = routelimit.New(routelimit.Config{Limiter: st.limiter, Identity: ids, Routes: cfg.HTTPRoutes(policies)}); err != nil {
			return nil, nil, err
		}
		// The same routes for gateways in front of services in any
		// language, in proxy mode too.
		why := "identity.trusted_proxies lists no gateway: /v1/check answers none until it does; add this gateway's address (%s) to it"
		if len(cfg.Identity.TrustedProxies) > 0 {
			why = "gateway.check is false: /v1/check answers no gateway, this one (%s) included"
		}
		chk = check.RefuseAll(s.logger, why)
		if gateways := cfg.TrustedPrefixes(); cfg.ServesCheck() {
			if chk, err = check.NewHandler(check.HTTPConfig{Limits: rest, Identity: ids, Gateways: gateways,
				UsernameHeader: cfg.Gateway.UsernameHeader, Logger: s.logger}); err != nil {
				return nil, nil, err
			}
		}
		r.Handle(check.Path, chk)
		r.Handle(check.Path+"/*", chk)
	}
	var rls *check.RateLimitService
	if len(cfg.Envoy.Domains) > 0 && len(cfg.TrustedPrefixes()) > 0 {
		if rls, err = check.NewRateLimitService(check.EnvoyConfig{Limiter: st.limiter, Identity: ids,
			Gateways: cfg.TrustedPrefixes(), Domains: cfg.EnvoyDomains(policies), Logger: s.logger}); err != nil {
			return nil, nil, err
		}
	}
	if cfg.GraphQL.Path != "" {
		gql, err := s.graphql(cfg, st.limiter, ids, policies)
		if err != nil {
			return nil, nil, err
		}
		s.metrics.operations.configure(cfg.GraphQL.Metrics.MaxOperations)
		r.Handle(cfg.GraphQL.Path, gql)
		// The GraphiQL playground, its assets embedded: it works with no
		// internet. The demo opens with a query and a demo key, so that the
		// first run shows extensions.cost.
		var opts []playground.Option
		if cfg.IsDemo() {
			opts = append(opts, playground.WithDefaultQuery(demoQuery),
				playground.WithHeaders(map[string]string{cfg.Identity.APIKeyHeader: "demo-free"}))
		}
		pg := playground.Handler("costgate", cfg.GraphQL.Path, opts...)
		r.Handle("/", pg)
		r.Handle("/assets/*", pg)
	}
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		jsonerror.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz(cfg.TrustedPrefixes()))
	if s.metricsOnMain(cfg) {
		r.Handle("/metrics", loopbackOnly(s.metrics.handler(), cfg.TrustedPrefixes()))
	}
	if !cfg.ProxyMode() {
		// The example REST API; in proxy mode only the proxied GraphQL is served.
		shop := demo.NewShop(graph.NewShop())
		r.Group(func(r chi.Router) {
			if rest != nil {
				r.Use(rest.Handler)
			} else {
				s.logger.Warn("config: no routes: the example REST routes and login are served unlimited")
			}
			r.Get("/api/products", shop.ListProducts)
			r.Get("/api/products/{id}", shop.GetProduct)
			r.Get("/api/ticks", demo.Ticks)
			r.Post("/login", demo.NewLogin().ServeHTTP)
		})
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		jsonerror.Write(w, http.StatusNotFound, jsonerror.Body{Error: "not_found", Message: "no such route"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// chi knows only the standard methods; Envoy's path_prefix check
		// carries the client's method, whatever it is ("post", PROPFIND).
		if p := r.URL.Path; chk != nil && (p == check.Path || strings.HasPrefix(p, check.Path+"/")) {
			chk.ServeHTTP(w, r)
			return
		}
		jsonerror.Write(w, http.StatusMethodNotAllowed, jsonerror.Body{Error: "method_not_allowed", Message: r.Method + " is not allowed here"})
	})
	return r, rls, nil
}

// demoQuery opens the demo's playground: the worked example of docs/graphql.md ("The price").
const demoQuery = `# costgate prices this operation from the schema's @cost and @listSize
# before it runs: see extensions.cost in the answer.
{
  products(first: 10) {
    nodes {
      id
      title
      variants(first: 5) { id }
    }
  }
}
`

// graphql builds the GraphQL endpoint: the example API (gqlgen) or, with
// graphql.schema and graphql.upstream, the proxy; either way the complete
// cost limit around it.
func (s *Server) graphql(cfg *config.Config, lim *limiter.Limiter, ids *identity.Resolver, policies map[string]*limiter.Policy) (http.Handler, error) {
	gcfg := gqllimit.Config{
		Limiter:           lim,
		Policy:            policies[cfg.GraphQL.Policy],
		Identity:          ids,
		ComplexityOptions: cfg.ComplexityOptions(),
		Limits:            cfg.GraphQLLimits(),
		OnCost:            s.metrics.cost,
		OnRejection:       s.metrics.rejection,
		OnOperation:       s.metrics.operations.observe,
		TrustedDocuments:  s.trustedDocuments(cfg),
		Logger:            s.logger,
	}
	if cfg.GraphQL.PersistedQueries {
		// gqllimit's middleware serves the protocol, embedded and in proxy mode.
		gcfg.PersistedQueries = gqllimit.NewPersistedQueryCache(0, 0)
	}
	if cfg.IntrospectsSchema() {
		return s.introspected(cfg, gcfg)
	}
	if cfg.ProxyMode() {
		sdl, err := os.ReadFile(cfg.GraphQL.Schema)
		if err != nil {
			return nil, fmt.Errorf("graphql.schema: %w", err)
		}
		if gcfg.Schema, err = complexity.LoadSDL(cfg.GraphQL.Schema, string(sdl), gcfg.ComplexityOptions...); err != nil {
			return nil, cfg.SchemaErrors(err, "graphql.schema")
		}
		gl, err := gqllimit.New(gcfg)
		if err != nil {
			return nil, err
		}
		pc := cfg.ProxyConfig()
		pc.Limiter, pc.Logger = gl, s.logger
		return gqlproxy.New(pc)
	}
	resolver := &graph.Resolver{Shop: graph.NewShop(), RateLimitInfo: graph.CostgateRateLimit}
	exec := graph.NewExecutableSchema(graph.Config{Resolvers: resolver})
	// Priced here rather than by the extension, so that graphql.costs is
	// refused against its lines instead of in a panic of gqlgen's.
	schema, err := complexity.NewSchema(exec.Schema(), gcfg.ComplexityOptions...)
	if err != nil {
		return nil, cfg.SchemaErrors(err, "the example API's schema")
	}
	gcfg.Schema = schema
	gl, err := gqllimit.New(gcfg)
	if err != nil {
		return nil, err
	}
	srv := handler.New(exec)
	srv.AddTransport(transport.SSE{}) // before POST, which would take its requests
	srv.AddTransport(transport.Websocket{KeepAlivePingInterval: 10 * time.Second})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	// gl.Handler gives gqlgen the documents its middleware parsed and
	// validated (gqllimit's QueryCache), kept by that middleware.
	if cfg.GraphQL.Introspection {
		srv.Use(extension.Introspection{})
	}
	return gl.Handler(srv), nil
}

// readyz is 200 once serving; the body reports the store. A store outage
// never fails readiness: each route's on_store_error decides what it means.
// The store's nodes (addresses, error texts, eviction policy and counts)
// go only to a client on loopback or itself a trusted proxy, as the
// trusted-proxy walk resolves it: not to a public client a trusted proxy
// forwards (access.go).
func (s *Server) readyz(trusted []netip.Prefix) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.serving.Load() {
			jsonerror.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "stopping"})
			return
		}
		s.mu.Lock()
		st, schemas := s.state, s.schemas
		s.mu.Unlock()
		if schemas != nil && !schemas.isReady() {
			jsonerror.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "waiting for the upstream's schema"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*limiter.DefaultTimeout)
		defer cancel()
		health := st.health(ctx)
		if !trustedClient(r, trusted) {
			health.Nodes = nil
		}
		jsonerror.WriteJSON(w, http.StatusOK, map[string]any{"status": "ready", "store": health})
	}
}

// metricsOnMain reports whether the main listener serves /metrics: unless
// metrics.listen, as the server started with it, gives it one of its own.
func (s *Server) metricsOnMain(cfg *config.Config) bool {
	if s.started != nil {
		cfg = s.started
	}
	return cfg.Metrics.Listen == ""
}
