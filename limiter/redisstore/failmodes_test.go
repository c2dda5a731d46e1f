package redisstore_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redistest"
)

// When Redis goes away (stopped) or hangs (SIGSTOP), every check still
// answers, within the store timeout, with the policy's on_store_error: allow
// serves, deny refuses, local falls back to limit/gateways in process. When
// Redis is back, checks use it again.
func TestStoreFailures(t *testing.T) {
	srv := redistest.StartServer(t)
	client := srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	store := newStore(t, client, newPrefix(t), nil)
	const timeout = 50 * time.Millisecond
	lim, err := limiter.New(store,
		limiter.WithTimeout(timeout),
		limiter.WithLocalFallback(memstore.New(nil), 2),
		limiter.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	pol := func(name string, fail limiter.FailMode, mode limiter.Mode) *limiter.Policy {
		return mustValidate(t, &limiter.Policy{Name: name, Algorithm: limiter.SlidingLog, Limit: 10, Period: time.Hour, OnStoreError: fail, Mode: mode})
	}
	allow, deny, local := pol("allow", limiter.FailAllow, ""), pol("deny", limiter.FailDeny, ""), pol("local", limiter.FailLocal, "")
	shadowDeny := pol("shadow-deny", limiter.FailDeny, limiter.Shadow)
	ctx := context.Background()

	check := func(t *testing.T, p *limiter.Policy, key string) limiter.Decision {
		t.Helper()
		start := time.Now()
		d := lim.Allow(ctx, p, key, 1)
		// Not a speed assertion: a guard that the check did not hang on Redis.
		if took := time.Since(start); took > timeout+time.Second {
			t.Errorf("%s: check took %s with a store timeout of %s", p.Name, took, timeout)
		}
		return d
	}
	expectFailModes := func(t *testing.T, key string) {
		t.Helper()
		if d := check(t, allow, key); !d.Allowed || d.Outcome != limiter.ErrorAllowed || d.Err == nil {
			t.Errorf("allow: %+v, want allowed with error_allowed and the error", d)
		}
		if d := check(t, deny, key); d.Allowed || d.Outcome != limiter.ErrorDenied || d.Err == nil {
			t.Errorf("deny: %+v, want denied with error_denied", d)
		}
		if d := check(t, shadowDeny, key); !d.Allowed || d.Outcome != limiter.ErrorDenied {
			t.Errorf("shadow deny: %+v, want allowed (shadow never denies) with error_denied", d)
		}
		// limit 10 shared by 2 gateways: this one grants 5 on its own.
		for i := range 6 {
			d := check(t, local, key)
			if d.Outcome != limiter.ErrorLocal || d.Allowed != (i < 5) {
				t.Errorf("local %d: %+v, want error_local, allowed %v", i, d, i < 5)
			}
		}
	}

	// Redis is up: a check is allowed (again until one is: on a busy machine
	// the first dial can outlast the 50ms timeout).
	deadline := time.Now().Add(5 * time.Second)
	for d := check(t, deny, "warm"); !d.Allowed || d.Outcome != limiter.Allowed; d = check(t, deny, "warm") {
		if time.Now().After(deadline) {
			t.Fatalf("with Redis up: %+v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}

	t.Run("redis stopped", func(t *testing.T) {
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
		expectFailModes(t, "down")
	})
	t.Run("redis back", func(t *testing.T) {
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		// The pool redials on its own; the first check may still see a dead connection.
		deadline := time.Now().Add(5 * time.Second)
		for d := lim.Allow(ctx, deny, "back", 1); d.Err != nil; d = lim.Allow(ctx, deny, "back", 1) {
			if time.Now().After(deadline) {
				t.Fatalf("Redis restarted but checks still fail: %v", d.Err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("redis hung", func(t *testing.T) {
		if err := srv.Freeze(); err != nil {
			t.Fatal(err)
		}
		defer srv.Thaw()
		expectFailModes(t, "hung")
	})
}
