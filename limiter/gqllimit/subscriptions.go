package gqllimit

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

// Subscriptions, embedded. A subscription is priced like a query of its
// selection and charged when it starts; its events are charged as they are
// sent (events.go). The subscriptions open at once per key are bounded
// by Limits.MaxSubscriptions, counted in this process (with a shared store,
// each process holds its own count).
//
// Over SSE (a POST) the operation goes through the middleware like any
// other. Over a websocket the middleware resolves who pays from the upgrade
// request and hands the connection to gqlgen's transport; each operation
// the connection starts is then read by the extension: parsed with the token
// limit and measured before gqlgen validates it (MutateOperationParameters),
// priced and charged after (MutateOperationContext), its slot released when
// it ends (InterceptOperation), or at the latest when the connection does.

// openSubscriptions counts the subscriptions open per key.
type openSubscriptions struct {
	mu   sync.Mutex
	open map[string]int
}

// acquire takes a slot for key unless max are taken; force takes it anyway
// (measure mode), and reports whether max were already taken.
func (o *openSubscriptions) acquire(key string, max int, force bool) (s *slot, full bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	full = o.open[key] >= max
	if full && !force {
		return nil, true
	}
	if o.open == nil {
		o.open = make(map[string]int)
	}
	o.open[key]++
	return &slot{subs: o, key: key}, full
}

// slot is one open subscription; release frees it, once.
type slot struct {
	subs *openSubscriptions
	key  string
	once sync.Once
}

func (s *slot) release() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		s.subs.mu.Lock()
		defer s.subs.mu.Unlock()
		if s.subs.open[s.key]--; s.subs.open[s.key] <= 0 {
			delete(s.subs.open, s.key)
		}
	})
}

// openSlot takes a slot for a subscription about to be charged, or returns
// TOO_MANY_SUBSCRIPTIONS. Other operations need none.
func (l *Limiter) openSlot(st *state, op *ast.OperationDefinition, key string) *Error {
	if op.Operation != ast.Subscription {
		return nil
	}
	max := l.cfg.MaxSubscriptions
	s, full := l.subs.acquire(key, max, l.cfg.Mode == limiter.Shadow)
	st.slot = s
	if !full {
		return nil
	}
	e := &Error{Status: http.StatusTooManyRequests, Code: CodeTooManySubscriptions,
		Message:    "this key has " + strconv.Itoa(max) + " subscriptions open, the most it may; end one first",
		Extensions: map[string]any{"maxSubscriptions": max}}
	if s == nil {
		return e
	}
	l.wouldReject(st, e) // measure mode: it runs
	return nil
}

// connection is a websocket connection: who pays, resolved from its upgrade
// request, and the operations it has in flight.
type connection struct {
	id    *identity.Identity
	mu    sync.Mutex
	open  map[*state]struct{}
	ended bool
}

type connectionKey struct{}

func connectionFrom(ctx context.Context) *connection {
	c, _ := ctx.Value(connectionKey{}).(*connection)
	return c
}

// hold records an operation of the connection; false once it ended.
func (c *connection) hold(st *state) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return false
	}
	if c.open == nil {
		c.open = make(map[*state]struct{})
	}
	c.open[st] = struct{}{}
	return true
}

// end ends the connection: every operation still open frees its slot.
func (c *connection) end() {
	c.mu.Lock()
	c.ended = true
	open := c.open
	c.open = nil
	c.mu.Unlock()
	for st := range open {
		st.slot.release()
	}
}

// upgrade serves a websocket upgrade: who pays is resolved from the upgrade
// request, as for any request; the connection is then gqlgen's, and the
// extension limits each operation it starts.
func (l *Limiter) upgrade(w http.ResponseWriter, r *http.Request, next http.Handler) {
	id, r, err := l.cfg.Identity.Attach(r)
	if err != nil {
		l.cfg.Logger.Warn("costgate: API key lookup failed", "err", err)
		l.fail(w, r, nil, identityUnavailable())
		return
	}
	if l.refusesKey(id) {
		l.unknownKey(w, r, &state{lim: l, id: id})
		return
	}
	c := &connection{id: id}
	defer c.end() // closed, by either side or by the server's stop: no slot outlives it
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), connectionKey{}, c)))
}

