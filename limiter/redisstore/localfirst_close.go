package redisstore

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
)

// A gateway that stops pushes what it granted and gives its leases back in
// one last sync (Store.Close). Without it, what it granted since its last
// sync was never charged, and the store gave its lease back whole three
// intervals later: the other gateways granted it a second time.

// last runs the last sync of every entry with something to push or a lease
// out, bounded by the store timeout: the entries with grants to push
// first, then those with a lease alone (which the store would give back by
// itself three intervals later). It runs once the sync loop has ended and
// no check can grant any more (closed is set).
func (lf *localFirst) last() {
	now := lf.now()
	lf.mu.RLock()
	var todo []*lfEntry
	for _, e := range lf.entries {
		e.mu.Lock()
		busy := e.pend[0].units != 0 || e.pend[1].units != 0 || e.synced && e.leaseValid(now)
		e.mu.Unlock()
		if busy {
			todo = append(todo, e)
		}
	}
	lf.mu.RUnlock()
	if len(todo) == 0 {
		return
	}
	timeout := time.Duration(lf.s.callTimeout.Load())
	if timeout <= 0 {
		timeout = limiter.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var locked []*lfEntry
	defer func() {
		for _, e := range locked {
			e.unlockSync()
		}
	}()
	// What was granted first, in pipelines of their own: leases alone the
	// store gives back by itself three intervals later.
	var grants, leases []*lfEntry
	for _, e := range todo {
		if !e.tryLockSync() { // a check's round trip is on its way: it pushes
			continue
		}
		locked = append(locked, e)
		if e.pending() != 0 {
			grants = append(grants, e)
		} else {
			leases = append(leases, e)
		}
	}
	keys, lost := lf.lastSync(ctx, grants)
	lf.lastSync(ctx, leases)
	if keys > 0 {
		lf.s.logger.Warn("redisstore: the last sync of local-first policies failed: what this gateway granted since its previous sync is not charged to the shared state",
			slog.Int64("keys", keys), slog.Int64("units", lost))
	}
}

// lastSync gives entries back their leases and pushes their grants, all
// entries of one node in one pipeline, the nodes in parallel, and returns
// the entries it could not sync and the units of their grants.
func (lf *localFirst) lastSync(ctx context.Context, entries []*lfEntry) (keys, lost int64) {
	type item struct {
		e  *lfEntry
		sn snapshot
	}
	byNode := map[*node][]item{}
	for _, e := range entries {
		n, err := lf.s.nodeFor(ctx, e.redisKey)
		if err != nil {
			lost += e.pending()
			keys++
			continue
		}
		byNode[n] = append(byNode[n], item{e, lf.snapshot(e, 0, false)})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for n, items := range byNode {
		wg.Go(func() {
			cmds := make([]*redis.IntSliceCmd, len(items))
			for i, it := range items {
				cmds[i] = redis.NewIntSliceCmd(ctx, it.sn.args...)
			}
			errs := lf.pipeline(ctx, n, cmds, func(i int) *script { return items[i].e.sc })
			mu.Lock()
			defer mu.Unlock()
			for i, it := range items {
				if errs[i] != nil {
					lost += it.sn.pend[0].units + it.sn.pend[1].units
					keys++
				}
			}
		})
	}
	wg.Wait()
	return keys, lost
}

// pending is what e granted and has not pushed yet.
func (e *lfEntry) pending() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pend[0].units + e.pend[1].units
}
