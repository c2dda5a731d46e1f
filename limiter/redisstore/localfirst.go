package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/costgate/costgate/limiter"
)

// Local-first policies (limiter.Policy.Sync; docs/redis.md, "Local-first
// limits"). A gateway leases a part of a key's shared budget and grants from
// it in process; every sync interval it gives the lease back, pushes what it
// granted and takes a new lease, all keys of one node in one pipeline.
//
// Why the overshoot is bounded (a sketch; N gateways, rate r, burst B,
// interval I): a lease is taken out of the shared state atomically, so what
// the gateways grant from leases never exceeds what an exact limiter holds.
// A gateway grants from a lease for 2·I after it sent the sync that got it,
// and the store gives a lease back only after 3·I without its gateway, so no
// lease is both given back and used. Grants made while a sync travels count
// against the next lease; only their excess over it (g per gateway) passes
// unbacked, and is charged at the next sync. Beyond a lease a gateway grants
// only while the store fails: r/n refilled up to B/n, or L/n a window, each
// pushed (as debt if need be) when the store answers. Hence: store up,
// overshoot ≤ N·g; k of N gateways cut off for D, ≤ (k/N)·(B + r·D).

const (
	// leaseLife is how many intervals a gateway grants from a lease; the
	// scripts give a lease back after 3 intervals without its gateway.
	leaseLife = 2
	// maxLocalEntries bounds the keys a store keeps locally; beyond it a
	// check is a round trip, as for an exact policy.
	maxLocalEntries = 1 << 20
	// idleSweeps: an entry unused for this many intervals is dropped.
	idleSweeps = 8
)

// localFirst holds a Store's local-first entries and runs its syncs.
type localFirst struct {
	s       *Store
	gateway string
	scripts map[limiter.Algorithm]*script

	mu      sync.RWMutex
	entries map[lfKey]*lfEntry

	dirtyMu sync.Mutex
	dirty   []*lfEntry

	start    sync.Once
	tick     atomic.Int64 // ns: the shortest interval seen, the loop's tick
	retick   chan struct{}
	manual   bool         // tests call flush themselves
	closed   atomic.Bool  // the store is closing: nothing is granted locally any more
	gateways atomic.Int64 // the most gateways any key had: a new key's share in an outage
	// roundTrips counts the calls to Redis the local-first policies made:
	// a pipeline is one.
	roundTrips atomic.Int64
}

type lfKey struct {
	p   *limiter.Policy
	key string
}

// lfEntry is one key of one local-first policy on this gateway.
type lfEntry struct {
	p              *limiter.Policy
	key, redisKey  string
	sc             *script
	offset         int64
	syncing        chan struct{} // one token, held across this entry's round trip
	queued         atomic.Bool
	mu             sync.Mutex
	synced         bool      // a sync answered at least once
	syncedAt       time.Time // local time the last answered sync was sent
	storeNow       int64     // the store's time in that answer (µs)
	lease, used    int64     // the lease and what was granted from it
	window         int64     // the lease's window (windows)
	gateways       int64     // the gateways on the key at the last sync
	shared         int64     // the shared remaining after the lease, then
	resetAt        time.Time // when the key's quota is full again, as then known
	pend           [2]pending
	outage         bool  // the last round trip failed: the outage share applies
	outTok         int64 // outage bucket, units × period × gateways
	outAt          time.Time
	winUsed, winAt int64 // granted in window winAt (windows' outage share)
	lastUse        time.Time
}

// pending is what was granted in a window and not yet pushed.
type pending struct{ units, window int64 }

