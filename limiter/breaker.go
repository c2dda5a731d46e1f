package limiter

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrBreakerOpen is the store error while a Breaker is open: the store failed
// repeatedly, and checks skip it until the cool-down ends.
var ErrBreakerOpen = errors.New("limiter: store circuit breaker open")

// StoreState is a store's health as readiness reports it.
type StoreState string

const (
	StoreUp          StoreState = "up"
	StoreDown        StoreState = "down"
	StoreBreakerOpen StoreState = "breaker open"
	// StoreOutOfMemory is a store that answers but refuses writes (Redis at
	// maxmemory with noeviction): PING works, every check fails.
	StoreOutOfMemory StoreState = "out of memory"
)

// Breaker wraps a Store with one process-wide circuit breaker, for stores
// that have none of their own. redisstore breaks per node itself (a failing
// Cluster master must not fail the keys of the others): do not wrap it.
//
// Breaker wraps a Store with a circuit breaker: after Threshold consecutive
// failures it fails every call at once for Cooldown, so that a dead Redis
// costs a request nothing while on_store_error decides, then lets one call
// through to probe it. Safe for concurrent use.
type Breaker struct {
	store     Store
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu        sync.Mutex
	failures  int
	openUntil time.Time
	probing   bool
}

var _ Store = (*Breaker)(nil)

// NewBreaker wraps store. threshold < 1 means 5; cooldown <= 0 means 1s.
func NewBreaker(store Store, threshold int, cooldown time.Duration) *Breaker {
	if threshold < 1 {
		threshold = 5
	}
	if cooldown <= 0 {
		cooldown = time.Second
	}
	return &Breaker{store: store, threshold: threshold, cooldown: cooldown, now: time.Now}
}

// State reports the store's health from the calls seen so far.
func (b *Breaker) State() StoreState {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.now().Before(b.openUntil):
		return StoreBreakerOpen
	case b.failures > 0:
		return StoreDown
	default:
		return StoreUp
	}
}

// Take implements Store.
func (b *Breaker) Take(ctx context.Context, p *Policy, key string, cost int64) (Decision, error) {
	if err := b.admit(); err != nil {
		return Decision{}, err
	}
	d, err := b.store.Take(ctx, p, key, cost)
	b.record(err)
	return d, err
}

// Undo implements Store.
func (b *Breaker) Undo(ctx context.Context, p *Policy, key string, r Receipt) (Decision, error) {
	if err := b.admit(); err != nil {
		return Decision{}, err
	}
	d, err := b.store.Undo(ctx, p, key, r)
	b.record(err)
	return d, err
}

func (b *Breaker) admit() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures < b.threshold {
		return nil
	}
	if b.now().Before(b.openUntil) || b.probing {
		return ErrBreakerOpen
	}
	b.probing = true // half open: this call probes the store
	return nil
}

func (b *Breaker) record(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if err == nil || errors.Is(err, context.Canceled) {
		if err == nil {
			b.failures, b.openUntil = 0, time.Time{}
		}
		return
	}
	b.failures++
	if b.failures >= b.threshold {
		b.openUntil = b.now().Add(b.cooldown)
	}
}
