package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
)

// The sync loop of the local-first policies (localfirst.go): one per
// Store, a pipeline per node each tick.

// setTick makes the loop tick at least every d.
func (lf *localFirst) setTick(d time.Duration) {
	for {
		t := lf.tick.Load()
		if t != 0 && time.Duration(t) <= d {
			return
		}
		if lf.tick.CompareAndSwap(t, int64(d)) {
			select {
			case lf.retick <- struct{}{}:
			default:
			}
			return
		}
	}
}

// run starts the sync loop (unless tests drive it).
func (lf *localFirst) run() {
	if lf.manual {
		return
	}
	lf.s.wg.Add(1)
	go lf.loop()
}

func (lf *localFirst) loop() {
	defer lf.s.wg.Done()
	select {
	case <-lf.s.stop:
		return
	case <-lf.retick:
	}
	t := time.NewTicker(time.Duration(lf.tick.Load()))
	defer t.Stop()
	for ticks := 1; ; ticks++ {
		select {
		case <-lf.s.stop:
			return
		case <-lf.retick:
			t.Reset(time.Duration(lf.tick.Load()))
		case <-t.C:
			lf.flush(context.Background())
			if ticks%idleSweeps == 0 {
				lf.sweep(lf.now())
			}
		}
	}
}

// sweep drops entries unused for idleSweeps of their intervals with nothing
// left to push.
func (lf *localFirst) sweep(now time.Time) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	for k, e := range lf.entries {
		e.mu.Lock()
		idle := now.Sub(e.lastUse) > idleSweeps*e.p.Sync && e.pend[0].units == 0 && e.pend[1].units == 0 && !e.queued.Load()
		e.mu.Unlock()
		if idle {
			delete(lf.entries, k)
		}
	}
}

// flush syncs every entry that granted or denied since its last sync: one
// pipeline per node, the nodes in parallel.
func (lf *localFirst) flush(ctx context.Context) {
	lf.dirtyMu.Lock()
	todo := lf.dirty
	lf.dirty = nil
	lf.dirtyMu.Unlock()
	type item struct {
		e  *lfEntry
		sn snapshot
	}
	byNode := map[*node][]item{}
	for _, e := range todo {
		e.queued.Store(false)
		if !e.tryLockSync() {
			lf.requeue(e) // a round trip of its own is on its way
			continue
		}
		n, err := lf.s.nodeFor(ctx, e.redisKey)
		if err != nil {
			e.fail(lf.now(), lf.gateways.Load())
			e.unlockSync()
			lf.requeue(e)
			continue
		}
		byNode[n] = append(byNode[n], item{e, lf.snapshot(e, 0, true)})
	}
	var wg sync.WaitGroup
	for n, items := range byNode {
		wg.Go(func() {
			cmds := make([]*redis.IntSliceCmd, len(items))
			for i, it := range items {
				cmds[i] = redis.NewIntSliceCmd(ctx, it.sn.args...)
			}
			errs := lf.pipeline(ctx, n, cmds, func(i int) *script { return items[i].e.sc })
			now := lf.now()
			for i, it := range items {
				r, err := syncReply{}, errs[i]
				if err == nil {
					r, err = decodeSync(cmds[i].Val())
				}
				if err != nil {
					if !isRedirect(err) { // a moved slot is no outage: next time, to its new node
						it.e.fail(now, lf.gateways.Load())
					}
					lf.requeue(it.e)
				} else {
					lf.apply(it.e, it.sn, r, now)
				}
				it.e.unlockSync()
			}
		})
	}
	wg.Wait()
}

// pipeline sends cmds to n in one round trip (the NOSCRIPT ones again as
// EVAL, once per script load), through n's breaker, and returns each
// command's error.
func (lf *localFirst) pipeline(ctx context.Context, n *node, cmds []*redis.IntSliceCmd, sc func(int) *script) []error {
	errs := make([]error, len(cmds))
	if !n.br.allow() {
		for i := range errs {
			errs[i] = fmt.Errorf("node %s: %w", n.addr, ErrBreakerOpen)
		}
		return errs
	}
	timeout := max(time.Duration(lf.s.callTimeout.Load()), 250*time.Millisecond)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	trips := n.sendScripts(ctx, cmds, RoundTripSync, func(i int) []any { return sc(i).eval(cmds[i].Args()) })
	lf.roundTrips.Add(int64(trips))
	for i, cmd := range cmds {
		errs[i] = cmd.Err()
		if errs[i] != nil && isRedirect(errs[i]) && lf.s.cluster != nil {
			lf.s.cluster.ReloadState(ctx)
		}
	}
	n.record(errs...)
	return errs
}

// takeAllSync is TakeAll when some of reqs are local-first: the exact
// ones in one TakeAll (one round trip), the local-first ones in process up
// to the first denial; a denial gives back what every other one charged.
// Local-first and exact policies never share a state, so deciding the
// exact ones first changes no decision.
func (s *Store) takeAllSync(ctx context.Context, reqs []limiter.Request) ([]limiter.Decision, error) {
	out := make([]limiter.Decision, len(reqs))
	decided := make([]bool, len(reqs))
	stop := len(reqs) // the first enforced denial
	var idx []int
	var exact []limiter.Request
	for i, r := range reqs {
		if r.Policy.Sync == 0 {
			idx, exact = append(idx, i), append(exact, r)
		}
	}
	if len(exact) > 0 {
		ds, err := s.TakeAll(ctx, exact)
		if err != nil {
			return nil, err
		}
		for k, d := range ds {
			out[idx[k]], decided[idx[k]] = d, true
			if !d.Allowed && exact[k].Policy.EffectiveMode() == limiter.Enforce {
				stop = idx[k]
			}
		}
	}
	for i := 0; i < stop; i++ {
		r := reqs[i]
		if r.Policy.Sync == 0 {
			continue
		}
		d, err := s.lf.take(ctx, r.Policy, r.Key, max(r.Cost, 1))
		if err != nil {
			s.undoAll(ctx, reqs, out, decided, -1)
			return nil, err
		}
		out[i], decided[i] = d, true
		if !d.Allowed && r.Policy.EffectiveMode() == limiter.Enforce {
			stop = i
		}
	}
	if stop == len(reqs) {
		return out, nil
	}
	s.undoAll(ctx, reqs, out, decided, stop)
	return out[:stop+1], nil
}

// undoAll gives back what every decided request but skip charged, newest
// first, each then reporting the state it leaves.
func (s *Store) undoAll(ctx context.Context, reqs []limiter.Request, ds []limiter.Decision, decided []bool, skip int) {
	for i := len(ds) - 1; i >= 0; i-- {
		if !decided[i] || i == skip || ds[i].Receipt.Cost == 0 {
			continue
		}
		if after, err := s.Undo(ctx, reqs[i].Policy, reqs[i].Key, ds[i].Receipt); err == nil {
			ds[i].Remaining, ds[i].ResetAfter = after.Remaining, after.ResetAfter
		}
		ds[i].Receipt = limiter.Receipt{}
	}
}

func anySync(reqs []limiter.Request) bool {
	for _, r := range reqs {
		if r.Policy.Sync > 0 {
			return true
		}
	}
	return false
}
