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
	// Document is the parsed document, shared with every request that sends
	// the same text: read it, never change it (validate a copy of your own,
	// kept with Derived).
	Document *ast.QueryDocument

	doc *document
}

// Derived returns what build returns for this operation's document: built
// by the first request that sends this text and operation name, and kept
// with the document in the middleware's cache for the requests that send it
// again (built each time when the document is not cached). An executor
// keeps there what it works out from the document alone, read-only once
// built: gqlproxy keeps its validated copy and the query it forwards.
func (o *Operation) Derived(build func() any) any {
	if o.doc == nil {
		return build()
	}
	o.doc.derivedOnce.Do(func() { o.doc.derived = build() })
	return o.doc.derived
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

// CostOf returns extensions.cost of the operation ctx belongs to, with what
// is known (requestedQueryCost once priced), or nil outside the middleware.
func CostOf(ctx context.Context) *Cost {
	if st := stateFrom(ctx); st != nil && st.op != nil {
		return st.stats.cost()
	}
	return nil
}

// Reject records that the operation ctx belongs to was refused with code and
// status before it ran, for an executor that writes the answer itself
// (gqlproxy, for the list of validation errors): it is counted
// (Config.OnRejection), the middleware answers with status, and CostOf then
// holds the caller's bucket. WriteError does the same for one error.
func Reject(ctx context.Context, status int, code string) {
	if st := stateFrom(ctx); st != nil && !st.admitted {
		st.lim.rejected(ctx, st, &Error{Status: status, Code: code})
	}
}

// WriteError answers with a GraphQL error response, status e.Status, and
// extensions.cost once the document parsed. An error for an operation that
// was not admitted (Admit did not return nil) is a rejection: it is counted
// (Config.OnRejection) and the answer reads the caller's bucket for
// throttleStatus. After Admit let it run, it is not (an upstream failure).
func WriteError(ctx context.Context, w http.ResponseWriter, e *Error) {
	st := stateFrom(ctx)
	if st != nil && !st.admitted {
		st.lim.rejected(ctx, st, e)
	}
	writeError(w, e, st)
}
