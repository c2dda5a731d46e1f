package gqllimit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/gqlvalidate"
)

// Extension returns the gqlgen handler extension: after validation and
// before execution it prices the operation, rejects it over the limits
// without charging, and charges the caller's bucket; during execution it
// counts what the resolvers returned (execution.go), then refunds the
// difference and adds extensions.cost. The handler must be wrapped in l.Middleware, which turns
// its decisions into HTTP statuses and headers (an extension cannot).
func (l *Limiter) Extension() graphql.HandlerExtension { return extension{l} }

type extension struct{ l *Limiter }

var (
	_ graphql.HandlerExtension          = extension{}
	_ graphql.OperationContextMutator   = extension{}
	_ graphql.ResponseInterceptor       = extension{}
	_ graphql.OperationParameterMutator = extension{}
	_ graphql.OperationInterceptor      = extension{}
)

const extensionName = "CostgateLimit"

func (extension) ExtensionName() string { return extensionName }

// Validate builds the pricing schema from gqlgen's, unless one was given,
// and keeps gqlgen's for the middleware to validate documents against.
func (e extension) Validate(schema graphql.ExecutableSchema) error {
	e.l.mu.Lock()
	defer e.l.mu.Unlock()
	e.l.installed.Store(true)
	e.l.validates = schema.Schema()
	if e.l.schema != nil {
		return nil
	}
	s, err := complexity.NewSchema(schema.Schema(), e.l.cfg.ComplexityOptions...)
	if err != nil {
		return fmt.Errorf("costgate: %w", err)
	}
	e.l.schema = s
	if e.l.trust != nil {
		// Until they load, requests are refused (trusted), never served unchecked.
		if err := e.l.loadTrusted(s, true); err != nil {
			return fmt.Errorf("costgate: %w", err)
		}
	}
	return nil
}

// MutateOperationParameters reads an operation a websocket connection
// started before gqlgen parses and validates it, as the middleware reads an
// HTTP request: the token limit, the whole document's depth, aliases and
// fields, validation. A refusal is one error here (gqlgen's interface);
// InterceptResponse answers every validation error.
func (e extension) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	c := connectionFrom(ctx)
	if c == nil || !graphql.HasOperationContext(ctx) {
		fillDocument(ctx, p) // a trusted document named by its documentId
		return nil
	}
	st, rerr := e.l.readStreamed(ctx, c, p)
	if st != nil {
		graphql.GetOperationContext(ctx).Stats.SetExtension(extensionName, st)
	}
	if rerr == nil {
		return nil
	}
	e.l.rejected(ctx, st, rerr)
	if st != nil {
		e.l.ended(st)
	}
	return rerr.gqlError()
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
		e.l.ended(st)
		return rerr.gqlError()
	}
	rerr := e.l.admit(ctx, st, rc.Operation, rc.Variables)
	if rerr != nil && rerr != errDryRun {
		e.l.ended(st) // refused: nothing runs
	}
	switch {
	case rerr == nil:
		e.l.watch(st, rc)
		return nil
	case rerr == errDryRun && st.dryRunData:
		// rateLimit(dryRun: true): run that field alone, which reads GetStats.
		rc.Operation = dryRunOperation(rc.Operation, rc.Variables)
		return nil
	}
	return rerr.gqlError()
}

// InterceptOperation frees a subscription's slot when it ends: when its
// stream does, or when its context is done (stopped by the client, its
// connection closed) if the transport stops reading first. A subscription
// whose bucket could not pay for its last event ends after the error.
func (e extension) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	responses := next(ctx)
	st := stateFrom(ctx)
	if st == nil || st.slot == nil && st.conn == nil {
		return responses
	}
	stop := context.AfterFunc(ctx, func() { e.l.operationDone(st) })
	return func(ctx context.Context) *graphql.Response {
		var resp *graphql.Response
		if !st.events.ended {
			resp = responses(ctx)
		}
		if resp == nil {
			stop()
			e.l.endEvents(ctx, st)
			e.l.ended(st) // before the transport says complete
		}
		return resp
	}
}

func (e extension) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	st := stateFrom(ctx)
	event := st != nil && st.exec != nil && st.exec.subscription
	if event && st.exec.count != nil {
		st.exec.count.BeginEvent()
	}
	resp := next(ctx)
	if resp == nil || st == nil || st.op == nil {
		return resp
	}
	if st.rejected && len(st.errs) > 0 && !st.admitted {
		resp.Errors = cloneErrors(st.errs) // a websocket's operation that did not validate: every error, not the one gqlgen was given
	}
	switch {
	case st.stats.DryRun && !st.dryRunData: // answered as a dry run: extensions.cost alone
		resp.Errors, resp.Data = nil, json.RawMessage("null")
	case st.stats.DryRun: // rateLimit(dryRun: true) alone ran
	case st.admitted && event:
		// A subscription was charged its price when it started; each event
		// is charged what it cost.
		resp = e.l.chargeEvent(ctx, st, resp)
	case st.admitted:
		if resp.HasNext == nil || !*resp.HasNext { // @defer: the last response settles
			e.l.finish(ctx, st)
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
		rerr := &Error{Status: status, Code: code}
		if status == http.StatusBadRequest {
			// Refused before it ran, as costgate's own refusals are: charged,
			// and its messages (which may echo a variable's value) bounded.
			rerr = e.l.refuse(ctx, st, rerr)
			for _, ge := range resp.Errors {
				gqlvalidate.Bound(ge)
			}
			if len(resp.Errors) > gqlvalidate.MaxErrors {
				resp.Errors = resp.Errors[:gqlvalidate.MaxErrors]
			}
		}
		e.l.rejected(ctx, st, &Error{Status: rerr.Status, Code: code})
		e.l.ended(st)
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
