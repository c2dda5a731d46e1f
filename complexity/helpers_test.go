package complexity_test

import (
	"os"
	"sync"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/complexity"
)

var (
	testASTOnce sync.Once
	testAST     *ast.Schema
	testASTErr  error
)

// loadAST parses testdata/schema.graphql once.
func loadAST(tb testing.TB) *ast.Schema {
	tb.Helper()
	testASTOnce.Do(func() {
		src, err := os.ReadFile("testdata/schema.graphql")
		if err != nil {
			testASTErr = err
			return
		}
		testAST, testASTErr = gqlparser.LoadSchema(&ast.Source{Name: "schema.graphql", Input: string(src)})
	})
	if testASTErr != nil {
		tb.Fatalf("load testdata/schema.graphql: %v", testASTErr)
	}
	return testAST
}

// testSchema is the fixed test schema with the given options.
func testSchema(tb testing.TB, opts ...complexity.Option) *complexity.Schema {
	tb.Helper()
	s, err := complexity.NewSchema(loadAST(tb), opts...)
	if err != nil {
		tb.Fatalf("NewSchema: %v", err)
	}
	return s
}

// parseValid parses and validates query against schema, failing the test on any error.
func parseValid(tb testing.TB, schema *ast.Schema, query string) *ast.QueryDocument {
	tb.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		tb.Fatalf("parse %q: %v", query, err)
	}
	if errs := validator.Validate(schema, doc); len(errs) > 0 {
		tb.Fatalf("validate %q: %v", query, errs)
	}
	return doc
}

// mustParse parses query without validating it.
func mustParse(tb testing.TB, query string) *ast.QueryDocument {
	tb.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		tb.Fatalf("parse %q: %v", query, err)
	}
	return doc
}
