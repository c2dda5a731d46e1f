// Package memstore is the in-process limiter.Store: the same algorithms and
// decisions as limiter/redisstore, for a single instance or as the local
// fallback of a gateway whose Redis is down.
//
// Memory is bounded. A key's state is dropped as soon as it is back to its
// initial value (its quota is full again), and at most MaxKeys keys are held:
// a new key at the cap evicts the key closest to full, the one whose quota
// would be back soonest, since forgetting it loses the least. Both are kept
// in one min-heap ordered by that instant, so sweeping and evicting cost
// O(log n) and need no background goroutine.
package memstore

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/costgate/costgate/limiter"
)

// DefaultMaxKeys is the key cap used when Options.MaxKeys is 0.
const DefaultMaxKeys = 1 << 20

// Options configures a Store. The zero value (or nil) is ready to use.
type Options struct {
	// MaxKeys caps the number of keys held (default DefaultMaxKeys).
	MaxKeys int
	// Clock returns the current time (default time.Now). Tests inject one.
	Clock func() time.Time
	// OnEvict is called (under the store's lock: keep it cheap) each time a
	// key is evicted at the cap, e.g. to count it in a metric.
	OnEvict func()
}

// Store is an in-memory limiter.Store, safe for concurrent use.
type Store struct {
	maxKeys int
	clock   func() time.Time
	onEvict func()

	mu      sync.Mutex
	entries map[entryKey]*entry
	expiry  expiryHeap

	evictions atomic.Uint64
}

var _ limiter.Store = (*Store)(nil)

// entryKey names one key's state under one policy; a struct key spares the
// concatenation a string key would allocate on every call.
type entryKey struct {
	alg       limiter.Algorithm
	name, key string
}

type entry struct {
	key      entryKey
	state    state
	expireAt int64 // µs: the quota is full again, the state can go
	// heapAt orders the heap: a lower bound of expireAt. A take only moves
	// expireAt later, so takes leave the heap alone and the heap catches up
	// when the entry reaches its top; an undo moves it earlier and fixes the
	// heap at once.
	heapAt int64
	index  int // in the heap
}

// New returns a Store; opts may be nil.
func New(opts *Options) *Store {
	s := &Store{maxKeys: DefaultMaxKeys, clock: time.Now, entries: make(map[entryKey]*entry)}
	if opts != nil {
		if opts.MaxKeys > 0 {
			s.maxKeys = opts.MaxKeys
		}
		if opts.Clock != nil {
			s.clock = opts.Clock
		}
		s.onEvict = opts.OnEvict
	}
	return s
}

// Take implements limiter.Store.
func (s *Store) Take(_ context.Context, p *limiter.Policy, key string, cost int64) (limiter.Decision, error) {
	if cost < 0 {
		return limiter.Decision{}, fmt.Errorf("memstore: negative cost %d", cost)
	}
	return s.step(p, key, cost, nil)
}

// Undo implements limiter.Store.
func (s *Store) Undo(_ context.Context, p *limiter.Policy, key string, r limiter.Receipt) (limiter.Decision, error) {
	if r.Cost < 0 {
		return limiter.Decision{}, fmt.Errorf("memstore: negative undo cost %d", r.Cost)
	}
	return s.step(p, key, 0, &r)
}

// Local reports that the store answers in process: no timeout is needed.
func (s *Store) Local() bool { return true }

// Len returns the number of keys held.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Evictions returns how many keys were evicted at the cap so far.
func (s *Store) Evictions() uint64 { return s.evictions.Load() }

func (s *Store) step(p *limiter.Policy, key string, cost int64, undo *limiter.Receipt) (limiter.Decision, error) {
	pr := paramsOf(p)
	id := entryKey{p.Algorithm, p.Name, key}
	now := s.clock().UnixMicro()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	e := s.entries[id]
	var st *state
	if e != nil {
		st = &e.state
	}
	var r result
	switch p.Algorithm {
	case limiter.TokenBucket:
		r = tokenBucket(pr, st, now, cost, undo)
	case limiter.LeakyBucket:
		r = leakyBucket(pr, st, now, cost, undo)
	case limiter.SlidingLog:
		r = slidingLog(pr, st, now, cost, undo)
	case limiter.SlidingWindow:
		r = slidingWindow(pr, st, now, cost, undo)
	case limiter.FixedWindow:
		r = fixedWindow(pr, st, now, cost, p.WindowOffset(key), undo)
	default:
		return limiter.Decision{}, &limiter.PolicyError{Policy: p.Name, Field: "algorithm", Reason: fmt.Sprintf("unknown algorithm %q", p.Algorithm)}
	}
	if r.write {
		s.save(id, e, r.newState, max(now, r.newState.last)+r.ttl, r.ttl)
	}
	return limiter.Decision{
		Allowed:         r.allowed,
		Limit:           pr.cap,
		Remaining:       r.remain,
		RetryAfter:      micros(r.retry),
		ResetAfter:      micros(r.reset),
		Delay:           micros(r.delay),
		ExceedsCapacity: r.exceeds,
		Receipt:         r.receipt,
	}, nil
}

// save stores st under id (e is its current entry or nil), or drops it when
// ttl is 0. Called with s.mu held.
func (s *Store) save(id entryKey, e *entry, st state, expireAt, ttl int64) {
	if ttl <= 0 {
		if e != nil {
			heap.Remove(&s.expiry, e.index)
			delete(s.entries, id)
		}
		return
	}
	if e != nil {
		e.state, e.expireAt = st, expireAt
		if expireAt < e.heapAt {
			e.heapAt = expireAt
			heap.Fix(&s.expiry, e.index)
		}
		return
	}
	if len(s.entries) >= s.maxKeys {
		victim := s.top()
		heap.Pop(&s.expiry)
		delete(s.entries, victim.key)
		s.evictions.Add(1)
		if s.onEvict != nil {
			s.onEvict()
		}
	}
	e = &entry{key: id, state: st, expireAt: expireAt, heapAt: expireAt}
	s.entries[id] = e
	heap.Push(&s.expiry, e)
}

// top returns the entry that is full again soonest, after bringing the
// heap's lower bounds up to date where they lag. Called with s.mu held and
// a non-empty heap.
func (s *Store) top() *entry {
	for {
		e := s.expiry[0]
		if e.heapAt == e.expireAt {
			return e // its bound is exact and no other entry's can be lower
		}
		e.heapAt = e.expireAt
		heap.Fix(&s.expiry, 0)
	}
}

// sweep drops every state whose quota is full again. Called with s.mu held.
func (s *Store) sweep(now int64) {
	for len(s.expiry) > 0 && s.expiry[0].heapAt <= now {
		e := s.top()
		if e.expireAt > now {
			return
		}
		heap.Pop(&s.expiry)
		delete(s.entries, e.key)
	}
}

// expiryHeap orders entries by heapAt, soonest first.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].heapAt < h[j].heapAt }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
