package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/costgate/costgate/complexity"
)

const costsSDL = `type Query {
  products(first: Int, last: Int): ProductConnection!
  search(limit: Int): [Product!]!
}
type ProductConnection { nodes: [Product!]! }
type Product { id: ID! variants(first: Int): [ID!]! }
`

const costsInline = gqlPolicy + `graphql:
  costs:
    "Query.products": {listSize: {slicingArguments: [first, last], sizedFields: [nodes], assumedSize: 50}}
    "Product.variants":
      cost: 2
      listSize: {slicingArguments: [first], requireOneSlicingArgument: false}
    "Product": {cost: 3}
    "Query.search(limit:)": {cost: 5}
`

func TestCostsInline(t *testing.T) {
	c, err := Parse("costgate.yaml", []byte(costsInline))
	if err != nil {
		t.Fatal(err)
	}
	no := false
	want := complexity.Costs{
		"Query.products":       {ListSize: &complexity.ListSize{AssumedSize: complexity.Weight(50), SlicingArguments: []string{"first", "last"}, SizedFields: []string{"nodes"}}},
		"Product.variants":     {Cost: complexity.Weight(2), ListSize: &complexity.ListSize{SlicingArguments: []string{"first"}, RequireOneSlicingArgument: &no}},
		"Product":              {Cost: complexity.Weight(3)},
		"Query.search(limit:)": {Cost: complexity.Weight(5)},
	}
	if got := c.Costs(); !reflect.DeepEqual(got, want) {
		t.Errorf("Costs() = %+v, want %+v", got, want)
	}
	// The overlay prices: products(first: 2) { nodes { variants(first: 4) { id } } }
	// = 1 + 2 × (3 + 4 × 2) = 23: variants weighs 2 per item.
	s, err := complexity.LoadSDL("schema.graphql", costsSDL, c.ComplexityOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	doc := mustParseQuery(t, `{ products(first: 2) { nodes { variants(first: 4) } } }`)
	if res, err := s.Analyze(doc, "", nil); err != nil || res.Cost != 23 {
		t.Errorf("cost = %d, %v; want 23", res.Cost, err)
	}
}

// TestCostsErrorsNameEntryAndLine: what the file gets wrong, and what the
// schema refuses, is reported against the entry's own line.
func TestCostsErrorsNameEntryAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, costs  string
		load, schema string // the expected error of Parse, else of the schema
	}{
		{"unknown setting", "    \"Product\": {cost: 1}\n    \"Query.products\":\n      listSze: {assumedSize: 5}\n",
			`costgate.yaml:7: graphql.costs["Query.products"].listSze: unknown key (want one of cost, listSize)`, ""},
		{"not an integer", "    \"Product\": {cost: \"3\"}\n",
			`costgate.yaml:5: graphql.costs.Product.cost: want an integer, got string "3"`, ""},
		{"not a coordinate", "    \"Product\": {cost: 1}\n    \"Query.search(limit)\": {cost: 5}\n",
			`costgate.yaml:6: graphql.costs["Query.search(limit)"]: "Query.search(limit)" is not a schema coordinate (Type, Type.field, Type.field(arg:))`, ""},
		{"a typo in a field", "    \"Product\": {cost: 1}\n    \"Query.prodcuts\": {cost: 5}\n",
			"", `costgate.yaml:6: graphql.costs["Query.prodcuts"]: names nothing: type Query has no field prodcuts`},
		{"a setting the rules refuse", "    \"Product\": {cost: 1}\n\n    \"Query.products\": {listSize: {slicingArguments: [after], sizedFields: [nodes]}}\n",
			"", `costgate.yaml:7: graphql.costs["Query.products"]: @listSize(slicingArguments:): "after" is not an argument of the field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("costgate.yaml", []byte(gqlPolicy+"graphql:\n  costs:\n"+tc.costs))
			checkCostsError(t, err, tc.load)
			if tc.load != "" {
				return
			}
			_, err = complexity.LoadSDL("schema.graphql", costsSDL, c.ComplexityOptions()...)
			checkCostsError(t, c.SchemaErrors(err, "graphql.schema"), tc.schema)
		})
	}
}

// TestCostsFile: costs: costs.yaml reads the entries from that file,
// relative to the config, and its errors name that file and its lines.
func TestCostsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	config := write("costgate.yaml", gqlPolicy+"graphql:\n  costs: costs.yaml\n")
	costsPath := write("costs.yaml", "# costs of the upstream\n\"Product\": {cost: 3}\n\"Query.serach(limit:)\": {cost: 5}\n")
	c, err := Load(config)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Costs(); len(got) != 2 || *got["Product"].Cost != 3 {
		t.Errorf("Costs() = %v, want the file's two entries", got)
	}
	_, err = complexity.LoadSDL("schema.graphql", costsSDL, c.ComplexityOptions()...)
	checkCostsError(t, c.SchemaErrors(err, "graphql.schema"),
		costsPath+`:3: graphql.costs["Query.serach(limit:)"]: names nothing: type Query has no field serach`)

	write("costs.yaml", "\"Product\": {cost: 3}\n\"Query.search(limit:)\":\n  weight: 5\n")
	_, err = Load(config)
	checkCostsError(t, err, costsPath+`:3: graphql.costs["Query.search(limit:)"].weight: unknown key (want one of cost, listSize)`)

	write("costgate.yaml", gqlPolicy+"graphql:\n  costs: missing.yaml\n")
	if _, err := Load(config); err == nil || !strings.Contains(err.Error(), "graphql.costs") {
		t.Errorf("Load with a missing costs file: %v, want an error naming graphql.costs", err)
	}
}

func checkCostsError(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("error: %v", err)
	case want != "" && (err == nil || err.Error() != want):
		t.Fatalf("error:\n%v\nwant:\n%s", err, want)
	}
}

func mustParseQuery(t *testing.T, query string) *ast.QueryDocument {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestIntrospectionSettings(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"negative refresh", "graphql:\n  schema_refresh: -1s\n", `bad.yaml:4: graphql.schema_refresh: must not be negative, got -1s (0: at start only)`},
		{"bad header name", "graphql:\n  introspection_headers: {\"Bad Header\": x}\n", `bad.yaml:4: graphql.introspection_headers["Bad Header"]: want an HTTP header name, got "Bad Header"`},
		{"control character in a value", "graphql:\n  introspection_headers: {Authorization: \"Bearer a\\r\\nX-Evil: 1\"}\n", `bad.yaml:4: graphql.introspection_headers.Authorization: the value holds a control character (it is not shown: it may be a secret)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(gqlPolicy+tc.yaml))
			checkCostsError(t, err, tc.want)
		})
	}
	c, err := Parse("ok.yaml", []byte(gqlPolicy+"graphql:\n  schema: introspect\n  upstream: http://127.0.0.1:9/graphql\n  schema_refresh: 0s\n  introspection_headers: {authorization: Bearer x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.IntrospectsSchema() || c.GraphQL.SchemaRefresh != 0 || c.IntrospectionHeader().Get("Authorization") != "Bearer x" {
		t.Errorf("graphql = %+v", c.GraphQL)
	}
	if c, _ := Parse("ok.yaml", []byte(gqlPolicy)); c.GraphQL.SchemaRefresh != DefaultSchemaRefresh {
		t.Errorf("schema_refresh default %s, want %s", c.GraphQL.SchemaRefresh, DefaultSchemaRefresh)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte(gqlPolicy+"graphql:\n  schema: introspect\n  upstream: http://127.0.0.1:9/graphql\n"), 0o600)
	if c, err := Load(path); err != nil || c.GraphQL.Schema != SchemaIntrospect {
		t.Errorf("Load: schema %q, %v; want introspect, not a path", c.GraphQL.Schema, err)
	}
}
