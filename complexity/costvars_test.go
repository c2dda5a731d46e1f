package complexity_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
)

// costVariableCases: queries against the cost tests' schema with variables in places
// that price and in places that do not.
var costVariableCases = []struct {
	name  string
	query string
	want  []string
}{
	{
		name:  "slicing argument and skip, not the id",
		query: `query($id: ID!, $n: Int, $s: Boolean!) { product(id: $id) { variants(first: $n) @skip(if: $s) { id } } }`,
		want:  []string{"n", "s"},
	},
	{
		name:  "a slicing argument with a default, not the search term",
		query: `query($t: String!, $l: Int) { search(term: $t, limit: $l) { ... on Product { title } } }`,
		want:  []string{"l"},
	},
	{
		name:  "a weighted input object argument, not a cursor",
		query: `query($f: ProductFilter, $first: Int, $after: String) { filtered(filter: $f, first: $first) { id } reviews(first: $first, after: $after) { id } }`,
		want:  []string{"f", "first"},
	},
	{
		name:  "variables inside an input object literal",
		query: `query($m: Int, $x: Int) { filtered(filter: {minPrice: $m, max: $x}) { id } }`,
		want:  []string{"m", "x"},
	},
	{
		name: "inside a fragment, once however often it is spread",
		query: `query($a: Boolean!, $n: Int, $id: ID!) { products(first: 3) { nodes { ...F } } product(id: $id) { ...F } }
			fragment F on Product { variants(first: $n) @include(if: $a) { id } related(first: 1) { id } }`,
		want: []string{"a", "n"},
	},
	{
		name:  "a mutation input with a weighted field, not the id",
		query: `mutation($in: ProductInput!, $id: ID!) { createProduct(input: $in) { id } deleteProduct(id: $id) }`,
		want:  []string{"in"},
	},
	{
		name:  "a list argument that is not a slicing argument",
		query: `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`,
		want:  []string{},
	},
	{
		name:  "under an abstract type, per possible type",
		query: `query($id: ID!, $n: Int) { node(id: $id) { ... on Product { variants(first: $n) { id } } } }`,
		want:  []string{"n"},
	},
	{
		name:  "introspection arguments do not price",
		query: `query($name: String!) { __type(name: $name) { name } }`,
		want:  []string{},
	},
}

