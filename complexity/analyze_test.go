package complexity_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/costgate/costgate/complexity"
)

// requestedCase is one row of the requested-cost table. The comment beside each want
// works the formula of docs/graphql.md ("The price") by hand against the cost tests' schema (internal/pricecases):
//
//	cost(f) = argCost(f) + n(f) × (w(f) + Σ cost(children))
type requestedCase struct {
	name  string
	query string
	vars  map[string]any
	opts  []complexity.Option
	want  int64
	// wantField, when set, expects a SLICING_ARGUMENT_REQUIRED error on that field.
	wantField string
	wantPath  string
}

var requestedCases = []requestedCase{
	// --- the worked example of docs/graphql.md ("The price") and connections ---
	{
		name:  "spec worked example",
		query: `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`,
		// variants 5×(1+0)=5; nodes (sized by products) 10×(1+0+0+5)=60; products counts once: 1×(1+60)
		want: 61,
	},
	{
		name:  "sized edges of a connection",
		query: `{ products(first: 3) { edges { cursor node { title variants(first: 2) { sku } } } } }`,
		// variants 2×1=2; node 1×(1+0+2)=3; edges 3×(1+0+3)=12; products 1+12
		want: 13,
	},
	{
		name:  "nested connections",
		query: `{ products(last: 2) { nodes { reviewConnection(first: 4) { totalCount nodes { body author { name } } } } } }`,
		// author: User 1 + name 6 = 7; review nodes 4×(2+0+7)=36; reviewConnection 1×(1+0+36)=37;
		// product nodes 2×(1+37)=76; products 1+76
		want: 77,
	},
	{
		name:  "sized field reached through a fragment",
		query: `{ products(first: 4) { ...Conn } } fragment Conn on ProductConnection { totalCount nodes { id } }`,
		// nodes 4×1=4; products 1+0+4
		want: 5,
	},
	{
		name: "one fragment under two list sizes",
		query: `{ a: products(first: 4) { ...Conn } b: products(first: 6) { ...Conn } }
			fragment Conn on ProductConnection { totalCount nodes { id } }`,
		// a: 1+4×1=5; b: 1+6×1=7 (the memo is keyed by the inherited size)
		want: 12,
	},

	// --- slicing arguments: variables, defaults, null, negatives ---
	{
		name:  "slicing argument from a variable",
		query: `query($n: Int) { products(first: $n) { nodes { id } } }`,
		vars:  map[string]any{"n": 7},
		// nodes 7×1=7; products 1+7
		want: 8,
	},
	{
		name:  "slicing argument from a JSON-decoded variable",
		query: `query($n: Int) { products(first: $n) { nodes { id } } }`,
		vars:  map[string]any{"n": float64(7)},
		want:  8, // as above
	},
	{
		name:  "slicing argument from a json.Number variable (gqlgen decodes with UseNumber)",
		query: `query($n: Int) { products(first: $n) { nodes { id } } }`,
		vars:  map[string]any{"n": json.Number("7")},
		want:  8, // as above
	},
	{
		name:  "variable default",
		query: `query($n: Int = 6) { reviews(first: $n) { id } }`,
		// reviews 6×(Review 2)=12
		want: 12,
	},
	{
		name:  "argument schema default",
		query: `{ search(term: "x") { ... on Shop { name } } }`,
		// limit = 5 (schema default); item max(Product 1, Shop 5+0, Review 2)=5; 5×5
		want: 25,
	},
	{
		name:  "unset variable falls back to the argument default",
		query: `query($l: Int) { search(term: "x", limit: $l) { ... on Review { body } } }`,
		// $l not given, no variable default: limit = 5; item max(1, 5, 2+0)=5; 5×5
		want: 25,
	},
	{
		name:  "variable beats the argument default",
		query: `query($l: Int) { search(term: "x", limit: $l) { ... on Review { body } } }`,
		vars:  map[string]any{"l": 2},
		// 2×5
		want: 10,
	},
	{
		name:  "null variable is no value",
		query: `query($n: Int) { reviews(first: $n) { id } }`,
		vars:  map[string]any{"n": nil},
		// no slicing value: assumedSize 50; 50×2
		want: 100,
	},
	{
		name:  "null literal is no value",
		query: `{ reviews(first: null) { id } }`,
		want:  100, // as above
	},
	{
		name:  "negative literal clamps to 0",
		query: `{ reviews(first: -5) { id } }`,
		// 0×2
		want: 0,
	},
	{
		name:  "negative variable clamps to 0",
		query: `query($n: Int) { products(first: $n) { nodes { id } } }`,
		vars:  map[string]any{"n": -3},
		// nodes 0×1=0; products 1×(1+0)
		want: 1,
	},
	{
		name:  "the largest slicing argument with a value",
		query: `{ filtered(first: 2, filter: {max: 7}) { id } }`,
		// argCost: filter 2 (no weighted input field); n = max(first 2, filter.max 7) = 7; 2 + 7×1
		want: 9,
	},

	// --- abstract types ---
	{
		name:  "union: max over the member types",
		query: `{ search(term: "x", limit: 4) { __typename ... on Product { price } ... on Review { body } } }`,
		// Product 1+2=3, Shop 5, Review 2+0=2 -> 5; 4×5
		want: 20,
	},
	{
		name:  "union: the heaviest selection, not the heaviest type",
		query: `{ search(term: "x", limit: 4) { ... on Product { variants(first: 10) { id } } } }`,
		// Product 1+10×1=11, Shop 5, Review 2 -> 11; 4×11
		want: 44,
	},
	{
		name:  "interface: field weights of each implementation",
		query: `{ named { name } }`,
		// Shop 5+0=5, User 1+name 6=7 -> 7; assumedSize 2: 2×7
		want: 14,
	},
	{
		name:  "interface with an inline fragment",
		query: `{ node(id: "1") { id ... on Product { variants(first: 9) { id } } } }`,
		// Product 1+0+9=10, Review 2, Shop 5, User 1 -> 10
		want: 10,
	},
	{
		name:  "abstract field with its own @cost",
		query: `{ featured { ... on Product { variants(first: 3) { id } } } }`,
		// w = 2 for every type: Product 2+3=5, Shop 2, Review 2 -> 5
		want: 5,
	},
	{
		name:  "list of an interface, default list size",
		query: `{ nodes(ids: ["1"]) { id } }`,
		// 10 × max(1, 2, 5, 1)
		want: 50,
	},
	{
		name:  "list of an interface, configured default list size",
		query: `{ nodes(ids: ["1"]) { id } }`,
		opts:  []complexity.Option{complexity.WithDefaultListSize(4)},
		// 4 × 5
		want: 20,
	},
	{
		name:  "typename on a union",
		query: `{ search(term: "x", limit: 3) { __typename } }`,
		// __typename 0; item max(1, 5, 2)=5; 3×5
		want: 15,
	},

	// --- fragments ---
	{
		name: "fragment reused in several list contexts",
		query: `{ product(id: "1") { ...PF } products(first: 3) { nodes { ...PF } } search(term: "x", limit: 2) { ...PF } }
			fragment PF on Product { title price variants(first: 3) { id } }`,
		// PF on Product = 0 + 2 + 3×1 = 5
		// product 1×(1+5)=6; products 1+3×(1+5)=19; search: Product 1+5=6, Shop 5, Review 2 -> 2×6=12
		// 6+19+12
		want: 37,
	},
	{
		name: "fragment on an interface, spread in object and union contexts",
		query: `{ product(id: "1") { ...N } search(term: "x", limit: 2) { ...N } }
			fragment N on Node { id ... on Product { price } }`,
		// product: 1+(0+2)=3; search: Product 1+2=3, Shop 5+0, Review 2+0 -> 5; 2×5=10; 3+10
		want: 13,
	},
	{
		name:  "inline fragments, with and without a type condition",
		query: `{ products(first: 2) { nodes { ... on Product { price } ... { title } ... on Node { id } } } }`,
		// per node 1+2+0+0=3; nodes 2×3=6; products 1+6
		want: 7,
	},

	// --- @skip / @include ---
	{
		name:  "skip and include with literals, excluded",
		query: `{ product(id: "1") { price @skip(if: true) variants(first: 4) @include(if: false) { id } title } }`,
		// 1×(1+0)
		want: 1,
	},
	{
		name:  "skip and include with literals, included",
		query: `{ product(id: "1") { price @skip(if: false) variants(first: 4) @include(if: true) { id } } }`,
		// 1+2+4×1
		want: 7,
	},
	{
		name:  "skip and include with variables",
		query: `query($s: Boolean!, $i: Boolean!) { product(id: "1") { price @skip(if: $s) variants(first: 4) @include(if: $i) { id } } }`,
		vars:  map[string]any{"s": true, "i": true},
		// 1+0+4
		want: 5,
	},
	{
		name:  "skip and include with variables, the other way",
		query: `query($s: Boolean!, $i: Boolean!) { product(id: "1") { price @skip(if: $s) variants(first: 4) @include(if: $i) { id } } }`,
		vars:  map[string]any{"s": false, "i": false},
		// 1+2+0
		want: 3,
	},
	{
		name: "skip on fragment spreads and inline fragments",
		query: `query($i: Boolean!) { product(id: "1") { ...PF @include(if: $i) ... on Product @skip(if: true) { price } } }
			fragment PF on Product { price }`,
		vars: map[string]any{"i": false},
		// both excluded: 1×(1+0)
		want: 1,
	},

	// --- mutations ---
	{
		name:  "mutation root field: mutation_cost",
		query: `mutation { createProduct(input: {title: "t"}) { id } }`,
		// w = 10 (root Mutation field); argCost 0 (title has no weight)
		want: 10,
	},
	{
		name:  "mutation with a weighted input field and children",
		query: `mutation { createProduct(input: {title: "t", price: 5}) { variants(first: 2) { id } } }`,
		// argCost ProductInput.price 4; 4 + 1×(10 + 2×1)
		want: 16,
	},
	{
		name:  "mutation field @cost beats mutation_cost",
		query: `mutation { deleteProduct(id: "1") }`,
		want:  3,
	},
	{
		name:  "mutation scalar field",
		query: `mutation { a: touch b: touch }`,
		// 10 + 10 (each root field pays)
		want: 20,
	},
	{
		name:  "configured mutation_cost",
		query: `mutation { a: touch b: touch }`,
		opts:  []complexity.Option{complexity.WithMutationCost(4)},
		want:  8,
	},
	{
		name:  "mutation root field through a fragment",
		query: `mutation { ...M } fragment M on Mutation { touch }`,
		want:  10,
	},

	// --- introspection and __typename ---
	{
		name:  "__schema costs introspection_cost whatever it selects",
		query: `{ __schema { types { name fields { name type { name } } } } }`,
		want:  1,
	},
	{
		name:  "__type and an aliased __schema",
		query: `{ __type(name: "Product") { name } s: __schema { queryType { name } } }`,
		want:  2, // 1 + 1
	},
	{
		name:  "configured introspection_cost",
		query: `{ __type(name: "Product") { name } s: __schema { queryType { name } } }`,
		opts:  []complexity.Option{complexity.WithIntrospectionCost(5)},
		want:  10,
	},
	{
		name:  "__typename alone is free",
		query: `{ __typename }`,
		want:  0,
	},
	{
		name:  "__typename under an object",
		query: `{ product(id: "1") { __typename } }`,
		want:  1, // the product itself
	},

	// --- aliases and repeated selections ---
	{
		name:  "aliases each counted",
		query: `{ a: product(id: "1") { price } b: product(id: "2") { price } }`,
		// 2 × (1+2)
		want: 6,
	},
	{
		name:  "a repeated field priced per occurrence",
		query: `{ product(id: "1") { price price } }`,
		// 1+2+2
		want: 5,
	},

	// --- lists ---
	{
		name:  "inner list level multiplies by default_list_size",
		query: `{ grid { x } }`,
		// [[Cell]]: 10×10 items × (1+0)
		want: 100,
	},
	{
		name:  "inner list with a slicing argument",
		query: `{ pricedGrid(rows: 3) { x } }`,
		// 3 × 10 items × 1
		want: 30,
	},
	{
		name:  "inner list with a configured default list size",
		query: `{ grid { x } }`,
		opts:  []complexity.Option{complexity.WithDefaultListSize(2)},
		want:  4, // 2×2
	},
	{
		name:  "list of scalars",
		query: `{ tags }`,
		want:  0, // 10 × 0
	},
	{
		name:  "assumedSize",
		query: `{ categories { name } }`,
		want:  3, // 3 × 1
	},
	{
		name:  "assumedSize when no slicing argument is given",
		query: `{ reviews { id } }`,
		want:  100, // 50 × 2
	},

	// --- weights: arguments, input fields, String weights ---
	{
		name:  "argument and input-field @cost, once per field",
		query: `{ filtered(filter: {minPrice: 5}, first: 2) { id } }`,
		// argCost filter 2 + minPrice 3 = 5; n = 2; 5 + 2×1
		want: 7,
	},
	{
		name:  "nested input field @cost",
		query: `{ filtered(filter: {minPrice: 5, category: {name: "x"}, max: 7}) { id } }`,
		// argCost 2+3+1 = 6; n = max(first default 4, filter.max 7) = 7; 6 + 7
		want: 13,
	},
	{
		name:  "input object from a variable",
		query: `query($f: ProductFilter) { filtered(filter: $f) { id } }`,
		vars:  map[string]any{"f": map[string]any{"minPrice": 1, "max": 3}},
		// argCost 2+3 = 5; n = max(4, 3) = 4; 5 + 4
		want: 9,
	},
	{
		name:  "no argument, no argument cost",
		query: `{ filtered { id } }`,
		want:  4, // n = first default 4
	},
	{
		name:  "each element of an input list pays its fields",
		query: `{ bulk(filters: [{minPrice: 1}, {minPrice: 2, category: {name: "a"}}]) { id } }`,
		// argCost 3 + 3+1 = 7; assumedSize 1: 7 + 1
		want: 8,
	},
	{
		name:  "unset variable inside an input object is absent",
		query: `query($m: Int) { filtered(filter: {minPrice: $m}, first: 1) { id } }`,
		// argCost filter 2 only; 2 + 1
		want: 3,
	},
	{
		name:  "variable inside an input object",
		query: `query($m: Int) { filtered(filter: {minPrice: $m}, first: 1) { id } }`,
		vars:  map[string]any{"m": 1},
		// 2+3 + 1
		want: 6,
	},
	{
		name:  "String weights on a type and a field",
		query: `{ shop { name } cheapShop { name } }`,
		// Shop "5"; cheapShop field "1" beats the type
		want: 6,
	},
	{
		name:  "scalar and enum weights, field weight",
		query: `{ money currency expensive }`,
		// Money "2" + Currency 1 + expensive 7
		want: 10,
	},

	// --- requireOneSlicingArgument ---
	{
		name:      "requireOneSlicingArgument: none given",
		query:     `{ products { totalCount } }`,
		wantField: "Query.products",
		wantPath:  "products",
	},
	{
		name:      "requireOneSlicingArgument: two given",
		query:     `{ products(first: 1, last: 2) { totalCount } }`,
		wantField: "Query.products",
		wantPath:  "products",
	},
	{
		name:      "requireOneSlicingArgument: null is no value",
		query:     `query($n: Int) { products(first: $n) { totalCount } }`,
		vars:      map[string]any{"n": nil},
		wantField: "Query.products",
		wantPath:  "products",
	},
	{
		name:      "requireOneSlicingArgument: null beats the schema default",
		query:     `{ search(term: "x", limit: null) { __typename } }`,
		wantField: "Query.search",
		wantPath:  "search",
	},
	{
		name:      "requireOneSlicingArgument: nested field, path through an alias",
		query:     `{ p: product(id: "1") { variants { id } } }`,
		wantField: "Product.variants",
		wantPath:  "p.variants",
	},
	{
		name:  "requireOneSlicingArgument false: none given",
		query: `{ reviews { id } }`,
		want:  100, // assumedSize 50 × 2
	},

	// --- saturation ---
	{
		name:  "saturates at 2^53-1",
		query: `{ products(first: 2147483647) { nodes { variants(first: 2147483647) { id } } } }`,
		// nodes (2^31-1)×(1+(2^31-1)) ≈ 4.6e18 > 2^53-1
		want: complexity.MaxCost,
	},
}

