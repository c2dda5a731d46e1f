// Package ratefields decides what the rate-limit headers and the check
// service's answers describe: which decisions, and each policy's quota and
// window.
package ratefields

import (
	"math"
	"time"

	"github.com/costgate/costgate/limiter"
)

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// CeilSeconds rounds d up to whole seconds.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// Window returns a policy's RateLimit-Policy quota and window: for the
// windows q = limit and w = the period; for the buckets q = burst and w = the
// seconds to refill a whole bucket, ceil(burst·period/limit). A concurrency
// policy has no window (w = 0): its quota is requests in flight (the
// draft's quota unit "concurrent-requests").
func Window(p *limiter.Policy) (q, w int64) {
	if p.Algorithm == limiter.Concurrency {
		return p.Limit, 0
	}
	if p.IsBucket() {
		b := p.Capacity()
		refill := ceilDiv(b*p.PeriodMicros(), p.Limit) // µs
		return b, max(1, ceilDiv(refill, 1_000_000))
	}
	return p.Limit, max(1, CeilSeconds(p.Period))
}

// Shown reports whether the rate-limit headers (header.Set) and the
// check service describe d: a decision of a policy that is not
// in shadow mode, carrying the store's state (Decision.HasState).
func Shown(d *limiter.Decision) bool {
	return d.Policy != nil && d.Policy.EffectiveMode() != limiter.Shadow && d.HasState()
}

// Describes reports whether the X-RateLimit-* headers describe d rather
// than best, the decision picked so far (nil: none): the one with the
// smallest remaining, ties to the first, where a concurrency policy that
// granted is described only when no rate policy applies. Its remaining
// counts requests in flight, not a rate's budget: a client reading
// X-RateLimit-Remaining as the latter would slow down for nothing.
func Describes(d, best *limiter.Decision) bool {
	if best == nil {
		return true
	}
	if a, b := inFlight(d), inFlight(best); a != b {
		return b
	}
	return d.Remaining < best.Remaining
}

// inFlight reports a concurrency decision that granted.
func inFlight(d *limiter.Decision) bool {
	return d.Allowed && d.Policy.Algorithm == limiter.Concurrency
}
