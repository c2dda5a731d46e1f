package limiter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/storetest"
)

// flaky is a memstore that answers as a store out of process would (not
// Local: tickets end from a goroutine) and fails every call while down, as
// a Redis outage does; failed says when a call failed.
type flaky struct {
	*memstore.Store
	down   atomic.Bool
	failed chan struct{}
}

func newFlaky(clock func() time.Time) *flaky {
	return &flaky{Store: memstore.New(&memstore.Options{Clock: clock}), failed: make(chan struct{}, 64)}
}

func (f *flaky) Local() bool { return false }

func (f *flaky) fail() error {
	select {
	case f.failed <- struct{}{}:
	default:
	}
	return errDown
}

func (f *flaky) Take(ctx context.Context, p *limiter.Policy, key string, cost int64) (limiter.Decision, error) {
	if f.down.Load() {
		return limiter.Decision{}, f.fail()
	}
	return f.Store.Take(ctx, p, key, cost)
}

func (f *flaky) Undo(ctx context.Context, p *limiter.Policy, key string, r limiter.Receipt) (limiter.Decision, error) {
	if f.down.Load() {
		return limiter.Decision{}, f.fail()
	}
	return f.Store.Undo(ctx, p, key, r)
}

func (f *flaky) Renew(ctx context.Context, p *limiter.Policy, key string, r limiter.Receipt) (limiter.Decision, error) {
	if f.down.Load() {
		return limiter.Decision{}, f.fail()
	}
	return f.Store.Renew(ctx, p, key, r)
}

func concPolicy(t *testing.T, limit int64, lease time.Duration) *limiter.Policy {
	t.Helper()
	return policy(t, limiter.Policy{Name: "conc", Algorithm: limiter.Concurrency, Limit: limit, Lease: lease, Key: []string{"ip"}})
}

// hold takes a place of p for key through lim and returns its ticket.
func hold(t *testing.T, lim *limiter.Limiter, reqs ...limiter.Request) *limiter.Ticket {
	t.Helper()
	ds, ok := lim.AllowAll(context.Background(), reqs)
	if !ok {
		t.Fatalf("denied: %+v", ds)
	}
	tk := lim.Ticket(reqs, ds)
	if tk == nil {
		t.Fatal("no ticket for a request that took a hold")
	}
	return tk
}

