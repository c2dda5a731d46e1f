package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
)

// BatchFactory returns a fresh BatchStore that reads the time from clock.
type BatchFactory func(t *testing.T, clock func() time.Time) limiter.BatchStore

// RunBatch checks a BatchStore's TakeAll: all or nothing, decisions in
// order up to the first enforced denial, a shadow policy's denial denying
// nothing, and the same decisions Take gives one policy at a time.
func RunBatch(t *testing.T, newStore BatchFactory) {
	ctx := context.Background()
	policies := func(t *testing.T) []*limiter.Policy {
		ps := []*limiter.Policy{
			{Name: "b-tb", Algorithm: limiter.TokenBucket, Limit: 10, Period: s},
			{Name: "b-log", Algorithm: limiter.SlidingLog, Limit: 3, Period: 10 * s},
			{Name: "b-fw", Algorithm: limiter.FixedWindow, Limit: 5, Period: 10 * s},
			{Name: "b-sw", Algorithm: limiter.SlidingWindow, Limit: 5, Period: 10 * s},
			{Name: "b-lb", Algorithm: limiter.LeakyBucket, Limit: 10, Period: s, Burst: 4},
		}
		for _, p := range ps {
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
		}
		return ps
	}
	reqs := func(ps []*limiter.Policy, key string, cost int64) []limiter.Request {
		out := make([]limiter.Request, len(ps))
		for i, p := range ps {
			out[i] = limiter.Request{Policy: p, Key: key, Cost: cost}
		}
		return out
	}

	t.Run("all granted", func(t *testing.T) {
		clock := NewClock(Base)
		store := newStore(t, clock.Now)
		ps := policies(t)
		ds, err := store.TakeAll(ctx, reqs(ps, "k", 1))
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != len(ps) {
			t.Fatalf("%d decisions for %d policies", len(ds), len(ps))
		}
		want := []int64{9, 2, 4, 4, 3}
		for i, d := range ds {
			if !d.Allowed || d.Remaining != want[i] || d.Receipt.Cost != 1 || d.Limit != ps[i].Capacity() {
				t.Errorf("%s: %+v, want allowed, remaining %d, receipt of 1", ps[i].Name, d, want[i])
			}
		}
	})

	t.Run("a denial charges nothing", func(t *testing.T) {
		clock := NewClock(Base)
		store := newStore(t, clock.Now)
		ps := policies(t)
		// Use up the sliding log (3) alone, then ask all five for 1.
		if d, err := store.Take(ctx, ps[1], "k", 3); err != nil || !d.Allowed {
			t.Fatalf("take 3: %+v %v", d, err)
		}
		ds, err := store.TakeAll(ctx, reqs(ps, "k", 1))
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 2 {
			t.Fatalf("%d decisions, want 2 (up to the denial): %+v", len(ds), ds)
		}
		if d := ds[0]; !d.Allowed || d.Remaining != 10 || d.Receipt.Cost != 0 || d.ResetAfter != 0 {
			t.Errorf("token bucket before the denial: %+v, want its state uncharged (10 left, no receipt)", d)
		}
		if d := ds[1]; d.Allowed || d.RetryAfter != 10*s {
			t.Errorf("sliding log: %+v, want denied, retry 10s", d)
		}
		for _, p := range ps {
			d, err := store.Take(ctx, p, "k", 0)
			if err != nil {
				t.Fatal(err)
			}
			if p != ps[1] && d.Remaining != p.Capacity() {
				t.Errorf("%s charged by a denied request: remaining %d", p.Name, d.Remaining)
			}
		}
	})

	t.Run("a shadow denial denies nothing", func(t *testing.T) {
		clock := NewClock(Base)
		store := newStore(t, clock.Now)
		ps := policies(t)
		shadow := *ps[1]
		shadow.Mode = limiter.Shadow
		if d, err := store.Take(ctx, &shadow, "k", 3); err != nil || !d.Allowed {
			t.Fatalf("take 3: %+v %v", d, err)
		}
		ds, err := store.TakeAll(ctx, []limiter.Request{{Policy: ps[0], Key: "k", Cost: 2}, {Policy: &shadow, Key: "k", Cost: 1}, {Policy: ps[2], Key: "k", Cost: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 3 || !ds[0].Allowed || ds[1].Allowed || !ds[2].Allowed || ds[0].Remaining != 8 || ds[2].Remaining != 3 {
			t.Fatalf("decisions %+v: want granted, denied (shadow), granted", ds)
		}
	})

	t.Run("exceeds capacity", func(t *testing.T) {
		clock := NewClock(Base)
		store := newStore(t, clock.Now)
		ps := policies(t)
		ds, err := store.TakeAll(ctx, []limiter.Request{{Policy: ps[0], Key: "k", Cost: 1}, {Policy: ps[4], Key: "k", Cost: 5}})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 2 || ds[1].Allowed || !ds[1].ExceedsCapacity || ds[0].Remaining != 10 {
			t.Fatalf("decisions %+v: want the second to exceed capacity and nothing charged", ds)
		}
	})
}
