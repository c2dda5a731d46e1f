package limiter

import (
	"fmt"
	"time"

	"github.com/costgate/costgate/internal/names"
)

// Algorithm names the rate-limiting algorithm of a policy.
type Algorithm string

// The five rate algorithms. Each takes a weighted cost c (at least 1) and is
// exact at its own definition, with P the period, L the limit, B the burst
// (the buckets' capacity, L by default) and now the store's clock (Redis
// TIME, one clock for every gateway), clamped to the newest time the key has
// seen. Arithmetic is exact in integers (time in microseconds, bucket
// contents in cost units × P), so Decision.Remaining is never off by one from
// float rounding; because Redis Lua numbers are doubles, exact to 2^53,
// [Policy.Validate] refuses a policy whose scaled state could pass that.
const (
	// TokenBucket is a bucket of B tokens refilled at L per P; a request
	// takes c tokens all or nothing. Refundable. State: tokens and a time.
	TokenBucket Algorithm = "token_bucket"
	// SlidingLog allows at most L cost units in any window of length P: a
	// request made at t counts while now < t+P. State: one entry per granted
	// request (its cost beside it) and a running total.
	SlidingLog Algorithm = "sliding_log"
	// SlidingWindow is the two-counter approximation
	// prev·(P − elapsed)/P + cur ≤ L, with windows aligned to multiples of P.
	SlidingWindow Algorithm = "sliding_window"
	// FixedWindow is one counter per window. Windows start at a per-key
	// offset ([Policy.WindowOffset]), so that clients do not all reset at
	// once. Its known weakness is the boundary burst: L at the end of one
	// window and L at the start of the next pass within moments, 2·L in all.
	FixedWindow Algorithm = "fixed_window"
	// LeakyBucket shapes: with T = P/L a request is admitted when
	// max(TAT, now) − now + c·T ≤ B·T, and should wait
	// Decision.Delay = max(TAT, now) − now before it is served. State: the
	// queue and a time.
	LeakyBucket Algorithm = "leaky_bucket"
)

// Concurrency bounds the requests of one key in flight at once, not a
// rate: a granted Take is a hold on one of Limit places, kept until the
// request ends (see [Ticket]) and at most Lease unrenewed.
const Concurrency Algorithm = "concurrency"

// Algorithms lists the rate algorithms in a stable order.
var algorithms = []Algorithm{TokenBucket, SlidingLog, SlidingWindow, FixedWindow, LeakyBucket}

// Algorithms returns the five rate algorithms: every supported algorithm
// but Concurrency, which has no period and counts requests in flight.
func Algorithms() []Algorithm { return append([]Algorithm(nil), algorithms...) }

// allAlgorithms names every algorithm in messages.
var allAlgorithms = append(Algorithms(), Concurrency)

// Mode says whether a policy's denials are enforced.
type Mode string

const (
	// Enforce denies requests over the limit. It is the default.
	Enforce Mode = "enforce"
	// Shadow never denies: would-be denials are logged and counted only.
	Shadow Mode = "shadow"
)

// FailMode says what a check does when the store cannot answer.
type FailMode string

const (
	// FailAllow serves the request (logged, counted). It is the default.
	FailAllow FailMode = "allow"
	// FailDeny refuses the request; HTTP answers 503.
	FailDeny FailMode = "deny"
	// FailLocal falls back to an in-process limiter holding limit/N, burst/N.
	FailLocal FailMode = "local"
)

// MaxExact is the largest integer a Lua (double) number holds exactly, 2^53-1.
// Policies whose scaled state could pass it are rejected by Validate.
const MaxExact = 1<<53 - 1

