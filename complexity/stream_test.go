package complexity_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
)

// streamActual prices data through an ActualCounter, reading it token by token as
// costgate's proxy does.
func streamActual(s *complexity.Schema, op *ast.OperationDefinition, vars map[string]any, data []byte) (int64, error) {
	c, err := s.NewActualCounter(op, vars)
	if err != nil {
		return 0, err
	}
	if len(bytes.TrimSpace(data)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := feed(dec, c); err != nil {
			return 0, err
		}
	}
	return c.Cost()
}

func feed(dec *json.Decoder, c *complexity.ActualCounter) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		object := t == '{'
		if object {
			c.BeginObject()
		} else {
			c.BeginArray()
		}
		for dec.More() {
			if object {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				c.Key([]byte(k.(string)))
			}
			if err := feed(dec, c); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		c.End()
	case string:
		c.String([]byte(t))
	case nil:
		c.Null()
	default:
		c.Scalar()
	}
	return nil
}

// checkStream asserts that the counter prices data as ActualJSON does.
func checkStream(t *testing.T, s *complexity.Schema, op *ast.OperationDefinition, vars map[string]any, data []byte) {
	t.Helper()
	want, wantErr := s.ActualJSON(op, vars, data)
	got, err := streamActual(s, op, vars, data)
	if got != want || (err == nil) != (wantErr == nil) {
		t.Errorf("streamed: %d, %v; ActualJSON: %d, %v (data %s)", got, err, want, wantErr, data)
	}
}

// The counter gives the actual costs of the tree pricing on responses that stress it:
// abstract items with their __typename last (as the proxy asks for it), several
// occurrences of one field, fragments on abstract types, nested lists.
func TestActualCounterMatchesActualJSON(t *testing.T) {
	s := testSchema(t)
	schemaAST := loadAST(t)
	for _, tc := range []struct{ query, data string }{
		{`{ search(term: "x", limit: 4) { ... on Product { variants(first: 10) { id } } t: __typename } }`,
			`{"search":[{"variants":[{"id":"1"},{"id":"2"}],"t":"Product"},{"t":"Shop"},{"t":"Nope"},{},null,7]}`},
		{`{ search(term: "x", limit: 4) { ...S ...S } } fragment S on SearchResult { ... on Product { variants(first: 2) { id } } __typename }`,
			`{"search":[{"variants":[{"id":"1"}],"__typename":"Product"},{"__typename":"Review"}]}`},
		{`{ named { name ... on Shop { name } } named { __typename } }`,
			`{"named":[{"name":"s","__typename":"Shop"},{"name":"u","__typename":"User"}]}`},
		{`{ grid { x } products(first: 2) { nodes { id } } }`,
			`{"grid":[[{"x":1}],{"x":2},[[{"x":3}]],"no"],"products":{"nodes":{"id":"1"}}}`},
		{`{ products(first: 2) { nodes { id } } }`, `{"products":[{"nodes":[]}]}`},
		{`{ a: product(id: "1") { price } b: product(id: "1") { price } }`, `{"b":{"price":"1"},"a":{"price":"2"}}`},
		{`{ __schema { types { name } } __type(name: "Query") { name } }`, `{"__schema":null,"__type":{"name":"Query"}}`},
		{`{ product(id: "1") { id } }`, `[]`},
		{`{ product(id: "1") { id } }`, `"x"`},
		{`{ product(id: "1") { id } }`, `{"product":{"id":`},
	} {
		doc := parseValid(t, schemaAST, tc.query)
		checkStream(t, s, doc.Operations[0], nil, []byte(tc.data))
	}
}

// A deep response costs the counter a few slots per level, reused: pricing a long
// list allocates nothing per item.
func TestActualCounterAllocations(t *testing.T) {
	s := testSchema(t)
	op := parseValid(t, loadAST(t), `{ search(term: "x", limit: 100) { __typename ... on Product { variants(first: 10) { id } } } }`).Operations[0]
	var item bytes.Buffer
	item.WriteString(`{"__typename":"Product","variants":[{"id":"1"},{"id":"2"}]}`)
	run := func(items int) float64 {
		return testing.AllocsPerRun(5, func() {
			c, _ := s.NewActualCounter(op, nil)
			c.BeginObject()
			c.Key([]byte("search"))
			c.BeginArray()
			for i := 0; i < items; i++ {
				c.BeginObject()
				c.Key([]byte("__typename"))
				c.String([]byte("Product"))
				c.Key([]byte("variants"))
				c.BeginArray()
				for j := 0; j < 2; j++ {
					c.BeginObject()
					c.Key([]byte("id"))
					c.String([]byte("1"))
					c.End()
				}
				c.End()
				c.End()
			}
			c.End()
			c.End()
			if got, err := c.Cost(); err != nil || got != int64(items)*3 {
				panic(fmt.Sprintf("cost %d, %v", got, err))
			}
		})
	}
	small, large := run(10), run(10000)
	if large > small+5 {
		t.Errorf("%.0f allocations for 10,000 items, %.0f for 10: allocations grow with the response", large, small)
	}
}

