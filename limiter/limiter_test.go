package limiter_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/storetest"
)

type events struct {
	mu  sync.Mutex
	all []limiter.Event
}

func (e *events) observe(ev limiter.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) outcomes() []limiter.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []limiter.Outcome
	for _, ev := range e.all {
		out = append(out, ev.Outcome)
	}
	return out
}

func policy(t *testing.T, p limiter.Policy) *limiter.Policy {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestEveryRequestCostsAtLeastOne(t *testing.T) {
	lim := newLimiter(t, memstore.New(nil))
	p := policy(t, limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 2, Period: time.Hour})
	for i, cost := range []int64{0, -7} {
		d := lim.Allow(context.Background(), p, "k", cost)
		if !d.Allowed || d.Cost != 1 || d.Remaining != int64(1-i) {
			t.Errorf("cost %d: %+v, want allowed, cost 1, remaining %d", cost, d, 1-i)
		}
	}
	if d := lim.Allow(context.Background(), p, "k", 0); d.Allowed {
		t.Errorf("third free request allowed: %+v", d)
	}
}

func TestOutcomesAndObserver(t *testing.T) {
	var ev events
	clock := storetest.NewClock(storetest.Base)
	store := memstore.New(&memstore.Options{Clock: clock.Now})
	lim := newLimiter(t, store, limiter.WithObserver(ev.observe), limiter.WithStoreName("memory"))
	p := policy(t, limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Hour})
	ctx := context.Background()
	if d := lim.Allow(ctx, p, "k", 1); !d.Allowed || d.Outcome != limiter.Allowed {
		t.Errorf("first: %+v", d)
	}
	d := lim.Allow(ctx, p, "k", 1)
	if d.Allowed || d.Outcome != limiter.Denied || d.RetryAfter != time.Hour || d.Policy != p {
		t.Errorf("second: %+v, want denied with RetryAfter 1h", d)
	}
	d = lim.Allow(ctx, p, "other", 2)
	if d.Allowed || !d.ExceedsCapacity || d.RetryAfter != 0 {
		t.Errorf("cost 2 of capacity 1: %+v, want denied, ExceedsCapacity, no RetryAfter", d)
	}
	want := []limiter.Outcome{limiter.Allowed, limiter.Denied, limiter.Denied}
	if got := ev.outcomes(); !equal(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}
	if ev.all[0].Store != "memory" || ev.all[0].Policy != "p" {
		t.Errorf("event %+v, want store memory, policy p", ev.all[0])
	}
}

// Shadow mode never denies; a would-be denial is reported as ShadowDenied
// and, like every denial, consumes nothing.
func TestShadowMode(t *testing.T) {
	var ev events
	lim := newLimiter(t, memstore.New(nil), limiter.WithObserver(ev.observe), limiter.WithLogger(discard))
	p := policy(t, limiter.Policy{Name: "p", Algorithm: limiter.SlidingLog, Limit: 2, Period: time.Hour, Mode: limiter.Shadow})
	ctx := context.Background()
	for range 5 {
		if d := lim.Allow(ctx, p, "k", 1); !d.Allowed {
			t.Fatalf("shadow mode denied: %+v", d)
		}
	}
	want := []limiter.Outcome{limiter.Allowed, limiter.Allowed, limiter.ShadowDenied, limiter.ShadowDenied, limiter.ShadowDenied}
	if got := ev.outcomes(); !equal(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}
	if d, err := lim.Peek(ctx, p, "k"); err != nil || d.Remaining != 0 {
		t.Errorf("peek: %+v %v, want remaining 0 (2 charged, 3 not)", d, err)
	}
}

