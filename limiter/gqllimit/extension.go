package gqllimit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/costgate/costgate/complexity"
)

// Extension returns the gqlgen handler extension: after validation and
// before execution it prices the operation, rejects it over the limits
// without charging, and charges the caller's bucket; after execution it
// prices what was returned, refunds the difference, and adds
// extensions.cost. The handler must be wrapped in l.Middleware, which turns
// its decisions into HTTP statuses and headers (an extension cannot).
func (l *Limiter) Extension() graphql.HandlerExtension { return extension{l} }

type extension struct{ l *Limiter }

var (
	_ graphql.HandlerExtension        = extension{}
	_ graphql.OperationContextMutator = extension{}
	_ graphql.ResponseInterceptor     = extension{}
)

func (extension) ExtensionName() string { return "CostgateLimit" }

// Validate builds the pricing schema from gqlgen's, unless one was given.
func (e extension) Validate(schema graphql.ExecutableSchema) error {
	e.l.mu.Lock()
	defer e.l.mu.Unlock()
	e.l.installed.Store(true)
	if e.l.schema != nil {
		return nil
	}
	s, err := complexity.NewSchema(schema.Schema(), e.l.cfg.ComplexityOptions...)
	if err != nil {
		return fmt.Errorf("costgate: %w", err)
	}
	e.l.schema = s
	return nil
}

func (e extension) MutateOperationContext(ctx context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	st := stateFrom(ctx)
	if st == nil {
		return gqlerror.Errorf("costgate: the GraphQL handler must be wrapped in gqllimit's Middleware")
	}
	if rc.RawQuery != st.op.Query || rc.OperationName != st.op.OperationName {
		// Something between the middleware and here (an operation parameter
		// mutator, a transport of its own) changed the operation: what would
		// run is not what costgate read, so nothing runs.
		e.l.cfg.Logger.Error("costgate: gqlgen is about to run another operation than the one costgate read (an OperationParameterMutator changed it); nothing runs")
		rerr := reject(http.StatusBadRequest, CodeBadRequest, "the operation run differs from the one read")
		e.l.rejected(ctx, st, rerr)
		return rerr.gqlError()
	}
	rerr := e.l.admit(ctx, st, rc.Operation, rc.Variables)
	switch {
	case rerr == nil:
		return nil
	case rerr == errDryRun && st.dryRunData:
		// rateLimit(dryRun: true): run that field alone, which reads GetStats.
		rc.Operation = dryRunOperation(rc.Operation, rc.Variables)
		return nil
	}
	return rerr.gqlError()
}

func (e extension) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	st := stateFrom(ctx)
	if resp == nil || st == nil || st.op == nil {
		return resp
	}
	switch {
	case st.stats.DryRun && !st.dryRunData: // answered as a dry run: extensions.cost alone
		resp.Errors, resp.Data = nil, json.RawMessage("null")
	case st.stats.DryRun: // rateLimit(dryRun: true) alone ran
	case st.admitted:
		if rc := graphql.GetOperationContext(ctx); rc != nil && rc.Operation != nil {
			e.l.finish(ctx, st, rc.Operation, rc.Variables, resp.Data)
		}
	case !st.rejected:
		// gqlgen refused the operation before costgate priced it: a
		// validation error, variables that do not coerce, an unknown
		// persisted query. Answered 400 (gqlgen's own is 422) with what is
		// known of the cost.
		code := CodeBadRequest
		if len(resp.Errors) > 0 {
			if c, ok := resp.Errors[0].Extensions["code"].(string); ok && c != "" {
				code = c
			}
		}
		status := http.StatusBadRequest
		if code == CodePersistedQueryNotFound {
			status = http.StatusOK
		}
		e.l.rejected(ctx, st, &Error{Status: status, Code: code})
	}
	if len(resp.Data) == 0 {
		resp.Data = json.RawMessage("null")
	}
	if resp.Extensions == nil {
		resp.Extensions = map[string]any{}
	}
	resp.Extensions["cost"] = st.stats.cost()
	return resp
}
