package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
)

// Factory returns a fresh store that reads the time from clock.
type Factory func(t *testing.T, clock func() time.Time) limiter.Store

// Options adjusts a Run.
type Options struct {
	// AfterStep, when set, is called after every step, e.g. to check the
	// TTLs of what the store wrote. wrote tells whether the step changed the
	// state (a granted take, an undo, a refund).
	AfterStep func(t *testing.T, p *limiter.Policy, key string, d limiter.Decision, wrote bool)
}

// Base is the instant conformance cases start from (a multiple of 10 s).
var Base = time.UnixMicro(1_700_000_000_000_000)

const (
	us = time.Microsecond
	ms = time.Millisecond
	s  = time.Second
)

type op int

const (
	take op = iota
	peek
	undo   // undo the receipt of step ref
	refund // give back cost units (Undo with a bare receipt)
	renew  // renew the concurrency hold of step ref's receipt (limiter.Renewer)
)

type step struct {
	at   time.Duration // since the case's start
	op   op
	cost int64
	ref  int // undo: index of the step whose receipt is given back
	want want
}

type want struct {
	allowed   bool
	remaining int64
	retry     time.Duration
	reset     time.Duration
	delay     time.Duration
	exceeds   bool
	entry     string // sliding_log receipt
}

type conformanceCase struct {
	name   string
	policy limiter.Policy
	steps  []step
}

