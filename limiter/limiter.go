package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/costgate/costgate/internal/loggate"
)

// DefaultTimeout bounds every store call unless WithTimeout says otherwise.
const DefaultTimeout = 50 * time.Millisecond

// Event describes one check, for metrics.
type Event struct {
	Policy   string
	Outcome  Outcome
	Store    string
	Duration time.Duration
	Err      error
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(lim *Limiter) { lim.logger = l } }

// WithObserver sets a hook called once per check, after it decided (metrics).
func WithObserver(f func(Event)) Option { return func(lim *Limiter) { lim.observe = f } }

// WithTimeout bounds each store call (default 50ms; 0 means the default). A call that timed out is
// a store error, and may have charged.
func WithTimeout(d time.Duration) Option { return func(lim *Limiter) { lim.timeout = d } }

// WithStoreName names the store in events ("redis", "memory").
func WithStoreName(name string) Option { return func(lim *Limiter) { lim.storeName = name } }

// WithLocalFallback gives policies with on_store_error: local an in-process
// store to fall back to while the shared one fails. Each gateway then grants
// limit/gateways and burst/gateways, so that the gateways together stay near
// the policy.
func WithLocalFallback(local Store, gateways int) Option {
	return func(lim *Limiter) {
		lim.local = local
		lim.gateways = max(gateways, 1)
	}
}

// CheckPolicy reports whether l can apply p's fail mode: on_store_error:
// local needs a local fallback (WithLocalFallback), or a store error would
// let every request through with no policy having said so. The error is a
// *PolicyError.
func (l *Limiter) CheckPolicy(p *Policy) error {
	if p != nil && p.EffectiveFailMode() == FailLocal && l.local == nil {
		return &PolicyError{Policy: p.Name, Field: "on_store_error",
			Reason: "local needs a local fallback store (limiter.WithLocalFallback), and this limiter has none"}
	}
	return l.checkHolds(p)
}

// Limiter applies policies to keys through a Store, with the policies' modes
// and fail modes. It is safe for concurrent use.
//
// A denied request consumes nothing. A store error never fails a check: the
// policy's OnStoreError decides (allow, deny, or local: an in-process store
// granting limit/gateways, whose policy the decision then carries, so that
// headers built from it agree), the decision carries the error, and a store
// call never takes longer than the timeout ([WithTimeout]). Store errors are
// logged at most once a second per policy, each line with the number of
// lines it stands for (suppressed=N). [Override]s, which operators set, are
// applied to each request before its check ([Overrides]).
type Limiter struct {
	store     Store
	storeName string
	logger    *slog.Logger
	observe   func(Event)
	timeout   time.Duration
	local     Store
	gateways  int
	selfTimed bool // the store bounds its calls itself (selfTimed)

	localPolicies sync.Map // *Policy → *Policy with limit/gateways
	logGates      sync.Map // policy name → *loggate.Gate
	denied        denyCache
	ends          endState                // what ended requests left to do (ticket.go)
	onDenied      func(Request, Decision) // WithDenials
}

// New returns a Limiter over store. It refuses a nil store, and a negative
// timeout (a zero one means DefaultTimeout).
func New(store Store, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, ErrNilStore
	}
	l := &Limiter{store: store, storeName: "store", timeout: DefaultTimeout, gateways: 1}
	for _, opt := range opts {
		opt(l)
	}
	switch {
	case l.timeout < 0:
		return nil, &FieldError{Field: "WithTimeout", Reason: "must not be negative, got " + l.timeout.String()}
	case l.timeout == 0:
		l.timeout = DefaultTimeout
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	if st, ok := store.(selfTimed); ok && !l.storeIsLocal() {
		st.BoundCalls(l.timeout)
		l.selfTimed = true
	}
	return l, nil
}

// Request is one policy applied to one key at one cost.
type Request struct {
	Policy *Policy
	Key    string
	Cost   int64
	// Tenant is the tenant the key belongs to, for overrides by tenant
	// ("": none known).
	Tenant string
	// Override is the operator override that applies (Overrides.Apply
	// sets it; nil: none).
	Override *Override
	// Caller is who the request is, for the WithDenials hook
	// (identity.Resolver.Request sets its *identity.Identity).
	Caller any
}

