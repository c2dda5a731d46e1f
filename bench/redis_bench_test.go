package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	throttled "github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulimiter "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
)

// redisCallers is the number of goroutines of the parallel Redis
// benchmarks: a gateway keeps many checks in flight, and with one goroutine
// per core the benchmark would only measure round-trip latency.
const redisCallers = 64

// redisParallelism is redisCallers per GOMAXPROCS, for b.SetParallelism.
func redisParallelism() int { return max(redisCallers/runtime.GOMAXPROCS(0), 1) }

// benchTimeout bounds costgate's checks in the benchmarks: generous, so
// that a busy spell on a shared machine slows a run instead of failing it.
const benchTimeout = 10 * time.Second

// noop is the cheapest script: the EVALSHA floor under any Lua limiter.
var noop = redis.NewScript("return 1")

// redisContenders returns the contenders of BenchmarkRedis, the peer first
// (benchstat compares every column with the first).
func redisContenders(b *testing.B, client *redis.Client) []struct {
	name string
	take takeFunc
} {
	rate := redis_rate.NewLimiter(client)
	rateLimit := redis_rate.Limit{Rate: bucketRate, Burst: bucketBurst, Period: time.Second}
	store := newRedisStore(b, client)
	tb := policy(b, limiter.TokenBucket)
	// A generous timeout: a loaded machine must not fail a benchmark.
	lim, err := limiter.New(store, limiter.WithStoreName("redis"), limiter.WithTimeout(benchTimeout))
	if err != nil {
		b.Fatal(err)
	}
	ulule, err := ululeredis.NewStoreWithOptions(client, ulimiter.StoreOptions{Prefix: "ulule"})
	if err != nil {
		b.Fatal(err)
	}
	ululeRate := ulimiter.Rate{Period: time.Second, Limit: windowLimit}
	thrStore, err := goredisstore.NewCtx(client, "throttled:")
	if err != nil {
		b.Fatal(err)
	}
	thr, err := throttled.NewGCRARateLimiterCtx(thrStore, throttled.RateQuota{MaxRate: throttled.PerSec(bucketRate), MaxBurst: bucketBurst - 1})
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		take takeFunc
	}{
		{"redis_rate", func(ctx context.Context, key string) (bool, error) {
			res, err := rate.Allow(ctx, key, rateLimit)
			if err != nil {
				return false, err
			}
			return res.Allowed > 0, nil
		}},
		{"costgate", func(ctx context.Context, key string) (bool, error) {
			d := lim.Allow(ctx, tb, key, 1)
			return d.Allowed, d.Err
		}},
		{"costgate_store", func(ctx context.Context, key string) (bool, error) {
			d, err := store.Take(ctx, tb, key, 1)
			return d.Allowed, err
		}},
		{"ulule", func(ctx context.Context, key string) (bool, error) {
			c, err := ulule.Increment(ctx, key, 1, ululeRate)
			return !c.Reached, err
		}},
		{"throttled", func(ctx context.Context, key string) (bool, error) {
			limited, _, err := thr.RateLimitCtx(ctx, key, 1)
			return !limited, err
		}},
		{"incr", func(ctx context.Context, key string) (bool, error) {
			return true, client.Incr(ctx, key).Err()
		}},
		{"evalsha_noop", func(ctx context.Context, key string) (bool, error) {
			return true, noop.Run(ctx, client, []string{key}).Err()
		}},
	}
}