func TestAnalyzeRequested(t *testing.T) {
	ast := loadAST(t)
	for _, tc := range requestedCases {
		t.Run(tc.name, func(t *testing.T) {
			s := testSchema(t, tc.opts...)
			doc := parseValid(t, ast, tc.query)
			got, err := s.Analyze(doc, "", tc.vars)
			if tc.wantField != "" {
				var opErr *complexity.OperationError
				if !errors.As(err, &opErr) {
					t.Fatalf("Analyze error = %v, want an *OperationError", err)
				}
				if opErr.Code != complexity.CodeSlicingArgumentRequired || opErr.Field != tc.wantField || opErr.Path != tc.wantPath {
					t.Errorf("error = {%s %s %s}, want {%s %s %s}", opErr.Code, opErr.Field, opErr.Path,
						complexity.CodeSlicingArgumentRequired, tc.wantField, tc.wantPath)
				}
				return
			}
			if err != nil {
				t.Fatalf("Analyze: %v", err)
			}
			if got.Cost != tc.want {
				t.Errorf("cost = %d, want %d", got.Cost, tc.want)
			}
			// The same operation through AnalyzeOperation (gqlgen's path) prices the same.
			op, err := s.AnalyzeOperation(doc.Operations[0], tc.vars)
			if err != nil || op.Cost != got.Cost {
				t.Errorf("AnalyzeOperation = %d, %v; want %d", op.Cost, err, got.Cost)
			}
		})
	}
}

