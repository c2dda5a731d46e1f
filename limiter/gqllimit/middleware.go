package gqllimit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/gqlexec"
	"github.com/costgate/costgate/internal/gqlvalidate"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
)

// params is a GraphQL-over-HTTP request, as read by readBody or readQuery.
type params struct {
	Query         string
	OperationName string
	rawVariables  json.RawMessage // checked to be a JSON object, decoded when needed (operation.Variables)
	Extensions    json.RawMessage // without persistedQuery once persisted resolved it
	documentID    string          // a trusted document's id (GraphQL-over-HTTP persisted documents)
}

// isJSON reports a Content-Type of application/json (parameters allowed),
// the one gqlgen's POST transport serves; an absent one is taken as JSON.
func isJSON(contentType string) bool {
	if contentType == "" || contentType == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// Middleware wraps the GraphQL handler (gqlgen's, with the Extension
// installed, or Proxy). It reads each request once and checks it, the
// cheapest checks first: the body size, batches, the parser's token limit,
// the depth, aliases and fields of the whole document (every operation and
// fragment, used or not), then validation against the schema, with rules
// linear in the document. It answers those rejections itself, charged the
// rejection cost (docs/graphql.md) and with nothing executed, and applies
// the HTTP status and rate-limit headers the extension decides. A websocket
// upgrade goes to gqlgen's transport once its caller is resolved: the
// extension limits each operation the connection starts (proxy mode
// refuses it).
//
// The handler must run the operation through the limiter: gqlgen's server
// with [Limiter.Extension] installed (or use [Limiter.Handler], which does
// both), or an executor of costgate's own (package gqlproxy). Until one of
// them is in place every request is answered 500, with the reason logged:
// a cost limit that is not applied is never served in silence.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	l.noteExecutor(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.installed.Load() && !l.executor.Load() {
			l.cfg.Logger.Error("costgate: the GraphQL handler does not run costgate's extension: add it with srv.Use(limiter.Extension()), or serve limiter.Handler(srv)")
			l.fail(w, r, nil, reject(http.StatusInternalServerError, CodeInternal, "the GraphQL cost limit is not installed"))
			return
		}
		if isUpgrade(r) && !l.executor.Load() {
			l.upgrade(w, r, next)
			return
		}
		st, r, body, rerr := l.prepare(w, r)
		if rerr != nil {
			l.fail(w, r, st, rerr)
			return
		}
		if st == nil {
			return // answered (401, or 429 for a guessed API key)
		}
		if r.Method == http.MethodPost {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		sw := &statusWriter{ResponseWriter: w, st: st, l: l}
		next.ServeHTTP(sw, r.WithContext(withState(r.Context(), st)))
		sw.flush()
		st.slot.release() // an SSE subscription ends with its request
		if st.admitted {
			l.register(r.Context(), st.register, st.op.Query)
		}
		l.reportOperation(st)
	})
}

// fail answers a rejection of the middleware's own, recorded as such.
func (l *Limiter) fail(w http.ResponseWriter, r *http.Request, st *state, e *Error) {
	l.rejected(r.Context(), st, e)
	if st == nil {
		writeError(w, e, nil)
		return
	}
	sw := &statusWriter{ResponseWriter: w, st: st, l: l}
	writeError(sw, e, st)
	sw.flush()
	l.reportOperation(st)
}

