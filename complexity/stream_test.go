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
