package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/redis/go-redis/v9"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/graph/model"
	"github.com/costgate/costgate/graph/playground"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redisstore"
)

// app is the server's handler and what it holds.
type app struct {
	handler   http.Handler
	storeName string
	metrics   *metrics
	limiter   *limiter.Limiter
	breaker   *limiter.Breaker // nil with the memory store
	redis     redis.UniversalClient
	serving   atomic.Bool
}

// newApp builds the store, the limiter, the middleware and the routes.
func newApp(cfg *Config, logger *slog.Logger) (*app, error) {
	a := &app{metrics: newMetrics()}
	timeout := limiter.DefaultTimeout
	var store limiter.Store
	opts := []limiter.Option{limiter.WithObserver(a.metrics.observe), limiter.WithLogger(logger)}
	if cfg.Store.Redis == nil {
		a.storeName = "memory"
		store = memstore.New(&memstore.Options{OnEvict: a.metrics.evictions.Inc})
	} else {
		client, err := redisClient(cfg.Store.Redis)
		if err != nil {
			return nil, err
		}
		rs, err := redisstore.New(client, &redisstore.Options{KeyPrefix: cfg.Store.KeyPrefix})
		if err != nil {
			client.Close()
			return nil, err
		}
		a.storeName, a.redis = "redis", client
		a.breaker = limiter.NewBreaker(rs, 5, time.Second)
		store = a.breaker
		timeout = cfg.Store.Redis.Timeout
		opts = append(opts, limiter.WithLocalFallback(memstore.New(nil), cfg.Store.Gateways))
	}
	opts = append(opts, limiter.WithTimeout(timeout), limiter.WithStoreName(a.storeName))
	lim, err := limiter.New(store, opts...)
	if err != nil {
		return nil, a.closeWith(err)
	}
	a.limiter = lim

	hashKey := []byte(cfg.Identity.HashKey)
	if len(hashKey) == 0 && cfg.Store.Redis != nil {
		// Only the built-in demo config gets here (a file must set hash_key).
		logger.Warn("the demo config shares Redis with a public hash key; set identity.hash_key in a config file for production")
		hashKey = []byte("costgate public demo hash key")
	}
	if len(hashKey) == 0 {
		// Memory store only (the config requires hash_key with Redis): one
		// process, so a random key hashes identities alike everywhere it matters.
		hashKey = make([]byte, 32)
		rand.Read(hashKey)
	}
	policies, err := cfg.LimiterPolicies()
	if err != nil {
		return nil, a.closeWith(err)
	}
	rules, err := cfg.RouteRules()
	if err != nil {
		return nil, a.closeWith(err)
	}
	r := chi.NewRouter()
	routes := make([]httplimit.Route, len(rules))
	for i, rule := range rules {
		routes[i] = httplimit.Route{Method: rule.Method, Path: rule.Path, Prefix: rule.Prefix, Pattern: cfg.Routes[i].Match}
		for _, name := range rule.Policies {
			routes[i].Policies = append(routes[i].Policies, policies[name])
		}
	}
	keys := make(map[string]httplimit.APIKey, len(cfg.Identity.APIKeys))
	for k, v := range cfg.Identity.APIKeys {
		keys[k] = httplimit.APIKey{Tenant: v.Tenant, Plan: v.Plan}
	}
	mw, err := httplimit.New(httplimit.Config{
		Limiter:        a.limiter,
		Routes:         routes,
		TrustedProxies: cfg.TrustedPrefixes(),
		APIKeyHeader:   cfg.Identity.APIKeyHeader,
		APIKeys:        keys,
		Plans:          cfg.Plans,
		HashKey:        hashKey,
		Router:         r,
	})
	if err != nil {
		return nil, a.closeWith(err)
	}

	gql, err := a.graphql(cfg, mw, policies, logger)
	if err != nil {
		return nil, a.closeWith(err)
	}
	r.Use(middleware.Recoverer)
	r.Handle(cfg.GraphQL.Path, gql)
	// The GraphiQL playground, its assets embedded: it works with no internet.
	pg := playground.Handler("costgate", cfg.GraphQL.Path)
	r.Handle("/", pg)
	r.Handle("/assets/*", pg)
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", a.readyz)
	r.Handle("/metrics", a.metrics.handler())
	r.Group(func(r chi.Router) {
		r.Use(mw.Handler)
		shop := newShop()
		r.Get("/api/products", shop.listProducts)
		r.Get("/api/products/{id}", shop.getProduct)
		r.Post("/login", newLogin().handle)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": "no such route"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method_not_allowed", "message": r.Method + " is not allowed here"})
	})
	a.handler = r
	a.serving.Store(true)
	return a, nil
}