// prepare reads and checks the request. It returns the request's state, the
// request carrying its identity, and the body read, or an error to answer
// with (and the state so far: once the document parsed, the answer carries
// extensions.cost); a nil state and error mean it answered the request
// itself. Who pays is resolved first: every refusal of a request that got
// as far as its body is charged (refuse), but for an ambiguous or malformed
// request, which is refused before anything is charged.
func (l *Limiter) prepare(w http.ResponseWriter, r *http.Request) (*state, *http.Request, []byte, *Error) {
	switch r.Method {
	case http.MethodGet:
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			// Proxy mode: an upstream's subscriptions are not served.
			return nil, r, nil, reject(http.StatusBadRequest, CodeSubscriptionsNotSupported, "subscriptions over websockets are not served by the proxy")
		}
	case http.MethodPost:
		if !isJSON(r.Header.Get("Content-Type")) {
			return nil, r, nil, reject(http.StatusUnsupportedMediaType, CodeBadRequest, "send GraphQL as application/json (or GET)")
		}
	case http.MethodOptions:
		// What gqlgen's transport.Options answers (200, the methods served,
		// no body); nothing runs, nothing is charged.
		w.Header().Set("Allow", "OPTIONS, GET, POST")
		w.WriteHeader(http.StatusOK)
		return nil, r, nil, nil
	default:
		w.Header().Set("Allow", "OPTIONS, GET, POST")
		return nil, r, nil, reject(http.StatusMethodNotAllowed, CodeBadRequest, "use GET or POST")
	}
	id, r, idErr := l.cfg.Identity.Attach(r)
	if idErr != nil {
		// Who pays is not known: nothing can be charged, and the answer is
		// 503 once the document is read (with its price).
		l.cfg.Logger.Warn("costgate: API key lookup failed", "err", idErr)
		id = nil
	}
	st := &state{lim: l, id: id, dryRun: headerTrue(r, HeaderDryRun), debug: headerTrue(r, HeaderCostDebug)}
	var (
		p    params
		body []byte
		err  error
	)
	if r.Method == http.MethodGet {
		if rerr := readQuery(r.URL.Query(), &p); rerr != nil {
			return nil, r, nil, rerr
		}
	} else {
		body, err = readAll(http.MaxBytesReader(w, r.Body, l.cfg.MaxBodyBytes), r.ContentLength)
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			st.read = readingCost(complexity.Limits{}, int(l.cfg.MaxBodyBytes))
			return st, r, nil, l.refuse(r.Context(), st, reject(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the body is larger than %d bytes", l.cfg.MaxBodyBytes))
		case err != nil:
			return nil, r, nil, reject(http.StatusBadRequest, CodeBadRequest, "could not read the body")
		}
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
			st.read = readingCost(complexity.Limits{}, len(body))
			return st, r, nil, l.refuse(r.Context(), st, reject(http.StatusBadRequest, CodeBatchNotSupported, "batched operations are not supported; send one operation per request"))
		}
		if rerr := readBody(body, &p); rerr != nil {
			return nil, r, nil, rerr
		}
	}
	size := len(body) + len(r.URL.RawQuery)
	trusted, rerr := l.trusted(r.Context(), &p) // trusted documents (trusted.go): before anything is parsed
	if rerr != nil {
		return l.untrusted(w, r, st, size, rerr)
	}
	query, register, rewritten, rerr := l.persisted(r.Context(), &p)
	if rerr != nil {
		return nil, r, nil, rerr
	}
	if rewritten {
		body = rewrite(r, &p, body)
	}
	if strings.TrimSpace(query) == "" {
		return nil, r, nil, reject(http.StatusBadRequest, CodeBadRequest, "no query")
	}
	doc, rerr := trusted.document(l, query, p.OperationName, size)
	if rerr != nil {
		st.read = rerr.cost
		return st, r, nil, l.refuse(r.Context(), st, rerr) // it did not parse: no extensions.cost
	}
	st.doc, st.register, st.size, st.byID = doc, register, size, trusted.byID
	st.floor, st.read = readingCost(doc.limits, size), writtenCost(doc.limits, size)
	st.op = &operation{Method: r.Method, Query: query, OperationName: p.OperationName, Extensions: p.Extensions, Document: doc.doc, doc: doc,
		rawVariables: p.rawVariables}
	if idErr != nil {
		l.prePrice(st, doc) // who pays is not known: there is no bucket to read
		return st, r, nil, identityUnavailable()
	}
	if l.refusesKey(id) {
		l.unknownKey(w, r, st)
		return nil, r, nil, nil
	}
	if op := doc.doc.Operations.ForName(p.OperationName); r.Method == http.MethodGet && op != nil && op.Operation != ast.Query {
		// A mutation over GET could be triggered cross-site by a link or an
		// image; gqlgen refuses it too, but only after it was charged.
		return st, r, nil, reject(http.StatusMethodNotAllowed, CodeBadRequest, "%s operations must be sent with POST", op.Operation)
	}
	if rerr := l.check(r.Context(), st); rerr != nil {
		return st, r, nil, rerr
	}
	return st, r, body, nil
}

