package limiter

import (
	"context"
	"errors"
	"time"

	"github.com/costgate/costgate/internal/loggate"
)

// What the Limiter offers the operators of a running server: checks that
// honour overrides, resets, and a hook on denials (the admin's top denied).

// Resetter is a Store that can clear one key's state under a policy, so
// that the key starts afresh (a locked login unlocked). memstore and
// redisstore implement it.
type Resetter interface {
	Reset(ctx context.Context, p *Policy, key string) error
}

// ErrNotResettable is returned by Limiter.Reset when the store cannot reset.
var ErrNotResettable = errors.New("limiter: the store cannot reset a key (it does not implement limiter.Resetter)")

// WithDenials sets a hook called with each request a policy denied
// (Outcome Denied, the deny cache's denials included), from the check's
// goroutine: it must be quick and must not block.
func WithDenials(f func(Request, Decision)) Option { return func(l *Limiter) { l.onDenied = f } }

// Check charges r (its cost at least 1) and returns the decision, as Allow
// does, honouring r.Override: a deny override blocks, an allow override
// exempts, a limit override has already replaced r.Policy.
func (l *Limiter) Check(ctx context.Context, r Request) Decision {
	r.Cost = max(r.Cost, 1)
	return l.check(ctx, r)
}

// Overridden is the decision of r's allow or deny override, made without
// the store (logged, at most once a second, and observed); false when r has
// none (a limit override leaves the decision to the store). Check makes it
// itself; a door that only reads state (a peek) asks it first.
func (l *Limiter) Overridden(r Request) (Decision, bool) {
	if r.Override == nil {
		return Decision{}, false
	}
	p, o := r.Policy, r.Override
	d := Decision{Policy: p, Cost: r.Cost, Limit: p.Capacity(), Override: o}
	switch o.Action {
	case ActionDeny:
		d.Outcome = Blocked
		l.logOverride(p, o, "request blocked by an operator override")
	case ActionAllow:
		d.Allowed, d.Outcome = true, Exempt
		l.logOverride(p, o, "request exempt from its limit by an operator override")
	default:
		return Decision{}, false
	}
	if l.observe != nil {
		l.observe(Event{Policy: p.Name, Outcome: d.Outcome, Store: l.storeName})
	}
	return d, true
}

// decidedByOverride reports a request an allow or deny override decides:
// such a batch goes policy by policy (the store is not asked for those).
func decidedByOverride(reqs []Request) bool {
	for i := range reqs {
		if o := reqs[i].Override; o != nil && o.Action != ActionLimit {
			return true
		}
	}
	return false
}

type overrideGate struct {
	policy string
	action Action
}

// logOverride logs a request an override decided, at most once a second
// per policy and action, with the number of lines suppressed.
func (l *Limiter) logOverride(p *Policy, o *Override, msg string) {
	k := overrideGate{p.Name, o.Action}
	v, ok := l.logGates.Load(k)
	if !ok {
		v, _ = l.logGates.LoadOrStore(k, &loggate.Gate{})
	}
	if n, ok := v.(*loggate.Gate).Pass(time.Now()); ok {
		l.logger.Info(msg, "policy", p.Name, "override", o.Name, "expires", o.Expires.UTC().Format(time.RFC3339), "suppressed", n)
	}
}

// reportDenial hands a denial to the WithDenials hook.
func (l *Limiter) reportDenial(r Request, d Decision) {
	if l.onDenied != nil && d.Outcome == Denied {
		l.onDenied(r, d)
	}
}

// Reset clears key's state under p in the store (see Resetter) and in this
// process: the deny cache and the local fallback's state. Other gateways
// sharing the store learn of it from the store (redisstore tells them) and
// call ForgetLocal.
func (l *Limiter) Reset(ctx context.Context, p *Policy, key string) error {
	rs, ok := l.store.(Resetter)
	if !ok {
		return ErrNotResettable
	}
	ctx, cancel := l.bounded(ctx)
	err := rs.Reset(ctx, p, key)
	cancel()
	l.ForgetLocal(p.Name, key)
	return err
}

// ForgetLocal drops what this process holds of key under the policy of
// that name (whatever its limits and algorithm): its deny cache entry and
// its local fallback state. A gateway calls it when another one reset the
// key.
func (l *Limiter) ForgetLocal(policy, key string) {
	l.denied.mu.Lock()
	for k := range l.denied.m {
		if k.key == key && k.policy.Name == policy {
			delete(l.denied.m, k)
		}
	}
	l.denied.mu.Unlock()
	if rs, ok := l.local.(Resetter); ok {
		for _, alg := range algorithms {
			// In process: it cannot fail.
			_ = rs.Reset(context.Background(), &Policy{Name: policy, Algorithm: alg}, key)
		}
	}
}

// ForgetDenials empties the deny cache: a gateway that may have missed
// resets (it lost the store for a while) stops denying from what it
// remembered, and asks the store again.
func (l *Limiter) ForgetDenials() {
	l.denied.mu.Lock()
	clear(l.denied.m)
	l.denied.mu.Unlock()
}

// CachedDenial is a deny cache entry, as Limiter.CachedDenial reports it.
type CachedDenial struct {
	// Cost is the smallest cost known denied, Until when it can pass.
	Cost  int64
	Until time.Time
}

// CachedDenial reports whether this process's deny cache holds key under p
// (a policy of p's name), and until when.
func (l *Limiter) CachedDenial(p *Policy, key string) (CachedDenial, bool) {
	now := time.Now()
	var out CachedDenial
	found := false
	l.denied.mu.Lock()
	defer l.denied.mu.Unlock()
	for k, e := range l.denied.m {
		if k.key == key && k.policy.Name == p.Name && now.Before(e.until) && (!found || e.until.After(out.Until)) {
			out, found = CachedDenial{Cost: e.cost, Until: e.until}, true
		}
	}
	return out, found
}
