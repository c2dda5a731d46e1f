package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
)

// RunChecks runs checks of several requests through a limiter.Limiter over
// stores made by newStore (Limiter.AllowAll: one script for Redis, policy
// by policy for the memory store). Requests of one check that name the same
// key see each other's charges in order, and a later denial undoes them
// all: two requests of 100 on a bucket of 150 are one allowed and one
// denied, and the bucket keeps its 150.
func RunChecks(t *testing.T, newStore Factory) {
	for _, alg := range limiter.Algorithms() {
		for _, tc := range sameKeyCases(alg) {
			t.Run(string(alg)+"/"+tc.name, func(t *testing.T) {
				runCheckCase(t, newStore, alg, tc)
			})
		}
	}
}

// A check's request: who is "p" (the policy), "s" (a shadow policy of the
// same name and algorithm, so the same state) or "o" (another policy), all
// on one key.
type checkReq struct {
	who  string
	cost int64
}

type checkWant struct {
	outcome   limiter.Outcome
	remaining int64
	retry     time.Duration
	reset     time.Duration
	delay     time.Duration
	exceeds   bool
	charged   int64 // the receipt's cost: 0 when nothing stays charged
}

type checkCase struct {
	name  string
	reqs  []checkReq
	ok    bool
	want  []checkWant // the decisions AllowAll returns
	after checkWant   // a peek at p's state afterwards (remaining, reset, delay)
}

func granted(remaining int64, reset time.Duration, charged int64) checkWant {
	return checkWant{outcome: limiter.Allowed, remaining: remaining, reset: reset, charged: charged}
}

func deniedAt(remaining int64, retry, reset time.Duration) checkWant {
	return checkWant{outcome: limiter.Denied, remaining: remaining, retry: retry, reset: reset}
}

func (w checkWant) shadow() checkWant { w.outcome = limiter.ShadowDenied; return w }

func (w checkWant) waiting(delay time.Duration) checkWant { w.delay = delay; return w }

// undone is a grant given back when a later request denied: it reports the
// full state that stays (and the delay its take had).
func undone(delay time.Duration) checkWant {
	return checkWant{outcome: limiter.Allowed, remaining: 150, delay: delay}
}

func state(remaining int64, reset time.Duration) checkWant {
	return checkWant{outcome: limiter.Allowed, remaining: remaining, reset: reset}
}

// The other policy: token_bucket, 10 an hour (a token every 6 minutes).
var (
	otherUndone  = checkWant{outcome: limiter.Allowed, remaining: 10}
	otherExceeds = checkWant{outcome: limiter.Denied, remaining: 10, exceeds: true}
)

// sameKeyCases are worked out by hand for a policy of capacity 150 that
// gives back 1 unit a second (150 per 150s), all requests at one instant
// (a window's start for the windows).
func sameKeyCases(alg limiter.Algorithm) []checkCase {
	type figures struct {
		// the reset after charges of 50, 100 and 140
		reset50, reset100, reset140 time.Duration
		// a denial of 100 after 100 charged; of 60 after 120
		retry100, resetDenied100, retry60, resetDenied60 time.Duration
		// leaky_bucket: the wait of a request with 50, 100 or 140 queued
		delay50, delay100, delay140 time.Duration
		// the wait a granted 60 had after 60 queued
		delay60 time.Duration
	}
	var f figures
	switch alg {
	case limiter.TokenBucket:
		// full again in (150−tokens)·1s; 100 more after 50 left: 50s
		f = figures{reset50: 50 * s, reset100: 100 * s, reset140: 140 * s,
			retry100: 50 * s, resetDenied100: 100 * s, retry60: 30 * s, resetDenied60: 120 * s}
	case limiter.LeakyBucket:
		// the queue drains 1 a second; a request waits for the queue ahead
		f = figures{reset50: 50 * s, reset100: 100 * s, reset140: 140 * s,
			retry100: 50 * s, resetDenied100: 100 * s, retry60: 30 * s, resetDenied60: 120 * s,
			delay50: 50 * s, delay100: 100 * s, delay140: 140 * s, delay60: 60 * s}
	case limiter.SlidingLog:
		// every entry made now leaves the window in 150s
		f = figures{reset50: 150 * s, reset100: 150 * s, reset140: 150 * s,
			retry100: 150 * s, resetDenied100: 150 * s, retry60: 150 * s, resetDenied60: 150 * s}
	case limiter.SlidingWindow:
		// cur counts for this window and the next: 300s. 100 after 100:
		// next window, where 100·(150s−e)/150s + 100 ≤ 150 at e = 75s: 225s.
		// 60 after 120: 120·(150s−e)/150s + 60 ≤ 150 at e = 37.5s: 187.5s.
		f = figures{reset50: 300 * s, reset100: 300 * s, reset140: 300 * s,
			retry100: 225 * s, resetDenied100: 300 * s, retry60: 187500 * ms, resetDenied60: 300 * s}
	case limiter.FixedWindow:
		// everything waits for the next window: 150s
		f = figures{reset50: 150 * s, reset100: 150 * s, reset140: 150 * s,
			retry100: 150 * s, resetDenied100: 150 * s, retry60: 150 * s, resetDenied60: 150 * s}
	}
	return []checkCase{
		{
			name:  "100 then 100: the second denied, the first undone",
			reqs:  []checkReq{{"p", 100}, {"p", 100}},
			want:  []checkWant{undone(0), deniedAt(50, f.retry100, f.resetDenied100)},
			after: state(150, 0),
		},
		{
			name:  "50 then 50: both charged",
			reqs:  []checkReq{{"p", 50}, {"p", 50}},
			ok:    true,
			want:  []checkWant{granted(100, f.reset50, 50), granted(50, f.reset100, 50).waiting(f.delay50)},
			after: state(50, f.reset100).waiting(f.delay100),
		},
		{
			name: "a shadow denial between denies nothing",
			reqs: []checkReq{{"p", 100}, {"s", 100}, {"p", 40}},
			ok:   true,
			want: []checkWant{
				granted(50, f.reset100, 100),
				deniedAt(50, f.retry100, f.resetDenied100).shadow(),
				granted(10, f.reset140, 40).waiting(f.delay100),
			},
			after: state(10, f.reset140).waiting(f.delay140),
		},
		{
			name:  "a third denied after a shadow grant: all three undone",
			reqs:  []checkReq{{"p", 60}, {"s", 60}, {"p", 60}},
			want:  []checkWant{undone(0), undone(f.delay60), deniedAt(30, f.retry60, f.resetDenied60)},
			after: state(150, 0),
		},
		{
			name:  "another policy denies after two grants",
			reqs:  []checkReq{{"p", 50}, {"p", 50}, {"o", 11}},
			want:  []checkWant{undone(0), undone(f.delay50), otherExceeds},
			after: state(150, 0),
		},
		{
			name:  "another policy between, the same key denies",
			reqs:  []checkReq{{"p", 100}, {"o", 1}, {"p", 100}},
			want:  []checkWant{undone(0), otherUndone, deniedAt(50, f.retry100, f.resetDenied100)},
			after: state(150, 0),
		},
	}
}

