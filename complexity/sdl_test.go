package complexity_test

import (
	"strings"
	"testing"

	"github.com/costgate/costgate/complexity"
)

// sdlBody is the worked example of docs/graphql.md's schema with its directives written @C and @L,
// to be named per case; the worked example query costs 61 (plus expensive's 7).
const sdlBody = `
type Query {
  products(first: Int): ProductConnection! @L(slicingArguments: ["first"], sizedFields: ["nodes"])
  expensive: Int @C(weight: 7)
}
type ProductConnection { nodes: [Product!]! }
type Product { id: ID! title: String variants(first: Int): [Variant!]! @L(slicingArguments: ["first"]) }
type Variant { id: ID! }
`

const sdlQuery = `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } expensive }`

func named(cost, listSize string) string {
	return strings.NewReplacer("@C(", "@"+cost+"(", "@L(", "@"+listSize+"(").Replace(sdlBody)
}

func TestLoadSDL(t *testing.T) {
	for _, tc := range []struct {
		name, sdl string
	}{
		{"directives used, not declared", named("cost", "listSize")},
		{
			"one declared in the IBM form, the other not",
			`directive @cost(weight: String!) on FIELD_DEFINITION | OBJECT` + named("cost", "listSize"),
		},
		{
			"both declared",
			complexity.DirectivesSDL + named("cost", "listSize"),
		},
		{
			"linked and renamed, nothing declared",
			`extend schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: [{name: "@cost", as: "@renamedCost"}, "@listSize"])` +
				named("renamedCost", "listSize"),
		},
		{
			"linked without import: @cost and @cost__listSize",
			`schema @link(url: "https://specs.apollo.dev/cost/v0.1") { query: Query }` + named("cost", "cost__listSize"),
		},
		{
			"a federation subgraph: linked directives and types declared for it",
			`extend schema @link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key", "@shareable", "@cost", "@listSize", "FieldSet"])
			directive @custom(fields: FieldSet) on OBJECT
			type Variant2 @key(fields: "id") @key(fields: "sku", resolvable: false) @shareable @custom(fields: "id") { id: ID! sku: String @federation__external }` +
				named("cost", "listSize"),
		},
		{
			"a supergraph that declares @link itself",
			`schema @link(url: "https://specs.apollo.dev/link/v1.0") @link(url: "https://specs.apollo.dev/cost/v0.1", import: ["@listSize"]) { query: Query }
			directive @link(url: String, as: String, for: link__Purpose, import: [link__Import]) repeatable on SCHEMA
			scalar link__Import
			enum link__Purpose { SECURITY EXECUTION }` + named("cost", "listSize"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := complexity.LoadSDL("schema.graphql", tc.sdl)
			if err != nil {
				t.Fatalf("LoadSDL: %v", err)
			}
			got, err := s.Analyze(parseValid(t, s.AST(), sdlQuery), "", nil)
			// 1 × (1 + 10 × (1 + 0 + 0 + 5 × (1 + 0))) = 61; expensive 7
			if err != nil || got.Cost != 68 {
				t.Errorf("cost = %d, %v; want 68", got.Cost, err)
			}
		})
	}
}

func TestLoadSDLErrors(t *testing.T) {
	for _, tc := range []struct {
		name, sdl, want string
	}{
		{
			name: "a cost spec costgate does not understand",
			sdl:  `extend schema @link(url: "https://specs.apollo.dev/cost/v1.0", import: ["@cost"])` + named("cost", "listSize"),
			want: `complexity: schema: @link(url: "https://specs.apollo.dev/cost/v1.0"): costgate understands only https://specs.apollo.dev/cost/v0.1; refusing the schema rather than ignoring its cost rules`,
		},
		{
			name: "a directive no link brings in",
			sdl:  `type Query { a: Int @nope }`,
			want: `parse schema.graphql: schema.graphql:1:22: Undefined directive nope.`,
		},
		{
			name: "a syntax error",
			sdl:  `type Query {`,
			want: `parse schema.graphql: schema.graphql:1:13: Expected Name, found <EOF>`,
		},
		{
			name: "a bad weight",
			sdl:  `type Query { a: Int @cost(weight: -3) }`,
			want: `complexity: Query.a: @cost(weight: -3): weight must be a non-negative integer`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := complexity.LoadSDL("schema.graphql", tc.sdl)
			if err == nil || err.Error() != tc.want {
				t.Errorf("LoadSDL error = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestLoadSDLOptions: the options reach NewSchema.
func TestLoadSDLOptions(t *testing.T) {
	s, err := complexity.LoadSDL("schema.graphql", `type Query { items: [Int] }`, complexity.WithDefaultListSize(3))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Analyze(parseValid(t, s.AST(), `{ items }`), "", nil)
	if err != nil || got.Cost != 0 { // 3 × 0: scalars are free; the option was accepted
		t.Errorf("cost = %d, %v; want 0", got.Cost, err)
	}
	if _, err := complexity.LoadSDL("schema.graphql", `type Query { a: Int }`, complexity.WithDefaultListSize(-1)); err == nil {
		t.Error("LoadSDL with a negative default list size: no error")
	}
}
