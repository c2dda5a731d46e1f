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
	if strings.Contains(string(buf[:runtime.Stack(buf, false)]), "TestLoneCheckMakesItsOwnRoundTrip") {
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
