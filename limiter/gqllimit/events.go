package gqllimit

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
)

// A subscription's events are charged as they are sent: each event's actual cost,
// counted from the execution that produced it, is taken from the key's bucket. The
// charges are batched, at most one store call per subscription per second (the
// subscription's opening charge counts as one): an event sent less than a second after
// the last call adds its cost to what the subscription owes, and the next call takes
// it all. When the bucket cannot pay, what it holds is taken (one more call) and the
// event is not sent:
// the subscription ends with a THROTTLED error (then complete). What goes unpaid is at
// most a second of one subscription's events. What a subscription owes when it ends is
// charged then. Limits.FreeSubscriptionEvents turns this off.

// eventChargeInterval is the least time between two charges of one subscription.
const eventChargeInterval = time.Second

// events is what a subscription's events owe. Only the goroutine that sends the
// subscription's events touches it.
type events struct {
	last  time.Time // the last charge (the opening one, at first)
	owed  int64
	ended bool // the bucket could not pay: nothing more is sent
}

// chargeEvent charges an event about to be sent, or returns the error that ends the
// subscription in its place.
func (l *Limiter) chargeEvent(ctx context.Context, st *state, resp *graphql.Response) *graphql.Response {
	cost, err := st.exec.cost()
	if err != nil {
		cost = st.stats.Requested // not counted: an event costs what the subscription was priced at
	}
	st.stats.Actual = &cost
	if l.cfg.OnCost != nil {
		l.cfg.OnCost("actual", cost)
	}
	if l.cfg.FreeSubscriptionEvents {
		return resp
	}
	st.events.owed = min(st.events.owed+cost, complexity.MaxCost)
	now := l.cfg.Clock()
	if now.Sub(st.events.last) < eventChargeInterval {
		return resp
	}
	e := l.payEvents(ctx, st, now)
	if e == nil {
		return resp
	}
	st.events.ended = true
	l.cfg.Logger.Debug("costgate: subscription ended: its events cost more than its bucket holds", "code", e.Code)
	return &graphql.Response{Data: json.RawMessage("null"), Errors: gqlerror.List{e.gqlError()}}
}

// endEvents charges what a subscription that ended still owes. The client may have
// gone: the charge does not depend on its connection.
func (l *Limiter) endEvents(ctx context.Context, st *state) {
	if st.exec != nil && st.exec.subscription && !l.cfg.FreeSubscriptionEvents && !st.events.ended {
		l.payEvents(context.WithoutCancel(ctx), st, l.cfg.Clock())
	}
}

// payEvents takes what the subscription owes from its bucket; the error says why the
// bucket could not pay.
func (l *Limiter) payEvents(ctx context.Context, st *state, now time.Time) *Error {
	owed := st.events.owed
	st.events.last, st.events.owed = now, 0
	if owed <= 0 {
		return nil
	}
	p, key := l.bucket(st)
	if l.cfg.Mode == limiter.Shadow {
		shadow := *p
		shadow.Mode = limiter.Shadow
		p = &shadow
	}
	d := l.cfg.Limiter.Allow(ctx, p, key, owed)
	st.stats.HasBucket = st.stats.HasBucket || d.HasState()
	st.stats.Remaining = d.Remaining
	st.stats.ResetAt = l.cfg.Clock().Add(d.ResetAfter)
	switch {
	case d.Outcome == limiter.ErrorDenied:
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeLimiterUnavailable,
			Message:    "the rate limiter cannot reach its store, and GraphQL fails closed; retry shortly",
			Extensions: map[string]any{"retryAfterSec": header.UnavailableRetryAfter}}
	case !d.Allowed:
		if d.Remaining > 0 {
			// The events were sent: what the bucket holds goes toward them.
			l.cfg.Limiter.Allow(ctx, p, key, d.Remaining)
			st.stats.Remaining = 0
		}
		return &Error{Status: http.StatusTooManyRequests, Code: CodeThrottled, Message: "Throttled",
			Extensions: map[string]any{"retryAfterSec": header.RetryAfterSeconds(d)}}
	}
	return nil
}
