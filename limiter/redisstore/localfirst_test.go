package redisstore_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
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
	gws, _ := newGatewaysWith(t, client, n, clk, redisstore.Options{})
	return gws
}

// newGatewaysWith is newGateways with options, and a counter of each
// gateway's round trips to Redis (a pipeline is one).
func newGatewaysWith(t *testing.T, client func() redis.UniversalClient, n int, clk *fakeClock, o redisstore.Options) ([]*redisstore.Store, []*tripCounter) {
	t.Helper()
	prefix := newPrefix(t)
	gws := make([]*redisstore.Store, n)
	trips := make([]*tripCounter, n)
	for i := range gws {
		c := client()
		trips[i] = &tripCounter{}
		switch c := c.(type) {
		case *redis.ClusterClient:
			c.OnNewNode(func(node *redis.Client) { node.AddHook(trips[i]) })
		case *redis.Client:
			c.AddHook(trips[i])
		}
		o.KeyPrefix, o.Clock, o.GatewayID = prefix, clk.now, fmt.Sprintf("gw%d", i)
		s, err := redisstore.New(c, &o)
		if err != nil {
			t.Fatal(err)
		}
		redisstore.ManualSync(s)
		t.Cleanup(func() { s.Close(); c.Close() })
		gws[i] = s
	}
	return gws, trips
}

// tripCounter counts the round trips of a client: a command, or a pipeline.
type tripCounter struct{ n atomic.Int64 }

func (h *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}

func (h *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
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
	// lims, when set, check through a Limiter per gateway: a decision
	// with an error outcome counts as failed.
	lims []*limiter.Limiter
}

// result is what a load admitted: the time of each admitted request since
// the start, and the counts.
type result struct {
	admitted   []time.Duration
	byGateway  []int
	requests   int
	errs       int
	firstGrant time.Time
}

// run drives l for d. Gateway i syncs at i/N of each interval past its
// start, so the syncs are staggered as real gateways' are.
func (l syncLoad) run(t *testing.T, gws []*redisstore.Store, clk *fakeClock, d time.Duration) result {
	t.Helper()
	var res result
	return l.runInto(t, gws, clk, d, &res)
}

