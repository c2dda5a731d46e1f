package complexity_test

import (
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
)

// linkDeclarations declares @link as the link spec v1.0 does, as a supergraph carries it.
const linkDeclarations = `
directive @link(url: String!, as: String, for: link__Purpose, import: [link__Import]) repeatable on SCHEMA
scalar link__Import
enum link__Purpose { SECURITY EXECUTION }
`

// costDeclarations declares the cost directives under the names given.
func costDeclarations(cost, listSize string) string {
	return "\n" + strings.NewReplacer("@cost(", "@"+cost+"(", "@listSize(", "@"+listSize+"(").Replace(complexity.DirectivesSDL)
}

// linkedBody uses the directives under the names given: items(first: 4) { id } costs
// 4 × Item 3 = 12 and expensive 7, 19 in all.
func linkedBody(cost, listSize string) string {
	return strings.NewReplacer("@C", "@"+cost, "@L", "@"+listSize).Replace(`
type Query {
  items(first: Int): [Item!]! @L(slicingArguments: ["first"])
  expensive: Int @C(weight: 7)
}
type Item @C(weight: 3) { id: ID }
`)
}

const linkedQuery = `{ items(first: 4) { id } expensive }`

func loadWithLink(t *testing.T, sdl string) *ast.Schema {
	t.Helper()
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "schema.graphql", Input: linkDeclarations + sdl})
	if err != nil {
		t.Fatalf("gqlparser.LoadSchema: %v", err)
	}
	return s
}

// TestLinkedDirectiveNames: the cost directives are found under the names an @link of the
// cost spec (or of federation) gives them.
func TestLinkedDirectiveNames(t *testing.T) {
	for _, tc := range []struct {
		name, schema   string
		cost, listSize string
	}{
		{
			name:   "renamed on import",
			schema: `schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: [{name: "@cost", as: "@weight"}, {name: "@listSize", as: "@size"}]) { query: Query }`,
			cost:   "weight", listSize: "size",
		},
		{
			name:   "imported under their own names",
			schema: `schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: ["@cost", "@listSize"]) { query: Query }`,
			cost:   "cost", listSize: "listSize",
		},
		{
			// the link spec's rule: the directive named like the spec is @cost, the other namespaced
			name:   "not imported",
			schema: `schema @link(url: "https://specs.apollo.dev/cost/v0.1") { query: Query }`,
			cost:   "cost", listSize: "cost__listSize",
		},
		{
			name:   "only @listSize imported, as Apollo's supergraphs do",
			schema: `schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: ["@listSize"]) { query: Query }`,
			cost:   "cost", listSize: "listSize",
		},
		{
			name:   "the link renames the namespace",
			schema: `schema @link(url: "https://specs.apollo.dev/cost/v0.1", as: "price") { query: Query }`,
			cost:   "price", listSize: "price__listSize",
		},
		{
			name:   "extend schema",
			schema: `extend schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: [{name: "@listSize", as: "@size"}])`,
			cost:   "cost", listSize: "size",
		},
		{
			name:   "both schema and extend schema",
			schema: `schema @link(url: "https://specs.apollo.dev/link/v1.0") { query: Query } extend schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: ["@listSize"])`,
			cost:   "cost", listSize: "listSize",
		},
		{
			name: "imported from federation",
			schema: `extend schema @link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key", {name: "@cost", as: "@w"}, "@listSize"])
				directive @key(fields: String!) repeatable on OBJECT`,
			cost: "w", listSize: "listSize",
		},
		{
			name:   "namespaced by federation",
			schema: `extend schema @link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key"])`,
			cost:   "federation__cost", listSize: "federation__listSize",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sdl := tc.schema + costDeclarations(tc.cost, tc.listSize) + linkedBody(tc.cost, tc.listSize)
			schemaAST := loadWithLink(t, sdl)
			s, err := complexity.NewSchema(schemaAST)
			if err != nil {
				t.Fatalf("NewSchema: %v", err)
			}
			got, err := s.Analyze(parseValid(t, schemaAST, linkedQuery), "", nil)
			// 4 × 3 + 7: both directives were read
			if err != nil || got.Cost != 19 {
				t.Errorf("cost = %d, %v; want 19", got.Cost, err)
			}
		})
	}
}

