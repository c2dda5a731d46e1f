package memstore

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"

	"github.com/costgate/costgate/limiter"
)

// shard is one lock's share of the keys, with its own cap.
type shard struct {
	// What every call reads comes first, on one cache line.
	mu sync.Mutex
	// nextDue is a lower bound of the instants at which the shard's states
	// are full again: no sweep is needed before it.
	nextDue int64
	table   table
	entries []entry

	groups  []group
	windows []windowEntry
	free    []int32 // indices of unused entries
	wfree   []int32 // of unused windows
	count   int
	maxKeys int
	seed    maphash.Seed
	onEvict func()
	// evictions is read without the lock, by Store.Evictions.
	evictions atomic.Uint64
	// Keeps the next shard's lock off this shard's cache lines.
	_ [64]byte
}

// entry is one key's state under one policy: 64 bytes, one cache line
// (the slices are line aligned), that hold all a bucket step reads and
// writes. The window and log algorithms keep the rest of their state in a
// windowEntry.
type entry struct {
	key   string
	last  int64 // state.last
	level int64 // state.level
	// Heap keys, each a lower bound of what it stands for (see heap.go).
	// rank (and for the buckets rankLo, frac of a µs in 1/limit) orders the
	// policy's states by quota in use; for the buckets it is the instant
	// they are full again.
	rank, rankLo int64
	group        int32 // index in shard.groups: the policy
	pos          int32 // in the byOrder heap
	window       int32 // index in shard.windows, or -1
	_            int32
}

// windowEntry is the rest of a window or log state, and its other heaps.
type windowEntry struct {
	start, cur, prev int64 // state
	log              *logState
	expireAt         int64 // back to the initial value
	eventAt          int64 // rank must be looked at again
	pos              [numHeaps - 1]int32
}

// stateOf assembles entry idx's state.
func (sh *shard) stateOf(idx int32) state {
	var st state
	sh.loadState(idx, &st)
	return st
}

// loadState assembles entry idx's state into st, field by field: the hot
// path reads it back field by field too, never as a block copy of narrow
// stores just made (a stalled store forward).
func (sh *shard) loadState(idx int32, st *state) {
	e := &sh.entries[idx]
	st.last, st.level = e.last, e.level
	if e.window >= 0 {
		w := &sh.windows[e.window]
		st.start, st.cur, st.prev, st.log = w.start, w.cur, w.prev, w.log
	}
}

// setState stores st into entry idx.
func (sh *shard) setState(idx int32, st *state) {
	e := &sh.entries[idx]
	e.last, e.level = st.last, st.level
	if e.window >= 0 {
		w := &sh.windows[e.window]
		w.start, w.cur, w.prev, w.log = st.start, st.cur, st.prev, st.log
	}
}

