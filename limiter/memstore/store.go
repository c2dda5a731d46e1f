package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"math/bits"
	"time"

	"github.com/costgate/costgate/limiter"
)

// DefaultMaxKeys is the key cap used when Options.MaxKeys is 0.
const DefaultMaxKeys = 1 << 20

// errNoRoom is a shard's answer to a new key when it is at its cap and
// every state it holds is denying: the policy's overflow state decides
// (overflow.go).
var errNoRoom = errors.New("memstore: at the key cap and every key is denying")

// Options configures a Store. The zero value (or nil) is ready to use.
type Options struct {
	// MaxKeys caps the number of keys held (default DefaultMaxKeys). A key's
	// state is dropped as soon as its quota is full again (by the next call
	// that lands in its shard, or by Store.Len). At the cap a new key evicts
	// the state whose loss grants the least: the least quota in use, as a
	// share of its policy's capacity, among the states that are not denying
	// (that could grant a cost of 1 now), so that a flood of new identities
	// cannot unlock a locked login. When every state is denying, the new key
	// is decided by its policy's overflow state, one key's quota shared by
	// every key that found no room: never a store error, which a policy that
	// fails open would serve unlimited. The cap is kept per shard (up to 16,
	// by a hash seeded at random per store, each at least 4096 keys), so a
	// shard may evict while the store holds a few percent fewer than MaxKeys.
	//
	// A token_bucket key costs about 105 bytes at a million keys, its key
	// string included (a 64-byte entry, 11 to 21 bytes of key table, 4 of
	// heap, and the key); window and log states add 56 bytes, a sliding log
	// 24 per entry (bench/'s BenchmarkMemoryPerKey; TestMemoryPerKey holds it
	// to 200 bytes).
	MaxKeys int
	// Clock returns the current time (default: the system's wall clock in
	// microseconds, on linux/amd64 a gettimeofday vDSO call, half the cost
	// of time.Now). Tests inject one. As in Redis, a key's time is clamped
	// to the newest it has seen.
	Clock func() time.Time
	// OnEvict is called each time a key is evicted at the cap, e.g. to count
	// it in a metric. It runs under a shard's lock: keep it cheap.
	OnEvict func()
	// OnOverflow is called with the policy's name each time a policy's
	// overflow state decides a new key: the key's shard was at the cap with
	// every state denying (see MaxKeys). Keep it cheap. Overflow decisions
	// are also logged, at most a line a second per policy; the overflow
	// states are not counted in Store.Len or the cap.
	OnOverflow func(policy string)
	// Logger receives the overflow lines, at most one a second per policy
	// (default slog.Default()).
	Logger *slog.Logger
}

// Store is an in-memory limiter.Store, safe for concurrent use.
type Store struct {
	seed   maphash.Seed
	shift  uint // a key's shard is its hash >> shift
	shards []shard
	clock  func() time.Time
	holds  holdTable // concurrency holds (concurrency.go)
	// overflow holds each policy's overflow state (overflow.go).
	overflow overflow
}

var (
	_ limiter.Store = (*Store)(nil)
	_ limiter.Local = (*Store)(nil)
)

const (
	// maxShards bounds the lock striping. 16 locks seldom collide on the
	// cores a gateway has; more shards spread the entries a run of calls
	// touches over more memory, which measured slower on one core (at 10k
	// keys, 64 shards cost 3% more a check than 16).
	maxShards = 16
	// minShardKeys is the smallest per-shard cap worth a shard of its own:
	// with at least this many keys each, the shards fill within a few
	// percent of each other.
	minShardKeys = 4096
)

// New returns a Store; opts may be nil.
func New(opts *Options) *Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	n := 1
	for n < maxShards && o.MaxKeys/(2*n) >= minShardKeys {
		n *= 2
	}
	s := &Store{
		seed:   maphash.MakeSeed(),
		shift:  uint(64 - bits.TrailingZeros(uint(n))),
		shards: make([]shard, n),
		clock:  o.Clock,
	}
	for i := range s.shards {
		sh := &s.shards[i]
		// The shards share the cap out; the first ones take the remainder.
		sh.maxKeys = o.MaxKeys / n
		if i < o.MaxKeys%n {
			sh.maxKeys++
		}
		sh.seed, sh.onEvict, sh.nextDue = s.seed, o.OnEvict, math.MaxInt64
	}
	s.overflow.init(s.seed, &o, o.MaxKeys)
	return s
}