func remainingOf(t *testing.T, lim *limiter.Limiter, p *limiter.Policy, key string) int64 {
	t.Helper()
	d, err := lim.Peek(context.Background(), p, key)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

// failure waits for f to fail a call, at most 10s.
func failure(t *testing.T, f *flaky, what string) {
	t.Helper()
	select {
	case <-f.failed:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no call failed within 10s", what)
	}
}

// waitFor polls cond, on the real clock, until it holds or 10s passed:
// it waits for an event (a renewal, a retry), it sets no margin.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A request longer than its lease keeps its place: the ticket renews it.
// Without the renewal the place would be free once the clock passed the
// first lease.
func TestTicketRenewsItsHolds(t *testing.T) {
	defer limiter.SetRenewInterval(5 * time.Millisecond)()
	clock := storetest.NewClock(storetest.Base)
	lim := newLimiter(t, memstore.New(&memstore.Options{Clock: clock.Now}), limiter.WithLogger(discard))
	p := concPolicy(t, 1, 10*time.Second)
	tk := hold(t, lim, limiter.Request{Policy: p, Key: "k", Cost: 1})
	defer tk.End(200)
	clock.Advance(9 * time.Second)
	waitFor(t, "a renewal at the new time", func() bool {
		d, err := lim.Peek(context.Background(), p, "k")
		return err == nil && d.ResetAfter == 10*time.Second
	})
	clock.Advance(9 * time.Second) // 18s after the take, 8s past its first lease
	if got := remainingOf(t, lim, p, "k"); got != 0 {
		t.Fatalf("remaining = %d 18s after the take of a 10s lease, want 0: the renewed hold still counts", got)
	}
	tk.End(200)
	if got := remainingOf(t, lim, p, "k"); got != 1 {
		t.Errorf("remaining = %d after End, want 1", got)
	}
}

// End acts once: a second End, or one after the hold's place was taken by
// another request, releases nothing of another's.
func TestTicketEndsOnce(t *testing.T) {
	lim := newLimiter(t, memstore.New(nil), limiter.WithLogger(discard))
	p := concPolicy(t, 3, 0)
	req := limiter.Request{Policy: p, Key: "k", Cost: 1}
	a := hold(t, lim, req)
	b := hold(t, lim, req)
	a.End(200)
	a.End(200)
	a.End(0)
	if got := remainingOf(t, lim, p, "k"); got != 2 {
		t.Errorf("remaining = %d after one of two holds ended three times, want 2", got)
	}
	b.End(0)
	if got := remainingOf(t, lim, p, "k"); got != 3 {
		t.Errorf("remaining = %d after both ended, want 3", got)
	}
	var none *limiter.Ticket
	none.End(200) // a nil ticket has nothing to do
}

// refund_status gives a charge back when the response's status matches:
// the sliding log loses the entry just added, the bucket its tokens.
func TestTicketRefundsByStatus(t *testing.T) {
	for _, tc := range []struct {
		status               int
		login, bucket, plain int64 // remaining after the request ended
	}{
		{200, 3, 6, 9},  // 2xx: the login refunded; the bucket refunds 204 and 404 only
		{204, 3, 10, 9}, // both refunded
		{401, 2, 6, 9},  // a failed login counts
		{404, 2, 10, 9}, // the bucket refunded, the login not
		{0, 2, 6, 9},    // no response: nothing refunded
		{500, 2, 6, 9},
	} {
		lim := newLimiter(t, memstore.New(nil), limiter.WithLogger(discard))
		login := policy(t, limiter.Policy{Name: "login", Algorithm: limiter.SlidingLog, Limit: 3, Period: time.Hour, Key: []string{"ip"}, RefundStatus: []string{"2xx"}})
		bucket := policy(t, limiter.Policy{Name: "b", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Hour, Key: []string{"ip"}, RefundStatus: []string{"204", "404"}})
		plain := policy(t, limiter.Policy{Name: "plain", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Hour, Key: []string{"ip"}})
		reqs := []limiter.Request{{Policy: login, Key: "k", Cost: 1}, {Policy: bucket, Key: "k", Cost: 4}, {Policy: plain, Key: "k", Cost: 1}}
		hold(t, lim, reqs...).End(tc.status)
		got := [3]int64{remainingOf(t, lim, login, "k"), remainingOf(t, lim, bucket, "k"), remainingOf(t, lim, plain, "k")}
		if want := [3]int64{tc.login, tc.bucket, tc.plain}; got != want {
			t.Errorf("after a %d: remaining login, bucket, plain = %v, want %v", tc.status, got, want)
		}
		if tk := lim.Ticket(reqs[2:], []limiter.Decision{{Policy: plain, Allowed: true, Receipt: limiter.Receipt{Cost: 1}}}); tk != nil {
			t.Error("a ticket for a request with nothing to do at its end")
		}
	}
}

// A release that fails (the store down when the request ends) is tried
// again until it gets through: the place is free again as soon as the
// store answers, not a lease later.
func TestTicketRetriesAFailedRelease(t *testing.T) {
	store := newFlaky(nil)
	lim := newLimiter(t, store, limiter.WithLogger(discard))
	p := concPolicy(t, 1, time.Hour)
	tk := hold(t, lim, limiter.Request{Policy: p, Key: "k", Cost: 1})
	store.down.Store(true)
	tk.End(200)
	failure(t, store, "the release")
	failure(t, store, "its first retry")
	store.down.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lim.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if got := remainingOf(t, lim, p, "k"); got != 1 {
		t.Errorf("remaining = %d once the store answers again, want 1: the release was not retried", got)
	}
}

// A renewal that finds its hold gone, with the key full, says so: the
// request runs on unheld, and a door may end it.
func TestTicketLostHold(t *testing.T) {
	defer limiter.SetRenewInterval(5 * time.Millisecond)()
	clock := storetest.NewClock(storetest.Base)
	store := newFlaky(clock.Now)
	lim := newLimiter(t, store, limiter.WithLogger(discard))
	p := concPolicy(t, 1, 10*time.Second)
	tk := hold(t, lim, limiter.Request{Policy: p, Key: "k", Cost: 1})
	defer tk.End(0)
	store.down.Store(true)
	failure(t, store, "a renewal")
	clock.Advance(11 * time.Second)
	// Its lease ran out during the outage, and another request took the place.
	if d, err := store.Store.Take(context.Background(), p, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("the free place: %+v %v", d, err)
	}
	store.down.Store(false)
	select {
	case <-tk.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed: the renewal took a place the key does not have")
	}
	if got := remainingOf(t, lim, p, "k"); got != 0 {
		t.Errorf("remaining = %d, want 0: one hold, the other request's", got)
	}
}

// Under on_store_error: local a hold is kept by the local fallback, and
// released there.
func TestTicketReleasesLocalHolds(t *testing.T) {
	local := memstore.New(nil)
	lim := newLimiter(t, failing{}, limiter.WithLogger(discard), limiter.WithLocalFallback(local, 2))
	p := policy(t, limiter.Policy{Name: "conc", Algorithm: limiter.Concurrency, Limit: 4, Key: []string{"ip"}, OnStoreError: limiter.FailLocal})
	// failing keeps no holds: a door would refuse the policy, with its reason.
	var pe *limiter.PolicyError
	if err := lim.CheckPolicy(p); !errors.As(err, &pe) || pe.Field != "algorithm" {
		t.Fatalf("CheckPolicy over a store without holds = %v, want a PolicyError on algorithm", err)
	}
	reqs := []limiter.Request{{Policy: p, Key: "k", Cost: 1}}
	ds, ok := lim.AllowAll(context.Background(), reqs)
	if !ok || ds[0].Outcome != limiter.ErrorLocal || ds[0].Limit != 2 {
		t.Fatalf("%+v, want allowed by the local fallback with 4/2 places", ds)
	}
	if n := local.Holds(); n != 1 {
		t.Fatalf("local holds = %d, want 1", n)
	}
	lim.Ticket(reqs, ds).End(200)
	if n := local.Holds(); n != 0 {
		t.Errorf("local holds = %d after End, want 0", n)
	}
}
