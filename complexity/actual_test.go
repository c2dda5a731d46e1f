package complexity_test

import (
	"encoding/json"
	"testing"

	"github.com/costgate/costgate/complexity"
)

func TestActual(t *testing.T) {
	s := testSchema(t)
	ast := loadAST(t)
	for _, tc := range []struct {
		name, query string
		vars        map[string]any
		data        string // the response's "data"
		requested   int64
		want        int64
	}{
		{
			name:      "worked example, lists shorter than requested",
			query:     `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`,
			data:      `{"products":{"nodes":[{"id":"1","title":"a","variants":[{"id":"v"}]},{"id":"2","title":"b","variants":[{"id":"w"},{"id":"x"},{"id":"y"}]}]}}`,
			requested: 61,
			// node 1: 1+1×1=2; node 2: 1+3×1=4; products 1×(1+6)
			want: 7,
		},
		{
			name:      "empty list",
			query:     `{ products(first: 10) { nodes { id } } }`,
			data:      `{"products":{"nodes":[]}}`,
			requested: 11,
			want:      1, // products 1×(1+0)
		},
		{
			name:      "null field",
			query:     `{ products(first: 10) { nodes { id } } product(id: "1") { price } }`,
			data:      `{"products":null,"product":null}`,
			requested: 14,
			want:      0,
		},
		{
			name:      "null items of a list do not count",
			query:     `{ reviews(first: 5) { id } }`,
			data:      `{"reviews":[{"id":"1"},null,{"id":"3"}]}`,
			requested: 10,
			want:      4, // 2 items × Review 2
		},
		{
			name:      "union priced by __typename",
			query:     `{ search(term: "x", limit: 4) { __typename ... on Product { variants(first: 10) { id } } } }`,
			data:      `{"search":[{"__typename":"Shop"},{"__typename":"Product","variants":[{"id":"1"},{"id":"2"}]},{"__typename":"Review"}]}`,
			requested: 44,
			// Shop 5 + Product (1+2×1) + Review 2
			want: 10,
		},
		{
			name:      "union without __typename: the maximum over the types",
			query:     `{ search(term: "x", limit: 4) { ... on Product { variants(first: 10) { id } } } }`,
			data:      `{"search":[{"variants":[{"id":"1"},{"id":"2"},{"id":"3"},{"id":"4"},{"id":"5"},{"id":"6"}]},{}]}`,
			requested: 44,
			// item 1: max(Product 1+6=7, Shop 5, Review 2) = 7; item 2: max(1, 5, 2) = 5
			want: 12,
		},
		{
			name:      "aliased __typename",
			query:     `{ search(term: "x", limit: 4) { t: __typename ... on Shop { name } } }`,
			data:      `{"search":[{"t":"Review"}]}`,
			requested: 20,
			want:      2, // Review, not the maximum (Shop 5)
		},
		{
			name:      "interface field weights by concrete type",
			query:     `{ named { __typename name } }`,
			data:      `{"named":[{"__typename":"Shop","name":"s"},{"__typename":"User","name":"u"}]}`,
			requested: 14,
			want:      12, // Shop 5 + User (1+6)
		},
		{
			name:      "aliases map to response keys",
			query:     `{ a: product(id: "1") { price } b: product(id: "2") { price } }`,
			data:      `{"a":{"price":"1.00"},"b":null}`,
			requested: 6,
			want:      3, // a: 1+2; b: null
		},
		{
			name:      "inner lists count their items",
			query:     `{ grid { x } }`,
			data:      `{"grid":[[{"x":1},{"x":2}],[{"x":3}],[]]}`,
			requested: 100,
			want:      3,
		},
		{
			name:      "fragments on the response",
			query:     `{ products(first: 3) { nodes { ...PF } } } fragment PF on Product { price variants(first: 2) { id } }`,
			data:      `{"products":{"nodes":[{"price":"1","variants":[]},{"price":"2","variants":[{"id":"v"}]}]}}`,
			requested: 1 + 3*(1+2+2),
			// node 1: 1+2+0; node 2: 1+2+1; products 1+(3+4)
			want: 8,
		},
		{
			name:      "skipped field is absent",
			query:     `query($s: Boolean!) { product(id: "1") { price @skip(if: $s) } }`,
			vars:      map[string]any{"s": true},
			data:      `{"product":{}}`,
			requested: 1,
			want:      1,
		},
		{
			name:      "mutation: mutation_cost and argument cost",
			query:     `mutation { createProduct(input: {title: "t", price: 5}) { id } }`,
			data:      `{"createProduct":{"id":"1"}}`,
			requested: 14,
			want:      14, // 4 + 1×10
		},
		{
			name:      "introspection",
			query:     `{ __schema { types { name } } }`,
			data:      `{"__schema":{"types":[{"name":"Query"}]}}`,
			requested: 1,
			want:      1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := parseValid(t, ast, tc.query)
			op := doc.Operations[0]
			req, err := s.AnalyzeOperation(op, tc.vars)
			if err != nil || req.Cost != tc.requested {
				t.Fatalf("requested = %d, %v; want %d", req.Cost, err, tc.requested)
			}
			got, err := s.ActualJSON(op, tc.vars, []byte(tc.data))
			if err != nil {
				t.Fatalf("ActualJSON: %v", err)
			}
			if got != tc.want {
				t.Errorf("actual = %d, want %d", got, tc.want)
			}
			if got, err := streamActual(s, op, tc.vars, []byte(tc.data)); err != nil || got != tc.want {
				t.Errorf("streamed = %d, %v; want %d", got, err, tc.want)
			}
			var data map[string]any
			if err := json.Unmarshal([]byte(tc.data), &data); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Actual(op, tc.vars, data); err != nil || got != tc.want {
				t.Errorf("Actual = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestActualNullData(t *testing.T) {
	s := testSchema(t)
	op := parseValid(t, loadAST(t), `{ product(id: "1") { id } }`).Operations[0]
	for _, data := range []string{"null", ""} {
		if got, err := s.ActualJSON(op, nil, []byte(data)); err != nil || got != 0 {
			t.Errorf("ActualJSON(%q) = %d, %v; want 0", data, got, err)
		}
		if got, err := streamActual(s, op, nil, []byte(data)); err != nil || got != 0 {
			t.Errorf("streamed %q = %d, %v; want 0", data, got, err)
		}
	}
	if _, err := s.ActualJSON(op, nil, []byte(`{"product":`)); err == nil {
		t.Errorf("ActualJSON on broken JSON: no error")
	}
}

// TestActualFanOut: a response to the fragment bomb is priced once per (fragment,
// response object), not 2^depth times.
func TestActualFanOut(t *testing.T) {
	s := testSchema(t)
	op := parseValid(t, loadAST(t), complexity.FanOutQuery(30)).Operations[0]
	data := map[string]any{"products": map[string]any{"nodes": []any{
		map[string]any{"variants": []any{map[string]any{"id": "1"}}},
	}}}
	got, err := s.Actual(op, nil, data)
	// Each of the 2^30 leaf copies sees the one variant: 1 + (1 + 2^30 × 1).
	if want := int64(2 + 1<<30); err != nil || got != want {
		t.Errorf("Actual = %d, %v; want %d", got, err, want)
	}
	raw, _ := json.Marshal(data)
	if got, err := streamActual(s, op, nil, raw); err != nil || got != 2+1<<30 {
		t.Errorf("streamed = %d, %v; want %d", got, err, 2+1<<30)
	}
}
