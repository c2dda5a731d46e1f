package redisstore_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
)

// callerHook counts the scripts sent from the goroutine of a check made by
// the test (its stack holds the test's function) and from any other.
type callerHook struct{ own, other atomic.Int64 }

func (h *callerHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *callerHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(len(cmds))
		return next(ctx, cmds)
	}
}
func (h *callerHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.count(1)
		}
		return next(ctx, cmd)
	}
}

func (h *callerHook) count(n int) {
	buf := make([]byte, 8<<10)
	if st := string(buf[:runtime.Stack(buf, false)]); strings.Contains(st, "TestLoneCheckMakesItsOwnRoundTrip") || strings.Contains(st, "TestSlowRoundTripBelowHalfTheBudget") {
		h.own.Add(int64(n))
	} else {
		h.other.Add(int64(n))
	}
}

// On a fast Redis, a lone check makes its round trip on its own goroutine,
// as a go-redis caller would: handing it to a worker goroutine and back
// costs two wake-ups, more CPU than the round trip itself.
func TestLoneCheckMakesItsOwnRoundTrip(t *testing.T) {
	s := open(t, redisstore.ClientOptions{URL: "redis://" + standalone.Addr()}, newPrefix(t))
	hook := &callerHook{}
	s.Client().AddHook(hook)
	lim := newLimiterWith(t, s, 10*time.Second) // a busy machine must not make Redis look slow
	p := mustValidate(t, &limiter.Policy{Name: "lone", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Second})
	ctx := context.Background()
	const checks = 50
	for range checks {
		if d := lim.Allow(ctx, p, "k", 1); d.Err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v", d)
		}
	}
	if own, other := hook.own.Load(), hook.other.Load(); own < checks*9/10 {
		t.Errorf("%d of %d lone checks sent from their own goroutine, %d from another, want (nearly) all from their own", own, checks, other)
	}
}

// A round trip that a busy moment made a few milliseconds long does not
// send every check of the next second through a worker: only a failure or
// a round trip of half the budget, a stall, does.
func TestSlowRoundTripBelowHalfTheBudgetKeepsTheDirectPath(t *testing.T) {
	s := open(t, redisstore.ClientOptions{URL: "redis://" + standalone.Addr()}, newPrefix(t))
	hook := &callerHook{}
	s.Client().AddHook(hook)
	// Budget 2s: Redis busy for 400ms is a fifth of it (more than the
	// eighth the direct path used to allow), and a busy machine adding
	// another 600ms to a round trip is far rarer than that.
	lim := newLimiterWith(t, s, 2*time.Second)
	p := mustValidate(t, &limiter.Policy{Name: "hiccup", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Second})
	ctx := context.Background()
	if d := lim.Allow(ctx, p, "k", 1); d.Err != nil {
		t.Fatal(d.Err)
	}
	// Keep Redis busy for 400ms (a script spinning on its clock) while a
	// lone check waits behind it; again if the check got there first.
	busy := redis.NewClient(&redis.Options{Addr: standalone.Addr()})
	defer busy.Close()
	for waited := time.Duration(0); waited < 250*time.Millisecond; {
		spun := make(chan error, 1)
		go func() {
			spun <- busy.Eval(ctx, `local t = redis.call('TIME'); local start = t[1]*1e6 + t[2]
				repeat t = redis.call('TIME') until t[1]*1e6 + t[2] - start >= 400000
				return 1`, nil).Err()
		}()
		time.Sleep(10 * time.Millisecond)
		start := time.Now()
		if d := lim.Allow(ctx, p, "k", 1); d.Err != nil {
			t.Fatal(d.Err)
		}
		waited = time.Since(start)
		if err := <-spun; err != nil {
			t.Fatal(err)
		}
	}
	hook.own.Store(0)
	hook.other.Store(0)
	const checks = 50
	for range checks {
		if d := lim.Allow(ctx, p, "k", 1); d.Err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v", d)
		}
	}
	if own, other := hook.own.Load(), hook.other.Load(); own < checks*9/10 {
		t.Errorf("after a 400ms round trip, %d of %d lone checks sent from their own goroutine, %d from another, want (nearly) all from their own", own, checks, other)
	}
}
