package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
)

// newTake builds a contender on a fresh store: every run of a benchmark
// function starts from an empty store.
type newTake func(b *testing.B) takeFunc

// newSethvargo is sethvargo/go-limiter's memorystore with bucketBurst tokens
// per hour. It refills only at interval ticks, so within a run it is a
// drained bucket like the others.
func newSethvargo(b *testing.B) takeFunc {
	b.Helper()
	s, err := memorystore.New(&memorystore.Config{Tokens: bucketBurst, Interval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	return sethvargoTake(s)
}

func sethvargoTake(s golimiter.Store) takeFunc {
	return func(ctx context.Context, key string) (bool, error) {
		_, _, _, ok, err := s.Take(ctx, key)
		return ok, err
	}
}

// newMemstore is costgate's memstore with the benchmark policy of alg.
func newMemstore(alg limiter.Algorithm) newTake {
	return func(b *testing.B) takeFunc {
		return memstoreTake(memstore.New(nil), policy(b, alg))
	}
}

func memstoreTake(s *memstore.Store, p *limiter.Policy) takeFunc {
	return func(ctx context.Context, key string) (bool, error) {
		d, err := s.Take(ctx, p, key, 1)
		return d.Allowed, err
	}
}

// newMemstoreRefilled is costgate's memstore token_bucket refilled so fast
// (1e9 a second) that a key is full again by its next call: its state is
// dropped and made anew, the path of a lightly used key.
func newMemstoreRefilled(b *testing.B) takeFunc {
	b.Helper()
	p := &limiter.Policy{Name: "bench-refilled", Algorithm: limiter.TokenBucket,
		Limit: bucketBurst, Burst: bucketBurst, Period: time.Second}
	if err := p.Validate(); err != nil {
		b.Fatal(err)
	}
	return memstoreTake(memstore.New(nil), p)
}

// warm charges every key once, so that a run measures the steady state
// rather than the creation of the keys.
func warm(b *testing.B, keys []string, take takeFunc) takeFunc {
	b.Helper()
	for _, k := range keys {
		if _, err := take(context.Background(), k); err != nil {
			b.Fatal(err)
		}
	}
	return take
}

// BenchmarkMemory compares one allowed in-process check: sethvargo/go-limiter
// memorystore Take (the peer, first) against costgate's memstore Take with a
// token_bucket whose keys keep their state, and with one whose keys are full
// again between calls (costgate_refilled: state dropped and recreated).
func BenchmarkMemory(b *testing.B) {
	contenders := []struct {
		name string
		new  newTake
	}{
		{"sethvargo", newSethvargo},
		{"costgate", newMemstore(limiter.TokenBucket)},
		{"costgate_refilled", newMemstoreRefilled},
	}
	for _, n := range keyCounts {
		keys := keySet(n)
		for _, conc := range concurrency {
			for _, c := range contenders {
				b.Run(fmt.Sprintf("keys=%d/conc=%s/impl=%s", n, conc.name, c.name), func(b *testing.B) {
					measure(b, keys, conc.parallel, warm(b, keys, c.new(b)))
				})
			}
		}
	}
}

// BenchmarkMemoryAlgorithms runs costgate's memstore Take with each of the
// five algorithms (token_bucket first, the base for benchstat).
func BenchmarkMemoryAlgorithms(b *testing.B) {
	for _, n := range keyCounts {
		keys := keySet(n)
		for _, conc := range concurrency {
			for _, alg := range limiter.Algorithms() {
				b.Run(fmt.Sprintf("keys=%d/conc=%s/alg=%s", n, conc.name, alg), func(b *testing.B) {
					measure(b, keys, conc.parallel, warm(b, keys, newMemstore(alg)(b)))
				})
			}
		}
	}
}

// BenchmarkLimiter measures what limiter.Limiter.Allow adds to a memstore
// Take (one key, token_bucket): store_take calls the store directly, allow
// goes through a Limiter with default options (memstore is a limiter.Local
// store, so no per-call timeout context is armed), allow_no_timeout through
// one with WithTimeout(0). The two Allow variants differ only if a timeout
// is armed for in-process stores again.
func BenchmarkLimiter(b *testing.B) {
	keys := keySet(1)
	contenders := []struct {
		name    string
		limiter bool // through a Limiter, with opts
		opts    []limiter.Option
	}{
		{"store_take", false, nil},
		{"allow", true, nil},
		{"allow_no_timeout", true, []limiter.Option{limiter.WithTimeout(0)}},
	}
	for _, conc := range concurrency {
		for _, c := range contenders {
			b.Run(fmt.Sprintf("conc=%s/impl=%s", conc.name, c.name), func(b *testing.B) {
				store := memstore.New(nil)
				p := policy(b, limiter.TokenBucket)
				take := memstoreTake(store, p)
				if c.limiter {
					lim, err := limiter.New(store, c.opts...)
					if err != nil {
						b.Fatal(err)
					}
					take = func(ctx context.Context, key string) (bool, error) {
						d := lim.Allow(ctx, p, key, 1)
						return d.Allowed, d.Err
					}
				}
				measure(b, keys, conc.parallel, take)
			})
		}
	}
}

// footprintKeys is the key count of BenchmarkMemoryPerKey: memstore's
// default cap.
const footprintKeys = memstore.DefaultMaxKeys

// BenchmarkMemoryPerKey fills a fresh store with a million keys, each a
// fresh string that only the store holds, one take each, and reports what a
// key costs once the garbage collector has run: B/key of live heap, and
// process-B/key, the memory the runtime holds from the OS (Sys less
// HeapReleased, after debug.FreeOSMemory). ns/op is the time to fill the
// store. costgate is a token_bucket on a clock that stands still (nothing
// refills, so no state is dropped as full); held/keys is the share of the
// keys it still holds at the end: the cap is per shard, so the fullest
// shards have evicted a few.
func BenchmarkMemoryPerKey(b *testing.B) {
	type filled struct {
		store any
		held  int
	}
	contenders := []struct {
		name string
		fill func(b *testing.B, n int) filled
	}{
		{"sethvargo", func(b *testing.B, n int) filled {
			s, err := memorystore.New(&memorystore.Config{Tokens: bucketBurst, Interval: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close(context.Background()) })
			ctx := context.Background()
			for i := range n {
				if _, _, _, _, err := s.Take(ctx, "user:"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			return filled{s, n}
		}},
		{"costgate", func(b *testing.B, n int) filled {
			now := time.Now()
			s := memstore.New(&memstore.Options{Clock: func() time.Time { return now }})
			p := policy(b, limiter.TokenBucket)
			ctx := context.Background()
			for i := range n {
				if _, err := s.Take(ctx, p, "user:"+strconv.Itoa(i), 1); err != nil {
					b.Fatal(err)
				}
			}
			return filled{s, s.Len()}
		}},
	}
	for _, c := range contenders {
		b.Run(fmt.Sprintf("keys=%d/impl=%s", footprintKeys, c.name), func(b *testing.B) {
			var heap, process, held float64
			for b.Loop() {
				before := memStats()
				f := c.fill(b, footprintKeys)
				after := memStats()
				runtime.KeepAlive(f.store)
				held = float64(f.held)
				heap = float64(after.HeapAlloc-before.HeapAlloc) / held
				process = float64((after.Sys-after.HeapReleased)-(before.Sys-before.HeapReleased)) / held
			}
			b.ReportMetric(heap, "B/key")
			b.ReportMetric(process, "process-B/key")
			b.ReportMetric(held/footprintKeys, "held/keys")
		})
	}
}

// memStats reads the memory statistics after a full collection, with the
// freed memory given back to the OS.
func memStats() runtime.MemStats {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