// Policy is one named limit. The zero values of Burst, Mode and OnStoreError
// take their defaults (Burst = Limit for buckets, enforce, allow).
type Policy struct {
	Name      string
	Algorithm Algorithm
	// Limit is the number of cost units granted per Period.
	Limit  int64
	Period time.Duration
	// Burst is the bucket capacity of token_bucket and leaky_bucket; 0 means Limit.
	// Windows ignore it.
	Burst        int64
	Key          []string
	Mode         Mode
	OnStoreError FailMode
	// LocalCache (off by default) remembers in process a key the store
	// denied, until its retry-after, and denies it again without a round
	// trip: a hot abusive key stops loading the store. It only denies what
	// the store would: a cost at least the one denied, before the time the
	// store said it could pass, forgotten on a refund or undo here. A
	// refund another gateway made is not seen, so the cache may deny, for at
	// most that key's retry-after, what the store would by then grant.
	LocalCache bool
	// Sync (0: off) makes the policy local-first: each gateway decides from
	// a lease of the shared budget and reconciles with the store every Sync
	// (token_bucket, fixed_window and sliding_window; docs/redis.md,
	// "Local-first limits", gives the bound). A store in one process
	// (memstore) is exact anyway and ignores it.
	Sync time.Duration
	// Lease is, for Concurrency, the longest a hold lives unrenewed
	// (default DefaultLease): a request in flight renews its holds every
	// Lease/3, so the holds of a gateway that died free themselves within
	// one Lease. Other algorithms take none.
	Lease time.Duration
	// RefundStatus lists response statuses, classes ("2xx") or codes
	// ("404"), whose requests are refunded when their response ends (see
	// [Ticket]): charged when they start, as always, so that requests in
	// flight together still count, and given back when the answer shows
	// they should not have counted. A login limit with [2xx] counts failed
	// attempts only.
	RefundStatus []string
}

// Capacity is the most cost one request can ever be granted: Burst for the
// buckets, Limit for the windows.
func (p *Policy) Capacity() int64 {
	if p.IsBucket() {
		if p.Burst > 0 {
			return p.Burst
		}
		return p.Limit
	}
	return p.Limit
}

// IsBucket reports whether the algorithm is token_bucket or leaky_bucket.
func (p *Policy) IsBucket() bool {
	return p.Algorithm == TokenBucket || p.Algorithm == LeakyBucket
}

// PeriodMicros is the period in whole microseconds, the unit of every store.
func (p *Policy) PeriodMicros() int64 { return p.Period.Microseconds() }

// WindowOffset is the per-key offset, in microseconds within [0, period), at
// which fixed_window windows start for key. Offsetting windows by a hash of the
// key spreads resets over the period so that clients do not all reset at once.
func (p *Policy) WindowOffset(key string) int64 {
	// FNV-1a over name NUL key, written out so that hashing strings
	// allocates nothing (hash/fnv takes []byte).
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for i := 0; i < len(p.Name); i++ {
		h = (h ^ uint64(p.Name[i])) * prime64
	}
	h *= prime64 // the NUL separator: h ^ 0 == h
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime64
	}
	return int64(h % uint64(p.PeriodMicros()))
}

