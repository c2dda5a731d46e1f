package gqllimit

import (
	"context"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
)

// ActualCounter returns a counter of op's actual cost, for an executor that
// prices the reply as it streams it (gqlproxy) and then calls FinishCost.
func (l *Limiter) ActualCounter(op *ast.OperationDefinition, vars map[string]any) (*complexity.ActualCounter, error) {
	return l.pricing().NewActualCounter(op, vars)
}

// FinishCost is Finish for an executor that priced what the operation
// returned itself: actual, or err when it could not be priced (then nothing
// is refunded).
func (l *Limiter) FinishCost(ctx context.Context, actual int64, err error) {
	if st := stateFrom(ctx); st != nil && st.priced && !st.dryRun {
		l.settle(ctx, st, actual, err)
	}
}

// FinishFailed records an admitted operation that returned nothing (its
// upstream failed): all but 1 of the charge is refunded, and
// actualQueryCost says what stays charged.
func (l *Limiter) FinishFailed(ctx context.Context) {
	st := stateFrom(ctx)
	if st == nil || !st.priced || st.dryRun {
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
	// Every operation costs at least 1, whatever it returned.
	refund := st.stats.Requested - max(actual, 1)
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
