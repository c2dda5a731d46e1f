package memstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock func() time.Time) limiter.Store {
		return memstore.New(&memstore.Options{Clock: clock})
	}, storetest.Options{})
}

// Requests of one check on the same key, through the Limiter: policy by
// policy, each seeing the charges before it, undone on a denial.
func TestSameKeyChecks(t *testing.T) {
	storetest.RunChecks(t, func(t *testing.T, clock func() time.Time) limiter.Store {
		return memstore.New(&memstore.Options{Clock: clock})
	})
}

// At the key cap a new key evicts the state with the least quota in use:
// for the keys of one bucket policy, the one closest to full.
func TestEvictsClosestToFullAtCap(t *testing.T) {
	clock := storetest.NewClock(storetest.Base)
	evicted := 0
	s := memstore.New(&memstore.Options{MaxKeys: 3, Clock: clock.Now, OnEvict: func() { evicted++ }})
	p := &limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 10, Period: 10 * time.Second}
	ctx := context.Background()
	take := func(key string, cost int64) limiter.Decision {
		t.Helper()
		d, err := s.Take(ctx, p, key, cost)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	take("heavy", 9) // full again in 9s
	take("light", 1) // full again in 1s: closest to full
	take("mid", 5)   // 5s
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want 3", s.Len())
	}
	take("new", 2)
	if s.Len() != 3 || evicted != 1 || s.Evictions() != 1 {
		t.Fatalf("Len %d, evicted %d (counter %d), want 3, 1, 1", s.Len(), evicted, s.Evictions())
	}
	// "light" was forgotten (full again), the others kept their state.
	for key, want := range map[string]int64{"light": 10, "heavy": 1, "mid": 5, "new": 8} {
		if d := take(key, 0); d.Remaining != want {
			t.Errorf("%s: remaining %d, want %d", key, d.Remaining, want)
		}
	}
}

// A key's state goes as soon as its quota is full again; no background
// goroutine is needed, the next call sweeps it.
func TestSweepsStateBackToFull(t *testing.T) {
	clock := storetest.NewClock(storetest.Base)
	s := memstore.New(&memstore.Options{Clock: clock.Now})
	ctx := context.Background()
	for _, alg := range limiter.Algorithms() {
		p := &limiter.Policy{Name: string(alg), Algorithm: alg, Limit: 5, Period: time.Minute}
		for i := range 100 {
			if _, err := s.Take(ctx, p, fmt.Sprint("key", i), 2); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := s.Len(); got != 500 {
		t.Fatalf("Len = %d, want 500", got)
	}
	clock.Advance(time.Minute) // everything but sliding_window's counts is full again
	s.Take(ctx, &limiter.Policy{Name: "x", Algorithm: limiter.FixedWindow, Limit: 1, Period: time.Second}, "x", 0)
	if got := s.Len(); got != 100 {
		t.Errorf("after one period: Len = %d, want 100 (sliding_window keeps the previous window)", got)
	}
	clock.Advance(time.Minute)
	s.Take(ctx, &limiter.Policy{Name: "x", Algorithm: limiter.FixedWindow, Limit: 1, Period: time.Second}, "x", 0)
	if got := s.Len(); got != 0 {
		t.Errorf("after two periods: Len = %d, want 0", got)
	}
}

// Concurrent callers on one key: exactly the limit passes.
func TestConcurrentCallersExact(t *testing.T) {
	s := memstore.New(nil)
	for _, alg := range limiter.Algorithms() {
		p := &limiter.Policy{Name: string(alg), Algorithm: alg, Limit: 100, Period: 24 * time.Hour}
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 75 {
					if d, err := s.Take(context.Background(), p, "k", 1); err == nil && d.Allowed {
						allowed.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if got := allowed.Load(); got != 100 {
			t.Errorf("%s: allowed %d of 600, want 100", alg, got)
		}
	}
}

// Takes move a key's "full again" instant later without reordering the heap
// at once; eviction must still pick the true least in use.
func TestEvictionSeesLaterTakes(t *testing.T) {
	clock := storetest.NewClock(storetest.Base)
	s := memstore.New(&memstore.Options{MaxKeys: 3, Clock: clock.Now})
	p := &limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 10, Period: 10 * time.Second}
	ctx := context.Background()
	take := func(key string, cost int64) {
		t.Helper()
		if _, err := s.Take(ctx, p, key, cost); err != nil {
			t.Fatal(err)
		}
	}
	take("a", 1) // full again in 1s
	take("b", 5) // 5s
	take("c", 6) // 6s
	take("a", 8) // a: now 9s; b is closest to full
	take("d", 1)
	for key, want := range map[string]int64{"a": 1, "b": 10, "c": 4, "d": 9} {
		d, _ := s.Take(ctx, p, key, 0)
		if d.Remaining != want {
			t.Errorf("%s: remaining %d, want %d", key, d.Remaining, want)
		}
	}
}
