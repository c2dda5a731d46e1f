package memstore

import (
	"math"
	"math/bits"
)

// This file holds what eviction needs of each algorithm: how much quota a
// state holds at an instant, and the keys that keep a policy's states in
// order of it. Why each key is right:
//
// Keys are spread over up to 16 shards by a hash seeded at random per
// store (clients cannot aim keys at one shard), each with its own lock, key
// table and share of the cap: MaxKeys divided by the number of shards. A
// store gets more than one shard only when each holds at least 4096 keys, so
// that shards fill within a few percent of each other. Because the cap is a
// shard's:
//
//   - a shard may be full, and evict, while the store as a whole holds a few
//     percent fewer than MaxKeys;
//   - "least in use" below means least in use within the new key's shard;
//   - a state that is denying is never evicted, in any shard, exactly;
//   - a new key goes to its policy's overflow state (below) when every
//     state of its shard is denying, even if another shard has room.
//
// A new key at the cap evicts the state whose loss grants the least: the
// least quota in use, as a share of its policy's capacity, among the states
// that are not denying. A state is denying when it could not grant a cost
// of 1 at this instant (it holds more than capacity − 1 unit); evicting it
// would hand its owner a fresh quota, so a flood of new identities cannot
// unlock a locked login. When every state is denying, the new key is
// decided by its policy's overflow state: one key's quota, with the
// policy's algorithm and numbers, shared by every key that found no room.
// It is never a store error, so a flood of locked identities cannot make a
// policy that fails open unlimited for newcomers; the charge's receipt
// says where it was taken, so an Undo gives it back there. Each eviction is
// counted ([Options.OnEvict], [Store.Evictions]), and each overflow
// decision counted ([Options.OnOverflow], [Store.Overflows]) and logged, at
// most a line a second per policy. The overflow states are not counted in
// [Store.Len] or the cap (there is one per policy).
//
// Quota in use changes as time passes, so eviction cannot sort states once
// by it. What it relies on instead is the order among the states of one
// policy, which for each algorithm is kept by a key that stays valid as time
// passes or is re-evaluated at known instants:
//
//   - token_bucket and leaky_bucket: every state of a policy refills (drains)
//     at the same rate, so the quota in use at any instant t is
//     (fullAt − t)·rate, where fullAt is when the state is full again. The
//     order by fullAt never changes; it is kept exactly in integers (the µs
//     and the remainder of the division), and it is also the order in which
//     the states expire.
//   - fixed_window: the count in use holds until the window ends, and then
//     the state is gone; the order by count never changes while it lives.
//   - sliding_log: the total in use falls only when the oldest entry leaves
//     the window. Each state is also kept in order of that instant, and
//     before an eviction the states whose instant has passed are trimmed (as
//     their next call would trim them) and re-ranked: each entry leaves
//     once, so this costs O(log n) per request over the log's life.
//   - sliding_window: prev·(P−e)/P + cur decays faster for a larger prev, so
//     the order of two states can flip inside a window. The rank is the
//     quota in use in whole units (as Remaining shows it; in steps of
//     limit/256 above a limit of 511, so the least in use is exact to that
//     step) and each state is kept in order of the instant its rank next
//     falls, solved from its counters; before an eviction the states whose
//     instant has passed are re-ranked. A rank takes at most 512 values, so
//     a state is re-ranked at most that often a window.
//
// Between policies no order holds (their shares fall at different speeds),
// so an eviction compares, at its own instant, the least used state of each
// policy in the shard (there are few policies), by exact shares (128-bit
// products). Whether a state denies is
// monotone in its policy's order, so when a policy's least used state
// denies, all of its states do and the policy is skipped; when every policy
// is skipped, the shard is full of denying states.
//
// The heaps that keep these orders are lazy: a take only ever raises a
// state's key (more in use, full again later), so it leaves the heaps alone,
// and a stale key is raised when it reaches the top. An undo, a refund or a
// fallen rank lowers a key at once. A bucket or fixed_window take therefore
// costs no heap work (a sliding one only when it lowers its rank); creating
// a key costs O(log n), and an eviction O(policies + log n) plus the
// re-ranking above.

// usage is the quota st holds at now: used out of capacity, in the
// algorithm's own units, and unit, one cost unit in them. st is denying (it
// could not grant a cost of 1) when used > capacity − unit.
func usage(pr params, st *state, now int64) (used, capacity, unit int64) {
	now = max(now, st.last)
	full := pr.cap * pr.per
	switch pr.alg {
	case tokenBucket:
		return bucketDebt(full-st.level, now-st.last, pr.limit), full, pr.per
	case leakyBucket:
		return bucketDebt(st.level, now-st.last, pr.limit), full, pr.per
	case fixedWindow:
		if now >= st.start+pr.per {
			return 0, pr.limit, 1
		}
		return st.cur, pr.limit, 1
	case slidingWindow:
		// In whole units, as Remaining shows it and as the policy's order
		// (windowRank) counts it.
		cur, prev, elapsed := windowsAt(pr, st, now)
		return ceilDiv(prev*(pr.per-elapsed)+cur*pr.per, pr.per) * pr.per, pr.limit * pr.per, pr.per
	case slidingLog:
		total := int64(0)
		if st.log != nil {
			total = st.log.total
			for _, e := range st.log.entries {
				if e.at+pr.per > now {
					break
				}
				total -= e.cost
			}
		}
		return total, pr.limit, 1
	}
	return 0, 1, 1
}

