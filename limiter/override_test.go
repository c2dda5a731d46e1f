package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
)

// benchRound counts the rounds of a benchmark (one per -count), so that
// each starts its cases at another one.
var benchRound atomic.Int64

// clock is a settable time for the override tables.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func override(name string, a limiter.Action, expires time.Time, targets ...limiter.Target) limiter.Override {
	return limiter.Override{Name: name, Action: a, Expires: expires, Targets: targets}
}

// The most specific override applies: one on the key, then one on the
// tenant under the policy, then one on the tenant under every policy; one
// that has expired is passed over for the next.
func TestOverridePrecedence(t *testing.T) {
	clk := newClock()
	api := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Minute}
	other := &limiter.Policy{Name: "other", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Minute}
	ov := limiter.NewOverrides(clk.now)
	soon, later := clk.now().Add(time.Minute), clk.now().Add(time.Hour)
	ov.Set([]limiter.Override{
		override("everywhere", limiter.ActionDeny, later, limiter.Target{Tenant: "acme"}),
		override("tenant", limiter.ActionAllow, later, limiter.Target{Policy: "api", Tenant: "acme"}),
		override("key", limiter.ActionDeny, soon, limiter.Target{Policy: "api", Key: "acme:k1"}),
	})
	applied := func(p *limiter.Policy, key, tenant string) string {
		r := ov.Apply(limiter.Request{Policy: p, Key: key, Tenant: tenant, Cost: 1})
		if r.Override == nil {
			return ""
		}
		return r.Override.Name
	}
	for _, tc := range []struct {
		p           *limiter.Policy
		key, tenant string
		want        string
	}{
		{api, "acme:k1", "acme", "key"},
		{api, "acme:k2", "acme", "tenant"},
		{other, "acme:k1", "acme", "everywhere"},
		{api, "bigco:k3", "bigco", ""},
		{api, "acme:k1", "", "key"}, // a key override needs no tenant
	} {
		if got := applied(tc.p, tc.key, tc.tenant); got != tc.want {
			t.Errorf("%s %s (tenant %q): override %q, want %q", tc.p.Name, tc.key, tc.tenant, got, tc.want)
		}
	}
	if n := len(ov.Matching(limiter.Request{Policy: api, Key: "acme:k1", Tenant: "acme"})); n != 3 {
		t.Errorf("Matching: %d overrides, want the 3 that name it", n)
	}
	clk.advance(2 * time.Minute)
	if got := applied(api, "acme:k1", "acme"); got != "tenant" {
		t.Errorf("after the key's override expired: %q, want the tenant's", got)
	}
	if n := ov.Len(); n != 2 {
		t.Errorf("Len %d after one expired, want 2", n)
	}
	clk.advance(time.Hour)
	if got := applied(api, "acme:k1", "acme"); got != "" {
		t.Errorf("after every override expired: %q applies", got)
	}
}

// Two overrides on one target: the one created later applies, whatever
// their order in the list.
func TestOverrideLaterCreatedWins(t *testing.T) {
	clk := newClock()
	api := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Minute}
	a := override("a", limiter.ActionDeny, clk.now().Add(time.Hour), limiter.Target{Policy: "api", Key: "k"})
	b := override("b", limiter.ActionAllow, clk.now().Add(time.Hour), limiter.Target{Policy: "api", Key: "k"})
	a.Created, b.Created = clk.now().Add(time.Second), clk.now()
	ov := limiter.NewOverrides(clk.now)
	ov.Set([]limiter.Override{a, b})
	if r := ov.Apply(limiter.Request{Policy: api, Key: "k"}); r.Override == nil || r.Override.Name != "a" {
		t.Errorf("applied %+v, want a (created last)", r.Override)
	}
}

