package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"

	"github.com/costgate/costgate/limiter"
)

// Concurrency holds are kept apart from the rate states, step for step as
// the Redis store's concurrency.lua keeps them: a set of holds per key,
// each with its id and the instant its lease ends. They are never evicted
// at the key cap (dropping one would admit a request over the limit), and
// need not be: there are as many as requests in flight, and one whose
// request never ended goes with its lease. A key's set is dropped when its
// last hold is released, and swept once its leases have all run out.

var _ limiter.Renewer = (*Store)(nil)

// holdShards stripes the holds' locks, as the rate states' are.
const holdShards = 16

// sweepEvery is how often a shard drops the sets whose leases all ran out.
const sweepEvery = 1_000_000 // µs

type holdTable struct {
	shards [holdShards]holdShard
}

type holdShard struct {
	mu        sync.Mutex
	sets      map[holdKey]*holdSet
	nextSweep int64
	_         [64]byte // keeps the next shard's lock off this one's cache line
}

type holdKey struct{ policy, key string }

// holdSet is one key's holds, in the order they were taken.
type holdSet struct {
	holds []hold
}

type hold struct {
	id  int64 // the time it was taken (µs), made unique within the set
	exp int64 // when its lease ends (µs): it counts while now < exp
}

// Concurrency operations, as concurrency.lua numbers them.
const (
	holdTake = iota
	holdRelease
	holdRenew
)

// concurrency runs one step of a Concurrency policy: op on key, with the
// hold a receipt names (release, renew) or a cost (take; 0 reads).
func (s *Store) concurrency(p *limiter.Policy, key string, op int, cost int64, ref string) (limiter.Decision, error) {
	if p.Limit < 1 {
		return limiter.Decision{}, &limiter.PolicyError{Policy: p.Name, Field: "limit", Reason: "must be positive"}
	}
	var id int64
	if op != holdTake {
		var err error
		if id, err = strconv.ParseInt(ref, 10, 64); err != nil {
			// Not a receipt of a hold: nothing it could release or renew.
			return limiter.Decision{}, fmt.Errorf("memstore: %s: %q names no hold", p.Name, ref)
		}
	}
	now := s.now()
	lease := p.EffectiveLease().Microseconds()
	sh := &s.holds.shards[maphash.String(s.seed, key)%holdShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.sets == nil {
		sh.sets = make(map[holdKey]*holdSet)
	}
	if now >= sh.nextSweep {
		sh.sweep(now)
	}
	k := holdKey{p.Name, key}
	set := sh.sets[k]
	if set == nil {
		set = &holdSet{}
	}
	d := set.step(p.Limit, lease, now, op, cost, id)
	switch {
	case len(set.holds) == 0:
		delete(sh.sets, k)
	case sh.sets[k] == nil:
		sh.sets[k] = set
	}
	return d, nil
}

// step is concurrency.lua's step on this set.
func (set *holdSet) step(limit, lease, now int64, op int, cost, ref int64) limiter.Decision {
	live, at := 0, -1 // at: the index of the hold ref names
	for i, h := range set.holds {
		if h.exp > now {
			live++
		}
		if op != holdTake && h.id == ref {
			at = i
		}
	}
	d := limiter.Decision{Limit: limit}
	write := false
	switch op {
	case holdTake:
		switch {
		case cost == 0:
			d.Allowed = true
		case int64(live) < limit:
			id := now
			for set.has(id) {
				id++
			}
			set.prune(now)
			set.holds = append(set.holds, hold{id: id, exp: now + lease})
			live++
			d.Allowed, write = true, true
			d.Receipt = limiter.Receipt{Cost: 1, Entry: strconv.FormatInt(id, 10)}
		default:
			d.RetryAfter = limiter.ConcurrencyRetryAfter
		}
	case holdRelease:
		if at >= 0 && set.holds[at].exp > now {
			live--
		}
		if at >= 0 {
			set.holds = append(set.holds[:at], set.holds[at+1:]...)
		}
		set.prune(now)
		d.Allowed, write = true, true
	case holdRenew:
		switch {
		case at >= 0 && set.holds[at].exp > now:
			set.holds[at].exp = now + lease
			d.Allowed = true
		case int64(live) < limit:
			if at >= 0 {
				set.holds = append(set.holds[:at], set.holds[at+1:]...)
			}
			set.holds = append(set.holds, hold{id: ref, exp: now + lease})
			live++
			d.Allowed = true
		default:
			d.RetryAfter = limiter.ConcurrencyRetryAfter
		}
		if d.Allowed {
			set.prune(now)
			write = true
			d.Receipt = limiter.Receipt{Cost: 1, Entry: strconv.FormatInt(ref, 10)}
		}
	}
	d.Remaining = max(0, limit-int64(live))
	var newest int64
	for _, h := range set.holds {
		newest = max(newest, h.exp)
	}
	if newest > now {
		d.ResetAfter = micros(newest - now)
	}
	if write && newest <= now {
		set.holds = set.holds[:0] // the key expires with its last lease
	}
	return d
}

func (set *holdSet) has(id int64) bool {
	for _, h := range set.holds {
		if h.id == id {
			return true
		}
	}
	return false
}

// prune drops the holds whose lease has run out.
func (set *holdSet) prune(now int64) {
	kept := set.holds[:0]
	for _, h := range set.holds {
		if h.exp > now {
			kept = append(kept, h)
		}
	}
	clear(set.holds[len(kept):])
	set.holds = kept
}

// sweep drops the sets whose leases have all run out: holds whose
// requests never ended, and keys no request has touched since.
func (sh *holdShard) sweep(now int64) {
	for k, set := range sh.sets {
		alive := false
		for _, h := range set.holds {
			if h.exp > now {
				alive = true
				break
			}
		}
		if !alive {
			delete(sh.sets, k)
		}
	}
	sh.nextSweep = now + sweepEvery
}

// Renew implements limiter.Renewer.
func (s *Store) Renew(_ context.Context, p *limiter.Policy, key string, r limiter.Receipt) (limiter.Decision, error) {
	if p.Algorithm != limiter.Concurrency {
		return limiter.Decision{}, &limiter.PolicyError{Policy: p.Name, Field: "algorithm", Reason: fmt.Sprintf("only concurrency holds are renewed, not %s", p.Algorithm)}
	}
	return s.concurrency(p, key, holdRenew, 0, r.Entry)
}

// Holds returns the number of concurrency holds the store keeps (their
// leases not run out), for tests and metrics.
func (s *Store) Holds() int {
	now := s.now()
	n := 0
	for i := range s.holds.shards {
		sh := &s.holds.shards[i]
		sh.mu.Lock()
		for _, set := range sh.sets {
			for _, h := range set.holds {
				if h.exp > now {
					n++
				}
			}
		}
		sh.mu.Unlock()
	}
	return n
}
