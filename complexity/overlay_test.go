package complexity_test

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/costgate/costgate/complexity"
)

// builtWith remembers the options a test schema was built with, so that checkPrices can
// build its overlay twin with the same ones.
var builtWith sync.Map // *complexity.Schema -> []complexity.Option

func remember(s *complexity.Schema, opts []complexity.Option) *complexity.Schema {
	builtWith.Store(s, opts)
	return s
}

// overlayTwin is schemaAST with its @cost and @listSize directives taken out of the SDL
// and written as a Costs overlay instead, built with opts and that overlay. ok is false
// for a schema that names the directives through @link (the overlay speaks of the
// settings, not the names).
func overlayTwin(tb testing.TB, schemaAST *ast.Schema, opts ...complexity.Option) (*ast.Schema, *complexity.Schema, bool) {
	tb.Helper()
	if len(schemaAST.SchemaDirectives) > 0 {
		return nil, nil, false
	}
	stripped, costs := stripCostDirectives(tb, schemaAST)
	twinAST, err := gqlparser.LoadSchema(&ast.Source{Name: "stripped.graphql", Input: stripped})
	if err != nil {
		tb.Fatalf("load the stripped SDL: %v\n%s", err, stripped)
	}
	for line := range strings.Lines(stripped) {
		if !strings.HasPrefix(line, "directive ") && (strings.Contains(line, "@cost(") || strings.Contains(line, "@listSize(")) {
			tb.Fatalf("a directive left in the stripped SDL: %s", line)
		}
	}
	twin, err := complexity.NewSchema(twinAST, append(opts[:len(opts):len(opts)], complexity.WithCosts(costs))...)
	if err != nil {
		tb.Fatalf("NewSchema with the overlay: %v", err)
	}
	return twinAST, twin, true
}

// stripCostDirectives writes schemaAST as SDL without @cost and @listSize, and returns
// the overlay that says what they said.
func stripCostDirectives(tb testing.TB, schemaAST *ast.Schema) (string, complexity.Costs) {
	tb.Helper()
	var sdl bytes.Buffer
	formatter.NewFormatter(&sdl).FormatSchema(schemaAST)
	doc, err := parser.ParseSchema(&ast.Source{Name: "formatted.graphql", Input: sdl.String()})
	if err != nil {
		tb.Fatalf("parse the formatted schema: %v", err)
	}
	costs := complexity.Costs{}
	take := func(coordinate string, dirs ast.DirectiveList) ast.DirectiveList {
		var kept ast.DirectiveList
		for _, d := range dirs {
			switch d.Name {
			case "cost":
				e := costs[coordinate]
				w, err := strconv.ParseInt(strings.TrimSuffix(d.Arguments.ForName("weight").Value.Raw, ".0"), 10, 64)
				if err != nil {
					tb.Fatalf("%s: weight %s", coordinate, d.Arguments.ForName("weight").Value.Raw)
				}
				e.Cost = complexity.Weight(w)
				costs[coordinate] = e
			case "listSize":
				e := costs[coordinate]
				e.ListSize = listSizeOf(tb, d)
				costs[coordinate] = e
			default:
				kept = append(kept, d)
			}
		}
		return kept
	}
	for _, def := range append(doc.Definitions, doc.Extensions...) {
		def.Directives = take(def.Name, def.Directives)
		for _, f := range def.Fields {
			f.Directives = take(def.Name+"."+f.Name, f.Directives)
			for _, a := range f.Arguments {
				a.Directives = take(def.Name+"."+f.Name+"("+a.Name+":)", a.Directives)
			}
		}
	}
	var out bytes.Buffer
	formatter.NewFormatter(&out).FormatSchemaDocument(doc)
	return out.String(), costs
}

func listSizeOf(tb testing.TB, d *ast.Directive) *complexity.ListSize {
	tb.Helper()
	ls := &complexity.ListSize{}
	strs := func(v *ast.Value) []string {
		out := []string{}
		if v.Kind != ast.ListValue {
			return append(out, v.Raw)
		}
		for _, c := range v.Children {
			out = append(out, c.Value.Raw)
		}
		return out
	}
	for _, a := range d.Arguments {
		switch a.Name {
		case "assumedSize":
			n, err := strconv.ParseInt(a.Value.Raw, 10, 64)
			if err != nil {
				tb.Fatalf("assumedSize %s", a.Value.Raw)
			}
			ls.AssumedSize = complexity.Weight(n)
		case "slicingArguments":
			ls.SlicingArguments = strs(a.Value)
		case "sizedFields":
			ls.SizedFields = strs(a.Value)
		case "requireOneSlicingArgument":
			b := a.Value.Raw == "true"
			ls.RequireOneSlicingArgument = &b
		}
	}
	return ls
}