// TestAnalyzeOnUnvalidatedDocument: Analyze resolves names itself, so a parsed but not
// validated document prices the same as a validated one.
func TestAnalyzeOnUnvalidatedDocument(t *testing.T) {
	s := testSchema(t)
	for _, tc := range requestedCases {
		if tc.wantField != "" || tc.opts != nil {
			continue
		}
		doc := mustParse(t, tc.query)
		got, err := s.Analyze(doc, "", tc.vars)
		if err != nil || got.Cost != tc.want {
			t.Errorf("%s: Analyze = %d, %v; want %d", tc.name, got.Cost, err, tc.want)
		}
	}
}

func TestAnalyzeLimits(t *testing.T) {
	s := testSchema(t)
	query := `query { a: product(id: "1") { ...PF } products(first: 2) { nodes { ...PF } } }
		fragment PF on Product { id v: variants(first: 1) { id } }`
	got, err := s.Analyze(parseValid(t, loadAST(t), query), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// fields: a, products, nodes + 2 × PF (id, v, v.id) = 3 + 6; aliases: a + 2 × v;
	// fragments spread one level deep
	want := complexity.Limits{Depth: 4, Aliases: 3, Fields: 9, FragmentDepth: 1}
	if got.Limits != want {
		t.Errorf("limits = %+v, want %+v", got.Limits, want)
	}
}

func TestAnalyzeOperationSelection(t *testing.T) {
	s := testSchema(t)
	doc := parseValid(t, loadAST(t), `query A { expensive } query B { money }`)
	for name, want := range map[string]int64{"A": 7, "B": 2} {
		got, err := s.Analyze(doc, name, nil)
		if err != nil || got.Cost != want {
			t.Errorf("Analyze(%s) = %d, %v; want %d", name, got.Cost, err, want)
		}
	}
	for _, name := range []string{"", "C"} {
		if _, err := s.Analyze(doc, name, nil); !errors.Is(err, complexity.ErrUnknownOperation) {
			t.Errorf("Analyze(%q) error = %v, want ErrUnknownOperation", name, err)
		}
	}
}

func TestAnalyzeErrorsOnBrokenDocuments(t *testing.T) {
	s := testSchema(t)
	for _, tc := range []struct {
		name, query string
		is          error // nil: any error
	}{
		{"fragment cycle", `{ product(id: "1") { ...A } } fragment A on Product { ...B } fragment B on Product { ...A }`, complexity.ErrFragmentCycle},
		{"fragment cycle through a field", `{ product(id: "1") { ...A } } fragment A on Product { related(first: 1) { ...A } }`, complexity.ErrFragmentCycle},
		{"unknown field", `{ nope }`, nil},
		{"unknown fragment", `{ product(id: "1") { ...Nope } }`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Analyze(mustParse(t, tc.query), "", nil)
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("error = %v, want %v", err, tc.is)
			}
		})
	}
}

