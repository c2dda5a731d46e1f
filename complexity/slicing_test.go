package complexity_test

import "testing"

// slicingSDL has list-typed slicing arguments (their length is the size, as Apollo Router
// reads them) and slicing arguments that are paths into input objects. An Item costs 1,
// and 1 + 2 = 3 when its price is selected.
const slicingSDL = `
type Query {
  byIds(ids: [ID!]): [Item!]!
    @listSize(slicingArguments: ["ids"], assumedSize: 40, requireOneSlicingArgument: false)
  lookup(skus: [String!]!, first: Int): [Item!]!
    @listSize(slicingArguments: ["skus", "first"], requireOneSlicingArgument: false)
  strict(ids: [ID!]): [Item!]! @listSize(slicingArguments: ["ids"])
  search(input: SearchInput!): [Item!]!
    @listSize(slicingArguments: ["input.page.first", "input.ids"], requireOneSlicingArgument: false)
  deep(input: Deep): [Item!]!
    @listSize(slicingArguments: ["input.a.b.count"], assumedSize: 7, requireOneSlicingArgument: false)
  strictPath(input: SearchInput!): [Item!]! @listSize(slicingArguments: ["input.page.first"])
}
type Item { id: ID! price: Int @cost(weight: 2) }
input SearchInput { page: Page ids: [ID!] term: String }
input Page { first: Int after: String }
input Deep { a: DeepA }
input DeepA { b: DeepB }
input DeepB { count: Int }
`

func TestListSlicingArguments(t *testing.T) {
	schemaAST, s := newTestSchema(t, slicingSDL)
	checkPrices(t, schemaAST, s, []priceCase{
		{
			name:  "literal list of three",
			query: `{ byIds(ids: ["a", "b", "c"]) { id price } }`,
			// n = len = 3; 3 × (1 + 0 + 2)
			want: 9,
		},
		{
			name:  "empty literal list",
			query: `{ byIds(ids: []) { id price } }`,
			// n = 0; 0 × 3
			want: 0,
		},
		{
			name:  "list from a variable",
			query: `query($ids: [ID!]) { byIds(ids: $ids) { id } }`,
			vars:  map[string]any{"ids": []any{"a", "b", "c", "d", "e"}},
			// n = 5; 5 × 1
			want: 5,
		},
		{
			name:  "null variable is no value",
			query: `query($ids: [ID!]) { byIds(ids: $ids) { id } }`,
			vars:  map[string]any{"ids": nil},
			// no slicing value: assumedSize 40; 40 × 1
			want: 40,
		},
		{
			name:  "absent variable is no value",
			query: `query($ids: [ID!]) { byIds(ids: $ids) { id } }`,
			// as above
			want: 40,
		},
		{
			name:  "a single value is a list of one",
			query: `{ byIds(ids: "a") { id price } }`,
			// input coercion makes ["a"]: 1 × 3
			want: 3,
		},
		{
			name:  "a single value in a list variable is a list of one",
			query: `query($ids: [ID!]) { byIds(ids: $ids) { id price } }`,
			vars:  map[string]any{"ids": "a"},
			want:  3, // as above
		},
		{
			name:  "variables inside a literal list",
			query: `query($a: ID!, $b: ID!) { byIds(ids: [$a, $b]) { id } }`,
			// the list has two items whatever they are: 2 × 1
			want: 2,
		},
		{
			name:  "the largest of a list length and an Int",
			query: `{ lookup(skus: ["x", "y"], first: 6) { id } }`,
			// n = max(2, 6); 6 × 1
			want: 6,
		},
		{
			name:  "the list longer than the Int",
			query: `{ lookup(skus: ["x", "y", "z", "w"], first: 1) { price } }`,
			// n = max(4, 1); 4 × (1 + 2)
			want: 12,
		},
		{
			name:  "requireOneSlicingArgument: a list counts as one",
			query: `{ strict(ids: ["a"]) { id } }`,
			want:  1, // 1 × 1
		},
		{
			name:      "requireOneSlicingArgument: none given",
			query:     `{ strict { id } }`,
			wantField: "Query.strict",
		},
		{
			name:      "requireOneSlicingArgument: null is no value",
			query:     `{ strict(ids: null) { id } }`,
			wantField: "Query.strict",
		},
	})
}

func TestPathSlicingArguments(t *testing.T) {
	schemaAST, s := newTestSchema(t, slicingSDL)
	checkPrices(t, schemaAST, s, []priceCase{
		{
			name:  "Int at the end of a path",
			query: `{ search(input: {page: {first: 10}}) { id } }`,
			// n = input.page.first = 10; 10 × 1
			want: 10,
		},
		{
			name:  "list at the end of a path",
			query: `{ search(input: {ids: ["a", "b"]}) { id price } }`,
			// n = len(input.ids) = 2; 2 × 3
			want: 6,
		},
		{
			name:  "both paths from a variable: the largest",
			query: `query($in: SearchInput!) { search(input: $in) { id price } }`,
			vars: map[string]any{"in": map[string]any{
				"page": map[string]any{"first": 4},
				"ids":  []any{"a", "b", "c", "d", "e", "f"},
			}},
			// n = max(4, 6); 6 × 3
			want: 18,
		},
		{
			name:  "no value on either path",
			query: `{ search(input: {term: "x"}) { id } }`,
			// no slicing value, no assumedSize: default_list_size 10 × 1
			want: 10,
		},
		{
			name:  "null in the middle of the path",
			query: `{ search(input: {page: null, term: "x"}) { id } }`,
			want:  10, // as above
		},
		{
			name:  "a variable inside the literal, at the end of the path",
			query: `query($n: Int) { search(input: {page: {first: $n}}) { id } }`,
			vars:  map[string]any{"n": 3},
			// n = 3; 3 × 1
			want: 3,
		},
		{
			name:  "three levels deep",
			query: `{ deep(input: {a: {b: {count: 12}}}) { id } }`,
			// n = 12; 12 × 1
			want: 12,
		},
		{
			name:  "three levels deep from a variable",
			query: `query($d: Deep) { deep(input: $d) { price } }`,
			vars:  map[string]any{"d": map[string]any{"a": map[string]any{"b": map[string]any{"count": 3}}}},
			// n = 3; 3 × (1 + 2)
			want: 9,
		},
		{
			name:  "path missing its end: assumedSize",
			query: `{ deep(input: {a: {}}) { id } }`,
			// no slicing value: assumedSize 7 × 1
			want: 7,
		},
		{
			name:  "negative value at the end of a path clamps to 0",
			query: `{ deep(input: {a: {b: {count: -4}}}) { id } }`,
			// n = 0
			want: 0,
		},
		{
			name:  "requireOneSlicingArgument on a path: given",
			query: `{ strictPath(input: {page: {first: 2}}) { id } }`,
			want:  2, // 2 × 1
		},
		{
			name:      "requireOneSlicingArgument on a path: missing",
			query:     `{ strictPath(input: {term: "x"}) { id } }`,
			wantField: "Query.strictPath",
		},
	})
}