func newRedisStore(b *testing.B, _ *redis.Client) *redisstore.Store {
	b.Helper()
	// Open, as the costgate server does: the store's own client and dialer.
	store, err := redisstore.Open(redisstore.ClientOptions{URL: "redis://" + server.Addr()}, &redisstore.Options{KeyPrefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	return store
}

// BenchmarkRedisLogin is a login request: two policies (per IP, per
// username, sliding_log as in the demo config), all or nothing. costgate's
// AllowAll sends one script for both; costgate_sequential charges them one
// by one (two round trips, as before BatchStore); redis_rate makes two calls.
func BenchmarkRedisLogin(b *testing.B) {
	client := newClient(b)
	store := newRedisStore(b, client)
	lim, err := limiter.New(store, limiter.WithTimeout(benchTimeout))
	if err != nil {
		b.Fatal(err)
	}
	seq, err := limiter.New(sequential{store}, limiter.WithTimeout(benchTimeout))
	if err != nil {
		b.Fatal(err)
	}
	ip := policy(b, limiter.TokenBucket)
	user := &limiter.Policy{Name: "bench-user", Algorithm: limiter.TokenBucket, Limit: bucketRate, Burst: bucketBurst, Period: time.Second}
	if err := user.Validate(); err != nil {
		b.Fatal(err)
	}
	rate := redis_rate.NewLimiter(client)
	rateLimit := redis_rate.Limit{Rate: bucketRate, Burst: bucketBurst, Period: time.Second}
	allowAll := func(l *limiter.Limiter) takeFunc {
		return func(ctx context.Context, key string) (bool, error) {
			ds, ok := l.AllowAll(ctx, []limiter.Request{{Policy: ip, Key: key, Cost: 1}, {Policy: user, Key: key, Cost: 1}})
			for _, d := range ds {
				if d.Err != nil {
					return false, d.Err
				}
			}
			return ok, nil
		}
	}
	contenders := []struct {
		name string
		take takeFunc
	}{
		{"redis_rate", func(ctx context.Context, key string) (bool, error) {
			a, err := rate.Allow(ctx, "ip:"+key, rateLimit)
			if err != nil || a.Allowed == 0 {
				return false, err
			}
			u, err := rate.Allow(ctx, "user:"+key, rateLimit)
			return err == nil && u.Allowed > 0, err
		}},
		{"costgate", allowAll(lim)},
		{"costgate_sequential", allowAll(seq)},
	}
	keys := keySet(manyKeys)
	for _, conc := range concurrency {
		for _, c := range contenders {
			b.Run(fmt.Sprintf("conc=%s/impl=%s", conc.name, c.name), func(b *testing.B) {
				measureRedis(b, client, keys, conc.parallel, c.take)
			})
		}
	}
}

// sequential hides a store's TakeAll: the Limiter then charges policy by
// policy, as it did before BatchStore.
type sequential struct{ limiter.Store }

// BenchmarkRedisMemory reports the Redis memory of one key's state
// (MEMORY USAGE, bytes/key) after one allowed check of the same identity,
// per contender, each with its default key prefix, and for sliding_log the
// bytes per entry of a log of 100.
func BenchmarkRedisMemory(b *testing.B) {
	client := newClient(b)
	ctx := context.Background()
	store, err := redisstore.Open(redisstore.ClientOptions{URL: "redis://" + server.Addr()}, nil) // the default prefix, as users run it
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	usage := func(b *testing.B, keys []string) int64 {
		b.Helper()
		var total int64
		for _, k := range keys {
			n, err := client.MemoryUsage(ctx, k).Result()
			if err != nil {
				b.Fatalf("MEMORY USAGE %s: %v", k, err)
			}
			total += n
		}
		return total
	}
	rate := redis_rate.NewLimiter(client)
	rateLimit := redis_rate.Limit{Rate: bucketRate, Burst: bucketBurst, Period: time.Second}
	costgate := func(alg limiter.Algorithm) (func(string) error, func(string) []string) {
		p := policy(b, alg)
		return func(key string) error {
				_, err := store.Take(ctx, p, key, 1)
				return err
			}, func(key string) []string {
				return store.Keys(p, key)
			}
	}
	tbTake, tbKeys := costgate(limiter.TokenBucket)
	fwTake, fwKeys := costgate(limiter.FixedWindow)
	for _, c := range []struct {
		name string
		take func(key string) error
		keys func(key string) []string
	}{
		{"redis_rate", func(key string) error {
			_, err := rate.Allow(ctx, key, rateLimit)
			return err
		}, func(key string) []string { return []string{"rate:" + key} }},
		{"costgate_token_bucket", tbTake, tbKeys},
		{"costgate_fixed_window", fwTake, fwKeys},
	} {
		b.Run("impl="+c.name, func(b *testing.B) {
			const n = 100
			var keys []string
			for i := range n {
				keys = append(keys, c.keys("mem-user:"+strconv.Itoa(i))...)
			}
			for b.Loop() {
				for i := range n {
					if err := c.take("mem-user:" + strconv.Itoa(i)); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(usage(b, keys))/n, "bytes/key")
		})
	}
	b.Run("impl=costgate_sliding_log_entry", func(b *testing.B) {
		p := &limiter.Policy{Name: "bench-log-mem", Algorithm: limiter.SlidingLog, Limit: 1_000_000, Period: time.Hour}
		if err := p.Validate(); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			client.Del(ctx, store.Keys(p, "log")...)
			for range 100 {
				if _, err := store.Take(ctx, p, "log", 1); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(usage(b, store.Keys(p, "log")))/100, "bytes/entry")
	})
}

// BenchmarkRedis compares one allowed check against a local Redis: costgate's
// redisstore token_bucket (Lua, EVALSHA), redis_rate's GCRA (Lua, EVALSHA),
// and two floors: a bare INCR round trip and an EVALSHA of "return 1".
func BenchmarkRedis(b *testing.B) {
	client := newClient(b)
	contenders := redisContenders(b, client)
	for _, n := range keyCounts {
		keys := keySet(n)
		for _, conc := range concurrency {
			for _, c := range contenders {
				if c.name == "throttled" && n == 1 && conc.parallel {
					// Its compare-and-set gives up after 10 attempts when 64
					// callers race on one key: the run cannot finish.
					continue
				}
				b.Run(fmt.Sprintf("keys=%d/conc=%s/impl=%s", n, conc.name, c.name), func(b *testing.B) {
					measureRedis(b, client, keys, conc.parallel, c.take)
				})
			}
		}
	}
}

// BenchmarkRedisAlgorithms runs costgate's redisstore Take with each of the
// five algorithms (token_bucket first, the base for benchstat).
func BenchmarkRedisAlgorithms(b *testing.B) {
	client := newClient(b)
	store := newRedisStore(b, client)
	for _, n := range keyCounts {
		keys := keySet(n)
		for _, conc := range concurrency {
			for _, alg := range limiter.Algorithms() {
				p := policy(b, alg)
				b.Run(fmt.Sprintf("keys=%d/conc=%s/alg=%s", n, conc.name, alg), func(b *testing.B) {
					measureRedis(b, client, keys, conc.parallel, func(ctx context.Context, key string) (bool, error) {
						d, err := store.Take(ctx, p, key, 1)
						return d.Allowed, err
					})
				})
			}
		}
	}
}

// measureRedis is measure with redisParallelism, and also reports
// redis-cpu-ns/op: the CPU time redis-server spent per call (INFO cpu), the
// server's share of the cost, which a loaded machine disturbs little.
func measureRedis(b *testing.B, client *redis.Client, keys []string, parallel bool, take takeFunc) {
	b.SetParallelism(redisParallelism())
	cpu0 := redisCPU(b, client)
	b.ResetTimer()
	measure(b, keys, parallel, take)
	cpu1 := redisCPU(b, client)
	b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "redis-cpu-ns/op")
}

// redisCPU returns the CPU time (user and system) redis-server has used.
func redisCPU(b *testing.B, client *redis.Client) time.Duration {
	b.Helper()
	info, err := client.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	found := 0
	for line := range strings.Lines(info) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "used_cpu_user" && name != "used_cpu_sys") {
			continue
		}
		sec, err := strconv.ParseFloat(value, 64)
		if err != nil {
			b.Fatalf("INFO cpu: %s: %v", line, err)
		}
		total += time.Duration(sec * float64(time.Second))
		found++
	}
	if found != 2 {
		b.Fatalf("INFO cpu: no used_cpu_user and used_cpu_sys in %q", info)
	}
	return total
}