func TestBreakdown(t *testing.T) {
	s := testSchema(t)
	doc := parseValid(t, loadAST(t), `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`)
	got, err := s.Analyze(doc, "", nil, complexity.WithBreakdown())
	if err != nil {
		t.Fatal(err)
	}
	want := []complexity.FieldCost{
		{Path: "products", DefinedWeight: 1, RequestedTotal: 61},
		{Path: "products.nodes", DefinedWeight: 1, RequestedTotal: 60},
		{Path: "products.nodes.id", DefinedWeight: 0, RequestedTotal: 0},
		{Path: "products.nodes.title", DefinedWeight: 0, RequestedTotal: 0},
		{Path: "products.nodes.variants", DefinedWeight: 1, RequestedTotal: 50}, // 5 per node × 10
		{Path: "products.nodes.variants.id", DefinedWeight: 0, RequestedTotal: 0},
	}
	if len(got.Breakdown) != len(want) {
		t.Fatalf("breakdown = %+v, want %+v", got.Breakdown, want)
	}
	for i := range want {
		if got.Breakdown[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got.Breakdown[i], want[i])
		}
	}
	plain, _ := s.Analyze(doc, "", nil)
	if plain.Breakdown != nil {
		t.Errorf("breakdown computed without WithBreakdown")
	}
}

