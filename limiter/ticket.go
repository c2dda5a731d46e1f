package limiter

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Ticket is what a granted request leaves to do when its response has
// ended: release its Concurrency holds, renewing them meanwhile, and
// refund the policies whose RefundStatus the response's status matches.
//
// A door takes a ticket right after AllowAll granted, and calls End once
// the response has ended, whatever ended it: the last byte written, the
// client gone, a panic (End in a defer), the server stopping. End must be
// called, as a context's cancel func must: until then the ticket renews its
// holds every lease/3. A nil *Ticket has nothing to do.
//
//	ds, ok := lim.AllowAll(ctx, reqs)
//	if !ok { ... answer the denial ... }
//	t := lim.Ticket(reqs, ds)
//	defer func() { t.End(status) }()
type Ticket struct {
	l     *Limiter
	items []ticketItem
	ended atomic.Bool
	// mu serialises renewals and the end, so that no renewal reaches the
	// store after the release.
	mu         sync.Mutex
	renewEvery time.Duration
	timer      *time.Timer
	lost       chan struct{}
	lostOnce   sync.Once
}

// renewInterval is how often a ticket renews a hold of lease: a third of
// it, so that two renewals can fail before the lease runs out. Tests
// shorten it (export_test.go).
var renewInterval = func(lease time.Duration) time.Duration { return lease / 3 }

// ticketItem is one decision a ticket acts on at the end.
type ticketItem struct {
	policy  *Policy // as it decided: the local policy after a store error under on_store_error: local
	key     string
	receipt Receipt
	local   bool // decided by the local fallback, which keeps its state
	hold    bool // a Concurrency hold: renewed, then released
	// until is when the hold's lease ends at the latest, as far as this
	// gateway knows: a release that keeps failing is retried until then.
	until time.Time
	gone  bool // a renewal found the hold gone and could not take it again
}

