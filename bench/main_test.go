// Package bench holds side-by-side benchmarks of costgate's limiter stores
// against peer libraries, measured in the same run so that figures can be
// reported as ratios against a peer. See README.md.
package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redistest"
)

// server is the one redis-server every Redis benchmark of the package uses.
var server *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &server) }

// newClient returns a client of the shared server, as costgate's redisstore
// requires it (ContextTimeoutEnabled). Every contender uses the same options.
func newClient(b *testing.B) *redis.Client {
	b.Helper()
	c := server.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	b.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	return c
}

// manyKeys is the size of the key set of the "many keys" variants.
const manyKeys = 10_000

// keyCounts are the key-set sizes every comparison runs with.
var keyCounts = []int{1, manyKeys}

// keySet returns n distinct keys.
func keySet(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	return keys
}

// Bucket numbers of every contender: a bucket so large that it never runs
// dry within a run (1e9 units) and refilled so slowly (1 unit per second)
// that it never fills up again, so that every call is an allowed take that
// writes state, the steady state of a busy key. Denials would take a cheaper
// path in every library, so a denial fails the benchmark.
const (
	bucketRate  = 1
	bucketBurst = 1_000_000_000
	// windowLimit is the limit of the window algorithms, which have no burst.
	windowLimit = 1_000_000_000
	// slidingLogPeriod is short because sliding_log keeps one entry per
	// request: its state (and cost) grows with rate × period.
	slidingLogPeriod = 100 * time.Millisecond
)

// policy returns the benchmark policy of alg: every call is allowed and
// keeps state (see bucketRate).
func policy(b *testing.B, alg limiter.Algorithm) *limiter.Policy {
	b.Helper()
	p := &limiter.Policy{Name: "bench-" + string(alg), Algorithm: alg, Period: time.Second}
	switch alg {
	case limiter.TokenBucket, limiter.LeakyBucket:
		p.Limit, p.Burst = bucketRate, bucketBurst
	case limiter.SlidingLog:
		p.Limit, p.Period = windowLimit, slidingLogPeriod
	default:
		p.Limit = windowLimit
	}
	if err := p.Validate(); err != nil {
		b.Fatal(err)
	}
	return p
}

// takeFunc is one contender's check of key: whether it was allowed.
type takeFunc func(ctx context.Context, key string) (bool, error)

// measure runs take over keys, round robin, serially (b.Loop) or from
// parallel goroutines (b.RunParallel, each starting at its own offset in
// keys). It fails the benchmark on an error or a denial. The same loop and
// one indirect call wrap every contender.
//
// Besides the wall time it reports cpu-ns/op, the CPU time of the whole
// process (every thread, the garbage collector included) per call: on a
// shared or loaded machine it moves much less than the wall time.
func measure(b *testing.B, keys []string, parallel bool, take takeFunc) {
	b.ReportAllocs()
	if cpu0, ok := processCPU(); ok {
		defer func() {
			cpu1, _ := processCPU()
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
		}()
	}
	ctx := context.Background()
	if !parallel {
		i := 0
		for b.Loop() {
			ok, err := take(ctx, keys[i])
			if err != nil {
				b.Fatal(err)
			}
			if !ok {
				b.Fatalf("key %q denied: the benchmark measures allowed calls only", keys[i])
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
		return
	}
	var goroutines, denied atomic.Int64
	var (
		mu       sync.Mutex
		firstErr error
	)
	b.RunParallel(func(pb *testing.PB) {
		i := int(goroutines.Add(1)*7919) % len(keys)
		for pb.Next() {
			ok, err := take(ctx, keys[i])
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			if !ok {
				denied.Add(1)
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	if n := denied.Load(); n > 0 {
		b.Fatalf("%d calls denied: the benchmark measures allowed calls only", n)
	}
}

// concurrency names the serial and the parallel variant of a benchmark.
var concurrency = []struct {
	name     string
	parallel bool
}{{"serial", false}, {"parallel", true}}

// processCPU returns the CPU time (user and system) used so far by this
// process, all threads.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