// TestFederationLinkKeepsPlainNames: a schema that links federation without importing the
// cost directives, but declares @cost and @listSize itself, is still read.
func TestFederationLinkKeepsPlainNames(t *testing.T) {
	sdl := `extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])` +
		costDeclarations("cost", "listSize") + linkedBody("cost", "listSize")
	schemaAST := loadWithLink(t, sdl)
	s, err := complexity.NewSchema(schemaAST)
	if err != nil {
		t.Fatalf("NewSchema: %v", err)
	}
	got, err := s.Analyze(parseValid(t, schemaAST, linkedQuery), "", nil)
	if err != nil || got.Cost != 19 {
		t.Errorf("cost = %d, %v; want 19", got.Cost, err)
	}
}

// TestLinkErrors: cost rules costgate cannot read are refused, naming the link or the field.
func TestLinkErrors(t *testing.T) {
	for _, tc := range []struct {
		name, sdl string
		want      []string
	}{
		{
			name: "unknown version of the cost spec",
			sdl: `schema @link(url: "https://specs.apollo.dev/cost/v0.2", import: ["@cost", "@listSize"]) { query: Query }` +
				costDeclarations("cost", "listSize") + linkedBody("cost", "listSize"),
			want: []string{`complexity: schema: @link(url: "https://specs.apollo.dev/cost/v0.2"): costgate understands only https://specs.apollo.dev/cost/v0.1; refusing the schema rather than ignoring its cost rules`},
		},
		{
			name: "a directive the cost spec does not define",
			sdl: `schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: ["@cost", "@listSize", "@budget"]) { query: Query }` +
				costDeclarations("cost", "listSize") + linkedBody("cost", "listSize"),
			want: []string{`complexity: schema: @link(url: "https://specs.apollo.dev/cost/v0.1"): imports "@budget", which the cost spec v0.1 does not define (only @cost and @listSize)`},
		},
		{
			name: "a type from the cost spec",
			sdl: `schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: ["@cost", "@listSize", "Weight"]) { query: Query }` +
				costDeclarations("cost", "listSize") + linkedBody("cost", "listSize"),
			want: []string{`complexity: schema: @link(url: "https://specs.apollo.dev/cost/v0.1"): imports "Weight", which the cost spec v0.1 does not define (only @cost and @listSize)`},
		},
		{
			name: "a rename without the @",
			sdl: `schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: [{name: "@cost", as: "weight"}]) { query: Query }` +
				costDeclarations("cost", "cost__listSize") + linkedBody("cost", "cost__listSize"),
			want: []string{`complexity: schema: @link(url: "https://specs.apollo.dev/cost/v0.1"): import: @cost is renamed to "weight", which lacks the @ of a directive`},
		},
		{
			name: "a cost spec url without a version",
			sdl: `schema @link(url: "https://specs.apollo.dev/cost") { query: Query }` +
				costDeclarations("cost", "listSize") + linkedBody("cost", "listSize"),
			want: []string{`complexity: schema: @link(url: "https://specs.apollo.dev/cost"): the url names no version of the cost spec costgate can read`},
		},
		{
			// @listSize is not the linked directive (that is @cost__listSize): never ignored in silence
			name: "plain @listSize beside a link that does not import it",
			sdl: `schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: ["@cost"]) { query: Query }` +
				costDeclarations("cost", "listSize") + linkedBody("cost", "listSize"),
			want: []string{`complexity: Query.items: @listSize is not the cost spec's directive in this schema: @link(url: "https://specs.apollo.dev/cost/v0.1") names it @cost__listSize; import it under its own name or write @cost__listSize`},
		},
		{
			name: "plain @cost beside a link that renames it",
			sdl: `schema @link(url: "https://specs.apollo.dev/cost/v0.1", import: [{name: "@cost", as: "@w"}, "@listSize"]) { query: Query }` +
				costDeclarations("cost", "listSize") + linkedBody("cost", "listSize"),
			want: []string{
				`complexity: Item: @cost is not the cost spec's directive in this schema: @link(url: "https://specs.apollo.dev/cost/v0.1") names it @w; import it under its own name or write @w`,
				`complexity: Query.expensive: @cost is not the cost spec's directive in this schema: @link(url: "https://specs.apollo.dev/cost/v0.1") names it @w; import it under its own name or write @w`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := complexity.NewSchema(loadWithLink(t, tc.sdl))
			if err == nil {
				t.Fatalf("NewSchema: no error, want %q", tc.want)
			}
			if got, want := err.Error(), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
