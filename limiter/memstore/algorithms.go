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

// algorithm is a limiter.Algorithm as a small number: the hot path
// compares it instead of strings.
type algorithm uint8

const (
	tokenBucket algorithm = iota + 1
	leakyBucket
	slidingLog
	slidingWindow
	fixedWindow
)

func algorithmOf(a limiter.Algorithm) algorithm {
	// Told apart by length and first letter, confirmed by one comparison.
	var alg algorithm
	switch {
	case len(a) == len(limiter.SlidingLog):
		alg = slidingLog
	case len(a) == len(limiter.SlidingWindow):
		alg = slidingWindow
	case len(a) != len(limiter.TokenBucket):
		return 0
	case a[0] == 't':
		alg = tokenBucket
	case a[0] == 'l':
		alg = leakyBucket
	case a[0] == 'f':
		alg = fixedWindow
	default:
		return 0
	}
	if a != algorithms[alg] {
		return 0
	}
	return alg
}

var algorithms = [...]limiter.Algorithm{
	tokenBucket:   limiter.TokenBucket,
	leakyBucket:   limiter.LeakyBucket,
	slidingLog:    limiter.SlidingLog,
	slidingWindow: limiter.SlidingWindow,
	fixedWindow:   limiter.FixedWindow,
}

func (a algorithm) bucket() bool { return a == tokenBucket || a == leakyBucket }

// params are a policy's algorithm and numbers in store units.
type params struct {
	alg   algorithm
	per   int64 // period, µs
	limit int64
	cap   int64 // burst for buckets, limit for windows
}

func paramsOf(p *limiter.Policy) params {
	alg := algorithmOf(p.Algorithm)
	pr := params{alg: alg, per: p.PeriodMicros(), limit: p.Limit, cap: p.Limit}
	if alg.bucket() && p.Burst > 0 {
		pr.cap = p.Burst
	}
	return pr
}

// state is one key's state. Which fields are used depends on the algorithm.
// The sliding log sits behind a pointer so that the other algorithms' states
// stay small.
type state struct {
	last  int64 // newest time seen, µs (clock steps back are clamped to it)
	level int64 // token_bucket: tokens × per; leaky_bucket: queue × per
	start int64 // windows: start of the current window, µs
	cur   int64 // windows: cost counted in the current window
	prev  int64 // sliding_window: cost counted in the previous window
	log   *logState
}

// logState is a sliding_log's entries, oldest first.
type logState struct {
	entries []logEntry
	total   int64 // sum of the costs in entries
	seq     int64 // last entry number (restarts when the log empties)
}

// logEntry is one granted request; its receipt names it "seq:cost".
type logEntry struct {
	at, cost, seq int64
}

// result is one step's outcome in store units, filled in by the algorithm
// (which expects it zeroed). The algorithm changes the state it was given
// (held: the key has one; else it starts from the initial value) only when
// it sets write (a denial or a read changes nothing); the state is dropped
// when ttl is 0: it is then back to its initial value.
type result struct {
	allowed bool
	exceeds bool
	remain  int64
	retry   int64
	reset   int64
	delay   int64
	receipt limiter.Receipt
	write   bool // the state changed
	ttl     int64
	// The buckets: the instant the new state is full again, fullAt plus
	// fullFrac/limit µs (see bucketFullAt), worked out beside reset.
	fullAt, fullFrac int64
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// takeTokenBucket: capacity cap, refills limit per period; tokens are held ×per.
func takeTokenBucket(pr params, dv *divisors, st *state, held bool, now, cost int64, undo *limiter.Receipt, r *result) {
	full := pr.cap * pr.per
	tokens, last := full, now
	if held {
		tokens, last = st.level, st.last
		now = max(now, last)
		tokens = full - bucketDebt(full-tokens, now-last, pr.limit)
	}
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
		r.retry = dv.limit.ceil(cost*pr.per - tokens)
	}
	r.remain = dv.per.div(tokens)
	q, rem := dv.limit.divmod(full - tokens)
	r.fullAt, r.fullFrac = now+q, rem
	r.reset = q + b2i(rem > 0)
	r.ttl = r.reset
	if r.write {
		st.level, st.last = tokens, now
	}
}