// A limit override replaces the limit and burst (or multiplies the
// plan-scaled ones): the store grants what it says, the decision carries
// the override and a policy of the new limits, and one pointer per policy.
func TestOverrideLimit(t *testing.T) {
	ctx := context.Background()
	lim := newLimiter(t, memstore.New(nil))
	p := policy(t, limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 3, Period: time.Hour})
	ov := limiter.NewOverrides(nil)
	ov.Set([]limiter.Override{{Name: "launch", Action: limiter.ActionLimit, Limit: 10, Burst: 8, Expires: time.Now().Add(time.Hour),
		Targets: []limiter.Target{{Policy: "api", Tenant: "acme"}}}})
	req := limiter.Request{Policy: p, Key: "acme:k", Tenant: "acme"}
	granted := 0
	for range 20 {
		r := ov.Apply(req)
		d := lim.Check(ctx, r)
		if d.Override == nil || d.Override.Name != "launch" || d.Limit != 8 || d.Policy.Limit != 10 || d.Policy.Name != "api" {
			t.Fatalf("decision %+v (policy %+v): want the override, burst 8, limit 10", d, d.Policy)
		}
		if d.Allowed {
			granted++
		}
	}
	if granted != 8 {
		t.Errorf("granted %d under an override of burst 8, want 8", granted)
	}
	if a, b := ov.Apply(req).Policy, ov.Apply(req).Policy; a != b {
		t.Error("the override derives a new policy per request: want one per policy")
	}
	// Without the override the policy's own burst applies to other tenants.
	if d := lim.Check(ctx, ov.Apply(limiter.Request{Policy: p, Key: "bigco:k", Tenant: "bigco"})); d.Limit != 3 || d.Override != nil {
		t.Errorf("another tenant: %+v, want the policy's burst 3 and no override", d)
	}

	x := limiter.Override{Action: limiter.ActionLimit, Multiplier: 2.5}
	scaled := policy(t, limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 100, Burst: 30, Period: time.Minute})
	d, err := x.Derive(scaled)
	if err != nil || d.Limit != 250 || d.Burst != 75 {
		t.Errorf("×2.5 of limit 100 burst 30: %+v %v, want 250 and 75", d, err)
	}
	window := policy(t, limiter.Policy{Name: "w", Algorithm: limiter.SlidingLog, Limit: 10, Period: time.Minute})
	if d, err := (&limiter.Override{Action: limiter.ActionLimit, Multiplier: 0.01}).Derive(window); err != nil || d.Limit != 1 || d.Burst != 0 {
		t.Errorf("×0.01 of a window of 10: %+v %v, want limit 1 (never 0), no burst", d, err)
	}
}

// A deny override blocks, in shadow mode too, charging nothing anywhere
// (the policies before it in the request are undone); an allow override
// serves the request without asking the store, even one that is down.
func TestOverrideDenyAndAllow(t *testing.T) {
	ctx := context.Background()
	var ev events
	mem := memstore.New(nil)
	store := &counting{Store: mem}
	lim := newLimiter(t, store, limiter.WithObserver(ev.observe), limiter.WithLogger(discard))
	first := policy(t, limiter.Policy{Name: "first", Algorithm: limiter.TokenBucket, Limit: 5, Period: time.Hour})
	shadow := policy(t, limiter.Policy{Name: "shadow", Algorithm: limiter.TokenBucket, Limit: 5, Period: time.Hour, Mode: limiter.Shadow})
	ov := limiter.NewOverrides(nil)
	ov.Set([]limiter.Override{
		override("block", limiter.ActionDeny, time.Now().Add(time.Hour), limiter.Target{Policy: "shadow", Key: "bad"}),
		override("vip", limiter.ActionAllow, time.Now().Add(time.Hour), limiter.Target{Tenant: "vip"}),
	})
	ds, ok := lim.AllowAll(ctx, []limiter.Request{ov.Apply(limiter.Request{Policy: first, Key: "bad", Cost: 2}), ov.Apply(limiter.Request{Policy: shadow, Key: "bad", Cost: 1})})
	if ok || len(ds) != 2 || ds[1].Outcome != limiter.Blocked || ds[1].Allowed || ds[1].HasState() || ds[1].Override == nil {
		t.Fatalf("blocked in shadow mode: %v %+v, want blocked, no state", ok, ds)
	}
	if d, err := lim.Peek(ctx, first, "bad"); err != nil || d.Remaining != 5 {
		t.Errorf("after the block, %d left of 5 under the first policy: it was charged", d.Remaining)
	}

	down := newLimiter(t, failing{}, limiter.WithObserver(ev.observe), limiter.WithLogger(discard))
	before := store.takes.Load()
	for range 100 {
		d := down.Check(ctx, ov.Apply(limiter.Request{Policy: first, Key: "vip:k", Tenant: "vip", Cost: 1000}))
		if !d.Allowed || d.Outcome != limiter.Exempt || d.Err != nil || d.HasState() {
			t.Fatalf("exempt on a store that is down: %+v", d)
		}
	}
	if store.takes.Load() != before {
		t.Error("an exempt request reached a store")
	}
	counts := map[limiter.Outcome]int{}
	for _, o := range ev.outcomes() {
		counts[o]++
	}
	if counts[limiter.Exempt] != 100 || counts[limiter.Blocked] != 1 {
		t.Errorf("observed %v, want 100 exempt and 1 blocked counted", counts)
	}
}