func newLocalFirst(s *Store, gateway string) (*localFirst, error) {
	if gateway == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("redisstore: gateway id: %w", err)
		}
		gateway = hex.EncodeToString(b[:])
	}
	lf := &localFirst{s: s, gateway: gateway, entries: make(map[lfKey]*lfEntry),
		scripts: make(map[limiter.Algorithm]*script), retick: make(chan struct{}, 1)}
	lf.gateways.Store(1)
	head, err := luaFiles.ReadFile("lua/sync_head.lua")
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	prelude, err := luaFiles.ReadFile("lua/prelude.lua")
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	for _, alg := range []limiter.Algorithm{limiter.TokenBucket, limiter.FixedWindow, limiter.SlidingWindow} {
		body, err := luaFiles.ReadFile("lua/sync_" + string(alg) + ".lua")
		if err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		lf.scripts[alg] = newScript("sync "+string(alg), string(prelude)+"\n"+string(head)+"\n"+string(body))
	}
	return lf, nil
}

func (lf *localFirst) now() time.Time {
	if lf.s.clock != nil {
		return lf.s.clock()
	}
	return time.Now()
}

// take decides cost for key under p (p.Sync > 0) locally when its lease
// allows, else in one round trip.
func (lf *localFirst) take(ctx context.Context, p *limiter.Policy, key string, cost int64) (limiter.Decision, error) {
	if lf.closed.Load() {
		return limiter.Decision{}, errClosed
	}
	e, err := lf.entry(p, key)
	if err != nil {
		return limiter.Decision{}, err
	}
	if e == nil { // at the cap of entries: exact
		return lf.roundTrip(ctx, &lfEntry{p: p, key: key, redisKey: lf.redisKey(p, key), sc: lf.scripts[p.Algorithm], offset: lf.offset(p, key)}, cost, false)
	}
	now := lf.now()
	if d, ok := e.local(now, cost); ok {
		lf.markDirty(e, d)
		return d, nil
	}
	left, ok := lf.lockSync(ctx, e)
	if !ok {
		return limiter.Decision{}, fmt.Errorf("redisstore: %s: %w", e.sc.name, context.DeadlineExceeded)
	}
	defer e.unlockSync()
	if left > 0 { // it waited: the round trip has what is left of the budget
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
	}
	now = lf.now()
	if d, ok := e.local(now, cost); ok { // a sync answered meanwhile
		lf.markDirty(e, d)
		return d, nil
	}
	return lf.roundTrip(ctx, e, cost, true)
}

// lockSync waits for e's round trip token no longer than a check may wait
// for the store (a sync of e may be on its way). Having waited, it returns
// what is left of that budget.
func (lf *localFirst) lockSync(ctx context.Context, e *lfEntry) (time.Duration, bool) {
	if e.tryLockSync() {
		return 0, true
	}
	budget := time.Duration(lf.s.callTimeout.Load())
	if budget <= 0 {
		budget = lf.s.replyWait
	}
	start := time.Now()
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case e.syncing <- struct{}{}:
		return max(budget-time.Since(start), time.Microsecond), true
	case <-t.C:
	case <-ctx.Done():
	}
	return 0, false
}

func (e *lfEntry) tryLockSync() bool {
	select {
	case e.syncing <- struct{}{}:
		return true
	default:
		return false
	}
}

func (e *lfEntry) unlockSync() { <-e.syncing }

func (lf *localFirst) markDirty(e *lfEntry, d limiter.Decision) {
	if (d.Receipt.Cost > 0 || !d.Allowed && !d.ExceedsCapacity) && e.queued.CompareAndSwap(false, true) {
		lf.dirtyMu.Lock()
		lf.dirty = append(lf.dirty, e)
		lf.dirtyMu.Unlock()
	}
}

// syncSuffix ends a local-first key's shared state: it keeps it apart from
// an exact policy's state of the same name.
const syncSuffix = "y"

func (lf *localFirst) redisKey(p *limiter.Policy, key string) string {
	t := tag(p, key)
	return lf.s.redisKey(&t, syncSuffix)
}

func (lf *localFirst) offset(p *limiter.Policy, key string) int64 {
	if p.Algorithm == limiter.FixedWindow {
		return p.WindowOffset(key)
	}
	return 0
}

