package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
)

// gateway is one store with its limiter and override table, wired to the
// store's admin stream as the server wires them.
type gateway struct {
	store *redisstore.Store
	lim   *limiter.Limiter
	ov    *limiter.Overrides

	mu     sync.Mutex
	events []redisstore.AdminEvent
	seen   chan redisstore.AdminEventKind
}

func newAdminGateways(t *testing.T, client func() redis.UniversalClient, prefix string, n int) []*gateway {
	t.Helper()
	gws := make([]*gateway, n)
	for i := range gws {
		s := newStore(t, client(), prefix, nil)
		lim, err := limiter.New(s, limiter.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		g := &gateway{store: s, lim: lim, ov: limiter.NewOverrides(nil), seen: make(chan redisstore.AdminEventKind, 1024)}
		s.Watch(func(ev redisstore.AdminEvent) {
			switch ev.Kind {
			case redisstore.AdminResync, redisstore.AdminOverrides:
				g.ov.Set(ev.Overrides)
				if ev.Kind == redisstore.AdminResync {
					lim.ForgetDenials()
				}
			case redisstore.AdminReset:
				for _, rk := range ev.Resets {
					lim.ForgetLocal(rk.Policy, rk.Key)
				}
			}
			g.mu.Lock()
			g.events = append(g.events, ev)
			g.mu.Unlock()
			g.seen <- ev.Kind
		})
		gws[i] = g
	}
	for _, g := range gws {
		g.wait(t, redisstore.AdminResync)
	}
	return gws
}

// wait waits for an event of kind, up to 10 s (a busy machine); it returns
// how long it waited.
func (g *gateway) wait(t *testing.T, kind redisstore.AdminEventKind) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case k := <-g.seen:
			if k == kind {
				return time.Since(start)
			}
		case <-deadline:
			g.mu.Lock()
			defer g.mu.Unlock()
			t.Fatalf("no %s event within 10s; events: %+v", kind, g.events)
		}
	}
}

// A reset on one gateway clears the state in Redis, and within a watch
// interval the other gateways' deny caches and local-first leases: a key
// locked everywhere is admitted everywhere.
func TestResetReachesEveryGateway(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			policies := map[string]*limiter.Policy{
				"login":  {Name: "login", Algorithm: limiter.SlidingLog, Limit: 10, Period: time.Hour, LocalCache: true},
				"leased": {Name: "leased", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Hour, Sync: 50 * time.Millisecond, LocalCache: true},
				"window": {Name: "window", Algorithm: limiter.FixedWindow, Limit: 10, Period: time.Hour},
				"leaky":  {Name: "leaky", Algorithm: limiter.LeakyBucket, Limit: 10, Period: time.Hour},
			}
			gws := newAdminGateways(t, be.client, newPrefix(t), 3)
			for _, p := range policies {
				for i, g := range gws {
					locked := false
					for range 30 {
						if d := g.lim.Allow(ctx, p, "alice", 1); !d.Allowed {
							locked = true
							break
						}
					}
					if !locked {
						t.Fatalf("%s: gateway %d still admits after 30 requests", p.Name, i)
					}
				}
			}
			if _, ok := gws[1].lim.CachedDenial(policies["login"], "alice"); !ok {
				t.Fatal("gateway 1 holds no deny cache entry: the test would show nothing")
			}
			resetAt := time.Now()
			for _, p := range policies {
				if err := gws[0].lim.Reset(ctx, p, "alice"); err != nil {
					t.Fatal(err)
				}
				for _, k := range gws[0].store.Keys(p, "alice") {
					if n := gws[0].store.Client().Exists(ctx, k).Val(); n != 0 {
						t.Errorf("%s: %s still exists after the reset", p.Name, k)
					}
				}
			}
			resetTook := time.Since(resetAt)
			for i, g := range gws[1:] {
				took := g.wait(t, redisstore.AdminReset)
				for len(g.resetsSeen()) < len(policies) {
					g.wait(t, redisstore.AdminReset)
				}
				t.Logf("gateway %d learned of the resets after %s", i+1, took)
			}
			// Admitted everywhere within a second of the reset (a local-first
			// state may take until the reset repeats, once every gateway has
			// read it), plus the slowest check seen: what the machine's load
			// adds.
			for _, p := range policies {
				for i, g := range gws {
					var last limiter.Decision
					slowest := time.Duration(0)
					for {
						began := time.Now()
						last = g.lim.Allow(ctx, p, "alice", 1)
						slowest = max(slowest, time.Since(began))
						if last.Allowed || time.Since(resetAt) > time.Second+resetTook+slowest+20*time.Millisecond {
							break
						}
						time.Sleep(20 * time.Millisecond)
					}
					if !last.Allowed {
						t.Errorf("%s: gateway %d still denies %s after the reset: %+v", p.Name, i, time.Since(resetAt).Round(time.Millisecond), last)
					}
				}
			}
		})
	}
}

func (g *gateway) resetsSeen() []redisstore.ResetKey {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []redisstore.ResetKey
	for _, ev := range g.events {
		out = append(out, ev.Resets...)
	}
	return out
}