// check checks a parsed document before it runs, in the order of their
// cost: its shape (the whole document's depth, aliases, fields and fragment
// nesting, measured when it was read), then validation. A refusal is charged.
func (l *Limiter) check(ctx context.Context, st *state) *Error {
	doc := st.doc
	if doc.measureErr != nil {
		return l.refuse(ctx, st, reject(http.StatusBadRequest, CodeValidationFailed, "%v", doc.measureErr))
	}
	if doc.doc.Operations.ForName(st.op.OperationName) == nil {
		msg := "the document has no operation named " + strconv.Quote(gqlvalidate.Truncate(st.op.OperationName, 256))
		if st.op.OperationName == "" {
			msg = "the document has several operations: name the one to run (operationName)"
		}
		if len(doc.doc.Operations) == 0 {
			msg = "the document has no operation"
		}
		return l.refuse(ctx, st, reject(http.StatusBadRequest, CodeValidationFailed, "%s", msg))
	}
	if doc.limits.FragmentDepth > l.cfg.MaxDepth {
		// A validation error in every mode: how deep fragments nest bounds
		// the work of validating them (each is walked again for every
		// fragment that reaches it), as apollo-compiler bounds it.
		return l.refuse(ctx, st, &Error{Status: http.StatusBadRequest, Code: CodeValidationFailed,
			Message:    "fragments are spread " + strconv.Itoa(doc.limits.FragmentDepth) + " deep, one inside another, more than the maximum of " + strconv.Itoa(l.cfg.MaxDepth),
			Extensions: map[string]any{"fragmentDepth": doc.limits.FragmentDepth, "maxDepth": l.cfg.MaxDepth}})
	}
	if e := l.shape(doc.limits); e != nil {
		if l.cfg.Mode != limiter.Shadow {
			l.prePrice(st, doc)
			return l.refuse(ctx, st, e)
		}
		l.wouldReject(st, e)
	}
	// From here, refusals have had the document validated too.
	st.read = validatedCost(doc.limits, st.size)
	if e := l.validate(st); e != nil {
		answer := l.refuse(ctx, st, e)
		if answer == e {
			st.errs = e.errs // answered: every error (a websocket's, by InterceptResponse)
		}
		return answer
	}
	return nil
}

// identityUnavailable is the answer when the API key could not be looked up.
func identityUnavailable() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeIdentityUnavailable,
		Message: "the API key could not be checked; retry shortly", Extensions: map[string]any{"retryAfterSec": header.UnavailableRetryAfter}}
}

// readAll is io.ReadAll into a buffer of the size the request announced
// (one allocation, where io.ReadAll grows from 512 bytes). A size over
// maxSizeHint is not believed before the bytes come: a client announcing a
// megabyte and sending nothing would cost one each.
func readAll(r io.Reader, size int64) ([]byte, error) {
	const maxSizeHint = 64 << 10
	if size <= 0 || size > maxSizeHint {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1) // +1: the end is seen without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than announced
		}
	}
}

// shape checks the depth, aliases and fields of the whole document (every
// operation and fragment, used or not) against the limits.
func (l *Limiter) shape(lim complexity.Limits) *Error {
	switch {
	case lim.Depth > l.cfg.MaxDepth:
		return &Error{Status: http.StatusBadRequest, Code: CodeMaxDepthExceeded,
			Message:    "the document is " + strconv.Itoa(lim.Depth) + " fields deep, more than the maximum of " + strconv.Itoa(l.cfg.MaxDepth),
			Extensions: map[string]any{"depth": lim.Depth, "maxDepth": l.cfg.MaxDepth}}
	case lim.Aliases > l.cfg.MaxAliases:
		return &Error{Status: http.StatusBadRequest, Code: CodeMaxAliasesExceeded,
			Message:    "the document has " + strconv.Itoa(lim.Aliases) + " aliases, more than the maximum of " + strconv.Itoa(l.cfg.MaxAliases),
			Extensions: map[string]any{"aliases": lim.Aliases, "maxAliases": l.cfg.MaxAliases}}
	case lim.Fields > l.cfg.MaxFields:
		return &Error{Status: http.StatusBadRequest, Code: CodeMaxFieldsExceeded,
			Message:    "the document selects " + strconv.Itoa(lim.Fields) + " fields, more than the maximum of " + strconv.Itoa(l.cfg.MaxFields),
			Extensions: map[string]any{"fields": lim.Fields, "maxFields": l.cfg.MaxFields}}
	}
	return nil
}

// prePrice prices an operation turned away before validation, for the
// requestedQueryCost of its answer: the pricing resolves fields and
// fragments by name and takes time linear in the document, so it is safe on
// a document that was never validated. When it cannot price the document as
// it stands (an unknown field, say), requestedQueryCost is left out.
func (l *Limiter) prePrice(st *state, doc *document) {
	schema := l.pricing()
	if schema == nil {
		return
	}
	if res, err := schema.Analyze(doc.doc, st.op.OperationName, st.op.Variables()); err == nil {
		st.stats.Requested = max(res.Cost, 1)
	}
}

