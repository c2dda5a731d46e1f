package complexity_test

import (
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
)

// loadSDL loads sdl after the given directive declarations.
func loadSDL(t *testing.T, directives, sdl string) *ast.Schema {
	t.Helper()
	s, err := gqlparser.LoadSchema(
		&ast.Source{Name: "directives.graphql", Input: directives},
		&ast.Source{Name: "schema.graphql", Input: sdl},
	)
	if err != nil {
		t.Fatalf("gqlparser.LoadSchema: %v", err)
	}
	return s
}

func TestNewSchemaErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		sdl  string
		opts []complexity.Option
		want []string // every line of the joined error, in order
	}{
		{
			name: "negative Int weight",
			sdl:  `type Query { a: Int @cost(weight: -1) }`,
			want: []string{`complexity: Query.a: @cost(weight: -1): weight must be a non-negative integer`},
		},
		{
			name: "String weight that is not a number",
			sdl:  `type Query { a: Int @cost(weight: "abc") }`,
			want: []string{`complexity: Query.a: @cost(weight: "abc"): weight must be a non-negative integer`},
		},
		{
			name: "String weight with a fraction",
			sdl:  `type Query { a: Int @cost(weight: "2.5") }`,
			want: []string{`complexity: Query.a: @cost(weight: "2.5"): weight must be a non-negative integer`},
		},
		{
			name: "Float weight",
			sdl:  `type Query { a: Int @cost(weight: 1.5) }`,
			want: []string{`complexity: Query.a: @cost(weight: 1.5): weight must be a non-negative integer`},
		},
		{
			name: "weight above 2^53-1",
			sdl:  `type Query { a: Int @cost(weight: "9007199254740992") }`,
			want: []string{`complexity: Query.a: @cost(weight: "9007199254740992"): weight must be a non-negative integer`},
		},
		{
			name: "negative weight on a type",
			sdl:  `type Query { t: T } type T @cost(weight: -2) { a: Int }`,
			want: []string{`complexity: T: @cost(weight: -2): weight must be a non-negative integer`},
		},
		{
			name: "bad weight on an argument",
			sdl:  `type Query { a(x: Int @cost(weight: "x")): Int }`,
			want: []string{`complexity: Query.a(x:): @cost(weight: "x"): weight must be a non-negative integer`},
		},
		{
			name: "bad weight on an input field",
			sdl:  `type Query { a(i: I): Int } input I { v: Int @cost(weight: -1) }`,
			want: []string{`complexity: I.v: @cost(weight: -1): weight must be a non-negative integer`},
		},
		{
			name: "@listSize on a non-list field",
			sdl:  `type Query { a: Int @listSize(assumedSize: 3) }`,
			want: []string{`complexity: Query.a: @listSize on a non-list field (Int); a connection field names its lists in sizedFields`},
		},
		{
			name: "sizedFields naming a missing field",
			sdl: `type Query { c(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["items"]) }
				type Conn { nodes: [Int] total: Int }`,
			want: []string{`complexity: Query.c: @listSize(sizedFields:): Conn has no field "items"`},
		},
		{
			name: "sizedFields naming a field that is not a list",
			sdl: `type Query { c(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["total"]) }
				type Conn { nodes: [Int] total: Int }`,
			want: []string{`complexity: Query.c: @listSize(sizedFields:): Conn.total is not a list`},
		},
		{
			name: "slicing argument that does not exist",
			sdl:  `type Query { l(first: Int): [Int] @listSize(slicingArguments: ["top"]) }`,
			want: []string{`complexity: Query.l: @listSize(slicingArguments:): "top" is not an argument of the field`},
		},
		{
			name: "slicing argument that is a String",
			sdl:  `type Query { l(after: String): [Int] @listSize(slicingArguments: ["after"]) }`,
			want: []string{`complexity: Query.l: @listSize(slicingArguments:): "after" is neither an Int nor a list argument (it is String)`},
		},
		{
			name: "slicing argument that is an input object",
			sdl:  `type Query { l(f: F): [Int] @listSize(slicingArguments: ["f"]) } input F { max: Int }`,
			want: []string{`complexity: Query.l: @listSize(slicingArguments:): "f" is neither an Int nor a list argument (it is F)`},
		},
		{
			name: "slicing path into a missing input field",
			sdl:  `type Query { l(f: F): [Int] @listSize(slicingArguments: ["f.nope"]) } input F { max: Int }`,
			want: []string{`complexity: Query.l: @listSize(slicingArguments:): "f.nope": F has no field "nope"`},
		},
		{
			name: "slicing path ending at an input object",
			sdl:  `type Query { l(in: S): [Int] @listSize(slicingArguments: ["in.page"]) } input S { page: P } input P { first: Int }`,
			want: []string{`complexity: Query.l: @listSize(slicingArguments:): "in.page" is neither an Int nor a list argument (it is P)`},
		},
		{
			name: "slicing path ending at a String",
			sdl:  `type Query { l(in: S): [Int] @listSize(slicingArguments: ["in.page.after"]) } input S { page: P } input P { after: String }`,
			want: []string{`complexity: Query.l: @listSize(slicingArguments:): "in.page.after" is neither an Int nor a list argument (it is String)`},
		},
		{
			name: "slicing path missing a step deep down",
			sdl:  `type Query { l(in: S): [Int] @listSize(slicingArguments: ["in.page.last"]) } input S { page: P } input P { first: Int }`,
			want: []string{`complexity: Query.l: @listSize(slicingArguments:): "in.page.last": P has no field "last"`},
		},
		{
			name: "slicing path through a list",
			sdl:  `type Query { l(in: [S]): [Int] @listSize(slicingArguments: ["in.first"]) } input S { first: Int }`,
			want: []string{`complexity: Query.l: @listSize(slicingArguments:): "in.first": [S] is not an input object`},
		},
		{
			name: "sized path missing a step",
			sdl: `type Query { c(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["page.nope"]) }
				type Conn { page: Page } type Page { items: [Int] }`,
			want: []string{`complexity: Query.c: @listSize(sizedFields:): "page.nope": Page has no field "nope"`},
		},
		{
			name: "sized path in selection syntax ending at a field that is not a list",
			sdl: `type Query { c(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["page { total }"]) }
				type Conn { page: Page } type Page { items: [Int] total: Int }`,
			want: []string{`complexity: Query.c: @listSize(sizedFields:): "page { total }": Page.total is not a list`},
		},
		{
			name: "sized path through a scalar",
			sdl: `type Query { c(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["total { items }"]) }
				type Conn { total: Int }`,
			want: []string{`complexity: Query.c: @listSize(sizedFields:): "total { items }": Int has no field "items"`},
		},
		{
			name: "sized path that does not parse",
			sdl: `type Query { c(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["page {"]) }
				type Conn { page: Page } type Page { items: [Int] }`,
			want: []string{`complexity: Query.c: @listSize(sizedFields:): "page {": a '{' is not closed`},
		},
		{
			name: "sized path selecting nothing",
			sdl: `type Query { c(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["page { }"]) }
				type Conn { page: Page } type Page { items: [Int] }`,
			want: []string{`complexity: Query.c: @listSize(sizedFields:): "page { }": '{ }' selects nothing`},
		},
		{
			name: "sized path with a stray character",
			sdl: `type Query { c(first: Int): Conn @listSize(slicingArguments: ["first"], sizedFields: ["page/items"]) }
				type Conn { page: Page } type Page { items: [Int] }`,
			want: []string{`complexity: Query.c: @listSize(sizedFields:): "page/items": unexpected '/'`},
		},
		{
			name: "negative input_object_cost",
			sdl:  `type Query { a: Int }`,
			opts: []complexity.Option{complexity.WithInputObjectCost(-1)},
			want: []string{`complexity: options: input_object_cost must be between 0 and 2^53-1, got -1`},
		},
		{
			name: "negative assumedSize",
			sdl:  `type Query { l: [Int] @listSize(assumedSize: -1) }`,
			want: []string{`complexity: Query.l: @listSize(assumedSize: -1): must be a non-negative Int`},
		},
		{
			name: "every problem is reported",
			sdl: `type Query { a: Int @cost(weight: -1) l(after: String): [Int] @listSize(slicingArguments: ["after"]) }
				type T @cost(weight: "x") { a: Int }`,
			want: []string{
				`complexity: Query.a: @cost(weight: -1): weight must be a non-negative integer`,
				`complexity: Query.l: @listSize(slicingArguments:): "after" is neither an Int nor a list argument (it is String)`,
				`complexity: T: @cost(weight: "x"): weight must be a non-negative integer`,
			},
		},
		{
			name: "negative option",
			sdl:  `type Query { a: Int }`,
			opts: []complexity.Option{complexity.WithDefaultListSize(-1)},
			want: []string{`complexity: options: default_list_size must be between 0 and 2^53-1, got -1`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := complexity.NewSchema(loadSDL(t, complexity.DirectivesSDL, tc.sdl), tc.opts...)
			if err == nil {
				t.Fatalf("NewSchema: no error, want %q", tc.want)
			}
			if got, want := err.Error(), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

const connectionSDL = `
type Query {
  products(first: Int): ProductConnection! @listSize(slicingArguments: ["first"], sizedFields: ["nodes"])
  heavy: Int @cost(weight: "2.0")
}
type ProductConnection { nodes: [Product!]! }
type Product { id: ID! title: String variants(first: Int): [Variant!]! @listSize(slicingArguments: ["first"]) }
type Variant { id: ID! }
`

// TestDirectiveForms: the Apollo (Int weight) and IBM (String weight) declarations both
// load, and price docs/graphql.md's worked example at 61.
func TestDirectiveForms(t *testing.T) {
	ibm := `directive @cost(weight: String!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR
directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION`
	for name, directives := range map[string]string{"apollo": complexity.DirectivesSDL, "ibm": ibm} {
		t.Run(name, func(t *testing.T) {
			ast := loadSDL(t, directives, connectionSDL)
			s, err := complexity.NewSchema(ast)
			if err != nil {
				t.Fatal(err)
			}
			for query, want := range map[string]int64{
				`{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`: 61,
				`{ heavy }`: 2, // "2.0" is the integer 2
			} {
				got, err := s.Analyze(parseValid(t, ast, query), "", nil)
				if err != nil || got.Cost != want {
					t.Errorf("%s: cost = %d, %v; want %d", query, got.Cost, err, want)
				}
			}
		})
	}
}

// TestRequireOneDefaultFromDeclaration: a declaration that defaults
// requireOneSlicingArgument to false is honoured; with no default, true applies.
func TestRequireOneDefaultFromDeclaration(t *testing.T) {
	for _, tc := range []struct {
		decl    string
		wantErr bool
	}{
		{`requireOneSlicingArgument: Boolean = false`, false},
		{`requireOneSlicingArgument: Boolean`, true},
	} {
		directives := strings.Replace(complexity.DirectivesSDL, "requireOneSlicingArgument: Boolean = true", tc.decl, 1)
		ast := loadSDL(t, directives, connectionSDL)
		s, err := complexity.NewSchema(ast)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Analyze(parseValid(t, ast, `{ products { nodes { id } } }`), "", nil)
		if gotErr := err != nil; gotErr != tc.wantErr {
			t.Errorf("%s: error = %v, want error %v", tc.decl, err, tc.wantErr)
		}
		if !tc.wantErr && res.Cost != 11 { // 1 + 10×1
			t.Errorf("%s: cost = %d, want 11", tc.decl, res.Cost)
		}
	}
}

// TestAbstractTypeWeightFallback: where a schema allows @cost on interfaces, an
// implementation without its own weight takes the interface's.
func TestAbstractTypeWeightFallback(t *testing.T) {
	directives := strings.Replace(complexity.DirectivesSDL, "| SCALAR", "| SCALAR | INTERFACE | UNION", 1)
	ast := loadSDL(t, directives, `
type Query { pet: Pet }
interface Pet @cost(weight: 4) { name: String }
type Cat implements Pet { name: String }
type Dog implements Pet @cost(weight: 9) { name: String }
`)
	s, err := complexity.NewSchema(ast)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Analyze(parseValid(t, ast, `{ pet { name } }`), "", nil)
	if err != nil || got.Cost != 9 { // max(Cat 4 from Pet, Dog 9)
		t.Errorf("cost = %d, %v; want 9", got.Cost, err)
	}
	got, err = s.Analyze(parseValid(t, ast, `{ pet { ... on Cat { name } } }`), "", nil)
	if err != nil || got.Cost != 9 {
		t.Errorf("cost = %d, %v; want 9", got.Cost, err)
	}
}
