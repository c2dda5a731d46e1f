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
// seconds to refill a whole bucket, ceil(burst·period/limit).
func Window(p *limiter.Policy) (q, w int64) {
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