func (l syncLoad) runInto(t *testing.T, gws []*redisstore.Store, clk *fakeClock, d time.Duration, res *result) result {
	t.Helper()
	ctx := context.Background()
	res.byGateway = make([]int, len(gws))
	start := clk.now()
	interval := l.policy.Sync
	for s := 0; time.Duration(s)*l.step < d; s++ {
		if l.before != nil {
			l.before(s)
		}
		elapsed := time.Duration(s) * l.step
		for i, gw := range gws {
			offset := time.Duration(i) * interval / time.Duration(len(gws)) / l.step * l.step
			if elapsed >= offset && (elapsed-offset)%interval == 0 {
				redisstore.FlushSync(gw)
			}
			for j := 0; j < l.perStep[i]; j++ {
				var dec limiter.Decision
				var err error
				if l.lims != nil {
					dec = l.lims[i].Allow(ctx, l.policy, l.key(s, i), 1)
					if dec.Err != nil || dec.Outcome != limiter.Allowed && dec.Outcome != limiter.Denied {
						err = fmt.Errorf("outcome %s: %v", dec.Outcome, dec.Err)
					}
				} else {
					dec, err = gw.Take(ctx, l.policy, l.key(s, i), 1)
				}
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
	return *res
}

// assertFewTrips returns a check, to defer, that the gateways' round
// trips since now were at most 5% of the requests (local-first's point).
func assertFewTrips(t *testing.T, trips []*tripCounter, requests func() int) func() {
	t.Helper()
	before := make([]int64, len(trips))
	for i, c := range trips {
		before[i] = c.n.Load()
	}
	return func() {
		t.Helper()
		var sum int64
		for i, c := range trips {
			sum += c.n.Load() - before[i]
		}
		t.Logf("%d round trips for %d requests", sum, requests())
		if float64(sum) > 0.05*float64(requests()) {
			t.Errorf("%d round trips for %d requests: more than 5%%", sum, requests())
		}
	}
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
// docs/redis.md's bound with Redis up: B + r·W), and not much less.
func TestSyncBalancedLoadStaysWithinBound(t *testing.T) {
	for _, b := range backends() {
		for _, n := range []int{3, 6} {
			t.Run(fmt.Sprintf("%s/%d gateways", b.name, n), func(t *testing.T) {
				clk := newFakeClock()
				gws, trips := newGatewaysWith(t, b.client, n, clk, redisstore.Options{})
				p := syncBucket(t, 100, time.Second, 100, 100*time.Millisecond) // r = 100/s, B = 100
				defer assertFewTrips(t, trips, func() int { return n * 2500 })()
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
			gws, trips := newGatewaysWith(t, b.client, 6, clk, redisstore.Options{})
			p := syncBucket(t, 100, time.Second, 100, 100*time.Millisecond)
			defer assertFewTrips(t, trips, func() int { return 10000 })()
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
			gws, trips := newGatewaysWith(t, b.client, 1, clk, redisstore.Options{})
			p := syncBucket(t, 20, time.Second, 20, 100*time.Millisecond) // each key gets 30/s: some denied
			const keys, d = 200, 10 * time.Second
			// 6 requests per step of 1ms, on the keys in turn.
			n := 0
			l := syncLoad{policy: p, step: time.Millisecond, perStep: []int{6},
				key: func(int, int) string { n++; return fmt.Sprintf("key%d", n%keys) }}
			before := trips[0].n.Load() // the pools' warm-up is not the load's
			res := l.run(t, gws, clk, d)
			count := trips[0].n.Load() - before
			ratio := float64(count) / float64(res.requests)
			t.Logf("%d round trips for %d requests (%d admitted): %.2f%% (the store counts %d of its own)",
				count, res.requests, len(res.admitted), 100*ratio, redisstore.SyncRoundTrips(gws[0]))
			if ratio > 0.02 {
				t.Errorf("round trips per request %.2f%%; want at most 2%%", 100*ratio)
			}
			if want := float64(keys) * (float64(p.Burst) + float64(p.Limit)*d.Seconds()); float64(len(res.admitted)) < 0.9*want {
				t.Errorf("admitted %d; an exact limiter admits %.0f", len(res.admitted), want)
			}
		})
	}
}

// Redis killed mid-run (with its data on disk, appendfsync always): no
// request fails, even under on_store_error: deny; the gateways keep to
// their shares; and one interval after Redis is back, the shared state
// holds exactly what was granted.
func TestSyncRedisKilledMidRun(t *testing.T) {
	srv := redistest.StartServer(t, redistest.WithConfig("appendonly", "yes"), redistest.WithConfig("appendfsync", "always"))
	clk := newFakeClock()
	const n = 3
	// A breaker that never opens: each sync after the restart tries (the
	// breaker's probe runs on the real clock, the test on its own).
	gws, _ := newGatewaysWith(t, func() redis.UniversalClient { return srv.Client(withTimeouts) }, n, clk,
		redisstore.Options{BreakerThreshold: 1 << 30})
	p := mustValidate(t, &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Second,
		Burst: 1000, Sync: 100 * time.Millisecond, OnStoreError: limiter.FailDeny})
	lims := make([]*limiter.Limiter, n)
	for i, gw := range gws {
		var err error
		if lims[i], err = limiter.New(gw, limiter.WithStoreName("redis")); err != nil {
			t.Fatal(err)
		}
	}
	const step = 2 * time.Millisecond
	const killAt, backAt, end = 3000, 3500, 4000 // steps: killed from 6s to 7s, load until 8s
	var outageFrom, outageTo int
	var before sharedState
	l := syncLoad{policy: p, step: step, perStep: []int{1, 1, 1}, key: func(int, int) string { return "k" }, lims: lims}
	var res result
	l.before = func(s int) {
		switch s {
		case killAt:
			for _, gw := range gws {
				redisstore.FlushSync(gw)
			}
			before = readShared(t, srv, p, clk, len(res.admitted))
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			outageFrom = len(res.admitted)
		case backAt:
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			// Redis is back when the gateways reach it (go-redis redials
			// on its own, real, clock).
			for _, gw := range gws {
				waitReachable(t, gw.Client())
			}
			outageTo = len(res.admitted)
		}
	}
	res = l.runInto(t, gws, clk, end*step, &res)
	if res.errs != 0 {
		t.Errorf("%d of %d requests failed", res.errs, res.requests)
	}
	hist := make([]int, 32)
	for _, a := range res.admitted {
		hist[a/(250*time.Millisecond)]++
	}
	t.Log(hist)
	outage := float64(backAt-killAt) * step.Seconds()
	inOutage := outageTo - outageFrom
	share := float64(p.Limit) * (outage + 2*p.Sync.Seconds()) // r·(D + 2I): the shares, and the leases out at the kill
	t.Logf("admitted %d during the %.1fs outage (r·(D+2I) = %.0f), %d in all", inOutage, outage, share, len(res.admitted))
	if float64(inOutage) > share {
		t.Errorf("admitted %d during the outage; the shares allow %.0f", inOutage, share)
	}
	run := clk.now().Sub(res.firstGrant)
	if exact := float64(p.Burst) + float64(p.Limit)*run.Seconds(); float64(len(res.admitted)) > exact {
		t.Errorf("admitted %d in all; an exact limiter admits at most %.0f", len(res.admitted), exact)
	}
	// One interval with no traffic: each gateway syncs once.
	for _, gw := range gws {
		clk.advance(p.Sync / n)
		redisstore.FlushSync(gw)
	}
	// Since the kill, the shared state (tokens and the leases out) moved
	// by the refill less every grant: exact again.
	after := readShared(t, srv, p, clk, len(res.admitted))
	got := after.units - before.units
	want := p.Limit*after.at.Sub(before.at).Microseconds() - int64(after.admitted-before.admitted)*p.PeriodMicros()
	if got != want {
		t.Errorf("the shared state moved by %d since the kill, want %d: off by %.2f units", got, want, float64(got-want)/float64(p.PeriodMicros()))
	}
}

// sharedState is a key's tokens plus the leases out (units × period), at
// a time, with the number admitted until then.
type sharedState struct {
	units    int64
	at       time.Time
	admitted int
}

func readShared(t *testing.T, srv *redistest.Server, p *limiter.Policy, clk *fakeClock, admitted int) sharedState {
	t.Helper()
	c := srv.Client(withTimeouts)
	defer c.Close()
	h, err := c.HGetAll(context.Background(), syncKeyOf(t, c)).Result()
	if err != nil {
		t.Fatal(err)
	}
	var tokens, held int64
	fmt.Sscan(h["k"], &tokens)
	for f, v := range h {
		var seen, lease, win int64
		if strings.HasPrefix(f, "g:") {
			if _, err := fmt.Sscanf(v, "%d %d %d", &seen, &lease, &win); err != nil {
				t.Fatalf("gateway field %q = %q: %v", f, v, err)
			}
			held += lease
		}
	}
	return sharedState{units: tokens + held*p.PeriodMicros(), at: clk.now(), admitted: admitted}
}

// waitReachable waits until c answers PING, at most 10 seconds.
func waitReachable(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis still unreachable 10s after it restarted")
		}
		time.Sleep(10 * time.Millisecond) // polling a reconnect, not a margin
	}
}

func syncKeyOf(t *testing.T, c *redis.Client) string {
	t.Helper()
	keys, err := c.Keys(context.Background(), "*}y").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v, %v; want one", keys, err)
	}
	return keys[0]
}

// The windows under sync: balanced load over the limit on 3 and 6
// gateways never admits more than the limit in one window (fixed_window
// windows start at the key's offset; sliding_window's current window
// alone must keep to the limit).
func TestSyncWindowsKeepTheLimit(t *testing.T) {
	for _, alg := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow} {
		for _, b := range backends() {
			for _, n := range []int{3, 6} {
				t.Run(fmt.Sprintf("%s/%s/%d gateways", alg, b.name, n), func(t *testing.T) {
					clk := newFakeClock()
					gws, trips := newGatewaysWith(t, b.client, n, clk, redisstore.Options{})
					p := mustValidate(t, &limiter.Policy{Name: "w", Algorithm: alg, Limit: 200, Period: time.Second, Sync: 100 * time.Millisecond})
					per := make([]int, n)
					for i := range per {
						per[i] = 1
					}
					const d = 5 * time.Second
					defer assertFewTrips(t, trips, func() int { return n * int(d/(2*time.Millisecond)) })()
					start := clk.now()
					res := syncLoad{policy: p, step: 2 * time.Millisecond, perStep: per, key: func(int, int) string { return "k" }}.run(t, gws, clk, d)
					offset := time.Duration(0)
					if alg == limiter.FixedWindow {
						offset = time.Duration(p.WindowOffset("k")) * time.Microsecond
					}
					counts := map[int64]int{}
					for _, a := range res.admitted {
						at := start.Add(a).UnixMicro() - offset.Microseconds()
						counts[at/p.PeriodMicros()]++
					}
					total := 0
					for w, c := range counts {
						total += c
						if c > int(p.Limit) {
							t.Errorf("window %d: admitted %d, limit %d", w, c, p.Limit)
						}
					}
					frac := float64(total) / (float64(p.Limit) * float64(len(counts)))
					t.Logf("admitted %d in %d windows: %.1f%% of the limit", total, len(counts), 100*frac)
					if frac < 0.8 {
						t.Errorf("admitted %.1f%% of the limit; want at least 80%%", 100*frac)
					}
				})
			}
		}
	}
}

