package gqllimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
)

// params is a GraphQL-over-HTTP request.
type params struct {
	Query         string          `json:"query"`
	OperationName string          `json:"operationName"`
	Variables     map[string]any  `json:"variables"`
	Extensions    json.RawMessage `json:"extensions,omitempty"`
}

// Middleware wraps the GraphQL handler (gqlgen's, with the Extension
// installed, or Proxy). It enforces what must be decided before validation,
// cheaply: the body size, batches, the parser's token limit, and the depth,
// aliases and fields of the document (gqlparser's overlapping-fields
// validation is quadratic; these checks are linear). It answers those
// rejections itself, with nothing charged and nothing executed, and applies
// the HTTP status and rate-limit headers the extension decides.
//
// The handler must run the operation through the limiter: gqlgen's server
// with [Limiter.Extension] installed (or use [Limiter.Handler], which does
// both), or an executor of costgate's own (package gqlproxy). Until one of
// them is in place every request is answered 500, with the reason logged:
// a cost limit that is not applied is never served in silence.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.installed.Load() && !l.executor.Load() {
			l.cfg.Logger.Error("costgate: the GraphQL handler does not run costgate's extension: add it with srv.Use(limiter.Extension()), or serve limiter.Handler(srv)")
			writeError(w, reject(http.StatusInternalServerError, CodeInternal, "the GraphQL cost limit is not installed"), nil)
			return
		}
		st, r, body, rerr := l.prepare(w, r)
		if rerr != nil {
			writeError(w, rerr, st)
			return
		}
		if st == nil {
			return // answered (401, or 429 for a guessed API key)
		}
		if r.Method == http.MethodPost {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		next.ServeHTTP(&statusWriter{ResponseWriter: w, st: st, l: l}, r.WithContext(withState(r.Context(), st)))
	})
}

// prepare reads and checks the request. It returns the request's state, the
// request carrying its identity, and the body read, or an error to answer
// with; a nil state and error mean it answered the request itself.
func (l *Limiter) prepare(w http.ResponseWriter, r *http.Request) (*state, *http.Request, []byte, *Error) {
	var (
		p    params
		body []byte
	)
	switch r.Method {
	case http.MethodGet:
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			return nil, r, nil, reject(http.StatusBadRequest, CodeBadRequest, "subscriptions over websockets are not served here")
		}
		q := r.URL.Query()
		p.Query, p.OperationName = q.Get("query"), q.Get("operationName")
		if v := q.Get("variables"); v != "" {
			if err := json.Unmarshal([]byte(v), &p.Variables); err != nil {
				return nil, r, nil, reject(http.StatusBadRequest, CodeBadRequest, "variables must be a JSON object")
			}
		}
	case http.MethodPost:
		if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
			return nil, r, nil, reject(http.StatusUnsupportedMediaType, CodeBadRequest, "send GraphQL as application/json (or GET)")
		}
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, l.cfg.MaxBodyBytes))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return nil, r, nil, reject(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the body is larger than %d bytes", l.cfg.MaxBodyBytes)
		case err != nil:
			return nil, r, nil, reject(http.StatusBadRequest, CodeBadRequest, "could not read the body")
		}
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
			return nil, r, nil, reject(http.StatusBadRequest, CodeBatchNotSupported, "batched operations are not supported; send one operation per request")
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, r, nil, reject(http.StatusBadRequest, CodeBadRequest, "the body must be a JSON object with a query")
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		return nil, r, nil, reject(http.StatusMethodNotAllowed, CodeBadRequest, "use GET or POST")
	}
	if strings.TrimSpace(p.Query) == "" {
		return nil, r, nil, reject(http.StatusBadRequest, CodeBadRequest, "no query")
	}
	doc, perr := parser.ParseQueryWithTokenLimit(&ast.Source{Input: p.Query}, l.cfg.MaxTokens)
	if perr != nil {
		if strings.Contains(perr.Error(), "exceeded token limit") {
			return nil, r, nil, reject(http.StatusBadRequest, CodeMaxTokensExceeded, "the document has more than %d tokens", l.cfg.MaxTokens)
		}
		return nil, r, nil, &Error{Status: http.StatusBadRequest, Code: CodeParseFailed, Message: parseMessage(perr)}
	}
	lim, err := complexity.Measure(doc, p.OperationName)
	if err != nil {
		return nil, r, nil, reject(http.StatusBadRequest, CodeValidationFailed, "%v", err)
	}
	if l.cfg.Mode != Measure {
		switch {
		case lim.Depth > l.cfg.MaxDepth:
			return nil, r, nil, &Error{Status: http.StatusBadRequest, Code: CodeMaxDepthExceeded,
				Message:    "the operation is " + strconv.Itoa(lim.Depth) + " fields deep, more than the maximum of " + strconv.Itoa(l.cfg.MaxDepth),
				Extensions: map[string]any{"depth": lim.Depth, "maxDepth": l.cfg.MaxDepth}}
		case lim.Aliases > l.cfg.MaxAliases:
			return nil, r, nil, &Error{Status: http.StatusBadRequest, Code: CodeMaxAliasesExceeded,
				Message:    "the operation has " + strconv.Itoa(lim.Aliases) + " aliases, more than the maximum of " + strconv.Itoa(l.cfg.MaxAliases),
				Extensions: map[string]any{"aliases": lim.Aliases, "maxAliases": l.cfg.MaxAliases}}
		case lim.Fields > l.cfg.MaxFields:
			return nil, r, nil, &Error{Status: http.StatusBadRequest, Code: CodeMaxFieldsExceeded,
				Message:    "the operation selects " + strconv.Itoa(lim.Fields) + " fields, more than the maximum of " + strconv.Itoa(l.cfg.MaxFields),
				Extensions: map[string]any{"fields": lim.Fields, "maxFields": l.cfg.MaxFields}}
		}
	}
	id, r, err := l.cfg.Identity.Attach(r)
	if err != nil {
		l.cfg.Logger.Warn("costgate: API key lookup failed", "err", err)
		return nil, r, nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeIdentityUnavailable,
			Message: "the API key could not be checked; retry shortly", Extensions: map[string]any{"retryAfterSec": header.UnavailableRetryAfter}}
	}
	st := &state{id: id, dryRun: headerTrue(r, HeaderDryRun), debug: headerTrue(r, HeaderCostDebug)}
	if id.UnknownKey {
		l.unknownKey(w, r, st)
		return nil, r, nil, nil
	}
	st.op = &Operation{Method: r.Method, Query: p.Query, OperationName: p.OperationName, Variables: p.Variables, Extensions: p.Extensions, Document: doc}
	return st, r, body, nil
}