// sharedActual prices data through a counter sharing plans.
func sharedActual(s *complexity.Schema, plans *complexity.ActualPlans, vars map[string]any, data []byte) (int64, error) {
	c, err := s.NewSharedActualCounter(plans, vars)
	if err != nil {
		return 0, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := feed(dec, c); err != nil {
		return 0, err
	}
	return c.Cost()
}

// Counters sharing an operation's plans price every response as ActualJSON
// does, one after the other, including when an @include takes a variable
// whose value changes from request to request.
func TestSharedActualCounter(t *testing.T) {
	s := testSchema(t)
	schemaAST := loadAST(t)
	data := []byte(`{"search":[{"variants":[{"id":"1"},{"id":"2"}],"__typename":"Product"},{"__typename":"Shop"}],"product":{"id":"1","variants":[{"id":"3"}]}}`)
	for _, query := range []string{
		`{ search(term: "x", limit: 4) { ...S } product(id: "1") { id variants(first: 5) { id } } } fragment S on SearchResult { ... on Product { variants(first: 2) { id } } __typename }`,
		`query($v: Boolean!) { search(term: "x", limit: 4) { ... on Product @include(if: $v) { variants(first: 2) { id } } __typename } product(id: "1") { id variants(first: 5) @skip(if: $v) { id } } }`,
		`query($v: Boolean!) { search(term: "x", limit: 4) { ...S } product(id: "1") { id } } fragment S on SearchResult { ... on Product { variants(first: 2) @include(if: $v) { id } } __typename }`,
	} {
		op := parseValid(t, schemaAST, query).Operations[0]
		plans := complexity.NewActualPlans(op)
		for _, v := range []bool{true, false, true, false} {
			vars := map[string]any{"v": v}
			want, err := s.ActualJSON(op, vars, data)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := sharedActual(s, plans, vars, data); got != want || err != nil {
				t.Errorf("%s, v=%v: shared counter %d, %v; ActualJSON %d", query, v, got, err, want)
			}
		}
	}
}

// A counter sharing plans built by an earlier one builds none: counting an
// operation again allocates less than the first time.
func TestSharedActualCounterReusesPlans(t *testing.T) {
	s := testSchema(t)
	op := parseValid(t, loadAST(t), `{ search(term: "x", limit: 4) { __typename ... on Product { variants(first: 10) { id sku } } } product(id: "1") { id } }`).Operations[0]
	data := []byte(`{"search":[{"__typename":"Product","variants":[{"id":"1","sku":"a"}]}],"product":{"id":"1"}}`)
	count := func(plans *complexity.ActualPlans) {
		if _, err := sharedActual(s, plans, nil, data); err != nil {
			t.Fatal(err)
		}
	}
	shared := complexity.NewActualPlans(op)
	count(shared)
	reused := testing.AllocsPerRun(20, func() { count(shared) })
	fresh := testing.AllocsPerRun(20, func() { count(complexity.NewActualPlans(op)) })
	if reused+5 > fresh {
		t.Errorf("%.0f allocations with the plans built, %.0f building them: plans are not reused", reused, fresh)
	}
}

// ActualJSONShared prices every response as ActualJSON does, with what it
// keeps from the responses before (of other variables, other data).
func TestActualJSONShared(t *testing.T) {
	s := testSchema(t)
	schemaAST := loadAST(t)
	for _, tc := range []struct{ query, data string }{
		{`query($v: Boolean!) { search(term: "x", limit: 4) { ... on Product @include(if: $v) { variants(first: 2) { id } } __typename } product(id: "1") { id variants(first: 5) @skip(if: $v) { id } } }`,
			`{"search":[{"variants":[{"id":"1"},{"id":"2"}],"__typename":"Product"},{"__typename":"Shop"}],"product":{"id":"1","variants":[{"id":"3"}]}}`},
		{`{ products(first: 3) { nodes { id variants(first: 2) { id } related(first: 2) { id reviewConnection(first: 2) { nodes { id author { id } } } } } } }`,
			`{"products":{"nodes":[{"id":"1","variants":[{"id":"a"}],"related":[{"id":"r","reviewConnection":{"nodes":[{"id":"v","author":{"id":"u"}}]}},{"id":"s","reviewConnection":{"nodes":[]}}]},{"id":"2","variants":[],"related":[{"id":"t","reviewConnection":{"nodes":[{"id":"w","author":null}]}}]}]}}`},
		{`{ search(term: "x", limit: 4) { ...S ...S } } fragment S on SearchResult { ... on Product { variants(first: 2) { id } } __typename }`,
			`{"search":[{"variants":[{"id":"1"}],"__typename":"Product"},{"__typename":"Review"}]}`},
	} {
		op := parseValid(t, schemaAST, tc.query).Operations[0]
		plans := complexity.NewActualPlans(op)
		for _, v := range []bool{true, false, true} {
			vars := map[string]any{"v": v}
			want, wantErr := s.ActualJSON(op, vars, []byte(tc.data))
			got, err := s.ActualJSONShared(plans, vars, []byte(tc.data))
			if got != want || (err == nil) != (wantErr == nil) {
				t.Errorf("%s, v=%v: ActualJSONShared %d, %v; ActualJSON %d, %v", tc.query, v, got, err, want, wantErr)
			}
		}
	}
}
