package complexity_test

import (
	"testing"

	"github.com/costgate/costgate/complexity"
)

// inputObjectSDL has input objects nested and in lists; only Filter.name carries @cost.
const inputObjectSDL = `
type Query {
  find(filter: Filter, first: Int): [Item!]! @listSize(slicingArguments: ["first"], requireOneSlicingArgument: false)
  bulk(filters: [Filter!]!): Int
  weighted(filter: Filter @cost(weight: 4)): Int
  scalarArg(id: ID): Int
}
input Filter { range: Range tags: [Tag!] name: String @cost(weight: 2) }
input Range { min: Int max: Int }
input Tag { name: String }
type Item { id: ID }
`

func TestInputObjectCost(t *testing.T) {
	for _, tc := range []struct {
		cost  int
		cases []priceCase
	}{
		{
			cost: 0, // the default: only @cost weights count
			cases: []priceCase{
				// n = 3: 0 + 3 × 1
				{name: "nested object", query: `{ find(filter: {range: {min: 1}}, first: 3) { id } }`, want: 3},
				// name 2 + n 2 × 1
				{name: "weighted field", query: `{ find(filter: {tags: [{name: "a"}, {name: "b"}], name: "x"}, first: 2) { id } }`, want: 4},
				{name: "list of objects", query: `{ bulk(filters: [{}, {range: {}}]) }`, want: 0},
				// argument weight 4
				{name: "weighted argument", query: `{ weighted(filter: {}) }`, want: 4},
			},
		},
		{
			cost: 1, // as Apollo and IBM count
			cases: []priceCase{
				// Filter 1 + Range 1 = 2; 2 + 3 × 1
				{name: "nested object", query: `{ find(filter: {range: {min: 1}}, first: 3) { id } }`, want: 5},
				// Filter 1 + Tag 1 + Tag 1 + name 2 = 5; 5 + 2 × 1
				{name: "objects in a list inside an object", query: `{ find(filter: {tags: [{name: "a"}, {name: "b"}], name: "x"}, first: 2) { id } }`, want: 7},
				// Filter 1 + (Filter 1 + Range 1); the Int costs 0
				{name: "list of objects", query: `{ bulk(filters: [{}, {range: {}}]) }`, want: 3},
				// argument weight 4 + Filter 1 (Apollo would count 4: its weight replaces the 1)
				{name: "weighted argument", query: `{ weighted(filter: {}) }`, want: 5},
				{name: "scalar argument", query: `{ scalarArg(id: "x") }`, want: 0},
				// once per field, not per item: Filter 1 + 10 × 1
				{name: "not multiplied by the list size", query: `{ find(filter: {}, first: 10) { id } }`, want: 11},
				// null is no value: 0 + 1 × 1
				{name: "null literal", query: `{ find(filter: null, first: 1) { id } }`, want: 1},
				// Filter 1 + Range 1; 2 + 1 × 1
				{
					name: "object from a variable", query: `query($f: Filter) { find(filter: $f, first: 1) { id } }`,
					vars: map[string]any{"f": map[string]any{"range": map[string]any{"max": 2}}}, want: 3,
				},
				{
					name: "null variable", query: `query($f: Filter) { find(filter: $f, first: 1) { id } }`,
					vars: map[string]any{"f": nil}, want: 1,
				},
				{name: "absent variable", query: `query($f: Filter) { find(filter: $f, first: 1) { id } }`, want: 1},
				// Filter 1 + Tag 1 (the variable's list holds one object) + Tag 1 (a literal); 3 + 1 × 1
				{
					name: "variables inside a literal", query: `query($t: Tag!) { find(filter: {tags: [$t, {name: "b"}]}, first: 1) { id } }`,
					vars: map[string]any{"t": map[string]any{"name": "a"}}, want: 4,
				},
			},
		},
		{
			cost: 5,
			cases: []priceCase{
				// 5 × (Filter + Filter + Range)
				{name: "list of objects", query: `{ bulk(filters: [{}, {range: {}}]) }`, want: 15},
			},
		},
	} {
		schemaAST, s := newTestSchema(t, inputObjectSDL, complexity.WithInputObjectCost(tc.cost))
		t.Run("input_object_cost="+itoa(tc.cost), func(t *testing.T) {
			checkPrices(t, schemaAST, s, tc.cases)
		})
	}
}

// TestInputObjectCostActual: the actual cost counts the arguments as the request does.
func TestInputObjectCostActual(t *testing.T) {
	schemaAST, s := newTestSchema(t, inputObjectSDL, complexity.WithInputObjectCost(1))
	doc := parseValid(t, schemaAST, `{ find(filter: {range: {min: 1}}, first: 3) { id } }`)
	// Filter 1 + Range 1 + one item returned × 1
	got, err := s.ActualJSON(doc.Operations[0], nil, []byte(`{"find":[{"id":"1"}]}`))
	if err != nil || got != 3 {
		t.Errorf("ActualJSON = %d, %v; want 3", got, err)
	}
	if got, err := streamActual(s, doc.Operations[0], nil, []byte(`{"find":[{"id":"1"}]}`)); err != nil || got != 3 {
		t.Errorf("streamed = %d, %v; want 3", got, err)
	}
}