// Cases are the expected decisions, worked out by hand from the algorithm
// definitions (limiter package documentation); the arithmetic is beside each.
//
// A Redis key expires on the server's real clock, not on the injected one, so
// no step depends on state whose TTL is only a few milliseconds of real time.
func cases() []conformanceCase {
	return []conformanceCase{
		{
			// 10/s, capacity 10: a token refills every 100ms.
			name:   "token_bucket/10 per second",
			policy: limiter.Policy{Algorithm: limiter.TokenBucket, Limit: 10, Period: s},
			steps: []step{
				{at: 0, cost: 1, want: want{allowed: true, remaining: 9, reset: 100 * ms}},
				{at: 0, cost: 9, want: want{allowed: true, remaining: 0, reset: s}},
				{at: 0, cost: 1, want: want{remaining: 0, retry: 100 * ms, reset: s}},
				// half a token back: 50ms to the next one, 950ms to full
				{at: 50 * ms, cost: 1, want: want{remaining: 0, retry: 50 * ms, reset: 950 * ms}},
				{at: 100*ms - us, cost: 1, want: want{remaining: 0, retry: us, reset: 900*ms + us}},
				// boundary: exactly one token is there at 100ms
				{at: 100 * ms, cost: 1, want: want{allowed: true, remaining: 0, reset: s}},
				{at: 100 * ms, cost: 11, want: want{exceeds: true, remaining: 0, reset: s}},
				{at: 100 * ms, op: refund, cost: 5, want: want{allowed: true, remaining: 5, reset: 500 * ms}},
				{at: 100 * ms, op: refund, cost: 100, want: want{allowed: true, remaining: 10}},
				{at: 100 * ms, op: peek, want: want{allowed: true, remaining: 10}},
			},
		},
		{
			// api tier: 1000/min, burst 150; a token every 60ms, full in 150·60ms = 9s.
			name:   "token_bucket/weighted 1000 per minute burst 150",
			policy: limiter.Policy{Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150},
			steps: []step{
				{at: 0, cost: 150, want: want{allowed: true, remaining: 0, reset: 9 * s}},
				{at: 0, cost: 1, want: want{remaining: 0, retry: 60 * ms, reset: 9 * s}},
				{at: 60 * ms, cost: 1, want: want{allowed: true, remaining: 0, reset: 9 * s}},
				{at: 60 * ms, cost: 2, want: want{remaining: 0, retry: 120 * ms, reset: 9 * s}},
				{at: 180 * ms, cost: 2, want: want{allowed: true, remaining: 0, reset: 9 * s}},
				// 30 tokens after 1.8s; a cost of 40 waits for 10 more: 600ms
				{at: 1980 * ms, cost: 40, want: want{remaining: 30, retry: 600 * ms, reset: 7200 * ms}},
				{at: 1980 * ms, cost: 30, want: want{allowed: true, remaining: 0, reset: 9 * s}},
				// a step back of the clock changes nothing: time is clamped
				{at: 1000 * ms, op: peek, want: want{allowed: true, remaining: 0, reset: 9 * s}},
			},
		},
		{
			// 3/s: a token every 333333.3µs, so every wait rounds up to whole µs.
			name:   "token_bucket/3 per second rounds waits up",
			policy: limiter.Policy{Algorithm: limiter.TokenBucket, Limit: 3, Period: s},
			steps: []step{
				{at: 0, cost: 3, want: want{allowed: true, remaining: 0, reset: s}},
				{at: 0, cost: 1, want: want{remaining: 0, retry: 333334 * us, reset: s}},
				// 333333µs·3 = 999999 of the 1000000 a token needs
				{at: 333333 * us, cost: 1, want: want{remaining: 0, retry: us, reset: 666667 * us}},
				// 1000002 − 1000000 = 2 left over: ceil((3000000−2)/3) = 1s to full
				{at: 333334 * us, cost: 1, want: want{allowed: true, remaining: 0, reset: s}},
			},
		},
		{
			name:   "leaky_bucket/3 per second burst 1 rounds waits up",
			policy: limiter.Policy{Algorithm: limiter.LeakyBucket, Limit: 3, Period: s, Burst: 1},
			steps: []step{
				{at: 0, cost: 1, want: want{allowed: true, remaining: 0, reset: 333334 * us}},
				{at: 0, cost: 1, want: want{remaining: 0, retry: 333334 * us, reset: 333334 * us}},
				// 1 of 1000000 still queued
				{at: 333333 * us, cost: 1, want: want{remaining: 0, retry: us, reset: us}},
				{at: 333334 * us, cost: 1, want: want{allowed: true, remaining: 0, reset: 333334 * us}},
			},
		},
		{
			// 10/s, burst 3: T = 100ms; each admitted unit waits for the queue ahead.
			name:   "leaky_bucket/10 per second burst 3",
			policy: limiter.Policy{Algorithm: limiter.LeakyBucket, Limit: 10, Period: s, Burst: 3},
			steps: []step{
				{at: 0, cost: 1, want: want{allowed: true, remaining: 2, reset: 100 * ms}},
				{at: 0, cost: 1, want: want{allowed: true, remaining: 1, delay: 100 * ms, reset: 200 * ms}},
				{at: 0, cost: 1, want: want{allowed: true, remaining: 0, delay: 200 * ms, reset: 300 * ms}},
				// queue 3T + T > 3T: denied until T has drained
				{at: 0, cost: 1, want: want{remaining: 0, retry: 100 * ms, reset: 300 * ms}},
				{at: 50 * ms, cost: 1, want: want{remaining: 0, retry: 50 * ms, reset: 250 * ms}},
				{at: 100 * ms, cost: 1, want: want{allowed: true, remaining: 0, delay: 200 * ms, reset: 300 * ms}},
				{at: 100 * ms, cost: 4, want: want{exceeds: true, remaining: 0, reset: 300 * ms}},
				{at: s, op: peek, want: want{allowed: true, remaining: 3}},
				{at: s, cost: 2, want: want{allowed: true, remaining: 1, reset: 200 * ms}},
				// 2 queued + 2 > 3: one unit (100ms) must drain first
				{at: s, cost: 2, want: want{remaining: 1, retry: 100 * ms, reset: 200 * ms}},
				{at: s, op: undo, ref: 8, want: want{allowed: true, remaining: 3}},
			},
		},
		{
			// 3 units in any 10s; an entry made at t counts while now < t+10s.
			name:   "sliding_log/3 per 10s",
			policy: limiter.Policy{Algorithm: limiter.SlidingLog, Limit: 3, Period: 10 * s},
			steps: []step{
				{at: 0, cost: 1, want: want{allowed: true, remaining: 2, reset: 10 * s, entry: "1:1"}},
				{at: s, cost: 2, want: want{allowed: true, remaining: 0, reset: 10 * s, entry: "2:2"}},
				// one unit must leave: the entry of t=0, at 10s
				{at: 2 * s, cost: 1, want: want{remaining: 0, retry: 8 * s, reset: 9 * s}},
				{at: 10*s - us, cost: 1, want: want{remaining: 0, retry: us, reset: s + us}},
				// boundary: at exactly 10s the first entry is out of the window
				{at: 10 * s, cost: 1, want: want{allowed: true, remaining: 0, reset: 10 * s, entry: "3:1"}},
				// two units must leave: the entry of t=1s (cost 2), at 11s
				{at: 10 * s, cost: 2, want: want{remaining: 0, retry: s, reset: 10 * s}},
				{at: 10 * s, cost: 4, want: want{exceeds: true, remaining: 0, reset: 10 * s}},
				{at: 10 * s, op: undo, ref: 4, want: want{allowed: true, remaining: 1, reset: s}},
				// the whole log has expired: the quota is full and numbering restarts
				{at: 30 * s, cost: 3, want: want{allowed: true, remaining: 0, reset: 10 * s, entry: "1:3"}},
			},
		},
		{
			name:   "sliding_log/retry spans several entries",
			policy: limiter.Policy{Algorithm: limiter.SlidingLog, Limit: 3, Period: 10 * s},
			steps: []step{
				{at: 0, cost: 1, want: want{allowed: true, remaining: 2, reset: 10 * s, entry: "1:1"}},
				{at: s, cost: 1, want: want{allowed: true, remaining: 1, reset: 10 * s, entry: "2:1"}},
				{at: 2 * s, cost: 1, want: want{allowed: true, remaining: 0, reset: 10 * s, entry: "3:1"}},
				// cost 2 needs the entries of 0s and 1s gone: at 11s
				{at: 3 * s, cost: 2, want: want{remaining: 0, retry: 8 * s, reset: 9 * s}},
				{at: 11 * s, cost: 2, want: want{allowed: true, remaining: 0, reset: 10 * s, entry: "4:2"}},
			},
		},
		{
			// limit 10 per 10s window; windows start at multiples of 10s.
			name:   "sliding_window/10 per 10s",
			policy: limiter.Policy{Algorithm: limiter.SlidingWindow, Limit: 10, Period: 10 * s},
			steps: []step{
				{at: 0, cost: 4, want: want{allowed: true, remaining: 6, reset: 20 * s}},
				{at: 5 * s, cost: 6, want: want{allowed: true, remaining: 0, reset: 15 * s}},
				// cur 10 + 1 > 10: next window, where 10·(10s−e)/10s + 1 ≤ 10 at e = 1s
				{at: 5 * s, cost: 1, want: want{remaining: 0, retry: 6 * s, reset: 15 * s}},
				{at: 10 * s, cost: 1, want: want{remaining: 0, retry: s, reset: 10 * s}},
				// e = 1s: prev weighs 10·0.9 = 9
				{at: 11 * s, cost: 1, want: want{allowed: true, remaining: 0, reset: 19 * s}},
				// e = 3.5s: 10·0.65 + 1 = 7.5 used; 3 more fit when 10·(1−e/10s) ≤ 6, e = 4s
				{at: 13500 * ms, op: peek, want: want{allowed: true, remaining: 2, reset: 16500 * ms}},
				{at: 13500 * ms, cost: 3, want: want{remaining: 2, retry: 500 * ms, reset: 16500 * ms}},
				{at: 14 * s, cost: 3, want: want{allowed: true, remaining: 0, reset: 16 * s}},
				{at: 14 * s, op: undo, ref: 7, want: want{allowed: true, remaining: 3, reset: 16 * s}},
				{at: 14 * s, cost: 11, want: want{exceeds: true, remaining: 3, reset: 16 * s}},
				// two windows later nothing is left
				{at: 30 * s, cost: 10, want: want{allowed: true, remaining: 0, reset: 20 * s}},
			},
		},
		{
			// prev 7 decays by 7 per 10s: 1 unit fits when 7·(10s−e) ≤ 6·10s,
			// e ≥ 10s − floor(60s/7) = 1428572µs (at 1428571µs, 7·8571429 > 60000000).
			name:   "sliding_window/7 per 10s rounds waits up",
			policy: limiter.Policy{Algorithm: limiter.SlidingWindow, Limit: 7, Period: 10 * s},
			steps: []step{
				{at: 0, cost: 7, want: want{allowed: true, remaining: 0, reset: 20 * s}},
				{at: 10 * s, cost: 1, want: want{remaining: 0, retry: 1428572 * us, reset: 10 * s}},
				{at: 10*s + 1428571*us, cost: 1, want: want{remaining: 0, retry: us, reset: 8571429 * us}},
				{at: 10*s + 1428572*us, cost: 1, want: want{allowed: true, remaining: 0, reset: 18571428 * us}},
			},
		},
		{
			// 3 per 10s window; the case starts at this key's window start.
			name:   "fixed_window/3 per 10s and the boundary burst",
			policy: limiter.Policy{Algorithm: limiter.FixedWindow, Limit: 3, Period: 10 * s},
			steps: []step{
				{at: 0, cost: 2, want: want{allowed: true, remaining: 1, reset: 10 * s}},
				{at: 9 * s, cost: 1, want: want{allowed: true, remaining: 0, reset: s}},
				{at: 10*s - us, cost: 1, want: want{remaining: 0, retry: us, reset: us}},
				// the boundary burst: a new window 1µs later takes a full limit again,
				// so 2×limit pass within 2µs. That is fixed_window's definition.
				{at: 10 * s, cost: 3, want: want{allowed: true, remaining: 0, reset: 10 * s}},
				{at: 10 * s, cost: 4, want: want{exceeds: true, remaining: 0, reset: 10 * s}},
				// undoing a charge of the previous window changes nothing
				{at: 10 * s, op: undo, ref: 1, want: want{allowed: true, remaining: 0, reset: 10 * s}},
				{at: 10 * s, op: undo, ref: 3, want: want{allowed: true, remaining: 3}},
			},
		},
	}
}

