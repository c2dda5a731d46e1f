package complexity_test

import "testing"

// sizedSDL names lists below the connection's own fields in sizedFields: with dots
// ("page.items") and in Apollo's selection syntax ("sections { rows { cells } }"). The
// list at the end of each path takes the parent's size; the parent counts once.
const sizedSDL = `
type Query {
  feed(first: Int = 4): Feed!
    @listSize(slicingArguments: ["first"], sizedFields: ["page.items", "sections { rows { cells } }"], requireOneSlicingArgument: false)
  groups(first: Int): GroupConnection!
    @listSize(slicingArguments: ["first"], sizedFields: ["edges { members }"], requireOneSlicingArgument: false)
  both(first: Int): Page!
    @listSize(slicingArguments: ["first"], sizedFields: ["items", "next { items other }"], requireOneSlicingArgument: false)
}
type Feed { page: Page sections: Section total: Int }
type Page { items: [Item!]! other: [Item!]! next: Page }
type Section { rows: Rows }
type Rows { cells: [Cell!]! }
type GroupConnection { edges: [Edge!]! }
type Edge { members: [Item!]! }
type Item { id: ID! price: Int @cost(weight: 3) }
type Cell { v: Int }
`

func TestNestedSizedFields(t *testing.T) {
	schemaAST, s := newTestSchema(t, sizedSDL)
	checkPrices(t, schemaAST, s, []priceCase{
		{
			name:  "dotted path",
			query: `{ feed(first: 5) { page { items { id price } } } }`,
			// items 5 × (1 + 0 + 3) = 20; page 1 × (1 + 20) = 21; feed counts once: 1 + 21
			want: 22,
		},
		{
			name:  "dotted path, the slicing argument's default",
			query: `{ feed { page { items { id } } } }`,
			// first = 4: items 4 × 1 = 4; page 1 + 4 = 5; feed 1 + 5
			want: 6,
		},
		{
			name:  "a list beside the path is not sized",
			query: `{ feed(first: 5) { page { other { id } } } }`,
			// other: default_list_size 10 × 1 = 10; page 1 + 10 = 11; feed 1 + 11
			want: 12,
		},
		{
			name:  "selection syntax, three levels",
			query: `{ feed(first: 3) { sections { rows { cells { v } } } } }`,
			// cells 3 × 1 = 3; rows 1 + 3 = 4; sections 1 + 4 = 5; feed 1 + 5
			want: 6,
		},
		{
			name:  "both paths, from a variable",
			query: `query($n: Int) { feed(first: $n) { total page { items { id } } sections { rows { cells { v } } } } }`,
			vars:  map[string]any{"n": 7},
			// items 7, page 8; cells 7, rows 8, sections 9; feed 1 + 0 + 8 + 9
			want: 18,
		},
		{
			name: "the path through fragments",
			query: `{ feed(first: 2) { ...F } }
				fragment F on Feed { page { ...P } }
				fragment P on Page { items { price } }`,
			// items 2 × (1 + 3) = 8; page 1 + 8 = 9; feed 1 + 9
			want: 10,
		},
		{
			name: "one fragment under two sizes",
			query: `{ a: feed(first: 2) { page { ...P } } b: feed(first: 6) { page { ...P } } }
				fragment P on Page { items { id } }`,
			// a: 1 + (1 + 2 × 1) = 4; b: 1 + (1 + 6 × 1) = 8 (the memo is keyed by the size)
			want: 12,
		},
		{
			name:  "an intermediate list keeps its own size",
			query: `{ groups(first: 3) { edges { members { id } } } }`,
			// members 3 × 1 = 3 per edge; edges (not sized: default 10) 10 × (1 + 3) = 40; groups 1 + 40
			want: 41,
		},
		{
			name:  "several ends under one step, and a level off the path",
			query: `{ both(first: 2) { items { id } next { items { id } other { id } next { items { id } } } } }`,
			// items 2; next: items 2 + other 2, next.next (not on a path) 1 + items 10 × 1 = 11;
			// next 1 + 2 + 2 + 11 = 16; both 1 + 2 + 16
			want: 19,
		},
	})
}
