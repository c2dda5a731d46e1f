package limiter

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Leases of Concurrency policies.
const (
	// DefaultLease is Policy.Lease when it is 0.
	DefaultLease = 30 * time.Second
	// MinLease bounds the lease from below: a request in flight renews its
	// holds every lease/3, so a shorter lease would load the store.
	MinLease = time.Second
	// MaxLease bounds it from above: a gateway that dies leaves its holds
	// for up to one lease.
	MaxLease = 24 * time.Hour
)

// ConcurrencyRetryAfter is the RetryAfter of a Concurrency denial: a place
// frees whenever a request in flight ends, so there is no better time to
// name than soon.
const ConcurrencyRetryAfter = time.Second

// Renewer is a Store that keeps Concurrency holds, as memstore and
// redisstore do. Take(cost ≥ 1) takes a hold when the key has fewer than
// Limit, and its Receipt names the hold (Entry); Take(0) reads the count;
// Undo releases the hold a receipt names (releasing one that is gone does
// nothing), and Renew extends its lease. A hold counts as one request
// whatever the cost asked.
type Renewer interface {
	// Renew extends the lease of the hold r names to the policy's lease
	// from now. A hold that is gone (its lease ran out while the store was
	// unreachable, or the store lost it) is taken again when the key has a
	// place; when it has none the decision is a denial, and the request
	// runs on without its hold.
	Renew(ctx context.Context, p *Policy, key string, r Receipt) (Decision, error)
}

// EffectiveLease is the lease of a Concurrency policy, its default applied.
func (p *Policy) EffectiveLease() time.Duration {
	if p.Lease == 0 {
		return DefaultLease
	}
	return p.Lease
}

// EndsWithResponse reports whether p acts when its request's response has
// ended, so that it needs a door that sees the end: a Concurrency policy
// releases its hold, a policy with RefundStatus refunds by the status.
// The gateway doors (a forward-auth check, Envoy's rate-limit service)
// never see it.
func (p *Policy) EndsWithResponse() bool {
	return p.Algorithm == Concurrency || len(p.RefundStatus) > 0
}

// RefundsStatus reports whether a response of status refunds p's charge
// (RefundStatus lists it or its class).
func (p *Policy) RefundsStatus(status int) bool {
	for _, s := range p.RefundStatus {
		if lo, hi, ok := statusRange(s); ok && status >= lo && status <= hi {
			return true
		}
	}
	return false
}

// statusRange reads a RefundStatus entry: a class "2xx" (200-299) or a
// code "404". Only final statuses, 200 to 599, end a response.
func statusRange(s string) (lo, hi int, ok bool) {
	if len(s) != 3 || s[0] < '2' || s[0] > '5' {
		return 0, 0, false
	}
	if s[1:] == "xx" || s[1:] == "XX" {
		lo = int(s[0]-'0') * 100
		return lo, lo + 99, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9' {
		return 0, 0, false
	}
	return n, n, true
}

// validateConcurrency checks what a Concurrency policy has instead of a
// rate's period: its lease, and none of what only a rate can use.
func (p *Policy) validateConcurrency() error {
	field := func(name, format string, args ...any) error {
		return &PolicyError{Policy: p.Name, Field: name, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case p.Period != 0:
		return field("period", "concurrency has no period: a hold lasts as long as its request (lease bounds one whose gateway died)")
	case p.Lease < 0:
		return field("lease", "must not be negative, got %s (leave it out for %s)", p.Lease, DefaultLease)
	case p.Lease != 0 && p.Lease < MinLease:
		return field("lease", "must be at least %s (requests renew their holds every lease/3), got %s", MinLease, p.Lease)
	case p.Lease > MaxLease:
		return field("lease", "must be at most %s (a gateway that dies leaves its holds for one lease), got %s", MaxLease, p.Lease)
	case p.Lease%time.Millisecond != 0:
		return field("lease", "must be a whole number of milliseconds, got %s", p.Lease)
	case p.LocalCache:
		return field("local_cache", "a concurrency place frees whenever a request ends: a remembered denial would deny what the store grants")
	case len(p.RefundStatus) > 0:
		return field("refund_status", "a concurrency hold is released when its request ends, whatever the status: there is nothing to refund")
	}
	return nil
}

// validateRefundStatus checks RefundStatus entries: 2xx-5xx or a code of
// 200-599, each once.
func (p *Policy) validateRefundStatus() error {
	for i, s := range p.RefundStatus {
		f := fmt.Sprintf("refund_status[%d]", i)
		if _, _, ok := statusRange(s); !ok {
			return &PolicyError{Policy: p.Name, Field: f,
				Reason: fmt.Sprintf("want a status class such as 2xx or a code such as 404 (200-599: a response ends with a final status), got %q", s)}
		}
		for _, earlier := range p.RefundStatus[:i] {
			if strings.EqualFold(earlier, s) {
				return &PolicyError{Policy: p.Name, Field: f, Reason: fmt.Sprintf("%q listed twice", s)}
			}
		}
	}
	return nil
}

// checkHolds reports a Concurrency policy l cannot keep holds for: its
// store (or the local fallback it may fall back to) is not a Renewer.
func (l *Limiter) checkHolds(p *Policy) error {
	if p == nil || p.Algorithm != Concurrency {
		return nil
	}
	if _, ok := l.store.(Renewer); !ok {
		return &PolicyError{Policy: p.Name, Field: "algorithm", Reason: "concurrency needs a store that keeps holds (limiter.Renewer: memstore, redisstore), and this limiter's has none"}
	}
	if _, ok := l.local.(Renewer); l.local != nil && p.EffectiveFailMode() == FailLocal && !ok {
		return &PolicyError{Policy: p.Name, Field: "on_store_error", Reason: "local needs a local fallback store that keeps holds (limiter.Renewer)"}
	}
	return nil
}
