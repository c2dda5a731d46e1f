package memstore

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"

	"github.com/costgate/costgate/limiter"
)

// shard is one lock's share of the keys, with its own cap.
type shard struct {
	mu      sync.Mutex
	maxKeys int
	count   int
	// nextDue is a lower bound of the instants at which the shard's states
	// are full again: no sweep is needed before it.
	nextDue int64
	seed    maphash.Seed
	onEvict func()
	table   table
	entries []entry
	free    []int32 // indices of unused entries
	groups  []group
	// evictions is read without the lock, by Store.Evictions.
	evictions atomic.Uint64
	// Keeps the next shard's lock off this shard's cache lines.
	_ [64]byte
}

// entry is one key's state under one policy.
type entry struct {
	// key, group and st come first: a lookup and a step read only them.
	key   string
	group int32 // index in shard.groups: the policy
	pos   [numHeaps]int32
	st    state
	// Heap keys, each a lower bound of what it stands for (see heap.go).
	// rank (and for the buckets rankLo, frac of a µs in 1/limit) orders the
	// policy's states by quota in use; for the buckets it is the instant
	// they are full again.
	rank, rankLo int64
	expireAt     int64 // windows and logs: back to the initial value
	eventAt      int64 // sliding windows and logs: rank must be looked at again
}

// group is one policy's states in a shard, in the heaps it needs.
type group struct {
	name    string
	pr      params // pr.alg is the algorithm
	quantum int64  // sliding_window: the step of its rank, in units
	heaps   [numHeaps]lazyHeap
}

func (g *group) bucket() bool { return g.pr.alg.bucket() }

// uses reports whether g keeps its states in heap h.
func (g *group) uses(h heapID) bool {
	switch h {
	case byOrder:
		return true
	case byExpiry:
		return !g.bucket()
	}
	return g.pr.alg == slidingLog || g.pr.alg == slidingWindow
}

// expiry is the heap that orders g's states by the instant they go.
func (g *group) expiry() *lazyHeap {
	if g.bucket() {
		return &g.heaps[byOrder]
	}
	return &g.heaps[byExpiry]
}

func (g *group) setParams(pr params) {
	g.pr = pr
	// 256 steps of rank at most: the order of sliding windows is exact to a
	// unit up to a limit of 511, and to 1/256 of the limit above.
	g.quantum = max(1, pr.limit/256)
}

// step runs one algorithm step on key under p. Called with sh.mu held.
func (sh *shard) step(p *limiter.Policy, pr params, key string, tag uint32, now, cost, offset int64, undo *limiter.Receipt, r *result) error {
	if now >= sh.nextDue {
		sh.sweep(now)
	}
	idx := sh.lookup(p, pr, key, tag)
	var st *state
	if idx >= 0 {
		e := &sh.entries[idx]
		if sh.groups[e.group].pr != pr {
			sh.reparam(e.group, pr, now)
		}
		st = &e.st
	}
	switch pr.alg {
	case tokenBucket:
		takeTokenBucket(pr, st, now, cost, undo, r)
	case leakyBucket:
		takeLeakyBucket(pr, st, now, cost, undo, r)
	case slidingLog:
		takeSlidingLog(pr, st, now, cost, undo, r)
	case slidingWindow:
		takeSlidingWindow(pr, st, now, cost, undo, r)
	case fixedWindow:
		takeFixedWindow(pr, st, now, cost, offset, undo, r)
	}
	switch {
	case !r.write:
	case r.ttl <= 0:
		if idx >= 0 {
			sh.drop(idx)
		}
	case idx >= 0:
		e := &sh.entries[idx]
		if pr.alg.bucket() {
			// Only these two change: skip the write barrier of the log pointer.
			e.st.level, e.st.last = r.newState.level, r.newState.last
		} else {
			e.st = r.newState
		}
		sh.rekey(idx, now, r)
	default:
		return sh.insert(p, pr, key, tag, r.newState, now)
	}
	return nil
}

// lookup returns the index of key's entry under p, or -1.
func (sh *shard) lookup(p *limiter.Policy, pr params, key string, tag uint32) int32 {
	t := &sh.table
	if t.n == 0 {
		return -1
	}
	for i := t.home(tag); ; i = (i + 1) & t.mask {
		v := t.slots[i]
		if v == 0 {
			return -1
		}
		if uint32(v>>32) != tag {
			continue
		}
		idx := int32(uint32(v)) - 1
		e := &sh.entries[idx]
		if e.key == key {
			if g := &sh.groups[e.group]; g.pr.alg == pr.alg && g.name == p.Name {
				return idx
			}
		}
	}
}

