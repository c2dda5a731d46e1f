package memstore

import (
	"strconv"
	"time"

	"github.com/costgate/costgate/limiter"
)

// The algorithms below are the in-memory twins of the Lua scripts in
// limiter/redisstore, step for step and in the same integer units: time in
// microseconds, bucket contents in cost units × period (µs), so that both
// stores give identical decisions for the same calls.

// params are a policy's numbers in store units.
type params struct {
	per   int64 // period, µs
	limit int64
	cap   int64 // burst for buckets, limit for windows
}

func paramsOf(p *limiter.Policy) params {
	return params{per: p.PeriodMicros(), limit: p.Limit, cap: p.Capacity()}
}

// state is one key's state. Which fields are used depends on the algorithm.
type state struct {
	level int64 // token_bucket: tokens × per; leaky_bucket: queue × per
	last  int64 // newest time seen, µs (clock steps back are clamped to it)
	start int64 // windows: start of the current window, µs
	cur   int64 // windows: cost counted in the current window
	prev  int64 // sliding_window: cost counted in the previous window
	log   []logEntry
	total int64 // sliding_log: sum of the costs in log
	seq   int64 // sliding_log: last entry number (restarts when the log empties)
}

type logEntry struct {
	at   int64
	cost int64
	id   string
}

// result is one step's outcome in store units. The new state is kept only
// when write is set (a denial or a read changes nothing), and dropped when
// ttl is 0: it is then back to its initial value.
type result struct {
	allowed  bool
	exceeds  bool
	remain   int64
	retry    int64
	reset    int64
	delay    int64
	receipt  limiter.Receipt
	write    bool // the state changed
	ttl      int64
	newState state
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// tokenBucket: capacity cap, refills limit per period; tokens are held ×per.
func tokenBucket(pr params, st *state, now, cost int64, undo *limiter.Receipt) result {
	full := pr.cap * pr.per
	tokens, last := full, now
	if st != nil {
		tokens, last = st.level, st.last
		now = max(now, last)
		// Refill, guarding the product against overflow once the bucket is full anyway.
		if elapsed := now - last; elapsed >= ceilDiv(full-tokens, pr.limit) {
			tokens = full
		} else {
			tokens += elapsed * pr.limit
		}
	}
	r := result{}
	switch {
	case undo != nil:
		tokens = min(full, tokens+undo.Cost*pr.per)
		r.allowed, r.write = true, true
	case cost == 0:
		r.allowed = true
	case cost > pr.cap:
		r.exceeds = true
	case tokens >= cost*pr.per:
		tokens -= cost * pr.per
		r.allowed, r.write = true, true
		r.receipt = limiter.Receipt{Cost: cost}
	default:
		r.retry = ceilDiv(cost*pr.per-tokens, pr.limit)
	}
	r.remain = tokens / pr.per
	r.reset = ceilDiv(full-tokens, pr.limit)
	r.ttl = r.reset
	r.newState = state{level: tokens, last: now}
	return r
}

// leakyBucket: a queue of at most cap units draining limit per period; a
// request waits for the queue ahead of it (delay). The queue is held ×per.
func leakyBucket(pr params, st *state, now, cost int64, undo *limiter.Receipt) result {
	full := pr.cap * pr.per
	var level int64
	if st != nil {
		level = st.level
		now = max(now, st.last)
		if elapsed := now - st.last; elapsed >= ceilDiv(level, pr.limit) {
			level = 0
		} else {
			level -= elapsed * pr.limit
		}
	}
	r := result{}
	switch {
	case undo != nil:
		level = max(0, level-undo.Cost*pr.per)
		r.allowed, r.write = true, true
	case cost == 0:
		r.allowed = true
		r.delay = ceilDiv(level, pr.limit)
	case cost > pr.cap:
		r.exceeds = true
	case level+cost*pr.per <= full:
		r.delay = ceilDiv(level, pr.limit)
		level += cost * pr.per
		r.allowed, r.write = true, true
		r.receipt = limiter.Receipt{Cost: cost}
	default:
		r.retry = ceilDiv(level+cost*pr.per-full, pr.limit)
	}
	r.remain = (full - level) / pr.per
	r.reset = ceilDiv(level, pr.limit)
	r.ttl = r.reset
	r.newState = state{level: level, last: now}
	return r
}

// slidingLog: at most limit units inside any window of length per. An entry
// made at t counts while now < t+per.
func slidingLog(pr params, st *state, now, cost int64, undo *limiter.Receipt) result {
	var s state
	if st != nil {
		// The log is changed in place: every path that changes it sets write.
		s = *st
		now = max(now, s.last)
	}
	s.last = now
	drop := 0
	for drop < len(s.log) && s.log[drop].at+pr.per <= now {
		s.total -= s.log[drop].cost
		drop++
	}
	s.log = s.log[drop:]
	if len(s.log) == 0 {
		s.total, s.seq = 0, 0
	}
	r := result{write: drop > 0}
	switch {
	case undo != nil:
		for i, e := range s.log {
			if e.id == undo.Entry {
				s.total -= e.cost
				s.log = append(s.log[:i], s.log[i+1:]...)
				r.write = true
				break
			}
		}
		r.allowed = true
	case cost == 0:
		r.allowed = true
	case cost > pr.limit:
		r.exceeds = true
	case s.total+cost <= pr.limit:
		s.seq++
		id := strconv.FormatInt(s.seq, 10) + ":" + strconv.FormatInt(cost, 10)
		s.log = append(s.log, logEntry{at: now, cost: cost, id: id})
		s.total += cost
		r.allowed, r.write = true, true
		r.receipt = limiter.Receipt{Cost: cost, Entry: id}
	default:
		need, freed := s.total+cost-pr.limit, int64(0)
		for _, e := range s.log {
			freed += e.cost
			if freed >= need {
				r.retry = e.at + pr.per - now
				break
			}
		}
	}
	r.remain = pr.limit - s.total
	if n := len(s.log); n > 0 {
		r.reset = s.log[n-1].at + pr.per - now
	}
	r.ttl = r.reset
	r.newState = s
	return r
}

// slidingWindow: prev·(per−elapsed)/per + cur ≤ limit, in units ×per.
// Windows are aligned to multiples of per.
func slidingWindow(pr params, st *state, now, cost int64, undo *limiter.Receipt) result {
	var s state
	if st != nil {
		s = *st
		now = max(now, s.last)
	}
	s.last = now
	ws := now - now%pr.per
	r := result{}
	switch {
	case s.start == ws:
	case s.start+pr.per == ws:
		s.prev, s.cur, s.start = s.cur, 0, ws
	default:
		s.prev, s.cur, s.start = 0, 0, ws
	}
	elapsed := now - ws
	used := s.prev*(pr.per-elapsed) + s.cur*pr.per
	switch {
	case undo != nil:
		if undo.Window == s.start {
			s.cur = max(0, s.cur-undo.Cost)
		} else if undo.Window+pr.per == s.start {
			s.prev = max(0, s.prev-undo.Cost)
		}
		r.allowed, r.write = true, true
	case cost == 0:
		r.allowed = true
	case cost > pr.limit:
		r.exceeds = true
	case used+cost*pr.per <= pr.limit*pr.per:
		s.cur += cost
		r.allowed, r.write = true, true
		r.receipt = limiter.Receipt{Cost: cost, Window: ws}
	case s.cur+cost <= pr.limit:
		// prev must decay: prev·(per−e) ≤ (limit−cur−cost)·per.
		r.retry = pr.per - (pr.limit-s.cur-cost)*pr.per/s.prev - elapsed
	default:
		// Not before the next window, where cur becomes prev.
		e := max(0, pr.per-(pr.limit-cost)*pr.per/s.cur)
		r.retry = pr.per - elapsed + e
	}
	used = s.prev*(pr.per-elapsed) + s.cur*pr.per
	r.remain = max(0, (pr.limit*pr.per-used)/pr.per)
	switch {
	case s.cur > 0:
		r.reset = 2*pr.per - elapsed
	case s.prev > 0:
		r.reset = pr.per - elapsed
	}
	r.ttl = r.reset
	r.newState = s
	return r
}

// fixedWindow: a counter per window; windows start at offset (per key) plus
// multiples of per.
func fixedWindow(pr params, st *state, now, cost, offset int64, undo *limiter.Receipt) result {
	var s state
	if st != nil {
		s = *st
		now = max(now, s.last)
	}
	s.last = now
	ws := now - floorMod(now-offset, pr.per)
	r := result{}
	if s.start != ws {
		s.start, s.cur = ws, 0
	}
	switch {
	case undo != nil:
		if undo.Window == s.start {
			s.cur = max(0, s.cur-undo.Cost)
		}
		r.allowed, r.write = true, true
	case cost == 0:
		r.allowed = true
	case cost > pr.limit:
		r.exceeds = true
	case s.cur+cost <= pr.limit:
		s.cur += cost
		r.allowed, r.write = true, true
		r.receipt = limiter.Receipt{Cost: cost, Window: ws}
	default:
		r.retry = ws + pr.per - now
	}
	r.remain = pr.limit - s.cur
	if s.cur > 0 {
		r.reset = ws + pr.per - now
	}
	r.ttl = r.reset
	r.newState = s
	return r
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
