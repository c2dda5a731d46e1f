package bench

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
)

// identities is how many identities BenchmarkRedisMemoryPerIdentity
// writes: enough that Redis's own accounting of them (used_memory) is
// not lost in the noise of its buffers.
const identities = 100_000

// BenchmarkRedisMemoryPerIdentity reports what one identity's state costs
// in Redis, by algorithm, after one allowed check of each of 100,000
// identities on a Redis of its own:
//
//   - used-B/identity: the growth of INFO used_memory over them, divided by
//     their number: Redis's own accounting, what maxmemory is compared with
//     (the key's dict entry, its expiry entry, the allocator's rounding);
//   - usage-B/identity: MEMORY USAGE of the identity's keys, summed, the
//     mean of 100 of them: the key and its value alone;
//   - keys/identity.
//
// sliding_log's 10_entries row gives each identity 10 entries (the
// limit): the difference from one is what an entry adds. Run it alone (-run '^$' -bench
// RedisMemoryPerIdentity -benchtime 1x): it fills a Redis.
func BenchmarkRedisMemoryPerIdentity(b *testing.B) {
	// The demo config's policies, but for the buckets' refill: one check
	// of a bucket refilled in a minute leaves a key for 60ms, so theirs is
	// a day, for the state to outlive the measurement (its size is the
	// same).
	for _, c := range []struct {
		name    string
		policy  limiter.Policy
		entries int // checks per identity
		n       int // identities
	}{
		{"token_bucket", limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: 24 * time.Hour, Burst: 150}, 1, identities},
		{"leaky_bucket", limiter.Policy{Name: "shape", Algorithm: limiter.LeakyBucket, Limit: 100, Period: 24 * time.Hour}, 1, identities},
		{"fixed_window", limiter.Policy{Name: "fixed", Algorithm: limiter.FixedWindow, Limit: 1000, Period: time.Hour}, 1, identities},
		{"sliding_window", limiter.Policy{Name: "window", Algorithm: limiter.SlidingWindow, Limit: 1000, Period: time.Hour}, 1, identities},
		{"sliding_log", limiter.Policy{Name: "login_user", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute}, 1, identities},
		{"sliding_log_10_entries", limiter.Policy{Name: "login_user", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute}, 10, identities / 5},
		{"token_bucket_sync", limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: 24 * time.Hour, Burst: 150, Sync: 100 * time.Millisecond}, 1, identities},
	} {
		b.Run("alg="+c.name, func(b *testing.B) {
			p := c.policy
			if err := p.Validate(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				used, usage, keys := identityMemory(b, &p, c.entries, c.n)
				b.ReportMetric(used, "used-B/identity")
				b.ReportMetric(usage, "usage-B/identity")
				b.ReportMetric(keys, "keys/identity")
			}
		})
	}
}

// identityMemory writes the state of n identities under p, entries checks
// each, on a Redis of its own, and measures it.
func identityMemory(b *testing.B, p *limiter.Policy, entries, n int) (used, usage, keys float64) {
	b.Helper()
	srv, err := redistest.NewServer()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	client := srv.Client()
	ctx := context.Background()
	// The default prefix, as users run it.
	store, err := redisstore.Open(redisstore.ClientOptions{URL: "redis://" + srv.Addr(), Timeout: benchTimeout}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	usedMemory := func() int64 {
		info, err := client.Info(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		b.Fatal("INFO memory has no used_memory")
		return 0
	}
	// One identity first: the scripts, the connections and the first
	// allocations are Redis's, not the identities'.
	if _, err := store.Take(ctx, p, "warm", 1); err != nil {
		b.Fatal(err)
	}
	before := usedMemory()
	var wg sync.WaitGroup
	const workers = 32
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				for range entries {
					d, err := store.Take(ctx, p, "identity:"+strconv.Itoa(i), 1)
					if err == nil && !d.Allowed {
						err = errDenied
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	after := usedMemory()
	held, err := client.DBSize(ctx).Result()
	if err != nil {
		b.Fatal(err)
	}
	const sample = 100
	var total int64
	for i := range sample {
		for _, k := range store.Keys(p, "identity:"+strconv.Itoa(i)) {
			u, err := client.MemoryUsage(ctx, k, 0).Result()
			if err != nil && err != redis.Nil {
				b.Fatalf("MEMORY USAGE %s: %v", k, err)
			}
			total += u
		}
	}
	return float64(after-before) / float64(n), float64(total) / sample, float64(held-1) / float64(n)
}

var errDenied = errorString("a check was denied: the benchmark measures allowed checks only")

type errorString string

func (e errorString) Error() string { return string(e) }