// Every request a policy denies reaches the WithDenials hook with its
// Caller, the deny cache's denials too; blocked and shadow ones do not.
func TestDenialsHook(t *testing.T) {
	ctx := context.Background()
	type seen struct {
		caller any
		policy string
	}
	var got []seen
	lim := newLimiter(t, remoteMem{memstore.New(nil)}, limiter.WithDenials(func(r limiter.Request, d limiter.Decision) {
		got = append(got, seen{r.Caller, d.Policy.Name})
	}), limiter.WithLogger(discard))
	p := policy(t, limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Hour, LocalCache: true})
	sh := policy(t, limiter.Policy{Name: "sh", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Hour, Mode: limiter.Shadow})
	for range 3 {
		lim.Check(ctx, limiter.Request{Policy: p, Key: "k", Caller: "alice"})
		lim.Check(ctx, limiter.Request{Policy: sh, Key: "k", Caller: "bob"})
	}
	if len(got) != 2 || got[0] != (seen{"alice", "p"}) || got[1] != got[0] {
		t.Errorf("denials seen %v, want alice's two denials of p (one from the store, one from the deny cache)", got)
	}
}

// Reset clears a key's state in the store and this process's deny cache:
// the next request passes. ForgetLocal alone (another gateway reset the
// store) drops what the deny cache would otherwise deny for its whole
// retry-after.
func TestResetUnlocks(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	lim := newLimiter(t, remoteMem{mem})
	other := newLimiter(t, remoteMem{mem}) // a second gateway on the same store
	p := policy(t, limiter.Policy{Name: "login", Algorithm: limiter.SlidingLog, Limit: 2, Period: time.Hour, LocalCache: true})
	lock := func(l *limiter.Limiter) {
		for range 3 {
			l.Allow(ctx, p, "alice", 1)
		}
		if d := l.Allow(ctx, p, "alice", 1); d.Allowed {
			t.Fatal("not locked")
		}
	}
	lock(lim)
	lock(other)
	if err := lim.Reset(ctx, p, "alice"); err != nil {
		t.Fatal(err)
	}
	if d := lim.Allow(ctx, p, "alice", 1); !d.Allowed || d.Remaining != 1 {
		t.Errorf("after the reset: %+v, want allowed with 1 left", d)
	}
	if _, cached := other.CachedDenial(p, "alice"); !cached {
		t.Fatal("the other gateway's deny cache does not hold the denial: the test shows nothing")
	}
	if d := other.Allow(ctx, p, "alice", 1); d.Allowed {
		t.Fatal("the other gateway's deny cache forgot the denial by itself")
	}
	other.ForgetLocal("login", "alice")
	if d := other.Allow(ctx, p, "alice", 1); !d.Allowed {
		t.Errorf("after ForgetLocal: %+v, want allowed", d)
	}
	if err := newLimiter(t, failing{}).Reset(ctx, p, "alice"); !errors.Is(err, limiter.ErrNotResettable) {
		t.Errorf("Reset on a store that cannot: %v", err)
	}
}

// Override.Validate names the field of every refusal, in the admin API's
// spelling.
func TestOverrideValidate(t *testing.T) {
	now := time.Now()
	good := func() limiter.Override {
		return limiter.Override{Name: "o", Action: limiter.ActionLimit, Limit: 5, Expires: now.Add(time.Hour),
			Targets: []limiter.Target{{Policy: "api", Key: "k"}}}
	}
	if err := func() *limiter.Override { o := good(); return &o }().Validate(now); err != nil {
		t.Fatalf("a good override: %v", err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*limiter.Override)
	}{
		{"name", func(o *limiter.Override) { o.Name = "" }},
		{"name", func(o *limiter.Override) { o.Name = "a b" }},
		{"policy", func(o *limiter.Override) { o.Targets = nil }},
		{"policy", func(o *limiter.Override) { o.Targets[0].Policy = "" }},
		{"action", func(o *limiter.Override) { o.Action = "" }},
		{"action", func(o *limiter.Override) { o.Action = "block" }},
		{"action", func(o *limiter.Override) { o.Action = limiter.ActionDeny }}, // with a limit
		{"limit", func(o *limiter.Override) { o.Limit = 0 }},
		{"multiplier", func(o *limiter.Override) { o.Multiplier = 2 }},
		{"multiplier", func(o *limiter.Override) { o.Limit, o.Multiplier = 0, -1 }},
		{"burst", func(o *limiter.Override) { o.Burst = -1 }},
		{"expires", func(o *limiter.Override) { o.Expires = time.Time{} }},
		{"expires", func(o *limiter.Override) { o.Expires = now.Add(-time.Second) }},
		{"expires", func(o *limiter.Override) { o.Expires = now.Add(limiter.MaxOverrideLife + time.Minute) }},
	} {
		o := good()
		tc.edit(&o)
		err := o.Validate(now)
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a FieldError on %s", o, err, tc.field)
		}
	}
}

