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
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// typenameAlias is the alias under which the proxy asks the upstream for
// __typename on abstract selections, so that actual costs price the concrete
// types returned. It is removed from the reply.
const typenameAlias = "__costgate_typename"

// DefaultTimeout bounds an upstream call unless Config.Timeout says otherwise.
const DefaultTimeout = 30 * time.Second

// maxUpstreamBody bounds the upstream reply read into memory.
const maxUpstreamBody = 64 << 20

// Config configures the proxy. Limiter and Upstream are required.
type Config struct {
	// Limiter prices, charges and refunds; its Config.Schema must be the
	// upstream's schema (complexity.LoadSDL).
	Limiter *gqllimit.Limiter
	// Upstream is the GraphQL endpoint operations are forwarded to.
	Upstream string
	// Client sends them (default: a client with Timeout).
	Client *http.Client
	// Timeout bounds one upstream call (default 30s).
	Timeout time.Duration
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
// rateLimit(dryRun: true) is answered by the proxy (gqllimit.DryRunData).
// Anything but a GraphQL response from the upstream (no answer, a timeout,
// not JSON, data that is not an object, errors that are not objects,
// neither data nor errors) answers UPSTREAM_ERROR (502) with a generic
// message, the detail logged, and all but 1 of the charge refunded.
func New(cfg Config) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gqlproxy: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{
			Timeout: cfg.Timeout,
			// A GraphQL endpoint does not redirect; following one would send
			// the caller's headers (API keys among them) somewhere else.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = cfg.Limiter.Config().Logger
	}
	p := &proxy{cfg: cfg, lim: cfg.Limiter, schema: cfg.Limiter.Config().Schema.AST()}
	cfg.Limiter.MarkExecutor()
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
// parsed, validated or formatted again.
type prepared struct {
	errs gqlerror.List // validation against the upstream's schema
	// doc is validated, with __typename asked for on abstract selections
	// (free: pricing it is the same as without); it is priced and forwarded.
	doc   *ast.QueryDocument
	query string // doc as forwarded
	added bool   // __typename was added somewhere
}

func (p *proxy) prepare(pr *gqllimit.Operation) *prepared {
	return pr.Derived(func() any {
		// A copy of its own: validation links definitions into the document,
		// and the middleware's is shared read-only. The middleware parsed the
		// same text with the token limit.
		doc, err := parser.ParseQuery(&ast.Source{Input: pr.Query})
		if err != nil {
			return &prepared{errs: gqlerror.List{gqlerror.Wrap(err)}}
		}
		if errs := validator.ValidateWithRules(p.schema, doc, nil); len(errs) > 0 {
			for _, e := range errs {
				if e.Extensions == nil {
					e.Extensions = map[string]any{}
				}
				e.Extensions["code"] = gqllimit.CodeValidationFailed
			}
			return &prepared{errs: errs}
		}
		added := addTypenames(doc, p.schema)
		var query bytes.Buffer
		formatter.NewFormatter(&query, formatter.WithComments()).FormatQueryDocument(doc)
		return &prepared{doc: doc, query: query.String(), added: added}
	}).(*prepared)
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pr := gqllimit.OperationFrom(ctx)
	if pr == nil {
		gqllimit.WriteError(ctx, w, &gqllimit.Error{Status: http.StatusInternalServerError, Code: gqllimit.CodeInternal, Message: "costgate: the proxy runs inside gqllimit's Middleware"})
		return
	}
	prep := p.prepare(pr)
	if len(prep.errs) > 0 {
		gqllimit.Reject(ctx, http.StatusBadRequest, gqllimit.CodeValidationFailed)
		res := gqllimit.Response{Data: json.RawMessage("null"), Extensions: map[string]any{"cost": gqllimit.CostOf(ctx)}}
		for _, e := range prep.errs {
			res.Errors = append(res.Errors, e)
		}
		gqllimit.WriteResponse(w, http.StatusBadRequest, res)
		return
	}
	op := prep.doc.Operations.ForName(pr.OperationName)
	if op == nil {
		gqllimit.WriteError(ctx, w, rejection(http.StatusBadRequest, gqllimit.CodeValidationFailed, fmt.Sprintf("no operation %q in the document", pr.OperationName)))
		return
	}
	if pr.Method == http.MethodGet && op.Operation != ast.Query { // the middleware refused it already
		gqllimit.WriteError(ctx, w, rejection(http.StatusMethodNotAllowed, gqllimit.CodeBadRequest, fmt.Sprintf("%s operations must be sent with POST", op.Operation)))
		return
	}
	vars, verr := validator.VariableValues(p.schema, op, pr.Variables)
	if verr != nil {
		gqllimit.WriteError(ctx, w, rejection(http.StatusBadRequest, gqllimit.CodeValidationFailed, gqllimit.ErrorMessage(verr)))
		return
	}
	if rerr := p.lim.Admit(ctx, op, vars); rerr != nil {
		if rerr == gqllimit.ErrDryRun {
			gqllimit.WriteResponse(w, http.StatusOK, gqllimit.Response{Data: gqllimit.DryRunData(ctx, op, vars), Extensions: map[string]any{"cost": gqllimit.CostOf(ctx)}})
			return
		}
		gqllimit.WriteError(ctx, w, rerr)
		return
	}

	reply, err := p.forward(r, request{Query: prep.query, OperationName: pr.OperationName, Variables: pr.Variables, Extensions: forwardedExtensions(pr.Extensions)})
	if err != nil {
		p.lim.Finish(ctx, op, vars, nil) // no data: all but 1 refunded
		// The upstream's address and error text are for the operator, not the client.
		p.cfg.Logger.Warn("costgate: upstream failed", "upstream", p.cfg.Upstream, "err", err)
		gqllimit.WriteError(ctx, w, rejection(http.StatusBadGateway, gqllimit.CodeUpstreamError, "the upstream GraphQL service failed; retry later"))
		return
	}
	p.lim.Finish(ctx, op, vars, reply.Data)
	if prep.added {
		reply.Data = stripTypenames(reply.Data)
	}
	ext := reply.Extensions
	if ext == nil {
		ext = map[string]any{}
	}
	ext["cost"] = gqllimit.CostOf(ctx)
	res := gqllimit.Response{Data: reply.Data, Extensions: ext}
	for _, e := range reply.Errors {
		res.Errors = append(res.Errors, e)
	}
	gqllimit.WriteResponse(w, http.StatusOK, res)
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

func rejection(status int, code, msg string) *gqllimit.Error {
	return &gqllimit.Error{Status: status, Code: code, Message: msg}
}

type upstreamReply struct {
	Errors     []*rawError
	Data       json.RawMessage
	Extensions map[string]any
}

func (p *proxy) forward(r *http.Request, body request) (*upstreamReply, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.Upstream, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Content-Type", "Accept-Encoding", "Connection", "Keep-Alive", "Te", "Trailer",
			"Transfer-Encoding", "Upgrade", "Proxy-Authorization", "Host":
			continue
		}
		if strings.HasPrefix(strings.ToLower(k), "costgate-") {
			continue
		}
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	res, err := p.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxUpstreamBody))
	if err != nil {
		return nil, fmt.Errorf("reading the reply: %w", err)
	}
	var reply upstreamReply
	if err := json.Unmarshal(data, &reply); err != nil {
		return nil, fmt.Errorf("status %d, not a GraphQL response", res.StatusCode)
	}
	reply.Data = bytes.TrimSpace(reply.Data)
	if len(reply.Data) == 0 || bytes.Equal(reply.Data, []byte("null")) {
		reply.Data = json.RawMessage("null")
		if len(reply.Errors) == 0 {
			return nil, fmt.Errorf("status %d, neither data nor errors", res.StatusCode)
		}
	} else if reply.Data[0] != '{' {
		return nil, fmt.Errorf("status %d, data is not an object", res.StatusCode)
	}
	for _, e := range reply.Errors {
		if e == nil {
			return nil, fmt.Errorf("status %d, a null error", res.StatusCode)
		}
		if t := bytes.TrimSpace(*e); len(t) == 0 || t[0] != '{' {
			return nil, fmt.Errorf("status %d, an error that is not an object", res.StatusCode)
		}
	}
	return &reply, nil
}