// Gateways on the real clock, with their own sync loops, checked by many
// goroutines through limiter.AllowAll beside an exact policy: no check
// fails, the local-first policy keeps near its limit, and Close stops the
// loops (the race detector watches the rest).
func TestSyncConcurrentGatewaysOnTheRealClock(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			prefix := newPrefix(t)
			p := mustValidate(t, &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 200, Period: time.Second, Sync: 20 * time.Millisecond})
			exact := mustValidate(t, &limiter.Policy{Name: "all", Algorithm: limiter.TokenBucket, Limit: 1 << 20, Period: time.Second})
			const gateways, workers, each = 3, 4, 200
			lims := make([]*limiter.Limiter, gateways)
			for i := range lims {
				c := b.client()
				s, err := redisstore.New(c, &redisstore.Options{KeyPrefix: prefix, GatewayID: fmt.Sprintf("gw%d", i)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close(); c.Close() })
				// A timeout no busy machine reaches: the exact policy's round
				// trips are not what this test is about.
				if lims[i], err = limiter.New(s, limiter.WithTimeout(5*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			var admitted, failed atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for _, lim := range lims {
				for range workers {
					wg.Go(func() {
						for range each {
							ds, ok := lim.AllowAll(context.Background(), []limiter.Request{{Policy: p, Key: "k", Cost: 1}, {Policy: exact, Key: "k", Cost: 1}})
							for _, d := range ds {
								if d.Err != nil {
									failed.Add(1)
								}
							}
							if ok {
								admitted.Add(1)
							}
						}
					})
				}
			}
			wg.Wait()
			elapsed := time.Since(start)
			if failed.Load() != 0 {
				t.Errorf("%d checks failed", failed.Load())
			}
			// B + r·elapsed, and what the gateways may grant while their
			// syncs travel (at most their leases, half the bucket each).
			bound := float64(p.Capacity())*(1+gateways/2.0) + float64(p.Limit)*elapsed.Seconds()
			t.Logf("admitted %d of %d in %s; B + r·t = %.0f", admitted.Load(), gateways*workers*each, elapsed,
				float64(p.Capacity())+float64(p.Limit)*elapsed.Seconds())
			if float64(admitted.Load()) > bound {
				t.Errorf("admitted %d; the bound is %.0f", admitted.Load(), bound)
			}
			if admitted.Load() < p.Capacity()/2 {
				t.Errorf("admitted %d; the bucket alone holds %d", admitted.Load(), p.Capacity())
			}
		})
	}
}