// Allow charges cost (at least 1) to key under p and returns the decision.
// It never fails: a store error is reported in Decision.Err, and the policy's
// on_store_error decides Allowed.
func (l *Limiter) Allow(ctx context.Context, p *Policy, key string, cost int64) Decision {
	return l.check(ctx, Request{Policy: p, Key: key, Cost: max(cost, 1)})
}

// AllowAll applies several policies to one request, all or nothing: they are
// charged in order, each atomically, and when one denies, the charges already
// made are undone so that a denied request consumes nothing anywhere. It
// returns every decision made (the denying one last) and whether the request
// may proceed. Each policy sees the charges before it: two requests of 100
// on one key of a 150-token bucket are one granted and one denied (then
// undone), in every store.
//
// A store that implements BatchStore charges them all in one step (one
// round trip to Redis, whatever the number of policies).
func (l *Limiter) AllowAll(ctx context.Context, reqs []Request) ([]Decision, bool) {
	return l.AppendAllowAll(ctx, make([]Decision, 0, len(reqs)), reqs)
}

// AppendAllowAll is AllowAll appending the decisions to dst, so that a
// caller with a buffer of its own (on its stack) allocates nothing for them.
func (l *Limiter) AppendAllowAll(ctx context.Context, dst []Decision, reqs []Request) ([]Decision, bool) {
	if bs, ok := l.store.(BatchStore); ok && len(reqs) > 1 && !decidedByOverride(reqs) {
		ds, ok := l.allowBatch(ctx, bs, reqs)
		return append(dst, ds...), ok
	}
	decisions := dst
	base := len(dst)
	for _, r := range reqs {
		r.Cost = max(r.Cost, 1)
		d := l.check(ctx, r)
		decisions = append(decisions, d)
		if !d.Allowed {
			l.undo(ctx, reqs, decisions[base:len(decisions)-1])
			return decisions, false
		}
	}
	return decisions, true
}

// isPolicyError reports a *PolicyError in err's chain. Apart from check, so
// that its errors.As target does not cost check an allocation.
func isPolicyError(err error) bool {
	var perr *PolicyError
	return errors.As(err, &perr)
}

// allowBatch is AllowAll over a BatchStore.
func (l *Limiter) allowBatch(ctx context.Context, bs BatchStore, reqs []Request) ([]Decision, bool) {
	var start time.Time
	if l.observe != nil {
		start = time.Now()
	}
	rs := make([]Request, len(reqs))
	sent := time.Now()
	for i, r := range reqs {
		r.Cost = max(r.Cost, 1)
		rs[i] = r
		if d, ok := l.cachedDenial(r, sent); ok && !d.Allowed {
			// Known denied: nothing else need be asked or charged.
			d.Override = r.Override
			l.reportDenial(r, d)
			l.observeAll(start, []Decision{d}, nil)
			return []Decision{d}, false
		}
	}
	tctx, cancel := l.bounded(ctx)
	ds, err := bs.TakeAll(tctx, rs)
	cancel()
	var perr *PolicyError
	switch {
	case errors.As(err, &perr):
		d := Decision{Policy: perr.policyOf(rs), Err: err, Outcome: ErrorDenied}
		d.Limit, d.Cost = d.Policy.Capacity(), costOf(rs, d.Policy)
		l.logStoreError(slog.LevelError, d.Policy, "rate limit policy is invalid; denying", "err", err)
		l.observeAll(start, []Decision{d}, err)
		return []Decision{d}, false
	case err != nil:
		// Each policy's on_store_error decides, in order, all or nothing.
		out := make([]Decision, 0, len(rs))
		for _, r := range rs {
			d := l.onStoreError(ctx, r, err)
			out = append(out, d)
			if !d.Allowed {
				l.undo(ctx, rs, out[:len(out)-1])
				l.observeAll(start, out, err)
				return out, false
			}
		}
		l.observeAll(start, out, err)
		return out, true
	}
	allowed := len(ds) == len(rs)
	for i := range ds {
		r := rs[i]
		ds[i].Policy, ds[i].Cost, ds[i].Override = r.Policy, r.Cost, r.Override
		if !chargedBefore(rs[:i], r) {
			l.rememberDenial(r, ds[i], sent)
		}
		ds[i] = l.settle(ds[i])
		l.reportDenial(r, ds[i])
		allowed = allowed && ds[i].Allowed
	}
	l.observeAll(start, ds, nil)
	return ds, allowed
}

