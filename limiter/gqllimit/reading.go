package gqllimit

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/gqlvalidate"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
)

// The gateway's own work is bounded, and paid for (docs/graphql.md).
//
// Before an operation runs, costgate reads the body, parses the document with
// the token limit, measures the whole document (every operation and fragment,
// used or not) against the depth, alias and field limits, and validates it
// with rules linear in the document (internal/gqlvalidate). A request refused
// at any of these steps is charged Limits.RejectionCost before its answer;
// one that goes on is charged at least what reading it cost. Both are at
// least readingCost: a document is never cheaper than reading it.

// Units of readingCost: what one token of the bucket buys of reading. Parsing
// takes time in proportion to the document's nodes, validating to its nodes
// and to what the walk visits again (fragments spread inside fragments), the
// JSON and string bytes in proportion to the request's size, and the fields
// are what the pricing and the merge rule read most.
//
// The figures hold the target of docs/graphql.md with a margin of two: a client refilled
// 50 tokens a second keeps at most 5 % of one core busy, whatever it sends
// (bench's BenchmarkGraphQLReading measures the documents that come
// closest).
const (
	fieldsPerToken = 100
	nodesPerToken  = 500
	bytesPerToken  = 32 << 10
	// A document that does not parse has no nodes to count: the parser made
	// at most one for every two bytes it read.
	bytesPerNode = 2
)

// readingCost is what reading a request costs, in tokens: one per 100 fields
// of the whole document, per 500 of its nodes (or of the selections
// validation visits, when more) and per 32 KiB of the request, and at least 1.
func readingCost(lim complexity.Limits, size int) int64 {
	nodes := int64(max(lim.Nodes, lim.Visits))
	return max(1, ceilDiv(int64(lim.Fields), fieldsPerToken), ceilDiv(nodes, nodesPerToken), ceilDiv(int64(size), bytesPerToken))
}

// writtenCost is what reading a document refused before validation took:
// parsing and measuring it, in proportion to its size as written.
func writtenCost(lim complexity.Limits, size int) int64 {
	return readingCost(complexity.Limits{Nodes: lim.Nodes}, size)
}

// validatedCost is what reading a document refused once it was validated
// took: its size and what validation visited. Not its fields expanded, which
// a fragment bomb makes astronomical: the pricing and the merge rule read
// each fragment once, however often it is spread.
func validatedCost(lim complexity.Limits, size int) int64 {
	return readingCost(complexity.Limits{Nodes: lim.Nodes, Visits: lim.Visits}, size)
}

// parseCost is the reading cost of a document that did not parse: what the
// parser read before it stopped, err's location (all of its tokens at the
// token limit).
func (l *Limiter) parseCost(query string, size int, tokenLimit bool, err error) int64 {
	read := len(query)
	switch off := errorOffset(query, err); {
	case tokenLimit:
		read = min(read, l.cfg.MaxTokens*bytesPerNode)
	case off >= 0:
		read = off
	}
	return readingCost(complexity.Limits{Nodes: read / bytesPerNode}, size)
}

func ceilDiv(n, d int64) int64 { return (n + d - 1) / d }

// refuse charges a request refused before execution (RejectionCost, or what
// reading it took when more: st.read) and returns the answer: e, or THROTTLED when the
// bucket cannot pay even that (then nothing is charged). In measure mode the
// charge is a shadow one. A store error answers e, as nothing runs either way.
func (l *Limiter) refuse(ctx context.Context, st *state, e *Error) *Error {
	if st == nil || st.id == nil || st.stats.Charged || st.refused {
		return e
	}
	st.refused = true
	p, _ := l.bucket(st)
	if l.cfg.Mode == limiter.Shadow {
		shadow := *p
		shadow.Mode = limiter.Shadow
		p = &shadow
	}
	// Never more than the bucket holds: a refusal the bucket could never pay
	// would be free.
	cost := min(max(l.cfg.RejectionCost, st.read), p.Capacity())
	d := l.charge(ctx, st, p, cost)
	st.stats.Limit, st.stats.RestoreRate = p.Capacity(), restoreRate(p)
	if d.HasState() {
		st.stats.HasBucket = true
		st.stats.Remaining = d.Remaining
		st.stats.ResetAt = l.cfg.Clock().Add(d.ResetAfter)
	}
	st.decision, st.headers = d, p.EffectiveMode() != limiter.Shadow
	if d.Outcome == limiter.Blocked {
		return blocked()
	}
	if d.Outcome == limiter.Denied && !d.ExceedsCapacity {
		return &Error{Status: http.StatusTooManyRequests, Code: CodeThrottled, Message: "Throttled",
			Extensions: map[string]any{"retryAfterSec": header.RetryAfterSeconds(d)}}
	}
	return e
}