func TestCostVariables(t *testing.T) {
	s, schemaAST := testSchema(t), loadAST(t)
	for _, tc := range costVariableCases {
		t.Run(tc.name, func(t *testing.T) {
			doc := parseValid(t, schemaAST, tc.query)
			if got := s.CostVariables(doc.Operations[0]); !slices.Equal(got, tc.want) {
				t.Errorf("CostVariables = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("input_object_cost makes every input object argument count", func(t *testing.T) {
		const sdl = `type Query { a(r: R, id: ID): Int } input R { min: Int }`
		query := `query($r: R, $id: ID) { a(r: $r, id: $id) }`
		for _, tc := range []struct {
			cost int
			want []string
		}{{0, []string{}}, {1, []string{"r"}}} {
			schemaAST, s := newTestSchema(t, sdl, complexity.WithInputObjectCost(tc.cost))
			doc := parseValid(t, schemaAST, query)
			if got := s.CostVariables(doc.Operations[0]); !slices.Equal(got, tc.want) {
				t.Errorf("input_object_cost %d: CostVariables = %q, want %q", tc.cost, got, tc.want)
			}
		}
	})
	t.Run("an unlinked fragment spread lists every variable", func(t *testing.T) {
		doc := mustParse(t, `query($id: ID!, $n: Int) { product(id: $id) { ...F } } fragment F on Product { variants(first: $n) { id } }`)
		if got, want := s.CostVariables(doc.Operations[0]), []string{"id", "n"}; !slices.Equal(got, want) {
			t.Errorf("CostVariables = %q, want %q", got, want)
		}
	})
}

// TestCostVariablesDecidePrice is the property a price cache relies on: for random
// variable values that agree on CostVariables, and differ anywhere else, the price (or
// the error) is the same. The values are random JSON of any shape, so wrong types, nulls
// and absent variables are covered; the seed is fixed so a failure reproduces.
func TestCostVariablesDecidePrice(t *testing.T) {
	type corpus struct {
		name    string
		ast     *ast.Schema
		schema  *complexity.Schema
		queries []string
	}
	var corpora []corpus
	{
		var queries []string
		for _, tc := range requestedCases {
			queries = append(queries, tc.query)
		}
		for _, tc := range costVariableCases {
			queries = append(queries, tc.query)
		}
		queries = append(queries,
			`query($s: Boolean!, $i: Boolean = true, $n: Int = 3) { products(first: $n) @skip(if: $s) { nodes { id } } reviews(first: $n) @include(if: $i) { id } }`,
			`query($f: [ProductFilter!], $c: String) { bulk(filters: $f) { id title } filtered(filter: {category: {name: $c}}) { id } }`,
		)
		corpora = append(corpora, corpus{"testdata", loadAST(t), testSchema(t), queries})
	}
	{
		a, s := newTestSchema(t, slicingSDL)
		corpora = append(corpora, corpus{"slicing", a, s, []string{
			`query($ids: [ID!], $t: String) { byIds(ids: $ids) { id price } search(input: {ids: $ids, term: $t}) { id } }`,
			`query($in: SearchInput!, $d: Deep, $first: Int) { search(input: $in) { id } deep(input: $d) { price } lookup(skus: ["a"], first: $first) { id } }`,
			`query($ids: [ID!]) { strict(ids: $ids) { id } }`,
		}})
	}
	{
		a, s := newTestSchema(t, inputObjectSDL, complexity.WithInputObjectCost(2))
		corpora = append(corpora, corpus{"input objects", a, s, []string{
			`query($f: Filter, $g: Filter!, $id: ID, $n: Int) { find(filter: $f, first: $n) { id } bulk(filters: [$g, {tags: [{name: "x"}]}]) scalarArg(id: $id) weighted(filter: $f) }`,
		}})
	}
	{
		a, s := newTestSchema(t, interfaceSDL)
		corpora = append(corpora, corpus{"interfaces", a, s, []string{
			`query($n: Int, $l: Int, $s: Boolean!) { media { related(first: $n) { title } ... on Book { reviews(limit: $l) @skip(if: $s) { stars } } } }`,
		}})
	}

	rng := rand.New(rand.NewPCG(1, 2))
	varied := 0 // trials where re-rolling the cost variables too changed the price
	for _, c := range corpora {
		for qi, query := range c.queries {
			doc := parseValid(t, c.ast, query)
			op := doc.Operations[0]
			costVars := c.schema.CostVariables(op)
			for trial := range 60 {
				base := randomVariables(rng, op, nil, nil)
				other := randomVariables(rng, op, costVars, base)
				got1, err1 := c.schema.Analyze(doc, "", base)
				got2, err2 := c.schema.AnalyzeOperation(op, other)
				if got1.Cost != got2.Cost || fmt.Sprint(err1) != fmt.Sprint(err2) {
					t.Fatalf("%s query %d trial %d: %s\ncost variables %q\nvariables %v: %d, %v\nvariables %v: %d, %v",
						c.name, qi, trial, query, costVars, base, got1.Cost, err1, other, got2.Cost, err2)
				}
				if got3, err3 := c.schema.Analyze(doc, "", randomVariables(rng, op, nil, nil)); got3.Cost != got1.Cost || fmt.Sprint(err3) != fmt.Sprint(err1) {
					varied++
				}
			}
		}
	}
	// The values must be able to move prices at all, or agreeing on them proves nothing.
	if varied < 100 {
		t.Errorf("only %d trials changed price when every variable was re-rolled", varied)
	}
}

// randomVariables gives each variable op declares a random value (or leaves it out),
// except those in keep, which take their value (or absence) from base.
func randomVariables(rng *rand.Rand, op *ast.OperationDefinition, keep []string, base map[string]any) map[string]any {
	vars := map[string]any{}
	for _, v := range op.VariableDefinitions {
		name := v.Variable
		if slices.Contains(keep, name) {
			if x, ok := base[name]; ok {
				vars[name] = x
			}
			continue
		}
		if rng.IntN(5) == 0 {
			continue // absent
		}
		vars[name] = randomValue(rng, 2)
	}
	return vars
}

var randomKeys = strings.Fields("first max minPrice category name page ids count a b range tags term price title")

func randomValue(rng *rand.Rand, depth int) any {
	kinds := 6
	if depth > 0 {
		kinds = 8
	}
	switch rng.IntN(kinds) {
	case 0:
		return nil
	case 1:
		return rng.IntN(25) - 4
	case 2:
		return float64(rng.IntN(40))/4 - 2
	case 3:
		return rng.IntN(2) == 0
	case 4:
		return fmt.Sprintf("s%d", rng.IntN(10))
	case 5:
		return int64(rng.IntN(1 << 20))
	case 6:
		list := make([]any, rng.IntN(5))
		for i := range list {
			list[i] = randomValue(rng, depth-1)
		}
		return list
	default:
		m := map[string]any{}
		for range rng.IntN(4) {
			m[randomKeys[rng.IntN(len(randomKeys))]] = randomValue(rng, depth-1)
		}
		return m
	}
}
