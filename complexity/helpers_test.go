package complexity_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/pricecases"
)

var (
	testASTOnce sync.Once
	testAST     *ast.Schema
	testASTErr  error
)

// loadAST parses the cost tests' schema (pricecases.SDL) once.
func loadAST(tb testing.TB) *ast.Schema {
	tb.Helper()
	testASTOnce.Do(func() {
		testAST, testASTErr = gqlparser.LoadSchema(&ast.Source{Name: "schema.graphql", Input: pricecases.SDL})
	})
	if testASTErr != nil {
		tb.Fatalf("load the cost tests' schema: %v", testASTErr)
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

// priceCase is one hand-worked price: the comment beside want works the formula of docs/graphql.md ("The price")
// cost(f) = argCost(f) + n(f) × (w(f) + Σ cost(children)).
type priceCase struct {
	name  string
	query string
	vars  map[string]any
	want  int64
	// wantField, when set, expects SLICING_ARGUMENT_REQUIRED on that schema coordinate.
	wantField string
}

// newTestSchema loads sdl after costgate's directive declarations and reads its cost
// directives, failing the test on any error.
func newTestSchema(tb testing.TB, sdl string, opts ...complexity.Option) (*ast.Schema, *complexity.Schema) {
	tb.Helper()
	schemaAST, err := gqlparser.LoadSchema(
		&ast.Source{Name: "directives.graphql", Input: complexity.DirectivesSDL},
		&ast.Source{Name: "schema.graphql", Input: sdl},
	)
	if err != nil {
		tb.Fatalf("gqlparser.LoadSchema: %v", err)
	}
	s, err := complexity.NewSchema(schemaAST, opts...)
	if err != nil {
		tb.Fatalf("NewSchema: %v", err)
	}
	return schemaAST, remember(s, opts)
}

// checkPrices prices each case on a validated document (through Analyze and
// AnalyzeOperation, which must agree) and compares with its hand-worked figure. A schema
// built by newTestSchema or loadPublished is also priced with its directives given as a
// Costs overlay instead, which must agree.
func checkPrices(t *testing.T, schemaAST *ast.Schema, s *complexity.Schema, cases []priceCase) {
	t.Helper()
	var (
		twinAST *ast.Schema
		twin    *complexity.Schema
		hasTwin bool
	)
	if opts, ok := builtWith.Load(s); ok {
		twinAST, twin, hasTwin = overlayTwin(t, schemaAST, opts.([]complexity.Option)...)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if hasTwin {
				samePrice(t, schemaAST, s, twinAST, twin, tc.query, tc.vars)
			}
			doc := parseValid(t, schemaAST, tc.query)
			got, err := s.Analyze(doc, "", tc.vars)
			if tc.wantField != "" {
				var opErr *complexity.OperationError
				if !errors.As(err, &opErr) || opErr.Code != complexity.CodeSlicingArgumentRequired || opErr.Field != tc.wantField {
					t.Fatalf("Analyze = %d, %v; want %s on %s", got.Cost, err, complexity.CodeSlicingArgumentRequired, tc.wantField)
				}
				return
			}
			if err != nil {
				t.Fatalf("Analyze: %v", err)
			}
			if got.Cost != tc.want {
				t.Errorf("cost = %d, want %d", got.Cost, tc.want)
			}
			op, err := s.AnalyzeOperation(doc.Operations[0], tc.vars)
			if err != nil || op.Cost != got.Cost {
				t.Errorf("AnalyzeOperation = %d, %v; want %d", op.Cost, err, got.Cost)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
