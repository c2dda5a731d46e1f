package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
)

// redisParallelism is the number of goroutines per GOMAXPROCS in the
// parallel Redis benchmarks: a gateway keeps many checks in flight, and with
// one goroutine per core the benchmark would only measure round-trip latency.
const redisParallelism = 4

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
			d, err := store.Take(ctx, tb, key, 1)
			return d.Allowed, err
		}},
		{"incr", func(ctx context.Context, key string) (bool, error) {
			return true, client.Incr(ctx, key).Err()
		}},
		{"evalsha_noop", func(ctx context.Context, key string) (bool, error) {
			return true, noop.Run(ctx, client, []string{key}).Err()
		}},
	}
}

func newRedisStore(b *testing.B, client *redis.Client) *redisstore.Store {
	b.Helper()
	store, err := redisstore.New(client, &redisstore.Options{KeyPrefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	return store
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
	b.SetParallelism(redisParallelism)
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