// takeLeakyBucket: a queue of at most cap units draining limit per period; a
// request waits for the queue ahead of it (delay). The queue is held ×per.
func takeLeakyBucket(pr params, dv *divisors, st *state, held bool, now, cost int64, undo *limiter.Receipt, r *result) {
	full := pr.cap * pr.per
	var level int64
	if held {
		level = st.level
		now = max(now, st.last)
		level = bucketDebt(level, now-st.last, pr.limit)
	}
	switch {
	case undo != nil:
		level = max(0, level-undo.Cost*pr.per)
		r.allowed, r.write = true, true
	case cost == 0:
		r.allowed = true
		r.delay = dv.limit.ceil(level)
	case cost > pr.cap:
		r.exceeds = true
	case level+cost*pr.per <= full:
		r.delay = dv.limit.ceil(level)
		level += cost * pr.per
		r.allowed, r.write = true, true
		r.receipt = limiter.Receipt{Cost: cost}
	default:
		r.retry = dv.limit.ceil(level + cost*pr.per - full)
	}
	r.remain = dv.per.div(full - level)
	q, rem := dv.limit.divmod(level)
	r.fullAt, r.fullFrac = now+q, rem
	r.reset = q + b2i(rem > 0)
	r.ttl = r.reset
	if r.write {
		st.level, st.last = level, now
	}
}

// takeSlidingLog: at most limit units inside any window of length per. An entry
// made at t counts while now < t+per. The log is changed only on the paths
// that set write.
func takeSlidingLog(pr params, st *state, held bool, now, cost int64, undo *limiter.Receipt, r *result) {
	var s state
	var lg logState
	if held {
		s = *st
		now = max(now, s.last)
		if s.log != nil {
			lg = *s.log
		}
	}
	s.last = now
	drop := 0
	for drop < len(lg.entries) && lg.entries[drop].at+pr.per <= now {
		lg.total -= lg.entries[drop].cost
		drop++
	}
	lg.entries = lg.entries[drop:]
	if len(lg.entries) == 0 {
		lg.total, lg.seq = 0, 0
	}
	r.write = drop > 0
	switch {
	case undo != nil:
		for i, e := range lg.entries {
			if e.names(undo.Entry) {
				lg.total -= e.cost
				lg.entries = append(lg.entries[:i], lg.entries[i+1:]...)
				r.write = true
				break
			}
		}
		r.allowed = true
	case cost == 0:
		r.allowed = true
	case cost > pr.limit:
		r.exceeds = true
	case lg.total+cost <= pr.limit:
		lg.seq++
		e := logEntry{at: now, cost: cost, seq: lg.seq}
		lg.entries = append(lg.entries, e)
		lg.total += cost
		r.allowed, r.write = true, true
		r.receipt = limiter.Receipt{Cost: cost, Entry: e.id()}
	default:
		need, freed := lg.total+cost-pr.limit, int64(0)
		for _, e := range lg.entries {
			freed += e.cost
			if freed >= need {
				r.retry = e.at + pr.per - now
				break
			}
		}
	}
	r.remain = pr.limit - lg.total
	if n := len(lg.entries); n > 0 {
		r.reset = lg.entries[n-1].at + pr.per - now
	}
	r.ttl = r.reset
	if r.write {
		if s.log == nil {
			s.log = new(logState)
		}
		*s.log = lg
	}
	if r.write {
		*st = s
	}
}

// id is the entry's receipt, "seq:cost", as the Redis store names it.
func (e logEntry) id() string {
	return strconv.FormatInt(e.seq, 10) + ":" + strconv.FormatInt(e.cost, 10)
}

// names reports whether receipt is e's id, without building the id.
func (e logEntry) names(receipt string) bool {
	var buf [48]byte
	b := strconv.AppendInt(buf[:0], e.seq, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, e.cost, 10)
	return string(b) == receipt
}

// takeSlidingWindow: prev·(per−elapsed)/per + cur ≤ limit, in units ×per.
// Windows are aligned to multiples of per.
func takeSlidingWindow(pr params, st *state, held bool, now, cost int64, undo *limiter.Receipt, r *result) {
	var s state
	if held {
		s = *st
		now = max(now, s.last)
	}
	s.last = now
	ws := now - now%pr.per
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
	if r.write {
		*st = s
	}
}

// takeFixedWindow: a counter per window; windows start at offset (per key) plus
// multiples of per.
func takeFixedWindow(pr params, st *state, held bool, now, cost, offset int64, undo *limiter.Receipt, r *result) {
	var s state
	if held {
		s = *st
		now = max(now, s.last)
	}
	s.last = now
	ws := now - floorMod(now-offset, pr.per)
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
	if r.write {
		*st = s
	}
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