// Local-first and exact policies on one request are all or nothing: the
// one that denies leaves the other uncharged, whichever it is.
func TestSyncAllOrNothingWithExactPolicies(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			clk := newFakeClock()
			gw := newGateways(t, b.client, 1, clk)[0]
			lim, err := limiter.New(gw)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			local := mustValidate(t, &limiter.Policy{Name: "local", Algorithm: limiter.TokenBucket, Limit: 3, Period: time.Hour, Sync: time.Second})
			exact := mustValidate(t, &limiter.Policy{Name: "exact", Algorithm: limiter.TokenBucket, Limit: 2, Period: time.Hour})
			peek := func(p *limiter.Policy) int64 {
				t.Helper()
				d, err := lim.Peek(ctx, p, "k")
				if err != nil {
					t.Fatal(err)
				}
				return d.Remaining
			}
			both := []limiter.Request{{Policy: local, Key: "k", Cost: 1}, {Policy: exact, Key: "k", Cost: 1}}
			for i, want := range []bool{true, true, false} {
				if _, ok := lim.AllowAll(ctx, both); ok != want {
					t.Fatalf("request %d: allowed %v, want %v", i, ok, want)
				}
				redisstore.FlushSync(gw)
			}
			// The exact policy denied the third: the local one was not charged.
			localLeft := peek(local)
			if _, ok := lim.AllowAll(ctx, []limiter.Request{{Policy: local, Key: "k", Cost: 1}}); !ok {
				t.Fatalf("the local policy denied with %d left", localLeft)
			}
			if _, ok := lim.AllowAll(ctx, []limiter.Request{{Policy: local, Key: "k", Cost: 1}}); ok {
				t.Fatal("the local policy granted a fourth unit of 3")
			}
			// Now the local one denies first: the exact one is not charged.
			exactLeft := peek(exact)
			refund, err := lim.Refund(ctx, exact, "k", 2)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := lim.AllowAll(ctx, both); ok {
				t.Fatal("allowed with the local policy spent")
			}
			if got := peek(exact); got != refund.Remaining {
				t.Errorf("exact policy left %d after a denial by the local one, want %d (it was %d)", got, refund.Remaining, exactLeft)
			}
		})
	}
}