func runCheckCase(t *testing.T, newStore Factory, alg limiter.Algorithm, tc checkCase) {
	clock := NewClock(Base)
	store := newStore(t, clock.Now)
	lim, err := limiter.New(store, limiter.WithLogger(slog.New(slog.DiscardHandler)), limiter.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p := &limiter.Policy{Name: "same", Algorithm: alg, Limit: 150, Period: 150 * s}
	shadow := *p
	shadow.Mode = limiter.Shadow
	other := &limiter.Policy{Name: "other", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Hour}
	for _, q := range []*limiter.Policy{p, &shadow, other} {
		if err := q.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	key := strings.NewReplacer("/", "-", " ", "-", ":", "-").Replace(t.Name())
	clock.Set(checkStart(p, key))

	reqs := make([]limiter.Request, len(tc.reqs))
	for i, r := range tc.reqs {
		pol := map[string]*limiter.Policy{"p": p, "s": &shadow, "o": other}[r.who]
		reqs[i] = limiter.Request{Policy: pol, Key: key, Cost: r.cost}
	}
	ctx := context.Background()
	ds, ok := lim.AllowAll(ctx, reqs)
	if ok != tc.ok || len(ds) != len(tc.want) {
		t.Fatalf("AllowAll = %v with %d decisions, want %v with %d:\n%+v", ok, len(ds), tc.ok, len(tc.want), ds)
	}
	for i, d := range ds {
		if d.Err != nil {
			t.Fatalf("decision %d: %v", i, d.Err)
		}
		if got, want := summarizeCheck(d), tc.want[i]; got != want {
			t.Errorf("decision %d (%s %d):\n got %+v\nwant %+v", i, tc.reqs[i].who, tc.reqs[i].cost, got, want)
		}
	}
	peek := func(q *limiter.Policy) checkWant {
		t.Helper()
		d, err := lim.Peek(ctx, q, key)
		if err != nil {
			t.Fatal(err)
		}
		w := summarizeCheck(d)
		w.charged = 0
		return w
	}
	if got := peek(p); got != tc.after {
		t.Errorf("afterwards:\n got %+v\nwant %+v", got, tc.after)
	}
	if got := peek(other); got.remaining != 10 {
		t.Errorf("the other policy afterwards: %+v, want 10 left", got)
	}
}

// checkStart is where a case starts: a window's start for the windows.
func checkStart(p *limiter.Policy, key string) time.Time {
	switch p.Algorithm {
	case limiter.FixedWindow:
		return WindowStart(p, key, Base)
	case limiter.SlidingWindow:
		per := p.PeriodMicros()
		return time.UnixMicro((Base.UnixMicro() + per - 1) / per * per)
	}
	return Base
}

func summarizeCheck(d limiter.Decision) checkWant {
	return checkWant{
		outcome:   d.Outcome,
		remaining: d.Remaining,
		retry:     d.RetryAfter,
		reset:     d.ResetAfter,
		delay:     d.Delay,
		exceeds:   d.ExceedsCapacity,
		charged:   d.Receipt.Cost,
	}
}

// String makes checkWant readable in failure messages.
func (w checkWant) String() string {
	return fmt.Sprintf("{%s remaining:%d retry:%s reset:%s delay:%s exceeds:%v charged:%d}",
		w.outcome, w.remaining, w.retry, w.reset, w.delay, w.exceeds, w.charged)
}
