// Package gqlproxy is costgate's proxy mode: any GraphQL upstream, priced
// from its SDL (with @cost and @listSize), behind the same cost limit as an
// embedded gqlgen server. [New] returns the complete handler.
package gqlproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/gqlexec"
	"github.com/costgate/costgate/internal/gqlvalidate"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// Error codes the proxy answers with when the upstream fails, in
// errors[0].extensions.code; the rest are gqllimit's.
const (
	CodeUpstreamError   = "UPSTREAM_ERROR"   // 502: the upstream failed
	CodeUpstreamTimeout = "UPSTREAM_TIMEOUT" // 504: the upstream did not answer in time
)

// typenameAlias is the alias under which the proxy asks the upstream for
// __typename on abstract selections, so that actual costs price the concrete
// types returned. It is removed from the reply.
const typenameAlias = "__costgate_typename"

// DefaultTimeout bounds an upstream call unless Config.Timeout says
// otherwise: below the 30 s write deadline of costgate's server, so that a
// client whose upstream does not answer gets a 504, not an empty reply.
const DefaultTimeout = 20 * time.Second

// Config configures the proxy. Limiter and Upstream are required.
type Config struct {
	// Limiter prices, charges and refunds; its Config.Schema must be the
	// upstream's schema (complexity.LoadSDL).
	Limiter *gqllimit.Limiter
	// Upstream is the GraphQL endpoint operations are forwarded to.
	Upstream string
	// Client sends them (default: a client that follows no redirect). A
	// redirect is an upstream failure: following one would send the
	// caller's headers, API key among them, somewhere else.
	Client *http.Client
	// Timeout bounds one upstream call, from sending the operation to the
	// reply's last byte (default DefaultTimeout). Keep it below the write
	// deadline of the server the proxy runs in: a call that times out before
	// the client got a byte is answered 504 UPSTREAM_TIMEOUT.
	Timeout time.Duration
	// StripAPIKey drops the API-key header (the Limiter's identity's) from
	// the request forwarded; by default it is forwarded.
	StripAPIKey bool
	// MaxResponseBytes bounds the upstream's reply (0: no bound). A reply
	// over it is UPSTREAM_ERROR (502). With a bound, a reply is read whole
	// (up to the bound) before the client gets a byte; without one, it is
	// streamed to the client as it is read, once its first 64 KiB are.
	MaxResponseBytes int64
	// Logger gets the upstream's failures, which clients never see in
	// detail (default: the Limiter's).
	Logger *slog.Logger
}

// Validate reports every problem of c, joined, as *limiter.FieldError values.
func (c *Config) Validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &limiter.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Limiter == nil:
		fail("Limiter", "required (gqllimit.New with the upstream's Schema)")
	case c.Limiter.Config().Schema == nil:
		fail("Limiter", "its Config.Schema is required: the upstream's schema prices and validates operations")
	}
	if c.Upstream == "" {
		fail("Upstream", "required: the URL operations are forwarded to")
	} else if u, err := url.Parse(c.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fail("Upstream", "want an http:// or https:// URL with a host")
	}
	if c.Timeout < 0 {
		fail("Timeout", "must not be negative, got %s", c.Timeout)
	}
	if c.MaxResponseBytes < 0 {
		fail("MaxResponseBytes", "must not be negative (0: no bound), got %d", c.MaxResponseBytes)
	}
	return errors.Join(errs...)
}