// graphql builds the GraphQL endpoint: the example API (gqlgen) or, with
// graphql.schema and graphql.upstream, the proxy; either way wrapped in the
// cost limiter.
func (a *app) graphql(cfg *Config, mw *httplimit.Middleware, policies map[string]*limiter.Policy, logger *slog.Logger) (http.Handler, error) {
	g := cfg.GraphQL
	off := func(n int) int { // 0 in the config disables a check
		if n <= 0 {
			return math.MaxInt
		}
		return n
	}
	maxCost := g.MaxCost
	if maxCost <= 0 {
		maxCost = complexity.MaxCost
	}
	gcfg := gqllimit.Config{
		Limiter:  a.limiter,
		Policy:   policies[g.Policy],
		Identity: mw,
		ComplexityOptions: []complexity.Option{
			complexity.WithDefaultListSize(int(g.DefaultListSize)),
			complexity.WithMutationCost(int(g.MutationCost)),
			complexity.WithIntrospectionCost(int(g.IntrospectionCost)),
		},
		Mode:            gqllimit.Mode(g.Mode),
		MaxCost:         maxCost,
		MaxDepth:        off(g.MaxDepth),
		MaxAliases:      off(g.MaxAliases),
		MaxFields:       off(g.MaxFields),
		MaxTokens:       off(g.MaxTokens),
		MaxBodyBytes:    g.MaxBodyBytes,
		Refund:          g.Refund,
		NoIntrospection: !g.Introspection,
		OnCost:          func(kind string, cost int64) { a.metrics.graphqlCost.WithLabelValues(kind).Observe(float64(cost)) },
		Logger:          logger,
	}
	if g.Upstream != "" {
		sdl, err := os.ReadFile(g.Schema)
		if err != nil {
			return nil, fmt.Errorf("graphql.schema: %w", err)
		}
		schema, err := gqllimit.LoadSchema(g.Schema, string(sdl), gcfg.ComplexityOptions...)
		if err != nil {
			return nil, fmt.Errorf("graphql.schema: %w", err)
		}
		gcfg.Schema = schema
		gl, err := gqllimit.New(gcfg)
		if err != nil {
			return nil, err
		}
		proxy, err := gl.Proxy(gqllimit.ProxyConfig{Upstream: g.Upstream})
		if err != nil {
			return nil, err
		}
		return gl.Middleware(proxy), nil
	}
	gl, err := gqllimit.New(gcfg)
	if err != nil {
		return nil, err
	}
	resolver := &graph.Resolver{Shop: graph.NewShop(), RateLimitInfo: rateLimitInfo}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: resolver}))
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	if g.Introspection {
		srv.Use(extension.Introspection{})
	}
	srv.Use(gl.Extension())
	return gl.Middleware(srv), nil
}

// rateLimitInfo feeds the example API's rateLimit field, GitHub's shape.
func rateLimitInfo(ctx context.Context) (model.RateLimit, bool) {
	st := gqllimit.GetStats(ctx)
	if st == nil {
		return model.RateLimit{}, false
	}
	return model.RateLimit{
		Cost:      int(st.Requested),
		Limit:     int(st.Limit),
		Remaining: int(st.Remaining),
		ResetAt:   st.ResetAt.UTC().Format(time.RFC3339),
		Used:      int(st.Limit - st.Remaining),
	}, true
}

// redisClient builds the client for store.redis. ContextTimeoutEnabled makes
// go-redis honour the store timeout on a hung socket.
func redisClient(rc *RedisConfig) (redis.UniversalClient, error) {
	switch {
	case rc.URL != "":
		o, err := redis.ParseURL(rc.URL)
		if err != nil {
			return nil, fmt.Errorf("store.redis.url: %w", err)
		}
		o.ContextTimeoutEnabled = true
		return redis.NewClient(o), nil
	case len(rc.Cluster) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Cluster, ContextTimeoutEnabled: true}), nil
	case rc.Sentinel != nil:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            rc.Sentinel.Master,
			SentinelAddrs:         rc.Sentinel.Addrs,
			ContextTimeoutEnabled: true,
		}), nil
	}
	return nil, errors.New("store.redis: one of url, cluster, sentinel is required")
}

// readyz is 200 once serving; the body reports the store. A store outage
// never fails readiness: each route's on_store_error decides what it means.
func (a *app) readyz(w http.ResponseWriter, r *http.Request) {
	if !a.serving.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "stopping"})
		return
	}
	state := limiter.StoreUp
	if a.redis != nil {
		if state = a.breaker.State(); state != limiter.StoreBreakerOpen {
			ctx, cancel := context.WithTimeout(r.Context(), limiter.DefaultTimeout)
			defer cancel()
			if err := a.redis.Ping(ctx).Err(); err != nil {
				state = limiter.StoreDown
			} else {
				state = limiter.StoreUp
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "store": map[string]string{"kind": a.storeName, "state": string(state)}})
}

func (a *app) closeWith(err error) error {
	a.close()
	return err
}

func (a *app) close() {
	if a.redis != nil {
		a.redis.Close()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