// Ticket returns what the request that AllowAll granted with ds (for reqs,
// in order) must do when its response ends, or nil when it need do nothing
// (no Concurrency hold taken, no RefundStatus charge made).
func (l *Limiter) Ticket(reqs []Request, ds []Decision) *Ticket {
	n := 0
	for i := range ds {
		if endsWithResponse(&ds[i]) && i < len(reqs) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	t := &Ticket{l: l, items: make([]ticketItem, 0, n)}
	now := time.Now()
	for i := range ds {
		d := &ds[i]
		if !endsWithResponse(d) || i >= len(reqs) {
			continue
		}
		it := ticketItem{policy: d.Policy, key: reqs[i].Key, receipt: d.Receipt, local: d.Outcome == ErrorLocal}
		if d.Policy.Algorithm == Concurrency {
			lease := d.Policy.EffectiveLease()
			it.hold, it.until = true, now.Add(lease)
			if every := renewInterval(lease); t.renewEvery == 0 || every < t.renewEvery {
				t.renewEvery = every
			}
		}
		t.items = append(t.items, it)
	}
	if t.renewEvery > 0 {
		t.lost = make(chan struct{})
		t.mu.Lock() // the first renewal, which reads timer, waits for it
		t.timer = time.AfterFunc(t.renewEvery, t.renew)
		t.mu.Unlock()
	}
	return t
}

// endsWithResponse reports whether d charged something its request's end
// acts on: a hold, or a charge its status may refund.
func endsWithResponse(d *Decision) bool {
	return d.Policy != nil && d.Receipt.Cost > 0 && d.HasState() && d.Policy.EndsWithResponse()
}

// End ends the request with its response's status (0 when no response was
// written: the client went away, the handler panicked): the policies whose
// RefundStatus matches the status are refunded, and every hold is released.
// Only the first call acts. End does not wait for the store: with a store
// out of process the calls go from a goroutine of their own, after the
// handler has returned, so they add nothing to the response's latency. A
// release that fails is retried until the hold's lease would have freed it
// anyway; a refund is not retried (it may have been made).
func (t *Ticket) End(status int) {
	if t == nil || !t.ended.CompareAndSwap(false, true) {
		return
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	if t.inProcess() {
		t.finish(status)
		return
	}
	t.l.ends.add()
	go func() {
		defer t.l.ends.done()
		t.finish(status)
	}()
}

// Lost is closed when a renewal found one of the ticket's holds gone (its
// lease ran out while the store could not be reached, or the store lost
// it) and the key had no place to take it again: the request now runs
// unheld. A door may end the request then (a subscription); a REST request
// runs to its end. Nil, which never closes, for a ticket without holds.
func (t *Ticket) Lost() <-chan struct{} {
	if t == nil {
		return nil
	}
	return t.lost
}

// inProcess reports whether every store the ticket acts on answers in
// process, so that End acts at once.
func (t *Ticket) inProcess() bool {
	if t.l.storeIsLocal() {
		return true
	}
	for i := range t.items {
		if !t.items[i].local {
			return false
		}
	}
	return true
}

func (t *Ticket) finish(status int) {
	t.mu.Lock() // after a renewal in flight
	defer t.mu.Unlock()
	for i := range t.items {
		it := &t.items[i]
		switch {
		case it.hold:
			if _, err := t.l.undoItem(it); err != nil {
				t.l.retryRelease(*it, err)
			}
		case it.policy.RefundsStatus(status):
			if _, err := t.l.undoItem(it); err != nil {
				t.l.logStoreError(slog.LevelWarn, it.policy, "refund by response status failed; the request stays charged", "status", status, "err", err)
			}
		}
	}
}

// renew extends the lease of every hold, then comes back in renewEvery.
func (t *Ticket) renew() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended.Load() {
		return
	}
	start := time.Now()
	for i := range t.items {
		it := &t.items[i]
		if !it.hold || it.gone {
			continue
		}
		store := t.l.store
		if it.local {
			store = t.l.local
		}
		r, ok := store.(Renewer)
		if !ok {
			continue // CheckPolicy refuses such a store for Concurrency
		}
		d, err := t.l.call(context.Background(), func(ctx context.Context) (Decision, error) {
			return r.Renew(ctx, it.policy, it.key, it.receipt)
		})
		switch {
		case err != nil:
			t.l.logStoreError(slog.LevelWarn, it.policy, "concurrency hold renewal failed; the hold lasts until its lease ends unless the next renewal succeeds", "err", err)
		case !d.Allowed:
			it.gone = true
			t.l.logStoreError(slog.LevelWarn, it.policy, "concurrency hold lost: its lease ran out and the key has no place to take it again; the request runs on unheld")
			t.lostOnce.Do(func() { close(t.lost) })
		default:
			it.until = start.Add(it.policy.EffectiveLease())
		}
	}
	t.timer.Reset(t.renewEvery)
}

// undoItem gives back what it's decision charged: a hold released, a
// charge refunded.
func (l *Limiter) undoItem(it *ticketItem) (Decision, error) {
	store := l.store
	if it.local {
		store = l.local
	}
	d, err := l.call(context.Background(), func(ctx context.Context) (Decision, error) {
		return store.Undo(ctx, it.policy, it.key, it.receipt)
	})
	if err == nil && !it.local && it.policy.LocalCache {
		l.denied.forget(denyKey{it.policy, it.key})
	}
	return d, err
}

// Retries of releases that failed.
const (
	maxPendingReleases = 1 << 16
	retryFirst         = 100 * time.Millisecond
	retryMax           = 2 * time.Second
)

// endState tracks the goroutines finishing tickets, for Drain, and the
// releases waiting to be tried again.
type endState struct {
	mu       sync.Mutex
	running  int
	idle     chan struct{} // closed when running falls back to 0
	retry    []ticketItem
	retrying bool
}

func (e *endState) add() {
	e.mu.Lock()
	if e.running == 0 {
		e.idle = make(chan struct{})
	}
	e.running++
	e.mu.Unlock()
}

func (e *endState) done() {
	e.mu.Lock()
	if e.running--; e.running == 0 {
		close(e.idle)
	}
	e.mu.Unlock()
}

// retryRelease queues a release that failed; a worker tries the queue
// again, backing off, until each hold's lease has passed.
func (l *Limiter) retryRelease(it ticketItem, err error) {
	if isPolicyError(err) {
		return
	}
	e := &l.ends
	e.mu.Lock()
	if len(e.retry) >= maxPendingReleases {
		e.mu.Unlock()
		l.logStoreError(slog.LevelError, it.policy, "concurrency hold release failed and too many wait to be retried; its lease will free it", "err", err)
		return
	}
	e.retry = append(e.retry, it)
	start := !e.retrying
	e.retrying = true
	e.mu.Unlock()
	l.logStoreError(slog.LevelWarn, it.policy, "concurrency hold release failed; retrying until its lease ends", "err", err)
	if start {
		e.add()
		go l.retryReleases()
	}
}

func (l *Limiter) retryReleases() {
	e := &l.ends
	defer e.done()
	wait := retryFirst
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		<-t.C
		e.mu.Lock()
		batch := e.retry
		e.retry = nil
		e.mu.Unlock()
		var again []ticketItem
		for i := range batch {
			it := &batch[i]
			if time.Now().After(it.until) {
				continue // its lease freed it
			}
			if _, err := l.undoItem(it); err != nil && !isPolicyError(err) {
				again = append(again, *it)
			}
		}
		e.mu.Lock()
		e.retry = append(again, e.retry...)
		if len(e.retry) == 0 {
			e.retrying = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		wait = min(2*wait, retryMax)
		t.Reset(wait)
	}
}

// Drain waits until what ended tickets left to do has reached the store:
// the releases and refunds on their way, and the releases being retried
// (each until its lease would have freed it), or until ctx ends. A server
// drains its limiter after its last request and before it closes the store.
func (l *Limiter) Drain(ctx context.Context) error {
	e := &l.ends
	e.mu.Lock()
	if e.running == 0 {
		e.mu.Unlock()
		return nil
	}
	idle := e.idle
	e.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
