package gqllimit

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/vektah/gqlparser/v2/ast"
)

// Operation is a GraphQL request as the middleware read it: parsed, and
// checked against the limits that come before validation (body, tokens,
// depth, aliases, fields), not yet validated.
type Operation struct {
	Method        string // GET or POST
	Query         string
	OperationName string
	Variables     map[string]any
	Extensions    json.RawMessage
	Document      *ast.QueryDocument
}

// OperationFrom returns the operation of the request ctx belongs to, as the
// middleware read it, or nil outside the middleware.
func OperationFrom(ctx context.Context) *Operation {
	if st := stateFrom(ctx); st != nil {
		return st.op
	}
	return nil
}

// The methods below let a handler of costgate's own execute operations in
// place of gqlgen (package gqlproxy does): it validates the operation, calls
// Admit, runs it, calls Finish with what came back, and answers with
// CostOf(ctx) in extensions.cost. Call MarkExecutor once when building it.

// Admit prices a validated operation and charges the caller. It returns nil
// when the operation may run, ErrDryRun for a dry run, or the rejection; the
// middleware answers with the rejection's Status and the rate-limit headers.
func (l *Limiter) Admit(ctx context.Context, op *ast.OperationDefinition, vars map[string]any) *Error {
	st := stateFrom(ctx)
	if st == nil {
		return reject(http.StatusInternalServerError, CodeInternal, "costgate: Admit outside gqllimit's Middleware")
	}
	return l.admit(ctx, st, op, vars)
}

// Finish prices what an admitted operation returned (data is the
// response's "data" member; nil when nothing came back, which refunds all
// but 1) and refunds requested − actual.
func (l *Limiter) Finish(ctx context.Context, op *ast.OperationDefinition, vars map[string]any, data []byte) {
	if st := stateFrom(ctx); st != nil {
		l.finish(ctx, st, op, vars, data)
	}
}

// CostOf returns extensions.cost of the operation ctx belongs to, or nil
// before it was priced.
func CostOf(ctx context.Context) *Cost {
	if st := stateFrom(ctx); st != nil && st.priced {
		return st.stats.cost()
	}
	return nil
}

// WriteError answers with a GraphQL error response: status e.Status,
// extensions.cost once the operation was priced.
func WriteError(ctx context.Context, w http.ResponseWriter, e *Error) {
	writeError(w, e, stateFrom(ctx))
}
