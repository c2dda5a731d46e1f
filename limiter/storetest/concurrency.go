package storetest

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
)

// holdID is the id of a hold taken at Base+at: the time in µs, plus bump
// for the holds taken before it in the same microsecond.
func holdID(at time.Duration, bump int64) string {
	return strconv.FormatInt(Base.Add(at).UnixMicro()+bump, 10)
}

// concurrencyCases are the concurrency conformance cases: at most limit
// holds of one key at once, each counting while now < its lease's end.
func concurrencyCases() []conformanceCase {
	const retry = limiter.ConcurrencyRetryAfter
	return []conformanceCase{
		{
			// 2 in flight; a hold lives 10s unrenewed.
			name:   "concurrency/2 in flight, lease 10s",
			policy: limiter.Policy{Algorithm: limiter.Concurrency, Limit: 2, Lease: 10 * s},
			steps: []step{
				{at: 0, cost: 1, want: want{allowed: true, remaining: 1, reset: 10 * s, entry: holdID(0, 0)}},
				// the same microsecond: the next id; a cost of 5 is one request
				{at: 0, cost: 5, want: want{allowed: true, remaining: 0, reset: 10 * s, entry: holdID(0, 1)}},
				// full: retry in 1s; the newest lease ends at 10s
				{at: s, cost: 1, want: want{remaining: 0, retry: retry, reset: 9 * s}},
				{at: s, op: peek, want: want{allowed: true, remaining: 0, reset: 9 * s}},
				// a release frees a place; releasing it again changes nothing
				{at: 2 * s, op: undo, ref: 0, want: want{allowed: true, remaining: 1, reset: 8 * s}},
				{at: 2 * s, op: undo, ref: 0, want: want{allowed: true, remaining: 1, reset: 8 * s}},
				{at: 3 * s, cost: 1, want: want{allowed: true, remaining: 0, reset: 10 * s, entry: holdID(3*s, 0)}},
				// renewed at 5s, step 1's hold lives to 15s; step 6's ends at 13s
				{at: 5 * s, op: renew, ref: 1, want: want{allowed: true, remaining: 0, reset: 10 * s, entry: holdID(0, 1)}},
				{at: 11 * s, cost: 1, want: want{remaining: 0, retry: retry, reset: 4 * s}},
				// at exactly 13s step 6's lease has ended: its place is free
				{at: 13 * s, cost: 1, want: want{allowed: true, remaining: 0, reset: 10 * s, entry: holdID(13*s, 0)}},
				// renewing a hold whose lease ended, with no place left: denied
				{at: 13 * s, op: renew, ref: 6, want: want{remaining: 0, retry: retry, reset: 10 * s}},
				// step 1's lease ended at 15s, but a place is free: taken again
				{at: 16 * s, op: renew, ref: 7, want: want{allowed: true, remaining: 0, reset: 10 * s, entry: holdID(0, 1)}},
				{at: 16 * s, op: undo, ref: 9, want: want{allowed: true, remaining: 1, reset: 10 * s}},
				// the last hold released: nothing is left
				{at: 16 * s, op: undo, ref: 11, want: want{allowed: true, remaining: 2}},
				// a clock step back takes a hold as at any other time
				{at: 15 * s, cost: 1, want: want{allowed: true, remaining: 1, reset: 10 * s, entry: holdID(15*s, 0)}},
			},
		},
		{
			// One place: a hold whose gateway died frees itself with its lease.
			name:   "concurrency/1 in flight, the lease frees a lost hold",
			policy: limiter.Policy{Algorithm: limiter.Concurrency, Limit: 1, Lease: 3 * s},
			steps: []step{
				{at: 0, cost: 1, want: want{allowed: true, remaining: 0, reset: 3 * s, entry: holdID(0, 0)}},
				{at: 3*s - us, cost: 1, want: want{remaining: 0, retry: retry, reset: us}},
				{at: 3 * s, cost: 1, want: want{allowed: true, remaining: 0, reset: 3 * s, entry: holdID(3*s, 0)}},
				// the first hold's release, long after its lease, frees nothing of the second's
				{at: 4 * s, op: undo, ref: 0, want: want{allowed: true, remaining: 0, reset: 2 * s}},
				{at: 4 * s, op: undo, ref: 2, want: want{allowed: true, remaining: 1}},
			},
		},
	}
}

