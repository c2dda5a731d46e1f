package gqllimit

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/gqlexec"
	"github.com/costgate/costgate/internal/gqlvalidate"
)

// operation is a GraphQL request as the middleware read it: parsed, and
// checked against the limits that come before validation (body, tokens,
// depth, aliases, fields), not yet validated.
type operation struct {
	Method        string // GET or POST
	Query         string
	OperationName string
	Extensions    json.RawMessage
	// Document is the parsed document, shared with every request that sends
	// the same text: read it, never change it.
	Document *ast.QueryDocument

	doc *document
	// The variables, as sent; decoded on first use (most requests never
	// need them decoded: gqlgen coerces its own).
	rawVariables json.RawMessage
	variables    map[string]any
	decoded      bool
}

// Variables returns the operation's variables, decoded from the JSON read
// (already checked to be an object) the first time it is called. Only the
// request's goroutine calls it.
func (o *operation) Variables() map[string]any {
	if !o.decoded {
		o.decoded = true
		if o.rawVariables != nil {
			_ = json.Unmarshal(o.rawVariables, &o.variables) // checked by setVariables
		}
	}
	return o.variables
}

// withState returns ctx carrying st, for the extension and for an executor
// of costgate's own (gqlexec.From).
func withState(ctx context.Context, st *state) context.Context {
	return gqlexec.NewContext(ctx, execRequest{st})
}

func stateFrom(ctx context.Context) *state {
	if r, ok := gqlexec.From(ctx).(execRequest); ok {
		return r.st
	}
	// An operation a websocket connection started keeps its state in
	// gqlgen's operation context.
	if connectionFrom(ctx) == nil || !graphql.HasOperationContext(ctx) {
		return nil
	}
	st, _ := graphql.GetOperationContext(ctx).Stats.GetExtension(extensionName).(*state)
	return st
}

// execRequest is a request's state as an executor of costgate's own
// (gqlproxy) sees it: see gqlexec.Request.
type execRequest struct{ st *state }

var _ gqlexec.Request = execRequest{}

// noteExecutor marks l as served by next when next executes operations
// itself, in place of gqlgen's extension.
func (l *Limiter) noteExecutor(next http.Handler) {
	if _, ok := next.(gqlexec.Executor); ok {
		l.executor.Store(true)
	}
}

func (r execRequest) Method() string              { return r.st.op.Method }
func (r execRequest) Query() string               { return r.st.op.Query }
func (r execRequest) OperationName() string       { return r.st.op.OperationName }
func (r execRequest) Variables() map[string]any   { return r.st.op.Variables() }
func (r execRequest) Extensions() json.RawMessage { return r.st.op.Extensions }

// Derived keeps what build returns with the document in the middleware's
// cache, for the requests that send it again (built each time when the
// document is not cached).
func (r execRequest) Derived(build func() any) any {
	d := r.st.op.doc
	if d == nil {
		return build()
	}
	d.derivedOnce.Do(func() { d.derived = build() })
	return d.derived
}

func (r execRequest) Admit(ctx context.Context, w http.ResponseWriter, op *ast.OperationDefinition, vars map[string]any) bool {
	st := r.st
	switch rerr := st.lim.admit(ctx, st, op, vars); {
	case rerr == nil:
		return true
	case rerr == errDryRun:
		gqlexec.WriteResponse(w, http.StatusOK, gqlexec.Response{Data: dryRunData(st, op, vars), Extensions: map[string]any{"cost": r.Cost()}})
	default:
		r.refuse(ctx, w, rerr)
	}
	return false
}

func (r execRequest) ActualCounter(plans *complexity.ActualPlans, vars map[string]any) (*complexity.ActualCounter, error) {
	return r.st.lim.pricing().NewSharedActualCounter(plans, vars)
}

func (r execRequest) FinishCost(ctx context.Context, actual int64, err error) {
	r.st.lim.finishCost(ctx, r.st, actual, err)
}

func (r execRequest) FinishFailed(ctx context.Context) { r.st.lim.finishFailed(ctx, r.st) }

func (r execRequest) FinishCharged(ctx context.Context) { r.st.lim.finishCharged(ctx, r.st) }

func (r execRequest) Cost() any {
	if r.st.op == nil {
		return nil
	}
	return r.st.stats.cost()
}

func (r execRequest) Refuse(ctx context.Context, w http.ResponseWriter, status int, code, message string) {
	r.refuse(ctx, w, &Error{Status: status, Code: code, Message: message})
}

// refuse answers e; an error for an operation that was not admitted is a
// rejection: a 400 is charged the rejection cost (a document refused before
// it ran, its variables say), every one is counted (Config.OnRejection),
// and the answer reads the caller's bucket for throttleStatus.
func (r execRequest) refuse(ctx context.Context, w http.ResponseWriter, e *Error) {
	if !r.st.admitted {
		if e.Status == http.StatusBadRequest {
			e = r.st.lim.refuse(ctx, r.st, e)
		}
		r.st.lim.rejected(ctx, r.st, e)
	}
	writeError(w, e, r.st)
}

func (r execRequest) RefuseAll(ctx context.Context, w http.ResponseWriter, status int, code string, errs gqlerror.List) {
	if !r.st.admitted {
		e := &Error{Status: status, Code: code}
		if status == http.StatusBadRequest {
			if e = r.st.lim.refuse(ctx, r.st, e); e.Code != code {
				writeError(w, e, r.st) // throttled: the bucket could not pay for the refusal
				r.st.lim.rejected(ctx, r.st, e)
				return
			}
		}
		r.st.lim.rejected(ctx, r.st, e)
	}
	if len(errs) > gqlvalidate.MaxErrors {
		errs = append(errs[:gqlvalidate.MaxErrors:gqlvalidate.MaxErrors], &gqlerror.Error{Message: gqlvalidate.TooManyErrors})
	}
	res := gqlexec.Response{Data: json.RawMessage("null"), Extensions: map[string]any{"cost": r.Cost()}}
	for _, e := range errs {
		res.Errors = append(res.Errors, gqlvalidate.Bound(e))
	}
	gqlexec.WriteResponse(w, status, res)
}
