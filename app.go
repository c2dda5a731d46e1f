package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
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
	a.limiter = limiter.New(store, opts...)

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
		Logger:         logger,
	})
	if err != nil {
		return nil, a.closeWith(err)
	}

	r.Use(middleware.Recoverer)
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