// chargedBefore reports whether one of earlier names r's state: r was then
// denied under their charges, which the denial undid, so its denial says
// nothing of what the store holds now (the deny cache must not keep it).
func chargedBefore(earlier []Request, r Request) bool {
	for _, e := range earlier {
		if sameState(e, r) {
			return true
		}
	}
	return false
}

func (l *Limiter) observeAll(start time.Time, ds []Decision, err error) {
	if l.observe == nil {
		return
	}
	took := time.Since(start)
	for _, d := range ds {
		l.observe(Event{Policy: d.Policy.Name, Outcome: d.Outcome, Store: l.storeName, Duration: took, Err: err})
	}
}

// policyOf returns the request's policy e names (the first when none does).
func (e *PolicyError) policyOf(rs []Request) *Policy {
	for _, r := range rs {
		if r.Policy.Name == e.Policy {
			return r.Policy
		}
	}
	return rs[0].Policy
}

func costOf(rs []Request, p *Policy) int64 {
	for _, r := range rs {
		if r.Policy == p {
			return r.Cost
		}
	}
	return 1
}

// undo gives back what the granted decisions charged, newest first, and
// has each report the state the request leaves behind.
func (l *Limiter) undo(ctx context.Context, reqs []Request, granted []Decision) {
	var small [16]bool // a check seldom has more policies: no allocation
	undone := small[:]
	if len(granted) > len(small) {
		undone = make([]bool, len(granted))
	}
	for i := len(granted) - 1; i >= 0; i-- {
		d := granted[i]
		if d.Receipt.Cost == 0 || d.Err != nil && d.Outcome != ErrorLocal {
			continue // nothing charged, or the store failed: nothing to give back
		}
		store := l.store
		p := reqs[i].Policy
		if d.Outcome == ErrorLocal {
			store, p = l.local, l.localPolicy(p)
		}
		after, err := l.call(ctx, func(ctx context.Context) (Decision, error) {
			return store.Undo(ctx, p, reqs[i].Key, d.Receipt)
		})
		if err != nil {
			l.logStoreError(slog.LevelWarn, p, "rate limit compensation failed", "err", err)
			continue
		}
		if p.LocalCache {
			l.denied.forget(denyKey{reqs[i].Policy, reqs[i].Key})
		}
		// Report the state the request leaves behind: nothing charged.
		granted[i].Remaining, granted[i].ResetAfter = after.Remaining, after.ResetAfter
		granted[i].Receipt = Receipt{}
		undone[i] = true
	}
	// Of the requests on one state, the oldest was undone last: its report
	// is the state that stays, for all of them.
	for j := range granted {
		for i := j + 1; undone[j] && i < len(granted); i++ {
			if undone[i] && sameState(reqs[i], reqs[j]) && (granted[i].Outcome == ErrorLocal) == (granted[j].Outcome == ErrorLocal) {
				granted[i].Remaining, granted[i].ResetAfter = granted[j].Remaining, granted[j].ResetAfter
			}
		}
	}
}

// sameState reports whether a and b charge one state: every store keys a
// state by the policy's name and algorithm and the key.
func sameState(a, b Request) bool {
	return a.Key == b.Key && a.Policy.Name == b.Policy.Name && a.Policy.Algorithm == b.Policy.Algorithm
}

