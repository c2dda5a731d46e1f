package gqllimit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// shopSchema is the example API's schema, read from its SDL (package graph
// imports this one).
func shopSchema(tb testing.TB) *complexity.Schema {
	tb.Helper()
	sdl, err := os.ReadFile("../../graph/schema.graphqls")
	if err != nil {
		tb.Fatal(err)
	}
	s, err := complexity.LoadSDL("schema.graphqls", string(sdl))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func newTestLimiter(tb testing.TB, documents int) *Limiter {
	tb.Helper()
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		tb.Fatal(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("cache-test-hash-key")})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := New(Config{Limiter: lim, Identity: ids, Schema: shopSchema(tb), DocumentCache: documents,
		Policy: &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 50, Period: time.Second, Burst: 1000, Key: []string{"ip"}}})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// validated is query parsed and validated on its own, as gqlgen (or the
// proxy) hands it to the pricing.
func validated(tb testing.TB, s *complexity.Schema, query string) *ast.OperationDefinition {
	tb.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		tb.Fatal(err)
	}
	if errs := validator.ValidateWithRules(s.AST(), doc, nil); len(errs) > 0 {
		tb.Fatal(errs)
	}
	return doc.Operations[0]
}

// A document read again is the one read before, not parsed again: per text
// and operation name, and only while the cache is on.
func TestDocumentCache(t *testing.T) {
	q := `query A { products(first: 2) { nodes { id } } } query B { search(text: "x") { __typename } }`
	l := newTestLimiter(t, 0)
	a, _ := l.document(q, "A", 0)
	if again, _ := l.document(q, "A", 0); again != a {
		t.Errorf("the same text and name were parsed again")
	}
	if b, _ := l.document(q, "B", 0); b == a {
		t.Errorf("operation B shares A's document")
	}
	off := newTestLimiter(t, -1)
	x, _ := off.document(q, "A", 0)
	if y, _ := off.document(q, "A", 0); x == y {
		t.Errorf("DocumentCache: -1 kept a document")
	}
	if _, err := l.document(`{ products( }`, "", 0); err == nil || err.Code != CodeParseFailed {
		t.Errorf("parse error: %v", err)
	}
}

// Prices are kept under the values of the variables the price depends on:
// another cursor is the same price, not worked out again; another page size
// is priced anew; errors are kept like prices.
func TestPriceCacheKeyedByCostVariables(t *testing.T) {
	s := shopSchema(t)
	q := `query($n: Int, $after: String) { products(first: $n, after: $after) { nodes { id variants(first: 2) { id } } } }`
	l := newTestLimiter(t, 0)
	d, _ := l.document(q, "", 0)
	op := validated(t, s, q)
	fresh := func(vars map[string]any) (int64, string) {
		res, err := s.AnalyzeOperation(op, vars)
		return res.Cost, fmt.Sprint(err)
	}
	for i, step := range []struct {
		vars   map[string]any
		prices int // distinct prices kept after the step
	}{
		{map[string]any{"n": 3, "after": "p1"}, 1},
		{map[string]any{"n": 3, "after": "p9"}, 1},
		{map[string]any{"n": 7}, 2},
		{map[string]any{"n": 3}, 2},
		{map[string]any{}, 3},
		{map[string]any{"n": nil}, 4}, // null is not absent: no default applies, and no slicing argument has a value
	} {
		got, err := d.price(s, op, step.vars)
		if want, wantErr := fresh(step.vars); got != want || fmt.Sprint(err) != wantErr {
			t.Errorf("step %d %v: %d, %v; want %d, %s", i, step.vars, got, err, want, wantErr)
		}
		if len(d.prices) != step.prices {
			t.Errorf("step %d %v: %d prices kept, want %d", i, step.vars, len(d.prices), step.prices)
		}
	}
	if !slices.Equal(d.costVars, []string{"n"}) {
		t.Errorf("cost variables %v, want [n]", d.costVars)
	}

	slicing := `query($n: Int) { products(first: $n) { nodes { id } } }`
	ds, _ := l.document(slicing, "", 0)
	sop := validated(t, s, slicing)
	for range 2 {
		if _, err := ds.price(s, sop, map[string]any{"n": nil}); err == nil {
			t.Errorf("first: null priced")
		}
	}
}

// Pricing an operation seen before allocates next to nothing.
func TestCachedPricingAllocations(t *testing.T) {
	s := shopSchema(t)
	l := newTestLimiter(t, 0)
	q := `query($n: Int) { products(first: $n) { nodes { id title variants(first: 2) { id sku } } } }`
	op := validated(t, s, q)
	vars := map[string]any{"n": int64(10)}
	d, _ := l.document(q, "", 0)
	if _, err := d.price(s, op, vars); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		d, _ := l.document(q, "", 0)
		d.price(s, op, vars)
	})
	if allocs > 4 { // the key of the cost variable's value
		t.Errorf("cached pricing allocates %.0f times, want at most 4", allocs)
	}
}

