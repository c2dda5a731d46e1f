package gqllimit

import (
	"context"
)

// An operation is settled once: the first of the finishes below that applies
// to it decides, and the others do nothing.

// finishCost settles an operation whose executor priced what it returned
// itself (gqlproxy): actual, or err when it could not be priced (then
// nothing is refunded).
func (l *Limiter) finishCost(ctx context.Context, st *state, actual int64, err error) {
	if st.priced && !st.dryRun && !st.settled {
		l.settle(ctx, st, actual, err)
	}
}

// finishCharged settles an operation that keeps its whole charge: a
// mutation that was forwarded, or one whose client went away once it was.
func (l *Limiter) finishCharged(ctx context.Context, st *state) {
	if st.priced && !st.dryRun && !st.settled {
		l.settle(ctx, st, st.stats.Requested, nil)
	}
}

// finishFailed records an admitted operation that returned nothing (its
// upstream failed): all but 1 of the charge is refunded, and
// actualQueryCost says what stays charged.
func (l *Limiter) finishFailed(ctx context.Context, st *state) {
	if !st.priced || st.dryRun || st.settled {
		return
	}
	l.settle(ctx, st, 0, nil)
	kept := int64(1)
	if l.cfg.NoRefund {
		kept = st.stats.Requested
	}
	st.stats.Actual = &kept
}

// settle records the actual cost of an operation that ran and refunds what
// it did not use; on err (the reply could not be priced) nothing.
func (l *Limiter) settle(ctx context.Context, st *state, actual int64, err error) {
	st.settled = true
	if err != nil {
		l.cfg.Logger.Warn("costgate: actual cost", "err", err)
		actual = st.stats.Requested // no refund on doubt
	}
	st.stats.Actual = &actual
	if l.cfg.OnCost != nil {
		l.cfg.OnCost("actual", actual)
	}
	// Every operation costs at least what reading it cost (at least 1),
	// whatever it returned.
	refund := st.stats.Requested - max(actual, st.floor, 1)
	if l.cfg.NoRefund || !st.stats.Charged || refund <= 0 {
		return
	}
	p, key := l.bucket(st)
	// The work is done: what it did not use goes back whether or not the
	// client is still there (a Redis call would fail on its cancelled context).
	d, err := l.cfg.Limiter.Refund(context.WithoutCancel(ctx), p, key, refund)
	if err != nil {
		l.cfg.Logger.Warn("costgate: refund", "policy", p.Name, "err", err)
		return
	}
	st.stats.Remaining = d.Remaining
	st.stats.ResetAt = l.cfg.Clock().Add(d.ResetAfter)
	st.decision.Remaining, st.decision.ResetAfter = d.Remaining, d.ResetAfter
}
