package redisstore_test

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
)

// fakeClock is the one clock of every gateway and of the scripts: the
// tests step it, so that what is admitted does not depend on the machine.
type fakeClock struct{ us atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.us.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	return c
}

func (c *fakeClock) now() time.Time          { return time.UnixMicro(c.us.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.us.Add(d.Microseconds()) }

// newGateways returns n stores sharing Redis through client(), each a
// gateway of its own, syncing only when the test says.
func newGateways(t *testing.T, client func() redis.UniversalClient, n int, clk *fakeClock) []*redisstore.Store {
	t.Helper()
	prefix := newPrefix(t)
	gws := make([]*redisstore.Store, n)
	for i := range gws {
		c := client()
		s, err := redisstore.New(c, &redisstore.Options{KeyPrefix: prefix, Clock: clk.now, GatewayID: fmt.Sprintf("gw%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		redisstore.ManualSync(s)
		t.Cleanup(func() { s.Close(); c.Close() })
		gws[i] = s
	}
	return gws
}

// syncLoad is a run of requests on gateways, stepped by the fake clock.
type syncLoad struct {
	policy *limiter.Policy
	step   time.Duration
	// perStep[i] is the number of requests gateway i gets each step.
	perStep []int
	key     func(step, i int) string
	// before runs at the start of each step (faults).
	before func(step int)
}

// result is what a load admitted: the time of each admitted request since
// the start, and the counts.
type result struct {
	admitted      []time.Duration
	byGateway     []int
	requests      int
	errs          int
	firstGrant    time.Time
	lastSyncRound time.Duration
}

// run drives l for d. Gateway i syncs at i/N of each interval past its
// start, so the syncs are staggered as real gateways' are.
func (l syncLoad) run(t *testing.T, gws []*redisstore.Store, clk *fakeClock, d time.Duration) result {
	t.Helper()
	ctx := context.Background()
	res := result{byGateway: make([]int, len(gws))}
	start := clk.now()
	interval := l.policy.Sync
	for s := 0; time.Duration(s)*l.step < d; s++ {
		if l.before != nil {
			l.before(s)
		}
		elapsed := time.Duration(s) * l.step
		for i, gw := range gws {
			if (elapsed-time.Duration(i)*interval/time.Duration(len(gws)))%interval == 0 {
				redisstore.FlushSync(gw)
			}
			for j := 0; j < l.perStep[i]; j++ {
				dec, err := gw.Take(ctx, l.policy, l.key(s, i), 1)
				res.requests++
				if err != nil {
					res.errs++
					continue
				}
				if dec.Allowed {
					if res.firstGrant.IsZero() {
						res.firstGrant = clk.now()
					}
					res.admitted = append(res.admitted, clk.now().Sub(start))
					res.byGateway[i]++
				}
			}
		}
		clk.advance(l.step)
	}
	return res
}

// mostInWindow is the most requests admitted inside any window of length w.
func mostInWindow(at []time.Duration, w time.Duration) int {
	sort.Slice(at, func(i, j int) bool { return at[i] < at[j] })
	most, lo := 0, 0
	for hi := range at {
		for at[hi]-at[lo] >= w {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

func syncBucket(t *testing.T, limit int64, period time.Duration, burst int64, sync time.Duration) *limiter.Policy {
	return mustValidate(t, &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: limit, Period: period, Burst: burst, Sync: sync})
}

// Balanced load on one key, well over the limit: in every window the
// gateways together admit no more than an exact limiter would (the
// README's bound with Redis up: B + r·W), and not much less.
func TestSyncBalancedLoadStaysWithinBound(t *testing.T) {
	for _, b := range backends() {
		for _, n := range []int{3, 6} {
			t.Run(fmt.Sprintf("%s/%d gateways", b.name, n), func(t *testing.T) {
				clk := newFakeClock()
				gws := newGateways(t, b.client, n, clk)
				p := syncBucket(t, 100, time.Second, 100, 100*time.Millisecond) // r = 100/s, B = 100
				per := make([]int, n)
				for i := range per {
					per[i] = 1 // 1 request per 2ms per gateway: 500/s each
				}
				const d = 5 * time.Second
				res := syncLoad{policy: p, step: 2 * time.Millisecond, perStep: per, key: func(int, int) string { return "k" }}.run(t, gws, clk, d)
				if res.errs != 0 {
					t.Fatalf("%d requests failed", res.errs)
				}
				for _, w := range []time.Duration{100 * time.Millisecond, time.Second, d} {
					got := mostInWindow(res.admitted, w)
					exact := float64(p.Burst) + float64(p.Limit)*w.Seconds()/p.Period.Seconds()
					if float64(got) > exact {
						t.Errorf("window %s: admitted %d, the bound is %.0f (B + r·W)", w, got, exact)
					}
					t.Logf("window %s: admitted %d of at most %.0f (%.1f%%), offered %d", w, got, exact, 100*float64(got)/exact, int(float64(n)*w.Seconds()*500))
				}
				total := float64(len(res.admitted)) / (float64(p.Burst) + float64(p.Limit)*d.Seconds())
				if total < 0.9 {
					t.Errorf("admitted %.1f%% of what an exact limiter would; want at least 90%%", 100*total)
				}
				t.Logf("by gateway %v", res.byGateway)
			})
		}
	}
}

// The whole load of a key on one gateway of six, the other five having
// seen the key once: it admits (nearly) the whole limit, not a sixth.
func TestSyncSkewedLoadGetsTheWholeLimit(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			clk := newFakeClock()
			gws := newGateways(t, b.client, 6, clk)
			p := syncBucket(t, 100, time.Second, 100, 100*time.Millisecond)
			ctx := context.Background()
			for _, gw := range gws[1:] {
				if d, err := gw.Take(ctx, p, "k", 1); err != nil || !d.Allowed {
					t.Fatalf("first request on another gateway: %+v, %v", d, err)
				}
			}
			const d = 20 * time.Second
			per := []int{1, 0, 0, 0, 0, 0}
			res := syncLoad{policy: p, step: 2 * time.Millisecond, perStep: per, key: func(int, int) string { return "k" }}.run(t, gws, clk, d)
			exact := float64(p.Burst-5) + float64(p.Limit)*d.Seconds()
			frac := float64(res.byGateway[0]) / exact
			t.Logf("one gateway of 6 admitted %d of %.0f: %.1f%% of the limit (limit/N would be %.1f%%)", res.byGateway[0], exact, 100*frac, 100.0/6)
			if frac < 0.95 {
				t.Errorf("admitted %.1f%% of the limit; want at least 95%%", 100*frac)
			}
			if frac > 1 {
				t.Errorf("admitted %.1f%% of the limit: more than an exact limiter", 100*frac)
			}
		})
	}
}

// At 6,000 requests a second over 200 keys, the round trips to Redis are
// at most 2% of the requests: a key costs one round trip when first seen
// and then one sync per interval, all keys of a node in one pipeline.
func TestSyncRoundTripsPerRequest(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			clk := newFakeClock()
			gws := newGateways(t, b.client, 1, clk)
			p := syncBucket(t, 20, time.Second, 20, 100*time.Millisecond) // each key gets 30/s: some denied
			const keys, d = 200, 10 * time.Second
			l := syncLoad{policy: p, step: time.Millisecond, perStep: []int{6},
				key: func(step, i int) string { return fmt.Sprintf("key%d", (step*6+i)%keys) }}
			// 6 requests per step on consecutive keys.
			n := 0
			l.key = func(int, int) string { n++; return fmt.Sprintf("key%d", n%keys) }
			res := l.run(t, gws, clk, d)
			trips := redisstore.SyncRoundTrips(gws[0])
			ratio := float64(trips) / float64(res.requests)
			t.Logf("%d round trips for %d requests (%d admitted): %.2f%%", trips, res.requests, len(res.admitted), 100*ratio)
			if ratio > 0.02 {
				t.Errorf("round trips per request %.2f%%; want at most 2%%", 100*ratio)
			}
			if want := float64(keys) * (float64(p.Burst) + float64(p.Limit)*d.Seconds()); float64(len(res.admitted)) < 0.9*want {
				t.Errorf("admitted %d; an exact limiter admits %.0f", len(res.admitted), want)
			}
		})
	}
}