// unknownKey answers a request with an API key the table does not know:
// 401, after charging 1 (or what reading the request cost, when more) to the
// anonymous bucket of the client address, so that guessing keys is itself
// limited. No state is keyed by the guess.
func (l *Limiter) unknownKey(w http.ResponseWriter, r *http.Request, st *state) {
	p, _ := l.bucket(st)
	d := l.charge(r.Context(), st, p, max(1, st.read)) // what reading the request cost, at least 1
	st.decision, st.headers = d, p.EffectiveMode() != limiter.Shadow
	st.stats.Limit, st.stats.RestoreRate = p.Capacity(), restoreRate(p)
	st.stats.HasBucket = d.HasState()
	st.stats.Remaining, st.stats.ResetAt = d.Remaining, l.cfg.Clock().Add(d.ResetAfter)
	e := reject(http.StatusUnauthorized, CodeUnauthenticated, "unknown API key")
	switch {
	case d.Outcome == limiter.Blocked:
		e = blocked()
	case !d.Allowed:
		e = &Error{Status: http.StatusTooManyRequests, Code: CodeThrottled, Message: "Throttled",
			Extensions: map[string]any{"retryAfterSec": header.RetryAfterSeconds(d)}}
	}
	l.fail(w, r, st, e)
}

// statusWriter applies the status and headers the limiter decided when the
// wrapped handler writes its response. The status the handler sets is held
// back until the body is written: gqlgen sets it before the response
// interceptors run (where costgate decides the status of a validation error),
// and the rate-limit headers only hold the refund once the operation ran.
type statusWriter struct {
	http.ResponseWriter
	st          *state
	l           *Limiter
	code        int // set by the handler, not yet written
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && !w.wroteHeader {
		w.code = code
	}
}

func (w *statusWriter) writeHeader() {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	code := w.code
	if code == 0 {
		code = http.StatusOK
	}
	if w.st.status != 0 {
		code = w.st.status
	}
	w.l.setHeaders(w.Header(), w.st, code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.writeHeader()
	return w.ResponseWriter.Write(b)
}

// flush writes a status the handler set without writing a body.
func (w *statusWriter) flush() {
	if w.code != 0 {
		w.writeHeader()
	}
}

// Flush writes the status and flushes: gqlgen's SSE transport streams.
func (w *statusWriter) Flush() {
	w.writeHeader()
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setHeaders writes the rate-limit headers of the charge, and Retry-After
// on a 429 or 503.
func (l *Limiter) setHeaders(h http.Header, st *state, status int) {
	if st == nil {
		return
	}
	if st.headers && st.decision.Policy != nil {
		header.Set(h, l.cfg.Clock(), []limiter.Decision{st.decision})
	}
	switch status {
	case http.StatusTooManyRequests:
		h.Set(header.RetryAfter, strconv.FormatInt(header.RetryAfterSeconds(st.decision), 10))
	case http.StatusServiceUnavailable:
		h.Set(header.RetryAfter, strconv.Itoa(header.UnavailableRetryAfter))
	}
}

func (e *Error) gqlError() *gqlerror.Error {
	if len(e.errs) > 0 {
		return e.errs[0]
	}
	ext := map[string]any{"code": e.Code}
	for k, v := range e.Extensions {
		ext[k] = v
	}
	return gqlvalidate.Bound(&gqlerror.Error{Message: e.Message, Extensions: ext})
}

// writeError answers with a GraphQL error response. extensions.cost is
// included once the document parsed: requestedQueryCost when the operation
// was priced, throttleStatus when the bucket was read.
func writeError(w http.ResponseWriter, e *Error, st *state) {
	res := gqlexec.Response{Errors: []any{e.gqlError()}, Data: json.RawMessage("null")}
	if len(e.errs) > 0 { // a document that did not validate: every error, bounded
		res.Errors = res.Errors[:0]
		for _, ge := range e.errs {
			res.Errors = append(res.Errors, ge)
		}
	}
	if st != nil && st.op != nil {
		res.Extensions = map[string]any{"cost": st.stats.cost()}
	}
	gqlexec.WriteResponse(w, e.Status, res)
}
