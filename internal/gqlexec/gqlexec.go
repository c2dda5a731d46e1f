// Package gqlexec joins gqllimit's middleware to an executor of costgate's
// own (gqlproxy), which runs operations in place of gqlgen and its
// extension. The middleware keeps each request's state in the context; the
// executor reaches it through Request. Both answer in one shape (Response).
// Applications use gqlgen, or gqlproxy, and never need this.
package gqlexec

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/jsonerror"
)

// Executor is implemented by a handler that executes operations itself:
// wrapped by gqllimit's middleware, it stands in for the extension, and the
// middleware serves requests instead of refusing them as unlimited.
type Executor interface {
	http.Handler
	ExecutesOperations()
}

// Request is one GraphQL request inside the middleware: read, parsed and
// checked against the limits that come before validation, not yet
// validated. The executor validates the operation, calls Admit, runs it,
// calls FinishCost or FinishFailed, and answers with Cost in
// extensions.cost.
type Request interface {
	Method() string // GET or POST
	Query() string
	OperationName() string
	Variables() map[string]any
	Extensions() json.RawMessage
	// Derived returns what build returns for this document: built by the
	// first request that sends this text and operation name and kept with
	// the document in the middleware's cache, read-only once built.
	Derived(build func() any) any
	// Admit prices a validated operation and charges the caller. It
	// reports whether the operation may run; when not, it has answered (the
	// rejection, or a dry run's answer).
	Admit(ctx context.Context, w http.ResponseWriter, op *ast.OperationDefinition, vars map[string]any) bool
	// ActualCounter counts the actual cost of plans' operation as the reply
	// streams past, sharing plans with the other requests that run it.
	ActualCounter(plans *complexity.ActualPlans, vars map[string]any) (*complexity.ActualCounter, error)
	// FinishCost refunds what an admitted operation did not use: actual,
	// or nothing when err says the reply could not be priced.
	FinishCost(ctx context.Context, actual int64, err error)
	// FinishFailed refunds all but 1 of an admitted operation that returned
	// nothing (its upstream failed).
	FinishFailed(ctx context.Context)
	// FinishCharged keeps the whole charge of an admitted operation: a
	// mutation forwarded, or one whose client went away once it was.
	// Whichever of the three Finish calls comes first settles the operation.
	FinishCharged(ctx context.Context)
	// Cost is extensions.cost, with what is known.
	Cost() any
	// Refuse answers with one GraphQL error; before Admit let the operation
	// run it is a rejection (counted, the caller's bucket read).
	Refuse(ctx context.Context, w http.ResponseWriter, status int, code, message string)
	// RefuseAll answers a document that does not validate with its errors,
	// a rejection with code.
	RefuseAll(ctx context.Context, w http.ResponseWriter, status int, code string, errs gqlerror.List)
}

// Response is a GraphQL response body, as costgate writes one.
type Response struct {
	Errors     []any           `json:"errors,omitempty"` // *gqlerror.Error, or an upstream's as it wrote it
	Data       json.RawMessage `json:"data"`
	Extensions map[string]any  `json:"extensions,omitempty"`
}

// WriteResponse writes res as JSON with status, never cached.
func WriteResponse(w http.ResponseWriter, status int, res Response) {
	jsonerror.WriteJSON(w, status, res)
}

// ErrorMessage is the message of a gqlparser error (without its location
// prefix), or err's text.
func ErrorMessage(err error) string {
	var ge *gqlerror.Error
	if errors.As(err, &ge) {
		return ge.Message
	}
	return err.Error()
}

type key struct{}

// NewContext returns ctx carrying r.
func NewContext(ctx context.Context, r Request) context.Context {
	return context.WithValue(ctx, key{}, r)
}

// From returns the request ctx belongs to, or nil outside the middleware.
func From(ctx context.Context) Request {
	r, _ := ctx.Value(key{}).(Request)
	return r
}
