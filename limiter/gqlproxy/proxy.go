package gqllimit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/validator"
)

// typenameAlias is the alias under which the proxy asks the upstream for
// __typename on abstract selections, so that actual costs price the concrete
// types returned. It is removed from the reply.
const typenameAlias = "__costgate_typename"

// DefaultUpstreamTimeout bounds an upstream call unless ProxyConfig says otherwise.
const DefaultUpstreamTimeout = 30 * time.Second

// maxUpstreamBody bounds the upstream reply read into memory.
const maxUpstreamBody = 64 << 20

// ProxyConfig configures Proxy.
type ProxyConfig struct {
	// Upstream is the GraphQL endpoint operations are forwarded to.
	Upstream string
	// Client sends them (default: a client with Timeout).
	Client  *http.Client
	Timeout time.Duration
}

// Proxy returns the handler of proxy mode, to be wrapped in l.Middleware:
// it validates the operation against the upstream's schema (Config.Schema),
// prices and charges it as the extension does, forwards it, prices the
// reply, refunds the difference and adds extensions.cost. Upstream failures
// come back as GraphQL errors, and all but 1 of the charge is refunded.
func (l *Limiter) Proxy(pc ProxyConfig) (http.Handler, error) {
	if l.pricing() == nil {
		return nil, errors.New("gqllimit: proxy mode needs Config.Schema, the upstream's schema")
	}
	if pc.Upstream == "" {
		return nil, errors.New("gqllimit: proxy mode needs an upstream URL")
	}
	if pc.Timeout <= 0 {
		pc.Timeout = DefaultUpstreamTimeout
	}
	if pc.Client == nil {
		pc.Client = &http.Client{Timeout: pc.Timeout}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := stateFrom(r.Context())
		if st == nil || st.prepared == nil {
			writeError(w, reject(http.StatusInternalServerError, "INTERNAL", "costgate: the proxy must be wrapped in gqllimit's Middleware"), nil)
			return
		}
		l.serveProxy(w, r, st, pc)
	}), nil
}

func (l *Limiter) serveProxy(w http.ResponseWriter, r *http.Request, st *state, pc ProxyConfig) {
	pr := st.prepared
	schema := l.pricing().AST()
	if errs := validator.ValidateWithRules(schema, pr.doc, nil); len(errs) > 0 {
		res := response{Data: json.RawMessage("null")}
		for _, e := range errs {
			if e.Extensions == nil {
				e.Extensions = map[string]any{}
			}
			e.Extensions["code"] = CodeValidationFailed
			res.Errors = append(res.Errors, e)
		}
		writeResponse(w, http.StatusBadRequest, res)
		return
	}
	op := pr.doc.Operations.ForName(pr.params.OperationName)
	if op == nil {
		writeError(w, reject(http.StatusBadRequest, CodeValidationFailed, "no operation %q in the document", pr.params.OperationName), nil)
		return
	}
	if r.Method == http.MethodGet && op.Operation != ast.Query {
		// A mutation over GET could be triggered cross-site by a link or an image.
		writeError(w, reject(http.StatusMethodNotAllowed, CodeBadRequest, "%s operations must be sent with POST", op.Operation), nil)
		return
	}
	if l.cfg.NoIntrospection && introspects(op) {
		writeError(w, reject(http.StatusBadRequest, CodeIntrospectionDisabled, "introspection is disabled"), nil)
		return
	}
	vars, verr := validator.VariableValues(schema, op, pr.params.Variables)
	if verr != nil {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeValidationFailed, Message: parseMessage(verr)}, nil)
		return
	}
	if rerr := l.admit(r.Context(), st, op, vars); rerr != nil {
		if rerr == errDryRun {
			writeResponse(w, http.StatusOK, response{Data: json.RawMessage("null"), Extensions: map[string]any{"cost": st.stats.cost()}})
			return
		}
		st.status = rerr.Status
		writeError(w, rerr, st)
		return
	}

	added := addTypenames(pr.doc, schema)
	var query bytes.Buffer
	formatter.NewFormatter(&query, formatter.WithComments()).FormatQueryDocument(pr.doc)
	reply, err := l.forward(r, pc, params{Query: query.String(), OperationName: pr.params.OperationName, Variables: pr.params.Variables, Extensions: pr.params.Extensions})
	if err != nil {
		l.finish(r.Context(), st, op, vars, nil) // no data: all but 1 refunded
		l.cfg.Logger.Warn("costgate: upstream failed", "err", err)
		writeError(w, reject(http.StatusBadGateway, CodeUpstreamError, "the upstream GraphQL server failed: %v", err), st)
		return
	}
	l.finish(r.Context(), st, op, vars, reply.Data)
	if added && len(reply.Data) > 0 {
		reply.Data = stripTypenames(reply.Data)
	}
	if len(reply.Data) == 0 {
		reply.Data = json.RawMessage("null")
	}
	ext := reply.Extensions
	if ext == nil {
		ext = map[string]any{}
	}
	ext["cost"] = st.stats.cost()
	res := response{Data: reply.Data, Extensions: ext}
	for _, e := range reply.Errors {
		res.Errors = append(res.Errors, e)
	}
	writeResponse(w, http.StatusOK, res)
}

func (l *Limiter) forward(r *http.Request, pc ProxyConfig, p params) (*struct {
	Errors     []*rawError
	Data       json.RawMessage
	Extensions map[string]any
}, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), pc.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pc.Upstream, bytes.NewReader(body))
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
	res, err := pc.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxUpstreamBody))
	if err != nil {
		return nil, fmt.Errorf("reading the reply: %w", err)
	}
	var reply struct {
		Errors     []*rawError
		Data       json.RawMessage
		Extensions map[string]any
	}
	if err := json.Unmarshal(raw, &reply); err != nil {
		return nil, fmt.Errorf("status %d, not a GraphQL response", res.StatusCode)
	}
	if len(reply.Data) == 0 && len(reply.Errors) == 0 {
		return nil, fmt.Errorf("status %d, neither data nor errors", res.StatusCode)
	}
	return &reply, nil
}

// introspects reports a root __schema or __type field, also through fragments.
func introspects(op *ast.OperationDefinition) bool {
	var walk func(set ast.SelectionSet) bool
	walk = func(set ast.SelectionSet) bool {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				if s.Name == "__schema" || s.Name == "__type" {
					return true
				}
			case *ast.InlineFragment:
				if walk(s.SelectionSet) {
					return true
				}
			case *ast.FragmentSpread:
				if s.Definition != nil && walk(s.Definition.SelectionSet) {
					return true
				}
			}
		}
		return false
	}
	return walk(op.SelectionSet)
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