// Validate checks the policy and fills nothing in. The error is a
// *PolicyError naming the field.
func (p *Policy) Validate() error {
	field := func(name, format string, args ...any) error {
		return &PolicyError{Policy: p.Name, Field: name, Reason: fmt.Sprintf(format, args...)}
	}
	if p.Name == "" {
		return field("name", "is empty")
	}
	if !names.Valid(p.Name) {
		// The name goes into store keys, headers and metric labels.
		return field("name", "letters, digits, '_', '-' and '.' only, got %q", p.Name)
	}
	switch p.Algorithm {
	case TokenBucket, SlidingLog, SlidingWindow, FixedWindow, LeakyBucket, Concurrency:
	case "":
		return field("algorithm", "missing (one of %v)", allAlgorithms)
	default:
		return field("algorithm", "unknown algorithm %q (one of %v)", p.Algorithm, allAlgorithms)
	}
	if p.Limit < 1 {
		return field("limit", "must be at least 1, got %d", p.Limit)
	}
	if p.Algorithm == Concurrency {
		if err := p.validateConcurrency(); err != nil {
			return err
		}
	} else if err := p.validatePeriod(); err != nil {
		return err
	}
	if p.Burst < 0 {
		return field("burst", "must not be negative, got %d", p.Burst)
	}
	if p.Burst != 0 && !p.IsBucket() {
		return field("burst", "only token_bucket and leaky_bucket take a burst (%s does not)", p.Algorithm)
	}
	// Key is read by the doors that build store keys from it (httplimit,
	// gqllimit), which refuse an empty one; here only its form is checked.
	for i, part := range p.Key {
		if part == "" {
			return field(fmt.Sprintf("key[%d]", i), "empty key part")
		}
		for _, earlier := range p.Key[:i] {
			if earlier == part {
				return field(fmt.Sprintf("key[%d]", i), "key part %q repeated", part)
			}
		}
	}
	switch p.Mode {
	case "", Enforce, Shadow:
	default:
		return field("mode", "unknown mode %q (enforce or shadow)", p.Mode)
	}
	switch p.OnStoreError {
	case "", FailAllow, FailDeny, FailLocal:
	default:
		return field("on_store_error", "unknown value %q (allow, deny or local)", p.OnStoreError)
	}
	if err := p.validateSync(); err != nil {
		return err
	}
	if err := p.validateRefundStatus(); err != nil {
		return err
	}
	if p.Algorithm == Concurrency {
		return nil // a count of holds, never scaled by a period
	}
	// Every store keeps integers scaled by the period in microseconds (tokens ×
	// period, limit × period), and Lua numbers are exact only up to 2^53.
	per := p.PeriodMicros()
	for _, f := range []struct {
		name  string
		value int64
	}{{"limit", p.Limit}, {"burst", p.Burst}} {
		if f.value > MaxExact/per {
			return field(f.name, "%d × period %s (%d µs) exceeds 2^53, the exact range of Redis Lua numbers; lower it or the period",
				f.value, p.Period, per)
		}
	}
	return nil
}

// validatePeriod checks the period of a rate algorithm, and that it has no
// lease.
func (p *Policy) validatePeriod() error {
	field := func(format string, args ...any) error {
		return &PolicyError{Policy: p.Name, Field: "period", Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case p.Period <= 0:
		return field("must be positive, got %s", p.Period)
	case p.Period%time.Microsecond != 0:
		return field("must be a whole number of microseconds, got %s", p.Period)
	case p.Period > 366*24*time.Hour:
		// A period over a year is a configuration mistake; it also keeps TTLs sane.
		return field("must be at most 366 days, got %s", p.Period)
	case p.Lease != 0:
		return &PolicyError{Policy: p.Name, Field: "lease", Reason: fmt.Sprintf("only concurrency takes a lease (%s counts a rate over its period)", p.Algorithm)}
	}
	return nil
}

// EffectiveMode returns the mode with its default applied.
func (p *Policy) EffectiveMode() Mode {
	if p.Mode == "" {
		return Enforce
	}
	return p.Mode
}

// EffectiveFailMode returns on_store_error with its default applied.
func (p *Policy) EffectiveFailMode() FailMode {
	if p.OnStoreError == "" {
		return FailAllow
	}
	return p.OnStoreError
}

// validateSync checks Sync: positive, at most the period, and only for the
// algorithms whose state can be leased out in parts.
func (p *Policy) validateSync() error {
	field := func(format string, args ...any) error {
		return &PolicyError{Policy: p.Name, Field: "sync", Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case p.Sync == 0:
		return nil
	case p.Algorithm == Concurrency:
		return field("concurrency stays exact: every hold is in the store, so that gateways together admit at most the limit")
	case p.Sync < 0:
		return field("must be positive, got %s", p.Sync)
	case p.Sync < time.Millisecond:
		return field("must be at least 1ms, got %s", p.Sync)
	case p.Sync > p.Period:
		return field("must be at most the period (%s), got %s", p.Period, p.Sync)
	}
	switch p.Algorithm {
	case SlidingLog:
		return field("sliding_log stays exact: it guards logins and other limits where every request counts; use sliding_window to sync")
	case LeakyBucket:
		return field("leaky_bucket shapes traffic with one queue (its delay orders requests across gateways), which local decisions cannot keep; use token_bucket to sync")
	}
	return nil
}