// New returns the complete proxy handler, the cost limit already around
// it: it reads and checks each request (gqllimit's middleware), validates
// the operation against the upstream's schema, prices and charges it,
// forwards it, prices the reply, refunds the difference and adds
// extensions.cost. A document sent again (in full, or by its hash with the
// Limiter's Config.PersistedQueries) is not parsed, validated or formatted
// again: that is kept with the document in gqllimit's cache. The upstream
// always gets the query in full, never the persistedQuery extension.
// rateLimit(dryRun: true) is answered by the proxy.
// The reply is streamed to the client while its actual cost is counted
// (complexity.ActualCounter): the memory a reply costs is bounded by the
// operation, not by the reply. Anything but a 2xx GraphQL response from the
// upstream (no answer, another status, redirects included, not JSON, data
// that is not an object, errors that are not objects, neither data nor
// errors) answers UPSTREAM_ERROR (502), and no answer within Timeout
// UPSTREAM_TIMEOUT (504), with a generic message, the detail logged, all but
// 1 of the charge refunded and actualQueryCost saying so. A reply found
// malformed (or cut off) after the client got its first bytes cannot be
// answered so: the connection is closed, the body unfinished, so that the
// client never takes it for a complete response; nothing is refunded.
func New(cfg Config) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gqlproxy: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{
			// A GraphQL endpoint does not redirect; following one would send
			// the caller's headers (API keys among them) somewhere else.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = cfg.Limiter.Config().Logger
	}
	p := &proxy{cfg: cfg, lim: cfg.Limiter, schema: cfg.Limiter.Config().Schema.AST()}
	return cfg.Limiter.Middleware(p), nil
}

type proxy struct {
	cfg    Config
	lim    *gqllimit.Limiter
	schema *ast.Schema
}

// request is what is forwarded.
type request struct {
	Query         string          `json:"query"`
	OperationName string          `json:"operationName,omitempty"`
	Variables     map[string]any  `json:"variables,omitempty"`
	Extensions    json.RawMessage `json:"extensions,omitempty"`
}

// prepared is what the proxy works out from a document alone: kept with the
// document in gqllimit's cache, so that an operation sent again is not
// parsed, validated or prepared again.
type prepared struct {
	errs    gqlerror.List // validation against the upstream's schema
	refusal string        // an alias the proxy refuses (see typename.go)
	// doc is the parse of query, validated: the client's document with
	// __typename asked for on abstract selections (free: pricing it is the
	// same as without); it is priced, and query is forwarded.
	doc   *ast.QueryDocument
	query string
	// inserted says where query differs from the client's text, to move
	// the upstream's error locations back into the client's document.
	inserted []insertion
	// plans are what counting the actual cost of each operation of doc
	// works out of it, kept for the requests that send doc again.
	plans sync.Map // *ast.OperationDefinition → *complexity.ActualPlans
}

// actualPlans returns the plans of op, an operation of prep.doc.
func (prep *prepared) actualPlans(op *ast.OperationDefinition) *complexity.ActualPlans {
	if plans, ok := prep.plans.Load(op); ok {
		return plans.(*complexity.ActualPlans)
	}
	plans, _ := prep.plans.LoadOrStore(op, complexity.NewActualPlans(op))
	return plans.(*complexity.ActualPlans)
}

// ExecutesOperations tells gqllimit's middleware that the proxy runs
// operations itself, in place of gqlgen's extension (gqlexec.Executor).
func (p *proxy) ExecutesOperations() {}

