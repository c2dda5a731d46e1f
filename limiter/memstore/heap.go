package memstore

// A shard keeps up to three heaps per policy over its entries (indices into
// shard.entries). Each entry holds its own key for each heap, and that key
// is a lower bound of the value it stands for: a take only ever raises the
// value (later full again, more in use, a later event), so takes leave the
// heaps alone, and a heap catches up when a stale entry reaches its top
// (raise its key, sift it down, look again). Anything that lowers a value
// (an undo, a refund, an event) lowers the key and sifts it up at once.
// Whatever the staleness, the top's key is the least of all keys, so once
// the top's key is exact, the top is the true least.

// heapID names one of an entry's heaps; it indexes entry.pos.
type heapID uint8

const (
	// byOrder ranks a policy's states by quota in use, least first. For the
	// buckets, whose order is their full-again instant, it is also the
	// expiry order.
	byOrder heapID = iota
	// byExpiry orders window and log states by the instant they are back
	// to their initial value.
	byExpiry
	// byEvent orders sliding_window and sliding_log states by the instant
	// their order key next falls.
	byEvent
	numHeaps
)

type lazyHeap struct {
	id    heapID
	pair  bool // byOrder of a bucket policy: ties on rank are broken by rankLo
	items []int32
}

// key returns entry idx's key in h (rank, rankLo for the pair).
func (sh *shard) key(h *lazyHeap, idx int32) (int64, int64) {
	e := &sh.entries[idx]
	switch h.id {
	case byExpiry:
		return sh.windows[e.window].expireAt, 0
	case byEvent:
		return sh.windows[e.window].eventAt, 0
	}
	if h.pair {
		return e.rank, e.rankLo
	}
	return e.rank, 0
}

// posOf points at entry idx's position in h.
func (sh *shard) posOf(h *lazyHeap, idx int32) *int32 {
	e := &sh.entries[idx]
	if h.id == byOrder {
		return &e.pos
	}
	return &sh.windows[e.window].pos[h.id-1]
}

func (sh *shard) less(h *lazyHeap, a, b int) bool {
	a1, a2 := sh.key(h, h.items[a])
	b1, b2 := sh.key(h, h.items[b])
	return a1 < b1 || a1 == b1 && a2 < b2
}

func (sh *shard) swap(h *lazyHeap, a, b int) {
	h.items[a], h.items[b] = h.items[b], h.items[a]
	*sh.posOf(h, h.items[a]) = int32(a)
	*sh.posOf(h, h.items[b]) = int32(b)
}

func (sh *shard) up(h *lazyHeap, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !sh.less(h, i, parent) {
			return
		}
		sh.swap(h, i, parent)
		i = parent
	}
}

func (sh *shard) down(h *lazyHeap, i int) {
	n := len(h.items)
	for {
		least, l := i, 2*i+1
		if l < n && sh.less(h, l, least) {
			least = l
		}
		if r := l + 1; r < n && sh.less(h, r, least) {
			least = r
		}
		if least == i {
			return
		}
		sh.swap(h, i, least)
		i = least
	}
}

func (sh *shard) push(h *lazyHeap, idx int32) {
	*sh.posOf(h, idx) = int32(len(h.items))
	h.items = append(h.items, idx)
	sh.up(h, len(h.items)-1)
}

// remove takes entry idx out of h.
func (sh *shard) remove(h *lazyHeap, idx int32) {
	i := int(*sh.posOf(h, idx))
	last := len(h.items) - 1
	if i != last {
		sh.swap(h, i, last)
	}
	h.items = h.items[:last]
	if i != last {
		sh.down(h, i)
		sh.up(h, i)
	}
}

// lowered sifts entry idx up after its key in h was lowered.
func (sh *shard) lowered(h *lazyHeap, idx int32) { sh.up(h, int(*sh.posOf(h, idx))) }

// raisedTop sifts the top down after its key was raised.
func (sh *shard) raisedTop(h *lazyHeap) { sh.down(h, 0) }

// rebuild restores the heap order after every key in h changed.
func (sh *shard) rebuild(h *lazyHeap) {
	for i, idx := range h.items {
		*sh.posOf(h, idx) = int32(i)
	}
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		sh.down(h, i)
	}
}