// An override put through one gateway reaches the others' tables (and a
// gateway that starts later), its removal too, and what has expired is
// neither applied nor kept.
func TestOverridesReachEveryGateway(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			prefix := newPrefix(t)
			api := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Hour}
			gws := newAdminGateways(t, be.client, prefix, 2)
			o := limiter.Override{Name: "block", Action: limiter.ActionDeny, Expires: time.Now().Add(time.Hour), Created: time.Now(),
				Targets: []limiter.Target{{Policy: "api", Key: "mallory"}}, Who: map[string]string{"api_key": "…lory"}}
			if err := gws[0].store.PutOverride(ctx, o); err != nil {
				t.Fatal(err)
			}
			t.Logf("the other gateway applied it after %s", gws[1].wait(t, redisstore.AdminOverrides))
			req := limiter.Request{Policy: api, Key: "mallory", Cost: 1}
			if d := gws[1].lim.Check(ctx, gws[1].ov.Apply(req)); d.Outcome != limiter.Blocked {
				t.Errorf("on the other gateway: %+v, want blocked", d)
			}
			later := newAdminGateways(t, be.client, prefix, 1)[0]
			if got := later.ov.List(); len(got) != 1 || got[0].Name != "block" || got[0].Who["api_key"] != "…lory" {
				t.Errorf("a gateway started later has %+v, want the override", got)
			}
			if ok, err := gws[1].store.DeleteOverride(ctx, "block"); !ok || err != nil {
				t.Fatalf("delete: %v %v", ok, err)
			}
			gws[0].wait(t, redisstore.AdminOverrides)
			if d := gws[0].lim.Check(ctx, gws[0].ov.Apply(req)); d.Outcome != limiter.Allowed {
				t.Errorf("after the delete: %+v, want allowed", d)
			}
			if ok, _ := gws[1].store.DeleteOverride(ctx, "block"); ok {
				t.Error("deleting it twice: there was one")
			}

			short := o
			short.Name, short.Expires = "short", time.Now().Add(300*time.Millisecond)
			if err := gws[0].store.PutOverride(ctx, short); err != nil {
				t.Fatal(err)
			}
			gws[1].wait(t, redisstore.AdminOverrides)
			for time.Now().Before(short.Expires) {
				time.Sleep(short.Expires.Sub(time.Now()) + time.Millisecond) // waiting for the expiry itself
			}
			if d := gws[1].lim.Check(ctx, gws[1].ov.Apply(req)); d.Outcome != limiter.Allowed {
				t.Errorf("after it expired: %+v, want allowed", d)
			}
			if list, err := gws[0].store.Overrides(ctx); err != nil || len(list) != 0 {
				t.Errorf("the store still lists %+v (%v) after it expired", list, err)
			}
			if n := gws[0].store.Client().HLen(ctx, prefix+"{admin}:overrides").Val(); n != 0 {
				t.Errorf("%d expired overrides kept in Redis", n)
			}
			if ttl := gws[0].store.Client().TTL(ctx, prefix+"{admin}:events").Val(); ttl <= 0 || ttl > 25*time.Hour {
				t.Errorf("the admin stream's TTL is %s, want about a day", ttl)
			}
		})
	}
}

// The shared state of a local-first policy is read without taking or
// giving back this gateway's lease.
func TestPeekSharedKeepsTheLease(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, standalone.Client(withTimeouts), newPrefix(t), nil)
	lim, err := limiter.New(s)
	if err != nil {
		t.Fatal(err)
	}
	p := &limiter.Policy{Name: "leased", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Hour, Sync: time.Hour}
	if d := lim.Allow(ctx, p, "k", 1); !d.Allowed {
		t.Fatalf("first check: %+v", d)
	}
	before, ok := s.Lease(p, "k")
	if !ok || before.Lease == 0 {
		t.Fatalf("no lease after a check: %+v %v", before, ok)
	}
	for range 3 {
		d, err := s.PeekShared(ctx, p, "k")
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(100) - 1 - before.Lease; d.Remaining != want {
			t.Errorf("shared remaining %d, want %d (100 less the 1 charged and the lease of %d)", d.Remaining, want, before.Lease)
		}
	}
	if after, _ := s.Lease(p, "k"); after != before {
		t.Errorf("the lease changed from %+v to %+v", before, after)
	}
	if _, err := s.PeekShared(ctx, &limiter.Policy{Name: "exact", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Hour}, "k"); err == nil {
		t.Error("PeekShared of an exact policy: no error")
	}
}

// The admin keys stay bounded: at most MaxOverrides overrides.
func TestOverridesBounded(t *testing.T) {
	ctx := context.Background()
	prefix := newPrefix(t)
	s := newStore(t, standalone.Client(withTimeouts), prefix, nil)
	pipe := s.Client().Pipeline()
	o := limiter.Override{Action: limiter.ActionDeny, Expires: time.Now().Add(time.Hour), Targets: []limiter.Target{{Policy: "api", Key: "k"}}}
	for i := range redisstore.MaxOverrides {
		o.Name = fmt.Sprintf("o%d", i)
		pipe.HSet(ctx, prefix+"{admin}:overrides", o.Name, fmt.Sprintf(`{"name":%q,"action":"deny","expires":%q,"targets":[{"policy":"api","key":"k"}]}`, o.Name, o.Expires.Format(time.RFC3339Nano)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	o.Name = "one-more"
	if err := s.PutOverride(ctx, o); err != redisstore.ErrTooManyOverrides {
		t.Errorf("the override past the bound: %v, want ErrTooManyOverrides", err)
	}
	o.Name = "o7"
	if err := s.PutOverride(ctx, o); err != nil {
		t.Errorf("replacing one at the bound: %v", err)
	}
}