func TestBreakdownAggregatesAndCaps(t *testing.T) {
	s := testSchema(t)
	// A fragment spread under two paths, and a repeated field, add up per path.
	doc := parseValid(t, loadAST(t), `{ a: product(id: "1") { ...PF } b: product(id: "2") { ...PF price } }
		fragment PF on Product { price }`)
	got, err := s.Analyze(doc, "", nil, complexity.WithBreakdown())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"a": 3, "a.price": 2, "b": 5, "b.price": 4}
	if len(got.Breakdown) != len(want) {
		t.Fatalf("breakdown = %+v", got.Breakdown)
	}
	var roots int64
	for _, e := range got.Breakdown {
		if want[e.Path] != e.RequestedTotal {
			t.Errorf("%s = %d, want %d", e.Path, e.RequestedTotal, want[e.Path])
		}
		if e.Path == "a" || e.Path == "b" {
			roots += e.RequestedTotal
		}
	}
	if roots != got.Cost {
		t.Errorf("root entries add to %d, cost is %d", roots, got.Cost)
	}

	// More distinct paths than MaxBreakdown: capped and flagged.
	big := complexity.PathFanOutQuery(12) // ~2^13 distinct paths
	res, err := s.Analyze(mustParse(t, big), "", nil, complexity.WithBreakdown())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Breakdown) != complexity.MaxBreakdown || !res.BreakdownTruncated {
		t.Errorf("breakdown has %d entries, truncated %v; want %d, true", len(res.Breakdown), res.BreakdownTruncated, complexity.MaxBreakdown)
	}
}