func TestLRU(t *testing.T) {
	c := newLRU[string, int](3, 100)
	for i := range 4 {
		c.add(fmt.Sprint(i), i, 10)
	}
	if _, ok := c.get("0"); ok || c.len() != 3 {
		t.Errorf("over 3 entries: the oldest kept (len %d)", c.len())
	}
	c.get("1") // now the most recent
	c.add("big", 0, 85)
	if _, ok := c.get("1"); !ok || c.len() != 2 {
		t.Errorf("over 100 bytes: want the least recent evicted, 1 kept; len %d", c.len())
	}
	c.add("huge", 0, 101)
	if _, ok := c.get("huge"); ok {
		t.Errorf("a value over the whole budget was kept")
	}
	c.add("1", 1, 15) // a new size for a kept key
	if c.bytes != 15+85 || c.len() != 2 {
		t.Errorf("after resizing: %d bytes in %d entries, want 100 in 2", c.bytes, c.len())
	}

	q := NewPersistedQueryCache(2, 0)
	q.Add(context.Background(), "h", "{ a }")
	if v, ok := q.Get(context.Background(), "h"); !ok || v != "{ a }" {
		t.Errorf("persisted query cache: %q, %v", v, ok)
	}
}

// query30 selects 30 fields of the example shop (the handler benchmark's).
const query30 = `query Shop($first: Int) {
  products(first: $first) {
    totalCount
    pageInfo { hasNextPage endCursor }
    nodes {
      id title priceCents description inventory
      variants(first: 3) { id sku color size priceCents }
      reviews(first: 2) { id rating body author { id name } }
    }
    edges { cursor node { id title priceCents } }
  }
}`

// BenchmarkPricing is the pricing of one request of a 30-field operation:
// fresh, the middleware parses and measures the text, gqlgen parses and
// validates it, the extension prices it (cost variables found, the
// operation analysed); cached, the middleware finds the document and its
// price under the cost variable's value, and gqlgen its validated document.
//
//	go test -run='^$' -bench=Pricing -benchmem ./limiter/gqllimit/
func BenchmarkPricing(b *testing.B) {
	s := shopSchema(b)
	vars := map[string]any{"first": int64(10)}
	if m, _ := complexity.Measure(parseOrFail(b, query30), ""); m.Fields != 30 {
		b.Fatalf("query30 has %d fields, want 30", m.Fields)
	}
	b.Run("fresh", func(b *testing.B) {
		l := newTestLimiter(b, -1)
		b.ReportAllocs()
		for b.Loop() {
			d, rerr := l.document(query30, "", 0)
			if rerr != nil || d.measureErr != nil || d.limits.Fields != 30 {
				b.Fatal(rerr, d.measureErr)
			}
			doc := parseOrFail(b, query30)
			if errs := validator.ValidateWithRules(s.AST(), doc, nil); len(errs) > 0 {
				b.Fatal(errs)
			}
			if _, err := d.price(s, doc.Operations[0], vars); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		l := newTestLimiter(b, 0)
		queries := NewQueryCache(0, 0) // gqlgen's
		doc := parseOrFail(b, query30)
		validator.ValidateWithRules(s.AST(), doc, nil)
		queries.Add(context.Background(), query30, doc)
		d, _ := l.document(query30, "", 0)
		d.price(s, doc.Operations[0], vars)
		b.ReportAllocs()
		for b.Loop() {
			d, rerr := l.document(query30, "", 0)
			if rerr != nil || d.limits.Fields != 30 {
				b.Fatal(rerr)
			}
			valid, ok := queries.Get(context.Background(), query30)
			if !ok {
				b.Fatal("not cached")
			}
			if _, err := d.price(s, valid.Operations[0], vars); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func parseOrFail(tb testing.TB, query string) *ast.QueryDocument {
	tb.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		tb.Fatal(err)
	}
	return doc
}

// The price cache's key encodes a value as json.Marshal does, whichever
// path encodes it.
func TestAppendJSONIsMarshal(t *testing.T) {
	for _, v := range []any{nil, true, false, 0, -7, int64(1) << 62, int32(-5), int64(10), 1.5, "x<y", []any{int64(1), "a"}, map[string]any{"b": 1, "a": nil}} {
		want, _ := json.Marshal(v)
		got, err := appendJSON(nil, v)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendJSON(%#v) = %s, %v; want %s", v, got, err, want)
		}
	}
}