// Refund gives n units back to a bucket policy's key, never above capacity,
// and returns the state after it.
func (l *Limiter) Refund(ctx context.Context, p *Policy, key string, n int64) (Decision, error) {
	if !p.IsBucket() {
		return Decision{}, ErrNotRefundable
	}
	d, err := l.call(ctx, func(ctx context.Context) (Decision, error) {
		return l.store.Undo(ctx, p, key, Receipt{Cost: max(n, 0)})
	})
	if err != nil {
		return Decision{}, fmt.Errorf("refund %s: %w", p.Name, err)
	}
	if p.LocalCache {
		l.denied.forget(denyKey{p, key})
	}
	d.Policy, d.Outcome, d.Allowed = p, Allowed, true
	return d, nil
}

// Peek returns the state of key under p without charging anything.
func (l *Limiter) Peek(ctx context.Context, p *Policy, key string) (Decision, error) {
	d, err := l.call(ctx, func(ctx context.Context) (Decision, error) {
		return l.store.Take(ctx, p, key, 0)
	})
	if err != nil {
		return Decision{}, fmt.Errorf("peek %s: %w", p.Name, err)
	}
	d.Policy, d.Outcome, d.Allowed = p, Allowed, true
	return d, nil
}

func (l *Limiter) check(ctx context.Context, r Request) Decision {
	p := r.Policy
	if r.Override != nil {
		if d, ok := l.Overridden(r); ok {
			return d
		}
	}
	var start time.Time
	if l.observe != nil || l.usesDenyCache(p) {
		start = time.Now()
	}
	if d, ok := l.cachedDenial(r, start); ok {
		d.Override = r.Override
		l.reportDenial(r, d)
		if l.observe != nil {
			l.observe(Event{Policy: p.Name, Outcome: d.Outcome, Store: l.storeName, Duration: time.Since(start)})
		}
		return d
	}
	d, err := l.take(ctx, r)
	d.Policy, d.Cost = p, r.Cost
	switch {
	case err != nil && isPolicyError(err):
		// A policy no store can apply is a programming error, never a
		// reason to let traffic through: it denies whatever on_store_error says.
		d = Decision{Policy: p, Cost: r.Cost, Limit: p.Capacity(), Err: err, Outcome: ErrorDenied}
		l.logStoreError(slog.LevelError, p, "rate limit policy is invalid; denying", "err", err)
	case err != nil:
		d = l.onStoreError(ctx, r, err)
	default:
		l.rememberDenial(r, d, start)
		d = l.settle(d)
		l.reportDenial(r, d)
	}
	d.Override = r.Override
	if l.observe != nil {
		l.observe(Event{Policy: p.Name, Outcome: d.Outcome, Store: l.storeName, Duration: time.Since(start), Err: err})
	}
	return d
}

// usesDenyCache reports whether checks of p consult the deny cache: the
// policy asks for it (local_cache) and the store is not in process already.
func (l *Limiter) usesDenyCache(p *Policy) bool { return p.LocalCache && !l.storeIsLocal() }

// cachedDenial is the deny cache's answer to r, settled by the policy's
// mode, when the cache holds a denial of r's key that still stands.
func (l *Limiter) cachedDenial(r Request, now time.Time) (Decision, bool) {
	if !l.usesDenyCache(r.Policy) {
		return Decision{}, false
	}
	d, ok := l.denied.get(denyKey{r.Policy, r.Key}, r.Cost, now)
	if !ok {
		return Decision{}, false
	}
	d.Policy = r.Policy
	return l.settle(d), true
}

// rememberDenial keeps d, the store's own decision on r sent at sent, in
// the deny cache when it is a denial and r's policy uses the cache.
func (l *Limiter) rememberDenial(r Request, d Decision, sent time.Time) {
	if !d.Allowed && l.usesDenyCache(r.Policy) {
		l.denied.put(denyKey{r.Policy, r.Key}, d, sent)
	}
}

// settle applies the policy's mode to a decision the store (or the deny
// cache) made.
func (l *Limiter) settle(d Decision) Decision {
	p := d.Policy
	switch {
	case d.Allowed:
		d.Outcome = Allowed
	case p.EffectiveMode() == Shadow:
		d.Allowed, d.Outcome = true, ShadowDenied
		l.logger.Info("rate limit would deny (shadow mode)", "policy", p.Name, "cost", d.Cost,
			"remaining", d.Remaining, "exceeds_capacity", d.ExceedsCapacity)
	default:
		d.Outcome = Denied
	}
	return d
}

