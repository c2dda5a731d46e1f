package gqllimit

// OperationEvent is one operation as Config.OnOperation reports it, once
// costgate is done with it.
type OperationEvent struct {
	// Name is the name of the operation the request selected: operationName,
	// or the name of the document's only operation; "" for an anonymous one.
	// When operationName selects no operation of the document it is the
	// operationName sent, which may be any string.
	Name string
	// Estimated is the priced cost (requestedQueryCost), 0 when the
	// operation was not priced (a validation error, say).
	Estimated int64
	// Actual is the cost of what the operation returned; HasActual reports
	// that it ran and was priced after.
	Actual    int64
	HasActual bool
	// Code is the rejection's code (errors[0].extensions.code), or, in
	// measure mode, the code enforcement would have answered; "" for an
	// operation that ran under its limits.
	Code string
}

// reportOperation calls Config.OnOperation for the operation st stands for.
func (l *Limiter) reportOperation(st *state) {
	if l.cfg.OnOperation == nil || st == nil || st.op == nil || st.dryRun || st.stats.DryRun {
		return
	}
	ev := OperationEvent{Name: st.op.OperationName, Estimated: st.stats.Requested, Code: st.code}
	if op := st.op.Document.Operations.ForName(st.op.OperationName); op != nil {
		ev.Name = op.Name
	}
	if st.stats.Actual != nil {
		ev.Actual, ev.HasActual = *st.stats.Actual, true
	}
	if ev.Code == "" {
		ev.Code = st.wouldBe
	}
	l.cfg.OnOperation(ev)
}