// unknownKey answers a request with an API key the table does not know:
// 401, after charging 1 to the anonymous bucket of the client address, so
// that guessing keys is itself limited. No state is keyed by the guess.
func (l *Limiter) unknownKey(w http.ResponseWriter, r *http.Request, st *state) {
	p, key := l.bucket(st)
	d := l.cfg.Limiter.Allow(r.Context(), p, key, 1)
	st.charged, st.headers = d, p.EffectiveMode() != limiter.Shadow
	sw := &statusWriter{ResponseWriter: w, st: st, l: l}
	if !d.Allowed {
		writeError(sw, &Error{Status: http.StatusTooManyRequests, Code: CodeThrottled, Message: "Throttled",
			Extensions: map[string]any{"retryAfterSec": header.RetryAfterSeconds(d)}}, st)
		return
	}
	writeError(sw, reject(http.StatusUnauthorized, CodeUnauthenticated, "unknown API key"), st)
}

// statusWriter applies the status and headers the limiter decided when the
// wrapped handler writes its response.
type statusWriter struct {
	http.ResponseWriter
	st          *state
	l           *Limiter
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	if w.st.status != 0 {
		code = w.st.status
	}
	w.l.setHeaders(w.Header(), w.st, code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setHeaders writes the rate-limit headers of the charge, and Retry-After
// on a 429 or 503.
func (l *Limiter) setHeaders(h http.Header, st *state, status int) {
	if st == nil {
		return
	}
	if st.headers && st.charged.Policy != nil {
		header.Set(h, l.cfg.Clock(), []limiter.Decision{st.charged})
	}
	switch status {
	case http.StatusTooManyRequests:
		h.Set(header.RetryAfter, strconv.FormatInt(header.RetryAfterSeconds(st.charged), 10))
	case http.StatusServiceUnavailable:
		h.Set(header.RetryAfter, strconv.Itoa(header.UnavailableRetryAfter))
	}
}

// response is a GraphQL response body.
type response struct {
	Errors     []any           `json:"errors,omitempty"` // *gqlerror.Error, or an upstream's as it wrote it
	Data       json.RawMessage `json:"data"`
	Extensions map[string]any  `json:"extensions,omitempty"`
}

func (e *Error) gqlError() *gqlerror.Error {
	ext := map[string]any{"code": e.Code}
	for k, v := range e.Extensions {
		ext[k] = v
	}
	return &gqlerror.Error{Message: e.Message, Extensions: ext}
}

// writeError answers with a GraphQL error response; extensions.cost is
// included once the operation was priced.
func writeError(w http.ResponseWriter, e *Error, st *state) {
	res := response{Errors: []any{e.gqlError()}, Data: json.RawMessage("null")}
	if st != nil && st.priced {
		res.Extensions = map[string]any{"cost": st.stats.cost()}
	}
	writeResponse(w, e.Status, res)
}

func writeResponse(w http.ResponseWriter, status int, res response) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(res)
}

func parseMessage(err error) string {
	var ge *gqlerror.Error
	if errors.As(err, &ge) {
		return ge.Message
	}
	return err.Error()
}