// Several policies on one request are all or nothing: when a later one
// denies, what the earlier ones charged is given back, whatever their
// algorithm.
func TestAllowAllUndoesEarlierCharges(t *testing.T) {
	for _, alg := range limiter.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			lim := newLimiter(t, memstore.New(nil))
			first := policy(t, limiter.Policy{Name: "first", Algorithm: alg, Limit: 10, Period: time.Hour})
			second := policy(t, limiter.Policy{Name: "second", Algorithm: limiter.FixedWindow, Limit: 3, Period: time.Hour})
			ctx := context.Background()
			reqs := []limiter.Request{{Policy: first, Key: "ip", Cost: 2}, {Policy: second, Key: "user", Cost: 3}}
			if ds, ok := lim.AllowAll(ctx, reqs); !ok || len(ds) != 2 {
				t.Fatalf("first request: %v %+v", ok, ds)
			}
			for range 3 {
				ds, ok := lim.AllowAll(ctx, reqs)
				if ok || len(ds) != 2 || ds[1].Policy != second || ds[1].Allowed {
					t.Fatalf("request over the second policy: ok %v, %+v", ok, ds)
				}
				if ds[0].Remaining != 8 || ds[0].Receipt.Cost != 0 {
					t.Errorf("undone decision reports remaining %d, receipt %+v; want 8 and no receipt", ds[0].Remaining, ds[0].Receipt)
				}
			}
			d, err := lim.Peek(ctx, first, "ip")
			if err != nil {
				t.Fatal(err)
			}
			if d.Remaining != 8 {
				t.Errorf("first policy remaining %d after 3 denied requests, want 8 (only the granted request charged)", d.Remaining)
			}
		})
	}
}

func TestRefund(t *testing.T) {
	lim := newLimiter(t, memstore.New(nil))
	ctx := context.Background()
	p := policy(t, limiter.Policy{Name: "gql", Algorithm: limiter.TokenBucket, Limit: 50, Period: time.Second, Burst: 1000})
	if d := lim.Allow(ctx, p, "k", 61); d.Remaining != 939 {
		t.Fatalf("after 61: remaining %d", d.Remaining)
	}
	d, err := lim.Refund(ctx, p, "k", 15)
	if err != nil || d.Remaining != 954 {
		t.Errorf("refund 15: %+v %v, want remaining 954", d, err)
	}
	if d, _ := lim.Refund(ctx, p, "k", 5000); d.Remaining != 1000 {
		t.Errorf("refund past capacity: remaining %d, want 1000", d.Remaining)
	}
	w := policy(t, limiter.Policy{Name: "w", Algorithm: limiter.SlidingWindow, Limit: 5, Period: time.Second})
	if _, err := lim.Refund(ctx, w, "k", 1); !errors.Is(err, limiter.ErrNotRefundable) {
		t.Errorf("refund of a window: %v, want ErrNotRefundable", err)
	}
}

var discard = slog.New(slog.DiscardHandler)

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func newLimiter(t *testing.T, store limiter.Store, opts ...limiter.Option) *limiter.Limiter {
	t.Helper()
	lim, err := limiter.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// A policy that skipped Validate and names no algorithm a store knows is a
// programming error: it must deny, not fail open through on_store_error: allow.
func TestInvalidPolicyDeniesWhateverItsFailMode(t *testing.T) {
	lim := newLimiter(t, memstore.New(nil), limiter.WithLogger(discard))
	p := &limiter.Policy{Name: "typo", Algorithm: "tokenbucket", Limit: 10, Period: time.Second, OnStoreError: limiter.FailAllow}
	d := lim.Allow(context.Background(), p, "k", 1)
	var pe *limiter.PolicyError
	if d.Allowed || d.Outcome != limiter.ErrorDenied || !errors.As(d.Err, &pe) || pe.Field != "algorithm" {
		t.Errorf("Allow = allowed %v, outcome %s, err %v; want denied, error_denied, a PolicyError on algorithm", d.Allowed, d.Outcome, d.Err)
	}
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	if _, err := limiter.New(nil); !errors.Is(err, limiter.ErrNilStore) {
		t.Errorf("New(nil) error = %v, want ErrNilStore", err)
	}
	var fe *limiter.FieldError
	if _, err := limiter.New(memstore.New(nil), limiter.WithTimeout(-time.Second)); !errors.As(err, &fe) || fe.Field != "WithTimeout" {
		t.Errorf("New with a negative timeout: error = %v, want a FieldError on WithTimeout", err)
	}
}