func (p *proxy) prepare(pr gqlexec.Request) *prepared {
	return pr.Derived(func() any {
		// A copy of its own, which the typenames are added to: the
		// middleware's is shared read-only. The middleware parsed the same
		// text with the token limit, measured and validated it (with rules
		// linear in the document): validating the copy links it to the
		// schema, as linear.
		doc, err := parser.ParseQuery(&ast.Source{Input: pr.Query()})
		if err != nil {
			return &prepared{errs: gqlerror.List{gqlerror.Wrap(err)}}
		}
		if errs := gqlvalidate.Validate(p.schema, doc, gqlvalidate.Options{}); len(errs) > 0 {
			for _, e := range errs {
				if e.Extensions == nil {
					e.Extensions = map[string]any{}
				}
				e.Extensions["code"] = gqllimit.CodeValidationFailed
			}
			return &prepared{errs: errs}
		}
		if why := aliasError(doc, p.schema); why != "" {
			return &prepared{refusal: why}
		}
		query, inserted := withTypenames(pr.Query(), doc, p.schema)
		if inserted == nil {
			return &prepared{doc: doc, query: query}
		}
		// What is priced is the parse of what is forwarded.
		fwd, err := parser.ParseQuery(&ast.Source{Input: query})
		var errs gqlerror.List
		if err == nil {
			errs = gqlvalidate.Validate(p.schema, fwd, gqlvalidate.Options{}) // linear, as the first validation
		}
		if err != nil || len(errs) > 0 {
			return &prepared{refusal: "costgate could not ask for the types of the abstract items"} // unreachable: the insertions are valid
		}
		return &prepared{doc: fwd, query: query, inserted: inserted}
	}).(*prepared)
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pr := gqlexec.From(ctx)
	if pr == nil {
		// Unreachable through New, which wraps the proxy in the middleware.
		gqlexec.WriteResponse(w, http.StatusInternalServerError, gqlexec.Response{Data: json.RawMessage("null"),
			Errors: []any{&gqlerror.Error{Message: "costgate: the proxy runs inside gqllimit's Middleware", Extensions: map[string]any{"code": gqllimit.CodeInternal}}}})
		return
	}
	prep := p.prepare(pr)
	if len(prep.errs) > 0 {
		pr.RefuseAll(ctx, w, http.StatusBadRequest, gqllimit.CodeValidationFailed, prep.errs)
		return
	}
	if prep.refusal != "" {
		pr.Refuse(ctx, w, http.StatusBadRequest, gqllimit.CodeBadRequest, prep.refusal)
		return
	}
	op := prep.doc.Operations.ForName(pr.OperationName())
	if op == nil {
		pr.Refuse(ctx, w, http.StatusBadRequest, gqllimit.CodeValidationFailed, fmt.Sprintf("no operation %q in the document", pr.OperationName()))
		return
	}
	if pr.Method() == http.MethodGet && op.Operation != ast.Query { // the middleware refused it already
		pr.Refuse(ctx, w, http.StatusMethodNotAllowed, gqllimit.CodeBadRequest, fmt.Sprintf("%s operations must be sent with POST", op.Operation))
		return
	}
	vars, verr := validator.VariableValues(p.schema, op, pr.Variables())
	if verr != nil {
		pr.Refuse(ctx, w, http.StatusBadRequest, gqllimit.CodeValidationFailed, gqlexec.ErrorMessage(verr))
		return
	}
	if !pr.Admit(ctx, w, op, vars) {
		return
	}
	p.relay(w, r, pr, prep, op, vars, request{Query: prep.query, OperationName: pr.OperationName(), Variables: pr.Variables(), Extensions: forwardedExtensions(pr.Extensions())})
}

// relay forwards an admitted operation and streams the upstream's reply to
// the client, counting its actual cost. What is refunded trusts nothing the
// client controls: a mutation forwarded keeps its whole charge (its fields
// ran, whatever the reply says), and so does an operation whose client went
// away once it was forwarded (the upstream runs it anyway); only the
// upstream's failure refunds, all but 1.
func (p *proxy) relay(w http.ResponseWriter, r *http.Request, pr gqlexec.Request, prep *prepared, op *ast.OperationDefinition, vars map[string]any, body request) {
	ctx := r.Context()
	upstream, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	res, err := p.send(upstream, r, body)
	if err != nil {
		p.failed(ctx, upstream, w, pr, err)
		return
	}
	defer res.Body.Close()
	count, err := pr.ActualCounter(prep.actualPlans(op), vars)
	if err != nil {
		pr.FinishCharged(ctx) // forwarded: the upstream runs it
		p.failed(ctx, upstream, w, pr, err)
		return
	}
	out := &replyWriter{w: w, commitAt: commitAt}
	if p.cfg.MaxResponseBytes > 0 {
		out.commitAt = 0 // held whole, up to the bound: an answer over it is a clean 502
	}
	ext := &replyWriter{max: maxExtensions}
	sc := newScanner(res.Body, p.cfg.MaxResponseBytes)
	defer func() { out.release(); ext.release(); sc.release() }()
	sc.watch = []*replyWriter{out, ext}
	if len(prep.inserted) > 0 {
		sc.strip, sc.inserted = typenameAlias, prep.inserted
	}
	if _, err := sc.envelope(out, count, ext); err != nil {
		if out.err != nil || ctx.Err() != nil {
			pr.FinishCharged(ctx) // the client went away: the upstream ran it all the same
		}
		if !out.committed {
			p.failed(ctx, upstream, w, pr, fmt.Errorf("status %d: %w", res.StatusCode, err))
			return
		}
		// The client has the beginning of a 200: end the connection with the
		// body unfinished, never a complete answer made of a broken reply.
		pr.FinishCost(ctx, 0, err)
		if ctx.Err() == nil {
			p.cfg.Logger.Warn("costgate: upstream reply failed after the client got its first bytes; connection closed", "upstream", p.cfg.Upstream, "err", p.explain(upstream, err))
		}
		panic(http.ErrAbortHandler)
	}
	if op.Operation == ast.Mutation {
		pr.FinishCharged(ctx) // every root mutation field forwarded ran, whatever the reply holds
	} else {
		actual, err := count.Cost()
		pr.FinishCost(ctx, actual, err)
	}
	closeAnswer(out, ext, pr.Cost())
	if err := out.close(); err != nil {
		p.cfg.Logger.Debug("costgate: writing the answer", "err", err)
	}
}

