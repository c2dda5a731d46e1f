package gqllimit

import (
	"context"
)

// finishCost settles an operation whose executor priced what it returned
// itself (gqlproxy): actual, or err when it could not be priced (then
// nothing is refunded).
func (l *Limiter) finishCost(ctx context.Context, st *state, actual int64, err error) {
	if st.priced && !st.dryRun {
		l.settle(ctx, st, actual, err)
	}
}

// finishFailed records an admitted operation that returned nothing (its
// upstream failed): all but 1 of the charge is refunded, and
// actualQueryCost says what stays charged.
func (l *Limiter) finishFailed(ctx context.Context, st *state) {
	if !st.priced || st.dryRun {
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
	d, err := l.cfg.Limiter.Refund(ctx, p, key, refund)
	if err != nil {
		l.cfg.Logger.Warn("costgate: refund", "policy", p.Name, "err", err)
		return
	}
	st.stats.Remaining = d.Remaining
	st.stats.ResetAt = l.cfg.Clock().Add(d.ResetAfter)
	st.decision.Remaining, st.decision.ResetAfter = d.Remaining, d.ResetAfter
}
