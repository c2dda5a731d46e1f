package limiter

import (
	"context"
	"errors"
	"time"
)

// Store keeps limiter state and applies one algorithm step atomically.
// Implementations: memstore (one process) and redisstore (shared by gateways).
type Store interface {
	// Take charges cost units to key under p, all or nothing, and reports the
	// state after the call. A denied take changes nothing. Cost 0 reads the
	// state without changing it. The Decision's Policy, Cost and Outcome are
	// filled in by the Limiter, not by the store.
	Take(ctx context.Context, p *Policy, key string, cost int64) (Decision, error)
	// Undo gives back what a granted Take charged, identified by its receipt
	// (a compensating step when a later policy of the same request denies).
	// For the buckets it also serves as a refund of r.Cost units, never above
	// capacity. It reports the state after the call.
	Undo(ctx context.Context, p *Policy, key string, r Receipt) (Decision, error)
}

// BatchStore is a Store that applies several policies of one request in
// one step (one round trip for Redis). Limiter.AllowAll uses it when the
// store has it; a Store without it is charged policy by policy.
type BatchStore interface {
	Store
	// TakeAll charges each request's cost to its key under its policy, all
	// or nothing, in order: a request sees the charges of the ones before
	// it (the same key named twice is charged twice). It returns the
	// decisions in order up to and including the first denial by an
	// enforced policy (a shadow policy's denial denies nothing); then
	// nothing is charged anywhere, and the decisions before the denial
	// report the state that stays, uncharged (no Receipt). Policy, Cost and
	// Outcome are filled in by the Limiter.
	TakeAll(ctx context.Context, reqs []Request) ([]Decision, error)
}

// selfTimed is implemented by stores that bound each call themselves, with
// a timer of their own rather than a context deadline armed per call (which
// costs allocations on every check). Limiter.New hands such a store its
// timeout once and then arms no context; a store shared by several
// Limiters keeps the last timeout handed to it.
type selfTimed interface {
	BoundCalls(timeout time.Duration)
}

// Receipt identifies what a granted Take charged so that it can be undone.
// Its fields are store-independent: both stores produce equal receipts for
// equal call sequences.
type Receipt struct {
	// Cost is the number of units charged; 0 means there is nothing to undo.
	Cost int64
	// Window is the start (Unix µs) of the window charged by fixed_window and
	// sliding_window.
	Window int64
	// Entry is the sliding_log entry added, "seq:cost".
	Entry string
}

// Outcome classifies a decision; its string is the metrics label.
type Outcome string

// Outcomes, as they appear in costgate_decisions_total{decision}.
const (
	Allowed      Outcome = "allowed"
	Denied       Outcome = "denied"
	ShadowDenied Outcome = "shadow_denied"
	ErrorAllowed Outcome = "error_allowed"
	ErrorDenied  Outcome = "error_denied"
	ErrorLocal   Outcome = "error_local"
)

// Decision is the answer to one check.
type Decision struct {
	// Allowed reports whether the request may proceed. In shadow mode it is
	// always true; Outcome tells whether enforcement would have denied it.
	Allowed bool
	// Limit is the most cost that can be granted at once: the burst of a
	// bucket, the limit of a window.
	Limit int64
	// Remaining is the cost that could be granted right now.
	Remaining int64
	// Cost is the cost that was asked for.
	Cost int64
	// RetryAfter is, on a denial, how long until the same cost would be
	// granted; zero when allowed or when the cost exceeds capacity.
	RetryAfter time.Duration
	// ResetAfter is how long until the full quota is back.
	ResetAfter time.Duration
	// Delay is, for leaky_bucket, how long the request should wait before it
	// is served (the queue ahead of it).
	Delay time.Duration
	// ExceedsCapacity reports a cost larger than the policy can ever grant:
	// retrying cannot cure it, so there is no RetryAfter.
	ExceedsCapacity bool
	// Outcome classifies the decision (and names the metrics label).
	Outcome Outcome
	// Policy is the policy that decided.
	Policy *Policy
	// Receipt identifies what was charged, for Undo.
	Receipt Receipt
	// Err is the store error when the store could not answer; Outcome then
	// says what the policy's on_store_error did about it.
	Err error
	// Override is the operator override that applied, if any.
	Override *Override
}

// HasState reports whether d carries the store's state (Limit, Remaining,
// ResetAfter): the store made it, or the local fallback did (an override
// that exempts or blocks asks neither).
func (d *Decision) HasState() bool {
	return (d.Err == nil || d.Outcome == ErrorLocal) && d.Outcome != Exempt && d.Outcome != Blocked
}

// ErrNotRefundable is returned when a refund is asked of a window algorithm.
var ErrNotRefundable = errors.New("limiter: only token_bucket and leaky_bucket policies can be refunded")