// entry returns key's entry under p, made on first sight; nil at the cap.
func (lf *localFirst) entry(p *limiter.Policy, key string) (*lfEntry, error) {
	sc := lf.scripts[p.Algorithm]
	if sc == nil {
		return nil, &limiter.PolicyError{Policy: p.Name, Field: "sync", Reason: fmt.Sprintf("%s cannot sync (token_bucket, fixed_window and sliding_window can)", p.Algorithm)}
	}
	k := lfKey{p, key}
	lf.mu.RLock()
	e := lf.entries[k]
	lf.mu.RUnlock()
	if e != nil {
		return e, nil
	}
	lf.start.Do(lf.run)
	lf.setTick(p.Sync)
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if e = lf.entries[k]; e == nil {
		if len(lf.entries) >= maxLocalEntries {
			return nil, nil
		}
		e = &lfEntry{p: p, key: key, redisKey: lf.redisKey(p, key), sc: sc, offset: lf.offset(p, key), syncing: make(chan struct{}, 1)}
		lf.entries[k] = e
	}
	return e, nil
}

// snapshot is what one round trip of an entry sends, and takes back.
type snapshot struct {
	args []any
	pend [2]pending
	used int64
	// sent is when the call left: a lease's life and the store's clock are
	// reckoned from it, so a late reply shortens a lease, never lengthens it.
	sent time.Time
}

func (lf *localFirst) snapshot(e *lfEntry, take int64, want bool) snapshot {
	e.mu.Lock()
	sn := snapshot{pend: e.pend, used: e.used, sent: lf.now()}
	e.mu.Unlock()
	var now any = ""
	if lf.s.clock != nil {
		now = lf.s.clock().UnixMicro()
	}
	w := 0
	if want {
		w = 1
	}
	args := e.sc.args(1, 14)
	args = append(args, e.redisKey, now)
	args = append(args, lf.s.policyConsts(e.p)...)
	args = append(args, lf.gateway, e.p.Sync.Microseconds(), take, w,
		sn.pend[0].units, sn.pend[0].window, sn.pend[1].units, sn.pend[1].window, e.offset)
	sn.args = args
	return sn
}

// syncReply is a decoded reply of a sync script.
type syncReply struct {
	allowed, exceeds             bool
	lease, shared, gateways, now int64
	retry, reset                 time.Duration
	window                       int64
}

func decodeSync(v []int64) (syncReply, error) {
	if len(v) != 9 {
		return syncReply{}, fmt.Errorf("redisstore: sync: unexpected reply %v", v)
	}
	return syncReply{allowed: v[0] == 1, lease: v[1], shared: v[2], gateways: max(v[3], 1), now: v[4],
		retry: time.Duration(v[5]) * time.Microsecond, reset: time.Duration(v[6]) * time.Microsecond,
		exceeds: v[7] == 1, window: v[8]}, nil
}

// roundTrip charges cost exactly and syncs e in one call (e.syncing held,
// or e not kept). A store that fails leaves the decision to the outage share.
func (lf *localFirst) roundTrip(ctx context.Context, e *lfEntry, cost int64, keep bool) (limiter.Decision, error) {
	sn := lf.snapshot(e, cost, keep)
	n, err := lf.s.nodeFor(ctx, e.redisKey)
	var reply []int64
	if err == nil {
		lf.roundTrips.Add(1)
		reply, err = n.do(ctx, e.sc, sn.args)
	}
	var r syncReply
	if err == nil {
		r, err = decodeSync(reply)
	}
	now := lf.now()
	if err != nil {
		if !keep || ctx.Err() != nil { // a caller gone is no outage
			return limiter.Decision{}, fmt.Errorf("redisstore: %s: %w", e.sc.name, err)
		}
		e.fail(now, lf.gateways.Load())
		d, _ := e.local(now, cost)
		lf.markDirty(e, d)
		return d, nil
	}
	d := limiter.Decision{Allowed: r.allowed, Limit: e.p.Capacity(), Remaining: r.lease, RetryAfter: r.retry,
		ResetAfter: r.reset, ExceedsCapacity: r.exceeds}
	if !keep {
		d.Remaining = max(r.shared, 0)
		return d, nil
	}
	lf.apply(e, sn, r, now)
	if r.allowed {
		// Charged in the store, not from the lease: Undo gives it back
		// through the next push.
		d.Receipt = limiter.Receipt{Cost: cost, Window: r.window, Entry: chargedInStore}
	}
	return d, nil
}