// groupFor returns the index of p's group, made if needed.
func (sh *shard) groupFor(p *limiter.Policy, pr params, now int64) int32 {
	for i := range sh.groups {
		if g := &sh.groups[i]; g.pr.alg == pr.alg && g.name == p.Name {
			if g.pr != pr {
				sh.reparam(int32(i), pr, now)
			}
			return int32(i)
		}
	}
	g := group{name: p.Name}
	g.setParams(pr)
	for h := range numHeaps {
		g.heaps[h].id = h
	}
	g.heaps[byOrder].pair = g.bucket()
	sh.groups = append(sh.groups, g)
	return int32(len(sh.groups) - 1)
}

// insert adds key's new state, evicting first at the cap.
func (sh *shard) insert(p *limiter.Policy, pr params, key string, tag uint32, st state, now int64) error {
	gi := sh.groupFor(p, pr, now)
	if sh.count >= sh.maxKeys && !sh.evict(now) {
		return fmt.Errorf("memstore: a new key of policy %q: %w", p.Name, ErrFull)
	}
	var idx int32
	if n := len(sh.free); n > 0 {
		idx, sh.free = sh.free[n-1], sh.free[:n-1]
	} else {
		idx = int32(len(sh.entries))
		sh.entries = append(sh.entries, entry{})
	}
	e := &sh.entries[idx]
	*e = entry{key: key, st: st, group: gi}
	g := &sh.groups[gi]
	sh.setKeys(g, e, now)
	for h := range numHeaps {
		if g.uses(h) {
			sh.push(&g.heaps[h], idx)
		}
	}
	sh.table.insert(tag, idx)
	sh.count++
	sh.nextDue = min(sh.nextDue, expiryKey(g, e))
	return nil
}

// drop forgets entry idx.
func (sh *shard) drop(idx int32) {
	e := &sh.entries[idx]
	g := &sh.groups[e.group]
	for h := range numHeaps {
		if g.uses(h) {
			sh.remove(&g.heaps[h], idx)
		}
	}
	sh.table.delete(uint32(maphash.String(sh.seed, e.key)), idx)
	*e = entry{} // lets the key and the log go
	sh.free = append(sh.free, idx)
	sh.count--
}

// setKeys sets e's heap keys exactly.
func (sh *shard) setKeys(g *group, e *entry, now int64) {
	if g.bucket() {
		e.rank, e.rankLo = bucketFullAt(g.pr, &e.st)
		return
	}
	e.expireAt = windowExpiry(g.pr, &e.st)
	e.rank, e.eventAt = windowRank(g.pr, g.quantum, &e.st, now)
}

// rekey brings entry idx's heap keys down to its new state where they are
// now too high; where they are too low they stay, as lower bounds.
func (sh *shard) rekey(idx int32, now int64, r *result) {
	e := &sh.entries[idx]
	g := &sh.groups[e.group]
	if g.bucket() {
		rank, lo := r.fullAt, r.fullFrac
		if rank < e.rank || rank == e.rank && lo < e.rankLo {
			e.rank, e.rankLo = rank, lo
			sh.lowered(&g.heaps[byOrder], idx)
			sh.nextDue = min(sh.nextDue, expiryKey(g, e))
		}
		return
	}
	if exp := windowExpiry(g.pr, &e.st); exp < e.expireAt {
		e.expireAt = exp
		sh.lowered(&g.heaps[byExpiry], idx)
		sh.nextDue = min(sh.nextDue, exp)
	}
	rank, event := windowRank(g.pr, g.quantum, &e.st, now)
	if rank < e.rank {
		e.rank = rank
		sh.lowered(&g.heaps[byOrder], idx)
	}
	if g.uses(byEvent) && event < e.eventAt {
		e.eventAt = event
		sh.lowered(&g.heaps[byEvent], idx)
	}
}

// expiryKey is the instant e's expiry key stands for.
func expiryKey(g *group, e *entry) int64 {
	if g.bucket() {
		if e.rankLo > 0 {
			return e.rank + 1
		}
		return e.rank
	}
	return e.expireAt
}