// group is one policy's states in a shard, in the heaps it needs.
type group struct {
	name    string
	pr      params // pr.alg is the algorithm
	div     divisors
	quantum int64 // sliding_window: the step of its rank, in units
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
	g.pr, g.div = pr, divisorsOf(pr)
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
	var st state
	held := idx >= 0
	var gi int32
	if held {
		gi = sh.entries[idx].group
		sh.loadState(idx, &st)
	} else {
		gi = sh.groupFor(p, pr, now)
	}
	g := &sh.groups[gi]
	if g.pr != pr {
		sh.reparam(gi, pr, now)
	}
	switch pr.alg {
	case tokenBucket:
		takeTokenBucket(pr, &g.div, &st, held, now, cost, undo, r)
	case leakyBucket:
		takeLeakyBucket(pr, &g.div, &st, held, now, cost, undo, r)
	case slidingLog:
		takeSlidingLog(pr, &st, held, now, cost, undo, r)
	case slidingWindow:
		takeSlidingWindow(pr, &st, held, now, cost, undo, r)
	case fixedWindow:
		takeFixedWindow(pr, &st, held, now, cost, offset, undo, r)
	}
	switch {
	case !r.write:
	case r.ttl <= 0:
		if idx >= 0 {
			sh.drop(idx)
		}
	case held:
		sh.setState(idx, &st)
		if undo != nil || !pr.alg.bucket() {
			// A bucket take only moves fullAt later: its key stays a lower bound.
			sh.rekey(idx, now, r, &st)
		}
	default:
		return sh.insert(p, gi, key, tag, st, now)
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

// insert adds key's new state under group gi, evicting first at the cap.
func (sh *shard) insert(p *limiter.Policy, gi int32, key string, tag uint32, st state, now int64) error {
	if sh.count >= sh.maxKeys && !sh.evict(now) {
		return errNoRoom
	}
	var idx int32
	if n := len(sh.free); n > 0 {
		idx, sh.free = sh.free[n-1], sh.free[:n-1]
	} else {
		if len(sh.entries) == cap(sh.entries) {
			// Double, but never past the cap: a full shard wastes no room.
			grown := make([]entry, len(sh.entries), min(max(2*cap(sh.entries), 16), sh.maxKeys))
			copy(grown, sh.entries)
			sh.entries = grown
		}
		idx = int32(len(sh.entries))
		sh.entries = sh.entries[:idx+1]
	}
	g := &sh.groups[gi]
	e := &sh.entries[idx]
	*e = entry{key: key, group: gi, window: -1}
	if !g.bucket() {
		if n := len(sh.wfree); n > 0 {
			e.window, sh.wfree = sh.wfree[n-1], sh.wfree[:n-1]
		} else {
			e.window = int32(len(sh.windows))
			sh.windows = append(sh.windows, windowEntry{})
		}
	}
	sh.setState(idx, &st)
	sh.setKeys(g, idx, now)
	for h := range numHeaps {
		if g.uses(h) {
			sh.push(&g.heaps[h], idx)
		}
	}
	sh.table.insert(tag, idx)
	sh.count++
	sh.nextDue = min(sh.nextDue, sh.expiryKey(g, idx))
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
	if e.window >= 0 {
		sh.windows[e.window] = windowEntry{} // lets the log go
		sh.wfree = append(sh.wfree, e.window)
	}
	*e = entry{window: -1} // lets the key go
	sh.free = append(sh.free, idx)
	sh.count--
}

// setKeys sets entry idx's heap keys exactly.
func (sh *shard) setKeys(g *group, idx int32, now int64) {
	e := &sh.entries[idx]
	st := sh.stateOf(idx)
	if g.bucket() {
		e.rank, e.rankLo = g.bucketFullAt(&st)
		return
	}
	w := &sh.windows[e.window]
	w.expireAt = windowExpiry(g.pr, &st)
	e.rank, w.eventAt = windowRank(g.pr, g.quantum, &st, now)
}

// rekey brings entry idx's heap keys down to its new state where they are
// now too high; where they are too low they stay, as lower bounds.
func (sh *shard) rekey(idx int32, now int64, r *result, st *state) {
	e := &sh.entries[idx]
	g := &sh.groups[e.group]
	if g.bucket() {
		rank, lo := r.fullAt, r.fullFrac
		if rank < e.rank || rank == e.rank && lo < e.rankLo {
			e.rank, e.rankLo = rank, lo
			sh.lowered(&g.heaps[byOrder], idx)
			sh.nextDue = min(sh.nextDue, sh.expiryKey(g, idx))
		}
		return
	}
	w := &sh.windows[e.window]
	if exp := windowExpiry(g.pr, st); exp < w.expireAt {
		w.expireAt = exp
		sh.lowered(&g.heaps[byExpiry], idx)
		sh.nextDue = min(sh.nextDue, exp)
	}
	rank, event := windowRank(g.pr, g.quantum, st, now)
	if rank < e.rank {
		e.rank = rank
		sh.lowered(&g.heaps[byOrder], idx)
	}
	if g.uses(byEvent) && event < w.eventAt {
		w.eventAt = event
		sh.lowered(&g.heaps[byEvent], idx)
	}
}

// expiryKey is the instant entry idx's expiry key stands for.
func (sh *shard) expiryKey(g *group, idx int32) int64 {
	e := &sh.entries[idx]
	if g.bucket() {
		if e.rankLo > 0 {
			return e.rank + 1
		}
		return e.rank
	}
	return sh.windows[e.window].expireAt
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
			st := sh.stateOf(idx)
			if g.bucket() {
				rank, lo := g.bucketFullAt(&st)
				if e.rank < rank || e.rank == rank && e.rankLo < lo {
					e.rank, e.rankLo = rank, lo
					sh.raisedTop(h)
					continue
				}
			} else if w := &sh.windows[e.window]; w.expireAt < windowExpiry(g.pr, &st) {
				w.expireAt = windowExpiry(g.pr, &st)
				sh.raisedTop(h)
				continue
			}
			if exp := sh.expiryKey(g, idx); exp > now {
				next = min(next, exp)
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
		st := sh.stateOf(idx)
		used, capacity, unit := usage(g.pr, &st, now)
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
		st := sh.stateOf(idx)
		var rank, lo int64
		if g.bucket() {
			rank, lo = g.bucketFullAt(&st)
		} else {
			rank, _ = windowRank(g.pr, g.quantum, &st, now)
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
		w := &sh.windows[e.window]
		if w.eventAt > now {
			return
		}
		st := sh.stateOf(idx)
		if g.pr.alg == slidingLog {
			if trimLog(g.pr, &st, now) {
				sh.drop(idx) // every entry left the window: the state is full again
				continue
			}
			sh.setState(idx, &st)
		}
		rank, event := windowRank(g.pr, g.quantum, &st, now)
		w.eventAt = max(event, now+1) // the rank holds until event, which is after now
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
		sh.setKeys(g, idx, now)
	}
	for h := range numHeaps {
		if g.uses(h) {
			sh.rebuild(&g.heaps[h])
		}
	}
	sh.nextDue = math.MinInt64
}