// samePrice checks that the twin prices query as s does: the same cost, or the same
// slicing-argument rejection.
func samePrice(t *testing.T, schemaAST *ast.Schema, s *complexity.Schema, twinAST *ast.Schema, twin *complexity.Schema, query string, vars map[string]any) {
	t.Helper()
	want, wantErr := s.Analyze(parseValid(t, schemaAST, query), "", vars)
	got, gotErr := twin.Analyze(parseValid(t, twinAST, query), "", vars)
	var wantOp, gotOp *complexity.OperationError
	errors.As(wantErr, &wantOp)
	errors.As(gotErr, &gotOp)
	switch {
	case (wantErr == nil) != (gotErr == nil):
		t.Errorf("with the overlay: %d, %v; with the directives: %d, %v", got.Cost, gotErr, want.Cost, wantErr)
	case wantOp != nil && (gotOp == nil || *gotOp != *wantOp):
		t.Errorf("with the overlay: %v; with the directives: %v", gotErr, wantErr)
	case got.Cost != want.Cost:
		t.Errorf("with the overlay: cost %d; with the directives: %d", got.Cost, want.Cost)
	}
}

// TestCostsOverlayPricesAsDirectives: every hand-worked case of the fixed test schema
// prices the same when its directives are taken out of the SDL and given as an overlay.
func TestCostsOverlayPricesAsDirectives(t *testing.T) {
	schemaAST := loadAST(t)
	for _, tc := range requestedCases {
		t.Run(tc.name, func(t *testing.T) {
			twinAST, twin, _ := overlayTwin(t, schemaAST, tc.opts...)
			samePrice(t, schemaAST, testSchema(t, tc.opts...), twinAST, twin, tc.query, tc.vars)
		})
	}
}

// TestCostsOverlayReplacesDirective: an entry replaces the directive at its coordinate,
// and leaves the other kind of directive there as the SDL wrote it.
func TestCostsOverlayReplacesDirective(t *testing.T) {
	const sdl = `type Query { products(first: Int): [Product!]! @listSize(slicingArguments: ["first"]) @cost(weight: 4) }
type Product { id: ID! }`
	for _, tc := range []struct {
		name  string
		costs complexity.Costs
		want  int64
	}{
		{"no overlay", nil, 3 * (4 + 0)},
		{"cost replaced, listSize kept", complexity.Costs{"Query.products": {Cost: complexity.Weight(7)}}, 3 * 7},
		{"listSize replaced, cost kept", complexity.Costs{"Query.products": {ListSize: &complexity.ListSize{AssumedSize: complexity.Weight(2), RequireOneSlicingArgument: new(bool)}}}, 2 * 4},
		{"a type's weight", complexity.Costs{"Product": {Cost: complexity.Weight(9)}, "Query.products": {Cost: complexity.Weight(0)}}, 3 * 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schemaAST, s := newTestSchema(t, sdl, complexity.WithCosts(tc.costs))
			got, err := s.Analyze(parseValid(t, schemaAST, `{ products(first: 3) { id } }`), "", nil)
			if err != nil || got.Cost != tc.want {
				t.Errorf("cost = %d, %v; want %d", got.Cost, err, tc.want)
			}
		})
	}
}

