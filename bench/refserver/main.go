// Command refserver is the reference the load test measures costgate
// against: the REST limit a Go user might write instead of running costgate,
// chi plus go-redis/redis_rate (or, with -store memory, sethvargo/go-limiter's
// memorystore), serving the same example product route from the same data.
//
//	refserver -addr 127.0.0.1:0 -store redis -redis redis://127.0.0.1:6379/0 -api-keys keys.json
//
// Like costgate it logs JSON on stderr, the first line "refserver listening"
// with the address, and serves Prometheus metrics on /metrics with the same
// collectors (Go runtime, process) and a check histogram with costgate's
// buckets, so that the load test reads both servers alike.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/sethvargo/go-limiter/memorystore"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "refserver:", err)
		os.Exit(1)
	}
}

// apiKey is what an API key stands for, as in costgate's identity.api_keys.
type apiKey struct {
	Tenant string `json:"tenant"`
	Plan   string `json:"plan"`
}

// checkTimeout bounds one limiter call, as costgate's store timeout (50ms) does.
const checkTimeout = 50 * time.Millisecond

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("refserver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	storeName := fs.String("store", "redis", "redis (go-redis/redis_rate), memory (sethvargo/go-limiter) or floor (no limiter: one EVALSHA of a script that returns at once, the least a limiter on Redis can do)")
	redisURL := fs.String("redis", "", "Redis URL, with -store redis")
	keysPath := fs.String("api-keys", "", "JSON file: API key → {tenant, plan}")
	limit := fs.Int("limit", 1000, "tokens refilled per -period")
	period := fs.Duration("period", time.Minute, "refill period")
	burst := fs.Int("burst", 150, "bucket capacity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	keys, err := loadKeys(*keysPath)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	checks := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "refserver_check_duration_seconds",
		Help:    "Time one rate-limit check took, by store.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
	}, []string{"store"})
	storeErrors := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "refserver_store_errors_total",
		Help: "Checks the store could not answer (the request was let through).",
	}, []string{"store"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(checks, storeErrors, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	checkDuration := checks.WithLabelValues(*storeName)

	var take takeFunc
	switch *storeName {
	case "redis":
		if *redisURL == "" {
			return errors.New("-store redis needs -redis")
		}
		opts, err := redis.ParseURL(*redisURL)
		if err != nil {
			return fmt.Errorf("-redis: %w", err)
		}
		client := redis.NewClient(opts)
		defer client.Close()
		take = redisTake(redis_rate.NewLimiter(client), redis_rate.Limit{Rate: *limit, Period: *period, Burst: *burst})
	case "floor":
		// Not a limiter: the same server with one go-redis round trip per
		// request that reads and writes nothing, so that the load test can
		// show how much of a request neither limiter can take away.
		if *redisURL == "" {
			return errors.New("-store floor needs -redis")
		}
		opts, err := redis.ParseURL(*redisURL)
		if err != nil {
			return fmt.Errorf("-redis: %w", err)
		}
		client := redis.NewClient(opts)
		defer client.Close()
		noop := redis.NewScript("return {1, ARGV[1]}")
		burst := int64(*burst)
		take = func(ctx context.Context, key string) (decision, error) {
			if err := noop.Run(ctx, client, []string{key}, burst).Err(); err != nil {
				return decision{}, err
			}
			return decision{allowed: true, limit: burst, remaining: burst, reset: time.Now()}, nil
		}
	case "memory":
		// memorystore refills at Interval ticks, and (v0.7.1) after the first
		// tick only to Interval/Tokens tokens: give it an Interval longer than
		// the run when it must never deny.
		store, err := memorystore.New(&memorystore.Config{Tokens: uint64(*burst), Interval: *period})
		if err != nil {
			return err
		}
		defer store.Close(context.Background())
		take = func(ctx context.Context, key string) (decision, error) {
			tokens, remaining, reset, ok, err := store.Take(ctx, key)
			return decision{allowed: ok, limit: int64(tokens), remaining: int64(remaining), reset: time.Unix(0, int64(reset))}, err
		}
	default:
		return fmt.Errorf("-store %q: want redis, memory or floor", *storeName)
	}

	shop := demo.NewShop(graph.NewShop())
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	r.Group(func(r chi.Router) {
		r.Use(rateLimit(keys, take, checkDuration, storeErrors.WithLabelValues(*storeName), logger))
		r.Get("/api/products/{id}", shop.GetProduct)
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	logger.Info("refserver listening", "addr", ln.Addr().String(), "store", *storeName)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

func loadKeys(path string) (map[string]apiKey, error) {
	if path == "" {
		return nil, errors.New("-api-keys is required")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys map[string]apiKey
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// decision is what the middleware needs of a limiter's answer.
type decision struct {
	allowed          bool
	limit, remaining int64
	retryAfter       time.Duration
	reset            time.Time
}

type takeFunc func(ctx context.Context, key string) (decision, error)

func redisTake(rl *redis_rate.Limiter, limit redis_rate.Limit) takeFunc {
	return func(ctx context.Context, key string) (decision, error) {
		res, err := rl.Allow(ctx, key, limit)
		if err != nil {
			return decision{}, err
		}
		return decision{
			allowed:    res.Allowed > 0,
			limit:      int64(limit.Burst),
			remaining:  int64(res.Remaining),
			retryAfter: res.RetryAfter,
			reset:      time.Now().Add(res.ResetAfter),
		}, nil
	}
}

// rateLimit keys each request by its API key's tenant and the key (401 for
// an unknown key), takes one token, and writes X-RateLimit-* headers; a
// limiter error lets the request through (costgate's on_store_error: allow).
func rateLimit(keys map[string]apiKey, take takeFunc, checkDuration prometheus.Observer, storeErrors prometheus.Counter, logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("X-API-Key")
			k, ok := keys[key]
			if !ok {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized", "message": "unknown API key"})
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
			start := time.Now()
			d, err := take(ctx, "rl:{"+k.Tenant+":"+key+"}")
			checkDuration.Observe(time.Since(start).Seconds())
			cancel()
			if err != nil {
				storeErrors.Inc()
				logger.Error("rate limit check failed; request allowed", "err", err.Error())
				next.ServeHTTP(w, r)
				return
			}
			h := w.Header()
			h.Set("X-RateLimit-Limit", strconv.FormatInt(d.limit, 10))
			h.Set("X-RateLimit-Remaining", strconv.FormatInt(d.remaining, 10))
			h.Set("X-RateLimit-Reset", strconv.FormatInt(d.reset.Unix(), 10))
			if !d.allowed {
				secs := int64((d.retryAfter + time.Second - 1) / time.Second)
				h.Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
				writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "rate_limit", "retry_after_sec": max(secs, 1)})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