// validate validates the document of st against the schema gqlgen runs with
// (or the proxy's upstream's), once per document: the errors are kept with it.
func (l *Limiter) validate(st *state) *Error {
	schema := l.validationSchema()
	if schema == nil {
		return reject(http.StatusInternalServerError, CodeInternal, "costgate: no schema to validate operations with")
	}
	errs := st.doc.validate(schema, gqlvalidate.Options{Suggestions: !l.cfg.NoIntrospection})
	if len(errs) == 0 {
		st.valid = true
		return nil
	}
	first := errs[0]
	return &Error{Status: http.StatusBadRequest, Code: CodeValidationFailed, Message: first.Message, errs: errs}
}

// validationSchema is gqlgen's schema embedded, the upstream's in proxy mode.
func (l *Limiter) validationSchema() *ast.Schema {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.validates != nil {
		return l.validates
	}
	if l.schema != nil {
		return l.schema.AST()
	}
	return nil
}

// validate validates d once against schema, and returns its errors, each
// with the code GRAPHQL_VALIDATION_FAILED. Validation links the document to
// the schema: it happens before any request reads the links (sync.Once).
func (d *document) validate(schema *ast.Schema, opts gqlvalidate.Options) gqlerror.List {
	d.validated.Do(func() {
		d.errs = gqlvalidate.Validate(schema, d.doc, opts)
		for _, e := range d.errs {
			if e.Extensions == nil {
				e.Extensions = map[string]any{}
			}
			e.Extensions["code"] = CodeValidationFailed
		}
	})
	return d.errs
}

// cloneErrors copies errs, kept with a document that every request sending
// it shares, for a response that what runs after costgate may change (an
// error presenter, another extension's response interceptor).
func cloneErrors(errs gqlerror.List) gqlerror.List {
	out := make(gqlerror.List, len(errs))
	for i, e := range errs {
		c := *e
		c.Locations = slices.Clone(e.Locations)
		c.Path = slices.Clone(e.Path)
		c.Extensions = maps.Clone(e.Extensions)
		out[i] = &c
	}
	return out
}

// QueryCache returns a cache for gqlgen's handler.Server.SetQueryCache that
// hands gqlgen the document the middleware read for the request: parsed,
// measured and validated once, so that gqlgen neither parses nor validates it
// again and runs exactly what costgate priced. It holds nothing itself (the
// middleware keeps documents, see Config.DocumentCache): a query it was not
// given by the middleware, validated, is a miss. [Limiter.Handler] installs
// it.
func (l *Limiter) QueryCache() graphql.Cache[*ast.QueryDocument] { return readingCache{} }

type readingCache struct{}

func (readingCache) Get(ctx context.Context, query string) (*ast.QueryDocument, bool) {
	st := stateFrom(ctx)
	if st == nil || !st.valid || st.op == nil || st.op.Query != query || st.doc == nil {
		return nil, false
	}
	return st.doc.doc, true
}

func (readingCache) Add(context.Context, string, *ast.QueryDocument) {}

// errorOffset is the byte offset in query of a parse error's first location,
// or -1.
func errorOffset(query string, err error) int {
	ge, ok := err.(*gqlerror.Error)
	if !ok || len(ge.Locations) == 0 {
		return -1
	}
	loc := ge.Locations[0]
	off := 0
	for line := 1; line < loc.Line; line++ {
		i := strings.IndexAny(query[off:], "\r\n")
		if i < 0 {
			return len(query)
		}
		off += i + 1
		if query[off-1] == '\r' && off < len(query) && query[off] == '\n' {
			off++
		}
	}
	return min(off+max(loc.Column-1, 0), len(query))
}
