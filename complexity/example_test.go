package complexity_test

import (
	"errors"
	"fmt"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/complexity"
)

const exampleSDL = `
type Query {
  products(first: Int): ProductConnection! @listSize(slicingArguments: ["first"], sizedFields: ["nodes"])
}
type ProductConnection { nodes: [Product!]! }
type Product {
  id: ID!
  title: String
  variants(first: Int): [Variant!]! @listSize(slicingArguments: ["first"])
}
type Variant { id: ID! }
`

// The worked example of the README's "GraphQL cost": 1 × (1 + 10 × (1 + 0 + 0 + 5 × (1 + 0))) = 61.
func Example() {
	schemaAST, err := gqlparser.LoadSchema(
		&ast.Source{Name: "cost.graphql", Input: complexity.DirectivesSDL},
		&ast.Source{Name: "schema.graphql", Input: exampleSDL},
	)
	if err != nil {
		panic(err)
	}
	schema, err := complexity.NewSchema(schemaAST)
	if err != nil {
		panic(err)
	}

	query := `query($n: Int) { products(first: $n) { nodes { id title variants(first: 5) { id } } } }`
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		panic(err)
	}
	limits, _ := complexity.Measure(doc, "") // before validation
	if errs := validator.Validate(schemaAST, doc); len(errs) > 0 {
		panic(errs)
	}
	res, err := schema.Analyze(doc, "", map[string]any{"n": 10})
	if err != nil {
		panic(err)
	}
	fmt.Println("requested:", res.Cost)
	fmt.Printf("depth %d, fields %d\n", limits.Depth, limits.Fields)

	actual, _ := schema.ActualJSON(doc.Operations[0], map[string]any{"n": 10},
		[]byte(`{"products":{"nodes":[{"id":"1","title":"a","variants":[{"id":"v1"},{"id":"v2"}]}]}}`))
	fmt.Println("actual:", actual)

	_, err = schema.Analyze(doc, "", nil) // $n not given: no slicing argument
	var opErr *complexity.OperationError
	if errors.As(err, &opErr) {
		fmt.Println(opErr.Code, opErr.Field)
	}
	// Output:
	// requested: 61
	// depth 4, fields 6
	// actual: 4
	// SLICING_ARGUMENT_REQUIRED Query.products
}