// TestCostsOverlayRefusals: an entry that names nothing, or a setting the directive rules
// refuse, is an error naming the entry; errors in the SDL's own directives are not.
func TestCostsOverlayRefusals(t *testing.T) {
	const sdl = `type Query {
  products(first: Int, filter: Filter): [Product!]!
  product: Product
  search(term: String): [Product!]! @cost(weight: -1)
}
type Product { id: ID! variants: [ID!]! }
input Filter { max: Int tag: String }
enum Color { RED }
`
	for _, tc := range []struct {
		name  string
		costs complexity.Costs
		want  []string // every error of the overlay: "coordinate: message"
	}{
		{"unknown type", complexity.Costs{"Prodcut": {Cost: complexity.Weight(1)}}, []string{"Prodcut: names nothing: the schema has no type Prodcut"}},
		{"unknown field", complexity.Costs{"Query.prodcuts": {Cost: complexity.Weight(1)}}, []string{"Query.prodcuts: names nothing: type Query has no field prodcuts"}},
		{"unknown argument", complexity.Costs{"Query.products(last:)": {Cost: complexity.Weight(1)}}, []string{"Query.products(last:): names nothing: Query.products has no argument last"}},
		{"unknown input field", complexity.Costs{"Filter.min": {Cost: complexity.Weight(1)}}, []string{"Filter.min: names nothing: input Filter has no field min"}},
		{"enum value", complexity.Costs{"Color.RED": {Cost: complexity.Weight(1)}}, []string{"Color.RED: names nothing: enum Color has no field RED"}},
		{"not a coordinate", complexity.Costs{"Query.products(first)": {Cost: complexity.Weight(1)}}, []string{`Query.products(first): "Query.products(first)" is not a schema coordinate (Type, Type.field, Type.field(arg:))`}},
		{"sets nothing", complexity.Costs{"Query.product": {}}, []string{"Query.product: sets neither cost nor listSize"}},
		{"listSize on an argument", complexity.Costs{"Query.products(first:)": {ListSize: &complexity.ListSize{AssumedSize: complexity.Weight(1)}}}, []string{"Query.products(first:): listSize applies to fields (Type.field) only"}},
		{"cost on an input type", complexity.Costs{"Filter": {Cost: complexity.Weight(1)}}, []string{"Filter: an input object type has no weight of its own; weigh its fields (Filter.field)"}},
		{"negative weight", complexity.Costs{"Product": {Cost: complexity.Weight(-2)}}, []string{"Product: @cost(weight: -2): weight must be a non-negative integer"}},
		{"listSize on a non-list field", complexity.Costs{"Query.product": {ListSize: &complexity.ListSize{AssumedSize: complexity.Weight(3)}}}, []string{"Query.product: @listSize on a non-list field (Product); a connection field names its lists in sizedFields"}},
		{"negative assumedSize", complexity.Costs{"Query.products": {ListSize: &complexity.ListSize{AssumedSize: complexity.Weight(-1)}}}, []string{"Query.products: @listSize(assumedSize: -1): must be a non-negative Int"}},
		{"slicing argument that is no argument", complexity.Costs{"Query.products": {ListSize: &complexity.ListSize{SlicingArguments: []string{"frist"}}}}, []string{`Query.products: @listSize(slicingArguments:): "frist" is not an argument of the field`}},
		{"slicing argument that is a String", complexity.Costs{"Query.products": {ListSize: &complexity.ListSize{SlicingArguments: []string{"filter.tag"}}}}, []string{`Query.products: @listSize(slicingArguments:): "filter.tag" is neither an Int nor a list argument (it is String)`}},
		{"sizedFields not a list", complexity.Costs{"Query.product": {ListSize: &complexity.ListSize{SizedFields: []string{"id"}}}}, []string{`Query.product: @listSize(sizedFields:): Product.id is not a list`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schemaAST := loadSDL(t, complexity.DirectivesSDL, sdl)
			_, err := complexity.NewSchema(schemaAST, complexity.WithCosts(tc.costs))
			var got []string
			for _, e := range unjoin(err) {
				var se *complexity.SchemaError
				if !errors.As(e, &se) {
					t.Fatalf("error %v is not a *SchemaError", e)
				}
				if se.InCosts {
					got = append(got, se.Coordinate+": "+se.Message)
				} else if se.Coordinate != "Query.search" {
					t.Errorf("an SDL error at %s: %v", se.Coordinate, se)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("overlay errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestCostsOverlayFixesSDLError: an entry replaces a directive the rules refuse, so the
// schema loads; an entry at another coordinate leaves the SDL's error an SDL error.
func TestCostsOverlayFixesSDLError(t *testing.T) {
	schemaAST := loadSDL(t, complexity.DirectivesSDL, `type Query { a: Int @cost(weight: -1) b: Int }`)
	if _, err := complexity.NewSchema(schemaAST, complexity.WithCosts(complexity.Costs{"Query.a": {Cost: complexity.Weight(1)}})); err != nil {
		t.Errorf("NewSchema: %v", err)
	}
	_, err := complexity.NewSchema(schemaAST, complexity.WithCosts(complexity.Costs{"Query.b": {Cost: complexity.Weight(1)}}))
	var se *complexity.SchemaError
	if !errors.As(err, &se) || se.Coordinate != "Query.a" || se.InCosts {
		t.Errorf("err = %#v, want the SDL's error at Query.a", se)
	}
}

func TestCostsUnknown(t *testing.T) {
	schemaAST := loadSDL(t, complexity.DirectivesSDL, `type Query { a(x: Int): Int } type T { b: Int }`)
	costs := complexity.Costs{"Query.a": {}, "Query.a(x:)": {}, "Query.gone": {}, "Gone": {}, "T.b": {}, "bad(": {}}
	got := strings.Join(costs.Unknown(schemaAST), " ")
	if want := "Gone Query.gone bad("; got != want {
		t.Errorf("Unknown = %s, want %s", got, want)
	}
	if rest := costs.Without("Gone", "bad("); len(rest) != 4 || len(costs) != 6 {
		t.Errorf("Without left %d of %d", len(rest), len(costs))
	}
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// CostSettings says the same of a schema annotated in its SDL and of its overlay twin,
// and tells a changed setting apart.
func TestCostSettings(t *testing.T) {
	schemaAST := loadAST(t)
	s := testSchema(t)
	_, twin, _ := overlayTwin(t, schemaAST)
	got, want := s.CostSettings(), twin.CostSettings()
	if len(got) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("with the directives: %v\nwith the overlay: %v", got, want)
	}
	if got, want := got["Query.products"], "listSize(slicingArguments: [first, last], sizedFields: [edges, nodes], requireOneSlicingArgument: true)"; got != want {
		t.Errorf("Query.products: %s, want %s", got, want)
	}
	changed := testSchema(t, complexity.WithCosts(complexity.Costs{"Query.products": {Cost: complexity.Weight(2)}}))
	if got := changed.CostSettings()["Query.products"]; !strings.HasPrefix(got, "cost 2, listSize(") {
		t.Errorf("Query.products with an overlay weight: %s", got)
	}
}