// sweep drops every state that is full again at now.
func (sh *shard) sweep(now int64) {
	next := int64(math.MaxInt64)
	for gi := range sh.groups {
		g := &sh.groups[gi]
		h := g.expiry()
		for len(h.items) > 0 {
			idx := h.items[0]
			e := &sh.entries[idx]
			if g.bucket() {
				rank, lo := bucketFullAt(g.pr, &e.st)
				if e.rank < rank || e.rank == rank && e.rankLo < lo {
					e.rank, e.rankLo = rank, lo
					sh.raisedTop(h)
					continue
				}
			} else if exp := windowExpiry(g.pr, &e.st); e.expireAt < exp {
				e.expireAt = exp
				sh.raisedTop(h)
				continue
			}
			if expiryKey(g, e) > now {
				next = min(next, expiryKey(g, e))
				break
			}
			sh.drop(idx)
		}
	}
	sh.nextDue = next
}

// evict makes room for one new key by dropping the state whose loss grants
// the least: the least quota in use, as a share of its policy's capacity,
// among the states that are not denying. It reports false when every state
// is denying.
func (sh *shard) evict(now int64) bool {
	best := int32(-1)
	var bestUsed, bestCap int64
	for gi := range sh.groups {
		g := &sh.groups[gi]
		if g.uses(byEvent) {
			sh.catchUp(g, now)
		}
		idx := sh.leastInUse(g, now)
		if idx < 0 {
			continue
		}
		used, capacity, unit := usage(g.pr, &sh.entries[idx].st, now)
		if used > capacity-unit {
			// The policy's least used state denies: so do all the others.
			continue
		}
		if best < 0 || lessShare(used, capacity, bestUsed, bestCap) {
			best, bestUsed, bestCap = idx, used, capacity
		}
	}
	if sh.count < sh.maxKeys {
		return true // catching up found states that had gone
	}
	if best < 0 {
		return false
	}
	sh.drop(best)
	sh.evictions.Add(1)
	if sh.onEvict != nil {
		sh.onEvict()
	}
	return true
}

// leastInUse returns g's state with the least quota in use at now (after
// catchUp for the groups with events), or -1 when g is empty.
func (sh *shard) leastInUse(g *group, now int64) int32 {
	h := &g.heaps[byOrder]
	for len(h.items) > 0 {
		idx := h.items[0]
		e := &sh.entries[idx]
		var rank, lo int64
		if g.bucket() {
			rank, lo = bucketFullAt(g.pr, &e.st)
		} else {
			rank, _ = windowRank(g.pr, g.quantum, &e.st, now)
		}
		if e.rank < rank || e.rank == rank && e.rankLo < lo {
			e.rank, e.rankLo = rank, lo
			sh.raisedTop(h)
			continue
		}
		return idx
	}
	return -1
}

// catchUp brings the ranks of g's sliding states down to now: every state
// whose rank has fallen since it was last looked at is looked at again (a
// sliding log drops the entries that left its window, as its next call
// would).
func (sh *shard) catchUp(g *group, now int64) {
	h := &g.heaps[byEvent]
	for len(h.items) > 0 {
		idx := h.items[0]
		e := &sh.entries[idx]
		if e.eventAt > now {
			return
		}
		if g.pr.alg == slidingLog && trimLog(g.pr, &e.st, now) {
			sh.drop(idx) // every entry left the window: the state is full again
			continue
		}
		rank, event := windowRank(g.pr, g.quantum, &e.st, now)
		e.eventAt = max(event, now+1) // the rank holds until event, which is after now
		sh.raisedTop(h)
		if rank < e.rank {
			e.rank = rank
			sh.lowered(&g.heaps[byOrder], idx)
		}
	}
}

// trimLog drops the entries of a sliding_log that left its window at now,
// as a call at now would, and reports whether none is left.
func trimLog(pr params, st *state, now int64) (empty bool) {
	lg := st.log
	if lg == nil {
		return true
	}
	now = max(now, st.last)
	drop := 0
	for drop < len(lg.entries) && lg.entries[drop].at+pr.per <= now {
		lg.total -= lg.entries[drop].cost
		drop++
	}
	if drop > 0 {
		lg.entries = lg.entries[drop:]
		st.last = now
	}
	return len(lg.entries) == 0
}

// reparam re-sorts group gi after its policy's numbers changed (a reload).
func (sh *shard) reparam(gi int32, pr params, now int64) {
	g := &sh.groups[gi]
	g.setParams(pr)
	for _, idx := range g.heaps[byOrder].items {
		sh.setKeys(g, &sh.entries[idx], now)
	}
	for h := range numHeaps {
		if g.uses(h) {
			sh.rebuild(&g.heaps[h])
		}
	}
	sh.nextDue = math.MinInt64
}