// A Cluster master killed under local-first load: no check fails (the
// gateway decides from its leases and shares meanwhile), and once the
// replica is promoted the killed master's keys sync again, to it.
func TestSyncFollowsClusterFailover(t *testing.T) {
	const nodeTimeout = time.Second
	c := redistest.StartCluster(t, redistest.WithReplicas(1),
		redistest.WithConfig("cluster-node-timeout", fmt.Sprint(nodeTimeout.Milliseconds())),
		redistest.WithConfig("cluster-require-full-coverage", "no"))
	prefix := newPrefix(t)
	store := open(t, redisstore.ClientOptions{Cluster: c.Addrs(), Timeout: 250 * time.Millisecond}, prefix)
	lim, err := limiter.New(store, limiter.WithTimeout(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p := mustValidate(t, &limiter.Policy{Name: "fo", Algorithm: limiter.TokenBucket, Limit: 1_000_000, Period: time.Second,
		Sync: 50 * time.Millisecond, OnStoreError: limiter.FailDeny})
	var victimKeys, keys []string
	for i := range 30 {
		key := fmt.Sprintf("key%d", i)
		keys = append(keys, key)
		if redisSlot(store.Keys(p, key)[0])*3/16384 == 0 {
			victimKeys = append(victimKeys, key)
		}
	}
	var failed, checks atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			d := lim.Allow(context.Background(), p, keys[i%len(keys)], 1)
			checks.Add(1)
			if d.Err != nil || !d.Allowed {
				failed.Add(1)
			}
			time.Sleep(time.Millisecond) // a steady load, not a margin
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	time.Sleep(500 * time.Millisecond) // the load runs before the kill
	victim, replica := c.Nodes()[0], c.Replicas()[0]
	killedAt := time.Now()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for !slotZeroOwnedBy(c.Nodes()[1:], replica.Addr()) {
		if time.Now().After(deadline) {
			t.Fatal("the replica was not promoted within 15s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	promotedAt := time.Now()
	// The killed master's keys sync to the promoted replica: this
	// gateway's record on them is newer than the promotion.
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer rc.Close()
	for _, key := range victimKeys {
		for {
			h, err := rc.HGetAll(context.Background(), store.Keys(p, key)[0]).Result()
			if err == nil && syncedSince(h, promotedAt) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("key %s never synced to the promoted replica: %v, %v", key, h, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	close(stop)
	<-done
	t.Logf("%d checks, %d failed or denied; replica promoted %s after the kill, the keys synced to it since",
		checks.Load(), failed.Load(), promotedAt.Sub(killedAt).Round(time.Millisecond))
	if failed.Load() != 0 {
		t.Errorf("%d of %d checks failed or were denied", failed.Load(), checks.Load())
	}
}

// syncedSince reports whether a gateway's record in a sync hash is newer
// than at.
func syncedSince(h map[string]string, at time.Time) bool {
	for f, v := range h {
		var seen, lease, win int64
		if strings.HasPrefix(f, "g:") {
			if _, err := fmt.Sscanf(v, "%d %d %d", &seen, &lease, &win); err == nil && seen >= at.UnixMicro() {
				return true
			}
		}
	}
	return false
}

// Local entries are dropped once idle (memory stays bounded by the keys in
// use), and a key first seen while Redis is down is decided from the share
// on_store_error: local would give, without an error.
func TestSyncIdleKeysDroppedAndNewKeysInOutage(t *testing.T) {
	srv := redistest.StartServer(t)
	clk := newFakeClock()
	gw := newGateways(t, func() redis.UniversalClient { return srv.Client(withTimeouts) }, 1, clk)[0]
	p := syncBucket(t, 10, time.Second, 10, 100*time.Millisecond)
	ctx := context.Background()
	for i := range 50 {
		if d, err := gw.Take(ctx, p, fmt.Sprint("k", i), 1); err != nil || !d.Allowed {
			t.Fatalf("key %d: %+v, %v", i, d, err)
		}
	}
	redisstore.FlushSync(gw)
	if left := redisstore.SweepSync(gw); left != 50 {
		t.Fatalf("%d entries after a sweep of keys just used, want 50", left)
	}
	clk.advance(time.Second)
	if left := redisstore.SweepSync(gw); left != 0 {
		t.Errorf("%d entries left after ten idle intervals, want 0", left)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	granted := 0
	for range 12 {
		d, err := gw.Take(ctx, p, "new", 1)
		if err != nil || d.Err != nil {
			t.Fatalf("a new key during the outage: %+v, %v", d, err)
		}
		if d.Allowed {
			granted++
		}
	}
	if granted != int(p.Burst) { // one gateway seen: the whole burst is its share
		t.Errorf("granted %d on a new key during the outage, want the share %d", granted, p.Burst)
	}
}