// send forwards the operation and returns the upstream's answer once its
// status says it may be a GraphQL response (see check).
func (p *proxy) send(ctx context.Context, r *http.Request, body request) (*http.Response, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.Upstream, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header = upstreamHeader(r, p.lim.Config().Identity.APIKeyHeader(), p.cfg.StripAPIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	res, err := p.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	if err := p.check(res); err != nil {
		res.Body.Close()
		return nil, err
	}
	return res, nil
}

// check refuses an answer that is not a GraphQL response by its status:
// other than 2xx (a redirect, or a GraphQL-over-HTTP 4xx, whatever its
// body), or longer than the bound. Its body decides the rest (its
// Content-Type is not read: upstreams label JSON in many ways).
func (p *proxy) check(res *http.Response) error {
	switch {
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return fmt.Errorf("status %d, a redirect to %q (never followed)", res.StatusCode, res.Header.Get("Location"))
	case res.StatusCode < 200 || res.StatusCode > 299:
		return fmt.Errorf("status %d", res.StatusCode)
	case p.cfg.MaxResponseBytes > 0 && res.ContentLength > p.cfg.MaxResponseBytes:
		return fmt.Errorf("status %d, Content-Length %d: %w (%d bytes)", res.StatusCode, res.ContentLength, errReplyTooLarge, p.cfg.MaxResponseBytes)
	}
	return nil
}

// failed answers an operation whose upstream failed before the client got a
// byte: 504 when it did not answer in time, else 502, the detail logged.
// All but 1 of the charge is refunded, unless the client went away (then it
// keeps its charge: the upstream got the operation, or would have).
func (p *proxy) failed(ctx, upstream context.Context, w http.ResponseWriter, pr gqlexec.Request, err error) {
	if ctx.Err() != nil {
		pr.FinishCharged(ctx)
		return // the client has gone: nobody to answer
	}
	pr.FinishFailed(ctx)
	err = p.explain(upstream, err)
	// The upstream's address and error text are for the operator, not the client.
	p.cfg.Logger.Warn("costgate: upstream failed", "upstream", p.cfg.Upstream, "err", err)
	if errors.Is(err, errUpstreamTimeout) {
		pr.Refuse(ctx, w, http.StatusGatewayTimeout, CodeUpstreamTimeout, "the upstream GraphQL service did not answer in time; retry later")
		return
	}
	pr.Refuse(ctx, w, http.StatusBadGateway, CodeUpstreamError, "the upstream GraphQL service failed; retry later")
}

var errUpstreamTimeout = errors.New("no answer within graphql.upstream_timeout")

// explain names a timeout as such: a read cut by the call's deadline fails
// with whatever error the transport chose.
func (p *proxy) explain(upstream context.Context, err error) error {
	if errors.Is(upstream.Err(), context.DeadlineExceeded) && !errors.Is(err, errUpstreamTimeout) {
		return fmt.Errorf("%w (%s): %w", errUpstreamTimeout, p.cfg.Timeout, err)
	}
	return err
}

// forwardedExtensions are the request's extensions less persistedQuery: the
// proxy serves that protocol itself, and forwards the query in full (as it
// formats it, whose hash is another).
func forwardedExtensions(ext json.RawMessage) json.RawMessage {
	if len(ext) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(ext, &m) != nil {
		return nil
	}
	if _, ok := m["persistedQuery"]; !ok {
		return ext
	}
	delete(m, "persistedQuery")
	if len(m) == 0 {
		return nil
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return out
}