// othersTable is a table of n overrides of policy api, none of them on the
// benchmarks' key or tenant: a key each, a tenant every tenth.
func othersTable(n int) *limiter.Overrides {
	full := limiter.NewOverrides(nil)
	var list []limiter.Override
	for i := range n {
		tg := limiter.Target{Policy: "api", Key: fmt.Sprintf("other:%d", i)}
		if i%10 == 0 {
			tg = limiter.Target{Policy: "api", Tenant: fmt.Sprintf("tenant%d", i)}
		}
		list = append(list, limiter.Override{Name: fmt.Sprintf("o%d", i), Action: limiter.ActionLimit, Multiplier: 2,
			Expires: time.Now().Add(time.Hour), Targets: []limiter.Target{tg}})
	}
	full.Set(list)
	return full
}

// What the table itself costs a request it does not apply to: no table,
// an empty one, 1,000 overrides of the same policy's other keys and
// tenants.
func BenchmarkOverridesApply(b *testing.B) {
	p := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Second}
	for _, bc := range []struct {
		name string
		ov   *limiter.Overrides
	}{{"none", nil}, {"empty", limiter.NewOverrides(nil)}, {"1000-others", othersTable(1000)}} {
		b.Run("table="+bc.name, func(b *testing.B) {
			req := limiter.Request{Policy: p, Key: "acme:0123456789abcdefghijkl", Tenant: "acme", Cost: 1}
			b.ReportAllocs()
			for b.Loop() {
				r := req
				bc.ov.ApplyTo(&r)
				if r.Override != nil {
					b.Fatal(r.Override.Name)
				}
			}
		})
	}
}

// Overrides cost a check nothing measurable when none apply: a check
// through a nil table, an empty one, and one of 1,000 overrides of other
// keys and tenants of the same policy, against the memory store (the
// cheapest check there is, so that the table's share shows most).
//
//	go test -run '^$' -bench BenchmarkCheckOverrides -cpu 1 -count 21 ./limiter/ | benchstat -col /table -
func BenchmarkCheckOverrides(b *testing.B) {
	ctx := context.Background()
	p := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1 << 40, Period: time.Second}
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		b.Fatal(err)
	}
	full := othersTable(1000)
	cases := []struct {
		name string
		ov   *limiter.Overrides
	}{{"none", nil}, {"empty", limiter.NewOverrides(nil)}, {"1000-others", full}}
	// Each round starts with another case: on a busy machine the first
	// sub-benchmark of a round runs measurably faster than the later ones,
	// whatever it measures.
	round := benchRound.Add(1)
	for i := range cases {
		bc := cases[(i+int(round))%len(cases)]
		b.Run("table="+bc.name, func(b *testing.B) {
			req := limiter.Request{Policy: p, Key: "acme:0123456789abcdefghijkl", Tenant: "acme", Cost: 1}
			b.ReportAllocs()
			for b.Loop() {
				if d := lim.Check(ctx, bc.ov.Apply(req)); !d.Allowed || d.Override != nil {
					b.Fatalf("%+v", d)
				}
			}
		})
	}
}

// The table's filter passes over the keys and tenants no override names
// and never one that an override names, however many there are.
func TestOverrideTableFindsEveryTarget(t *testing.T) {
	api := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Minute}
	ov := limiter.NewOverrides(nil)
	var list []limiter.Override
	for i := range 5000 {
		tg := limiter.Target{Policy: "api", Key: fmt.Sprintf("k%d", i)}
		if i%5 == 0 {
			tg = limiter.Target{Tenant: fmt.Sprintf("t%d", i)}
		}
		list = append(list, override(fmt.Sprintf("o%d", i), limiter.ActionDeny, time.Now().Add(time.Hour), tg))
	}
	ov.Set(list)
	for i := range 5000 {
		r := limiter.Request{Policy: api, Key: fmt.Sprintf("k%d", i)}
		if i%5 == 0 {
			r = limiter.Request{Policy: api, Key: "any", Tenant: fmt.Sprintf("t%d", i)}
		}
		if got := ov.Apply(r).Override; got == nil || got.Name != fmt.Sprintf("o%d", i) {
			t.Fatalf("target %d: override %+v", i, got)
		}
	}
	for i := range 5000 {
		if got := ov.Apply(limiter.Request{Policy: api, Key: fmt.Sprintf("other%d", i), Tenant: "nobody"}).Override; got != nil {
			t.Fatalf("a key no override names got %q", got.Name)
		}
	}
}