// rawError keeps an upstream error as the upstream wrote it.
type rawError = json.RawMessage

// addTypenames asks for __typename (under typenameAlias) in every selection
// set of an abstract type, in the operations and fragments of doc, which
// must be validated. It reports whether it added any.
func addTypenames(doc *ast.QueryDocument, schema *ast.Schema) bool {
	added := false
	var walk func(set ast.SelectionSet, typ string) ast.SelectionSet
	walk = func(set ast.SelectionSet, typ string) ast.SelectionSet {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				if s.Definition != nil && len(s.SelectionSet) > 0 {
					s.SelectionSet = walk(s.SelectionSet, s.Definition.Type.Name())
				}
			case *ast.InlineFragment:
				inner := typ
				if s.TypeCondition != "" {
					inner = s.TypeCondition
				}
				s.SelectionSet = walk(s.SelectionSet, inner)
			}
		}
		if def := schema.Types[typ]; def != nil && def.IsAbstractType() {
			added = true
			set = append(set, &ast.Field{Alias: typenameAlias, Name: "__typename"})
		}
		return set
	}
	for _, op := range doc.Operations {
		op.SelectionSet = walk(op.SelectionSet, "")
	}
	for _, f := range doc.Fragments {
		f.SelectionSet = walk(f.SelectionSet, f.TypeCondition)
	}
	return added
}

// stripTypenames removes typenameAlias members from a JSON value, keeping
// the order of every other member (GraphQL responses are ordered).
func stripTypenames(data json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out bytes.Buffer
	if err := copyStripped(dec, &out); err != nil {
		return data
	}
	return out.Bytes()
}

func copyStripped(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			out.WriteByte('{')
			first := true
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				if key == typenameAlias {
					var skip json.RawMessage
					if err := dec.Decode(&skip); err != nil {
						return err
					}
					continue
				}
				if !first {
					out.WriteByte(',')
				}
				first = false
				kb, _ := json.Marshal(key)
				out.Write(kb)
				out.WriteByte(':')
				if err := copyStripped(dec, out); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil { // '}'
				return err
			}
			out.WriteByte('}')
		case '[':
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := copyStripped(dec, out); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil { // ']'
				return err
			}
			out.WriteByte(']')
		}
	case nil:
		out.WriteString("null")
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		out.Write(b)
	}
	return nil
}