// Take implements limiter.Store.
func (s *Store) Take(_ context.Context, p *limiter.Policy, key string, cost int64) (d limiter.Decision, err error) {
	if cost < 0 {
		return d, fmt.Errorf("memstore: negative cost %d", cost)
	}
	if p.Algorithm == limiter.Concurrency {
		return s.concurrency(p, key, holdTake, cost, "")
	}
	var r result
	var capacity int64
	if capacity, err = s.step(p, key, cost, nil, &r); err == nil {
		r.fill(&d, capacity)
	}
	return d, err
}

// Undo implements limiter.Store.
func (s *Store) Undo(_ context.Context, p *limiter.Policy, key string, r limiter.Receipt) (limiter.Decision, error) {
	if r.Cost < 0 {
		return limiter.Decision{}, fmt.Errorf("memstore: negative undo cost %d", r.Cost)
	}
	if p.Algorithm == limiter.Concurrency {
		return s.concurrency(p, key, holdRelease, 0, r.Entry)
	}
	var res result
	capacity, err := s.step(p, key, 0, &r, &res)
	var d limiter.Decision
	if err == nil {
		res.fill(&d, capacity)
	}
	return d, err
}

// Local reports that the store answers in process: no timeout is needed.
func (s *Store) Local() bool { return true }

// Len returns the number of keys held, after dropping the states that are
// full again.
func (s *Store) Len() int {
	n := 0
	now := s.now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if now >= sh.nextDue {
			sh.sweep(now)
		}
		n += sh.count
		sh.mu.Unlock()
	}
	return n
}

// Overflows returns how many new keys the policies' overflow states decided
// so far.
func (s *Store) Overflows() uint64 { return s.overflow.count.Load() }

// Evictions returns how many keys were evicted at the cap so far.
func (s *Store) Evictions() uint64 {
	var n uint64
	for i := range s.shards {
		n += s.shards[i].evictions.Load()
	}
	return n
}

func (s *Store) now() int64 {
	if s.clock != nil {
		return s.clock().UnixMicro()
	}
	return wallMicros()
}

// step runs one algorithm step into r and returns the policy's capacity.
func (s *Store) step(p *limiter.Policy, key string, cost int64, undo *limiter.Receipt, r *result) (int64, error) {
	pr := paramsOf(p)
	var offset int64
	switch pr.alg {
	case 0:
		return 0, &limiter.PolicyError{Policy: p.Name, Field: "algorithm", Reason: fmt.Sprintf("unknown algorithm %q", p.Algorithm)}
	case fixedWindow:
		offset = p.WindowOffset(key)
	}
	if pr.limit < 1 || pr.per < 1 || pr.cap < 1 {
		// Validate refuses these; a store must not divide by them.
		return 0, &limiter.PolicyError{Policy: p.Name, Field: "limit", Reason: "limit, period and burst must be positive"}
	}
	now := s.now()
	if own, ok := isOverflow(undo); ok {
		return pr.cap, s.overflow.step(p, pr, now, 0, &own, r)
	}
	h := maphash.String(s.seed, key)
	sh := &s.shards[h>>s.shift]

	sh.mu.Lock()
	err := sh.step(p, pr, key, uint32(h), now, cost, offset, undo, r)
	sh.mu.Unlock()
	if err == errNoRoom {
		if undo != nil {
			return pr.cap, nil // the key holds nothing to give back
		}
		return pr.cap, s.overflow.step(p, pr, now, cost, nil, r)
	}
	return pr.cap, err
}

// fill writes r into d field by field: building a Decision aside and
// copying it costs more than the bucket arithmetic (the wide copy stalls on
// the narrow stores just made).
func (r *result) fill(d *limiter.Decision, capacity int64) {
	d.Allowed = r.allowed
	d.Limit = capacity
	d.Remaining = r.remain
	d.RetryAfter = micros(r.retry)
	d.ResetAfter = micros(r.reset)
	d.Delay = micros(r.delay)
	d.ExceedsCapacity = r.exceeds
	d.Receipt.Cost, d.Receipt.Window, d.Receipt.Entry = r.receipt.Cost, r.receipt.Window, r.receipt.Entry
}