// RunConcurrencyChecks runs checks that hold and charge at once through a
// limiter.Limiter over stores made by newStore: a rate policy and a
// concurrency policy on one request are all or nothing, and two holds of
// one check on one key see each other.
func RunConcurrencyChecks(t *testing.T, newStore Factory) {
	ctx := context.Background()
	setup := func(t *testing.T) (*limiter.Limiter, *limiter.Policy, *limiter.Policy, string) {
		t.Helper()
		clock := NewClock(Base)
		lim, err := limiter.New(newStore(t, clock.Now), limiter.WithLogger(slog.New(slog.DiscardHandler)), limiter.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		rate := &limiter.Policy{Name: "rate", Algorithm: limiter.TokenBucket, Limit: 3, Period: time.Hour}
		conc := &limiter.Policy{Name: "conc", Algorithm: limiter.Concurrency, Limit: 2, Lease: 10 * s}
		for _, p := range []*limiter.Policy{rate, conc} {
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			if err := lim.CheckPolicy(p); err != nil {
				t.Fatal(err)
			}
		}
		return lim, rate, conc, strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	}
	remaining := func(t *testing.T, lim *limiter.Limiter, p *limiter.Policy, key string) int64 {
		t.Helper()
		d, err := lim.Peek(ctx, p, key)
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}

	t.Run("a concurrency denial undoes the rate charge", func(t *testing.T) {
		lim, rate, conc, key := setup(t)
		both := []limiter.Request{{Policy: rate, Key: key, Cost: 1}, {Policy: conc, Key: key, Cost: 1}}
		for i := range 2 {
			if _, ok := lim.AllowAll(ctx, both); !ok {
				t.Fatalf("request %d denied with a place free", i)
			}
		}
		ds, ok := lim.AllowAll(ctx, both)
		if ok || len(ds) != 2 || ds[1].Outcome != limiter.Denied || ds[1].RetryAfter != limiter.ConcurrencyRetryAfter {
			t.Fatalf("third request: ok %v %+v, want denied by conc, retry 1s", ok, ds)
		}
		if ds[0].Receipt.Cost != 0 {
			t.Errorf("the rate charge of the denied request stands: %+v", ds[0])
		}
		if got := remaining(t, lim, rate, key); got != 1 {
			t.Errorf("rate remaining = %d, want 1 (two charged, the denied one undone)", got)
		}
	})
	t.Run("a rate denial releases the hold", func(t *testing.T) {
		lim, rate, conc, key := setup(t)
		if _, ok := lim.AllowAll(ctx, []limiter.Request{{Policy: rate, Key: key, Cost: 3}}); !ok {
			t.Fatal("draining the bucket was denied")
		}
		ds, ok := lim.AllowAll(ctx, []limiter.Request{{Policy: conc, Key: key, Cost: 1}, {Policy: rate, Key: key, Cost: 1}})
		if ok || len(ds) != 2 || ds[0].Receipt.Cost != 0 {
			t.Fatalf("ok %v %+v, want denied by rate, the hold undone", ok, ds)
		}
		if got := remaining(t, lim, conc, key); got != 2 {
			t.Errorf("concurrency remaining = %d, want 2: the denied request's hold was kept", got)
		}
	})
	t.Run("two holds of one check on one key", func(t *testing.T) {
		lim, _, conc, key := setup(t)
		one := &limiter.Policy{Name: "conc", Algorithm: limiter.Concurrency, Limit: 1, Lease: 10 * s}
		ds, ok := lim.AllowAll(ctx, []limiter.Request{{Policy: one, Key: key, Cost: 1}, {Policy: one, Key: key, Cost: 1}})
		if ok || len(ds) != 2 || ds[0].Receipt.Cost != 0 || ds[1].Outcome != limiter.Denied {
			t.Fatalf("ok %v %+v, want the second denied and the first undone", ok, ds)
		}
		if got := remaining(t, lim, conc, key); got != 2 {
			t.Errorf("remaining = %d under the limit-2 policy of the same name, want 2: nothing held", got)
		}
	})
	t.Run("the ticket releases the hold once", func(t *testing.T) {
		lim, rate, conc, key := setup(t)
		reqs := []limiter.Request{{Policy: rate, Key: key, Cost: 1}, {Policy: conc, Key: key, Cost: 1}}
		ds, ok := lim.AllowAll(ctx, reqs)
		if !ok {
			t.Fatalf("denied: %+v", ds)
		}
		tk := lim.Ticket(reqs, ds)
		if tk == nil {
			t.Fatal("no ticket for a request holding a place")
		}
		if _, ok := lim.AllowAll(ctx, reqs[1:]); !ok {
			t.Fatal("a second hold was denied")
		}
		tk.End(200)
		tk.End(200)
		if err := lim.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if got := remaining(t, lim, conc, key); got != 1 {
			t.Errorf("remaining = %d after one of two holds ended (twice), want 1", got)
		}
		if got := remaining(t, lim, rate, key); got != 2 {
			t.Errorf("rate remaining = %d, want 2: no refund_status, nothing refunded", got)
		}
	})
}