// chargedInStore marks the receipt of a cost the store charged itself (a
// round trip), not the lease: undoing it gives nothing back to the lease.
const chargedInStore = "store"

// apply takes a sync's answer into e.
func (lf *localFirst) apply(e *lfEntry, sn snapshot, r syncReply, now time.Time) {
	for lf.gateways.Load() < r.gateways {
		g := lf.gateways.Load()
		if lf.gateways.CompareAndSwap(g, r.gateways) {
			break
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, pushed := range sn.pend {
		if e.pend[i].window == pushed.window { // else the slot moved on to a newer window
			e.pend[i].units -= pushed.units
		}
	}
	// Grants made while the call travelled came from the lease given
	// back: they count against the new one (and are pushed next time).
	e.used = max(e.used-sn.used, 0)
	e.lease, e.window, e.gateways, e.shared = r.lease, r.window, r.gateways, r.shared
	e.synced, e.syncedAt, e.storeNow = true, sn.sent, r.now
	e.resetAt = now.Add(r.reset)
	e.outage, e.outTok, e.outAt = false, 0, time.Time{}
	if e.pend[0].units != 0 || e.pend[1].units != 0 {
		lf.requeue(e)
	}
}

func (lf *localFirst) requeue(e *lfEntry) {
	if e.queued.CompareAndSwap(false, true) {
		lf.dirtyMu.Lock()
		lf.dirty = append(lf.dirty, e)
		lf.dirtyMu.Unlock()
	}
}

// fail records that the store could not be reached for e: from now on the
// outage share decides what the lease cannot.
func (e *lfEntry) fail(now time.Time, gateways int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.outage {
		return
	}
	e.outage = true
	if !e.synced {
		// Never synced: a fresh share, as on_store_error: local would give.
		e.gateways = gateways
		e.outTok, e.outAt = e.p.Capacity()*e.p.PeriodMicros(), now
		return
	}
	// The share accrues from the moment the lease ends.
	e.outTok, e.outAt = 0, e.syncedAt.Add(leaseLife*e.p.Sync)
}

// storeTime estimates the store's clock now (µs), from the last sync.
func (e *lfEntry) storeTime(now time.Time) int64 {
	return e.storeNow + now.Sub(e.syncedAt).Microseconds()
}

// windowAt is the start of the window the store's time t falls in (the
// offset is 0 but for fixed_window).
func (e *lfEntry) windowAt(t int64) int64 {
	per := e.p.PeriodMicros()
	return e.offset + floorDiv(t-e.offset, per)*per
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// leaseValid reports whether e may grant from its lease now.
func (e *lfEntry) leaseValid(now time.Time) bool {
	if !e.synced || now.Sub(e.syncedAt) >= leaseLife*e.p.Sync {
		return false
	}
	return e.p.Algorithm == limiter.TokenBucket || e.storeTime(now) < e.window+e.p.PeriodMicros()
}

// local decides cost from the lease (and, in an outage, the outage share),
// and reports false when only a round trip can.
func (e *lfEntry) local(now time.Time, cost int64) (limiter.Decision, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastUse = now
	capacity := e.p.Capacity()
	d := limiter.Decision{Limit: capacity, ResetAfter: max(e.resetAt.Sub(now), 0)}
	valid := e.leaseValid(now)
	if !valid && !e.outage {
		return d, false
	}
	lease := int64(0)
	if valid {
		lease = e.lease - e.used
	}
	share := e.outageShare(now)
	avail := max(lease, 0) + share
	d.Remaining = avail
	switch {
	case cost > capacity:
		d.ExceedsCapacity = true
		return d, true
	case cost == 0:
		d.Allowed = true
		return d, true
	case cost > avail:
		d.RetryAfter = e.retryAfter(now, cost, avail)
		return d, true
	}
	fromLease := min(cost, max(lease, 0))
	e.used += fromLease
	e.spendShare(cost - fromLease)
	e.grant(now, cost)
	d.Allowed, d.Remaining = true, avail-cost
	d.Receipt = limiter.Receipt{Cost: cost, Window: e.window}
	return d, true
}

// grant records cost granted now, to be pushed in the window it fell in.
func (e *lfEntry) grant(now time.Time, cost int64) {
	w := int64(0)
	if e.p.Algorithm != limiter.TokenBucket {
		w = e.windowAt(e.storeTime(now))
		if w != e.winAt {
			e.winAt, e.winUsed = w, 0
		}
		e.winUsed += cost
	}
	e.addPending(w, cost)
}

func (e *lfEntry) addPending(w, units int64) {
	for i := range e.pend {
		if e.pend[i].window == w {
			e.pend[i].units += units
			return
		}
	}
	// A new window: it takes an empty slot, or the older window's (over
	// twice, it matters no more).
	i := 0
	switch {
	case e.pend[0].units == 0:
	case e.pend[1].units == 0, e.pend[1].window < e.pend[0].window:
		i = 1
	}
	e.pend[i] = pending{units, w}
}

// outageShare is what the store's outage lets e grant beyond its lease:
// rate/n refilled up to burst/n for a bucket, limit/n per window.
func (e *lfEntry) outageShare(now time.Time) int64 {
	if !e.outage {
		return 0
	}
	n := max(e.gateways, 1)
	per := e.p.PeriodMicros()
	if e.p.Algorithm == limiter.TokenBucket {
		if now.After(e.outAt) {
			top := e.p.Capacity() * per
			e.outTok = min(top, e.outTok+now.Sub(e.outAt).Microseconds()*e.p.Limit)
			e.outAt = now
		}
		return max(e.outTok/(per*n), 0)
	}
	used := int64(0)
	if e.windowAt(e.storeTime(now)) == e.winAt {
		used = e.winUsed
	}
	return max(e.p.Limit/n-used, 0)
}

func (e *lfEntry) spendShare(units int64) {
	if units > 0 && e.p.Algorithm == limiter.TokenBucket {
		e.outTok -= units * e.p.PeriodMicros() * max(e.gateways, 1)
	}
}

// retryAfter estimates when cost could pass: at the next sync when the
// shared state holds it, else when it is refilled (or the window ends).
func (e *lfEntry) retryAfter(now time.Time, cost, avail int64) time.Duration {
	next := max(e.syncedAt.Add(e.p.Sync).Sub(now), time.Millisecond)
	if e.outage {
		next = e.p.Sync
	}
	short := cost - avail - max(e.shared, 0)
	if short <= 0 {
		return next
	}
	per := e.p.PeriodMicros()
	if e.p.Algorithm == limiter.TokenBucket {
		return max(next, time.Duration((short*per+e.p.Limit-1)/e.p.Limit)*time.Microsecond)
	}
	end := e.windowAt(e.storeTime(now)) + per - e.storeTime(now)
	return max(next, time.Duration(end)*time.Microsecond)
}

// undo gives back what a local-first take granted.
func (lf *localFirst) undo(p *limiter.Policy, key string, r limiter.Receipt) (limiter.Decision, error) {
	e, err := lf.entry(p, key)
	if err != nil || e == nil {
		return limiter.Decision{Limit: p.Capacity()}, err
	}
	now := lf.now()
	e.mu.Lock()
	if r.Entry != chargedInStore {
		e.used = max(e.used-r.Cost, 0)
	}
	w := r.Window
	if p.Algorithm == limiter.TokenBucket {
		w = 0
	} else if e.winAt == w {
		e.winUsed = max(e.winUsed-r.Cost, 0)
	}
	e.addPending(w, -r.Cost)
	e.mu.Unlock()
	lf.requeue(e)
	d, _ := e.local(now, 0)
	return d, nil
}