// bucketDebt is what a bucket owes after elapsed µs of draining at rate
// per µs: debt − elapsed·rate, at least 0, without overflowing. (A debt
// below 0 is a bucket fuller than a lowered capacity: it is full.)
func bucketDebt(debt, elapsed, rate int64) int64 {
	if debt <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(elapsed), uint64(rate))
	if hi != 0 || lo >= uint64(debt) {
		return 0
	}
	return debt - int64(lo)
}

// windowsAt is a sliding_window state seen from now (≥ st.last): the counts
// of the current and the previous window, and the time since the current
// one started.
func windowsAt(pr params, st *state, now int64) (cur, prev, elapsed int64) {
	ws := now - now%pr.per
	switch {
	case st.start == ws:
		cur, prev = st.cur, st.prev
	case st.start+pr.per == ws:
		prev = st.cur
	}
	return cur, prev, now - ws
}

// lessShare reports whether a1 out of c1 is a smaller share than a2 out of
// c2, exactly (the products can pass 2^64).
func lessShare(a1, c1, a2, c2 int64) bool {
	h1, l1 := bits.Mul64(uint64(a1), uint64(c2))
	h2, l2 := bits.Mul64(uint64(a2), uint64(c1))
	return h1 < h2 || h1 == h2 && l1 < l2
}

// bucketFullAt is the instant a bucket state is full again, exactly: the
// whole µs floor plus frac/limit of one. Every state of one policy refills
// at the same rate, so this instant orders them by quota in use at any time.
func (g *group) bucketFullAt(st *state) (floor, frac int64) {
	debt := st.level // leaky_bucket: the queue
	if g.pr.alg == tokenBucket {
		debt = g.pr.cap*g.pr.per - st.level
	}
	if debt <= 0 {
		return st.last, 0 // fuller than a lowered capacity: full
	}
	q, r := g.div.limit.divmod(debt)
	return st.last + q, r
}

// windowExpiry is the instant a window or log state is back to its initial
// value, from the state alone (as its TTL was set).
func windowExpiry(pr params, st *state) int64 {
	switch pr.alg {
	case fixedWindow:
		return st.start + pr.per
	case slidingWindow:
		if st.cur > 0 {
			return st.start + 2*pr.per
		}
		return st.start + pr.per
	case slidingLog:
		if st.log != nil && len(st.log.entries) > 0 {
			return st.log.entries[len(st.log.entries)-1].at + pr.per
		}
	}
	return st.last
}

// denyingRank is the rank of a state that is denying: above every other.
const denyingRank = math.MaxInt64

// noEvent is the event instant of a state whose rank cannot fall any more.
const noEvent = math.MaxInt64

// windowRank orders the window and log states of one policy by quota in use
// at now, and says when that order key next falls (it never rises without a
// write). fixed_window: the count, which holds until the window ends and the
// state goes. sliding_log: the total (entries that left the window must have
// been trimmed), falling when the oldest entry leaves. sliding_window: the
// units in use, ceil(used/per), in steps of quantum, with every denying state
// ranked last, falling at an instant solved from the two counters.
func windowRank(pr params, quantum int64, st *state, now int64) (rank, event int64) {
	now = max(now, st.last)
	switch pr.alg {
	case fixedWindow:
		return st.cur, noEvent
	case slidingLog:
		if st.log == nil || len(st.log.entries) == 0 {
			return 0, noEvent
		}
		return st.log.total, st.log.entries[0].at + pr.per
	case slidingWindow:
		cur, prev, elapsed := windowsAt(pr, st, now)
		used := prev*(pr.per-elapsed) + cur*pr.per
		units := ceilDiv(used, pr.per)
		var target int64 // the most in use at the next lower rank, ×per
		switch {
		case units >= pr.limit:
			rank, target = denyingRank, (pr.limit-1)*pr.per
		case units/quantum == 0:
			return 0, noEvent
		default:
			rank = units / quantum
			target = (rank*quantum - 1) * pr.per
		}
		return rank, windowFallsTo(pr, now-elapsed, cur, prev, target)
	}
	return 0, noEvent
}

// windowFallsTo is the first instant at which a sliding_window whose
// current window started at ws, with counts cur and prev, has at most target
// (×per) in use. In use is prev·(per−e) + cur·per during the window and
// cur·(per−e) during the next one (e: the time into each).
func windowFallsTo(pr params, ws, cur, prev, target int64) int64 {
	if cur*pr.per > target {
		// Not in this window: in the next one, cur·(per−e) ≤ target.
		return ws + pr.per + pr.per - target/cur
	}
	if prev == 0 {
		return ws
	}
	return ws + pr.per - (target-cur*pr.per)/prev
}