// isUpgrade reports a request gqlgen's websocket transport takes (it takes
// any Upgrade header; the handshake is a GET).
func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && r.Header.Get("Upgrade") != ""
}

// readStreamed reads an operation a websocket connection started, before
// gqlgen parses and validates it: what the middleware checks of an HTTP
// request, validation included (gqlgen then runs the document read here).
// The state is nil when the document did not parse.
func (l *Limiter) readStreamed(ctx context.Context, c *connection, p *graphql.RawParams) (*state, *Error) {
	st := &state{lim: l, id: c.id, conn: c}
	if int64(len(p.Query)) > l.cfg.MaxBodyBytes {
		st.read = readingCost(complexity.Limits{}, len(p.Query))
		return nil, l.refuse(ctx, st, reject(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the query is larger than %d bytes", l.cfg.MaxBodyBytes))
	}
	trusted, rerr := l.trustedStreamed(p) // trusted documents (trusted.go): before anything is parsed
	if rerr != nil {
		if rerr.Status < http.StatusInternalServerError {
			st.read = readingCost(complexity.Limits{}, len(p.Query))
			rerr = l.refuse(ctx, st, rerr)
		}
		return nil, rerr
	}
	if strings.TrimSpace(p.Query) == "" {
		return nil, reject(http.StatusBadRequest, CodeBadRequest, "no query")
	}
	doc, rerr := trusted.document(l, p.Query, p.OperationName, len(p.Query))
	if rerr != nil {
		st.read = rerr.cost
		return nil, l.refuse(ctx, st, rerr)
	}
	st.doc, st.size = doc, len(p.Query)
	st.floor, st.read = readingCost(doc.limits, st.size), writtenCost(doc.limits, st.size)
	st.op = &operation{Method: http.MethodGet, Query: p.Query, OperationName: p.OperationName, Document: doc.doc, doc: doc,
		variables: p.Variables, decoded: true}
	if !c.hold(st) {
		return st, reject(http.StatusServiceUnavailable, CodeInternal, "the connection has ended")
	}
	return st, l.check(ctx, st)
}

// operationDone frees what an operation that ended holds: its subscription
// slot, its place among its connection's operations. Any goroutine may
// call it, any number of times.
func (l *Limiter) operationDone(st *state) {
	st.slot.release()
	if st.conn != nil {
		st.conn.mu.Lock()
		delete(st.conn.open, st)
		st.conn.mu.Unlock()
	}
}

// ended is operationDone where nothing writes the operation's state any
// more (its refusal, the end of its stream): an operation of a websocket
// connection is then reported, once (the middleware reports the others).
func (l *Limiter) ended(st *state) {
	l.operationDone(st)
	if st.conn != nil {
		st.reported.Do(func() { l.reportOperation(st) })
	}
}

// costgate's refusals are protocol errors to gqlgen, as its validation
// errors are: its websocket transport sends them as the protocol's error
// message, not as a result, and its HTTP transports answer them 422 (the
// middleware sets its own status). gqlgen keys both by error code, in a
// process-wide registry meant to be filled at init: the generic codes
// (BAD_REQUEST, INTERNAL), which other extensions may use, are left out, and
// so is PERSISTED_QUERY_NOT_FOUND, which gqlgen's own APQ answers as a result.
func init() {
	for _, code := range []string{
		CodeThrottled, CodeMaxCostExceeded, CodeCostExceedsCapacity, CodeSlicingArgumentRequired,
		CodeMaxDepthExceeded, CodeMaxAliasesExceeded, CodeMaxFieldsExceeded, CodeMaxTokensExceeded,
		CodeBodyTooLarge, CodeLimiterUnavailable, CodeIntrospectionDisabled, CodeTooManySubscriptions,
		CodePersistedQueryNotInList,
	} {
		errcode.RegisterErrorType(code, errcode.KindProtocol)
	}
}