// Run runs the conformance suite against stores made by newStore.
func Run(t *testing.T, newStore Factory, opts Options) {
	for _, tc := range append(cases(), concurrencyCases()...) {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(Base)
			store := newStore(t, clock.Now)
			p := tc.policy
			p.Name = "conf"
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			key := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
			start := Base
			if p.Algorithm == limiter.FixedWindow {
				start = WindowStart(&p, key, Base)
			}
			ctx := context.Background()
			receipts := make([]limiter.Receipt, len(tc.steps))
			for i, st := range tc.steps {
				clock.Set(start.Add(st.at))
				var (
					d   limiter.Decision
					err error
				)
				switch st.op {
				case take:
					d, err = store.Take(ctx, &p, key, st.cost)
				case peek:
					d, err = store.Take(ctx, &p, key, 0)
				case undo:
					d, err = store.Undo(ctx, &p, key, receipts[st.ref])
				case refund:
					d, err = store.Undo(ctx, &p, key, limiter.Receipt{Cost: st.cost})
				case renew:
					r, ok := store.(limiter.Renewer)
					if !ok {
						t.Fatalf("step %d: the store keeps no concurrency holds (limiter.Renewer)", i)
					}
					d, err = r.Renew(ctx, &p, key, receipts[st.ref])
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				receipts[i] = d.Receipt
				if got, want := summarize(d), st.want; got != want {
					t.Errorf("step %d (at %s, cost %d):\n got %+v\nwant %+v", i, st.at, st.cost, got, want)
				}
				if d.Limit != p.Capacity() {
					t.Errorf("step %d: Limit = %d, want %d", i, d.Limit, p.Capacity())
				}
				wantCost := st.cost
				if p.Algorithm == limiter.Concurrency {
					wantCost = 1 // a hold is one request
				}
				if d.Allowed && st.op == take && d.Receipt.Cost != wantCost {
					t.Errorf("step %d: receipt cost = %d, want %d", i, d.Receipt.Cost, wantCost)
				}
				if opts.AfterStep != nil {
					wrote := st.op == undo || st.op == refund || (st.op == take || st.op == renew) && d.Allowed
					opts.AfterStep(t, &p, key, d, wrote)
				}
			}
		})
	}
}

func summarize(d limiter.Decision) want {
	return want{
		allowed:   d.Allowed,
		remaining: d.Remaining,
		retry:     d.RetryAfter,
		reset:     d.ResetAfter,
		delay:     d.Delay,
		exceeds:   d.ExceedsCapacity,
		entry:     d.Receipt.Entry,
	}
}

// WindowStart returns the start of the first fixed_window window of key that
// begins at or after t.
func WindowStart(p *limiter.Policy, key string, t time.Time) time.Time {
	per := p.PeriodMicros()
	off := p.WindowOffset(key)
	now := t.UnixMicro()
	k := (now - off + per - 1) / per
	return time.UnixMicro(off + k*per)
}

// String makes want readable in failure messages.
func (w want) String() string {
	return fmt.Sprintf("{allowed:%v remaining:%d retry:%s reset:%s delay:%s exceeds:%v entry:%q}",
		w.allowed, w.remaining, w.retry, w.reset, w.delay, w.exceeds, w.entry)
}