func (l *Limiter) onStoreError(ctx context.Context, r Request, err error) Decision {
	p := r.Policy
	d := Decision{Policy: p, Cost: r.Cost, Limit: p.Capacity(), Err: err}
	switch p.EffectiveFailMode() {
	case FailDeny:
		d.Outcome = ErrorDenied
	case FailLocal:
		if l.local != nil {
			// The local policy decides, and the decision says so: its
			// limit and burst are the shared ones divided among the
			// gateways, and headers built from it must agree.
			lp := l.localPolicy(p)
			ld, lerr := l.local.Take(ctx, lp, r.Key, r.Cost)
			if lerr == nil {
				ld.Policy, ld.Cost, ld.Err, ld.Outcome = lp, r.Cost, err, ErrorLocal
				if !ld.Allowed && p.EffectiveMode() == Shadow {
					ld.Allowed = true
				}
				l.logStoreError(slog.LevelWarn, p, "rate limit store failed, using the local fallback", "err", err)
				return ld
			}
			err = fmt.Errorf("%w (local fallback: %v)", err, lerr)
			d.Err = err
		}
		d.Allowed, d.Outcome = true, ErrorAllowed
	default:
		d.Allowed, d.Outcome = true, ErrorAllowed
	}
	if p.EffectiveMode() == Shadow {
		d.Allowed = true
	}
	l.logStoreError(slog.LevelWarn, p, "rate limit store failed", "on_store_error", p.EffectiveFailMode(), "err", err)
	return d
}

// logStoreError logs a store error of p, at most once a second per policy,
// with the number of lines suppressed since the last one: an outage at a
// thousand requests a second writes one line a second, not a thousand.
func (l *Limiter) logStoreError(level slog.Level, p *Policy, msg string, args ...any) {
	v, ok := l.logGates.Load(p.Name)
	if !ok {
		v, _ = l.logGates.LoadOrStore(p.Name, &loggate.Gate{})
	}
	n, ok := v.(*loggate.Gate).Pass(time.Now())
	if !ok {
		return
	}
	l.logger.Log(context.Background(), level, msg, append([]any{"policy", p.Name}, append(args, "suppressed", n)...)...)
}

// localPolicy is p with limit and burst divided among the gateways: the
// same name, so that headers and metrics name the policy the config does.
func (l *Limiter) localPolicy(p *Policy) *Policy {
	if v, ok := l.localPolicies.Load(p); ok {
		return v.(*Policy)
	}
	lp := *p
	lp.Limit = max(p.Limit/int64(l.gateways), 1)
	if p.IsBucket() {
		lp.Burst = max(p.Capacity()/int64(l.gateways), 1)
	}
	v, _ := l.localPolicies.LoadOrStore(p, &lp)
	return v.(*Policy)
}

func (l *Limiter) storeIsLocal() bool {
	local, ok := l.store.(Local)
	return ok && local.Local()
}

// Local is implemented by stores that answer in process, without I/O: the
// Limiter does not arm a timeout for them.
type Local interface{ Local() bool }

// take is one store Take, bounded by the timeout unless the store answers in
// process or bounds its own calls. It is call without the closure: the
// check path allocates nothing of its own.
func (l *Limiter) take(ctx context.Context, r Request) (Decision, error) {
	ctx, cancel := l.bounded(ctx)
	defer cancel()
	return l.store.Take(ctx, r.Policy, r.Key, r.Cost)
}

func (l *Limiter) call(ctx context.Context, f func(context.Context) (Decision, error)) (Decision, error) {
	ctx, cancel := l.bounded(ctx)
	defer cancel()
	return f(ctx)
}

// bounded is ctx bounded by the store timeout, the one place a store call
// gets its deadline: none when the store answers in process or bounds its
// calls itself (selfTimed), so those checks allocate no context.
func (l *Limiter) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.selfTimed || l.storeIsLocal() || l.timeout <= 0 {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, l.timeout)
}

func noCancel() {}
