package gqllimit

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/gqlexec"
)

type docKey struct{ query, operationName string }

// document is a query text as the middleware read it for one operation name: parsed
// with the token limit and measured, and what later steps learned about it. Requests
// that send the same text share it; doc is never changed once the document is cached.
type document struct {
	doc        *ast.QueryDocument // parsed; validated once validated has run
	limits     complexity.Limits  // of the whole document
	measureErr error

	validated sync.Once
	errs      gqlerror.List // validation's

	mu       sync.Mutex
	costVars []string // nil until the first price; then the variables the price depends on
	known    bool
	prices   map[string]price // by the values of costVars

	derivedOnce sync.Once
	derived     any

	exec atomic.Pointer[execPlan] // of the operation last run for this document (see execPlan)
}

// price is a cached result of pricing: a cost, or the operation's rejection.
type price struct {
	cost int64
	err  *complexity.OperationError
}

// Bounds of a document's price cache: the distinct values of its cost variables that are
// remembered, and the size of those values.
const (
	maxPricesPerDocument = 64
	maxPriceKey          = 1024
)

// document returns the parsed and measured document of query, from the cache when the
// same text and operation name were read before, or the rejection of a query that does
// not parse, with what reading it cost (size is the request's).
func (l *Limiter) document(query, operationName string, size int) (*document, *Error) {
	key := docKey{query, operationName}
	if l.docs != nil {
		if d, ok := l.docs.get(key); ok {
			return d, nil
		}
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, l.cfg.MaxTokens)
	if err != nil {
		if strings.Contains(err.Error(), "exceeded token limit") {
			e := reject(http.StatusBadRequest, CodeMaxTokensExceeded, "the document has more than %d tokens", l.cfg.MaxTokens)
			e.cost = l.parseCost(query, size, true, err)
			return nil, e
		}
		e := &Error{Status: http.StatusBadRequest, Code: CodeParseFailed, Message: gqlexec.ErrorMessage(err)}
		e.cost = l.parseCost(query, size, false, err)
		return nil, e
	}
	d := &document{doc: doc}
	d.limits, d.measureErr = complexity.MeasureDocument(doc)
	if l.docs != nil {
		l.docs.add(key, d, documentWeight(query))
	}
	return d, nil
}

// price prices op, an operation of this document validated against schema, with vars.
// CostVariables names the variables the price depends on: the price is kept under their
// values, and a later request that gives them the same values is not priced again.
func (d *document) price(schema *complexity.Schema, op *ast.OperationDefinition, vars map[string]any) (int64, error) {
	d.mu.Lock()
	if !d.known {
		d.costVars, d.known = schema.CostVariables(op), true
	}
	names := d.costVars
	key, cacheable := priceKey(names, vars)
	if cacheable {
		if p, ok := d.prices[key]; ok {
			d.mu.Unlock()
			if p.err != nil {
				return 0, p.err
			}
			return p.cost, nil
		}
	}
	d.mu.Unlock()

	res, err := schema.AnalyzeOperation(op, vars)
	var oe *complexity.OperationError
	if err != nil && !errors.As(err, &oe) {
		return 0, err // not an answer about the operation: never kept
	}
	if cacheable {
		d.mu.Lock()
		if d.prices == nil || len(d.prices) >= maxPricesPerDocument {
			d.prices = make(map[string]price, 1)
		}
		d.prices[key] = price{cost: res.Cost, err: oe}
		d.mu.Unlock()
	}
	return res.Cost, err
}

// priceKey encodes the values vars gives the variables names, in order, absent ones
// apart from null; false when a value is too large to keep (or cannot be encoded).
func priceKey(names []string, vars map[string]any) (string, bool) {
	if len(names) == 0 {
		return "", true
	}
	var (
		b       strings.Builder
		scratch [32]byte
	)
	for _, name := range names {
		v, ok := vars[name]
		if !ok {
			b.WriteString("-\x00")
			continue
		}
		j, err := appendJSON(scratch[:0], v)
		if err != nil {
			return "", false
		}
		b.WriteByte('=')
		b.Write(j) // JSON never holds a raw NUL: the separator is unambiguous
		b.WriteByte(0)
		if b.Len() > maxPriceKey {
			return "", false
		}
	}
	return b.String(), true
}

// appendJSON appends v as json.Marshal encodes it (map keys sorted: one
// encoding per value), without its reflection for the integers, booleans
// and nulls that most cost variables hold.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	}
	j, err := json.Marshal(v)
	return append(b, j...), err
}
