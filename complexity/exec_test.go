package complexity_test

import (
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
)

// Go values standing for the union's items, named as gqlgen names its models
// (letter case and underscores aside), and one named after no possible type.
type (
	Shop     struct{}
	review   struct{}
	Elsewise struct{}
)

// An executor's report of what search returned prices each item by the type
// its Go value is named after, else as the costliest possible type; the
// leaves that cost nothing have no entry in the plan.
func TestExecCountPricesItemsByTheirGoType(t *testing.T) {
	s := testSchema(t)
	op := parseValid(t, loadAST(t), `{ search(term: "x", limit: 4) { __typename ... on Product { id } } }`).Operations[0]
	plan, err := s.NewExecPlan(op)
	if err != nil {
		t.Fatal(err)
	}
	search := op.SelectionSet[0].(*ast.Field)
	id := search.SelectionSet[1].(*ast.InlineFragment).SelectionSet[0].(*ast.Field)
	if plan.Field(id) != nil {
		t.Errorf("Product.id costs nothing whatever it returns, yet it has a plan entry")
	}
	f := plan.Field(search)
	if f == nil {
		t.Fatal("search has no plan entry")
	}
	count := s.NewExecCount(plan, nil)
	count.Add(f, "Query", []any{Shop{}, &review{}, nil, Elsewise{}}, nil)
	// Shop 5, Review 2, the null item nothing, Elsewise the costliest (Shop 5).
	if got, err := count.Cost(); err != nil || got != 12 {
		t.Errorf("cost %d, %v; want 12", got, err)
	}
}

// A root mutation field costs its whole price once called, whatever it
// returned; once per response key however often it is reported.
func TestExecCountChargesMutationsWhole(t *testing.T) {
	s := testSchema(t)
	op := parseValid(t, loadAST(t), `mutation { createProduct(input: {title: "t", price: 5}) { id variants(first: 3) { id } } touch }`).Operations[0]
	plan, err := s.NewExecPlan(op)
	if err != nil {
		t.Fatal(err)
	}
	create := plan.Field(op.SelectionSet[0].(*ast.Field))
	if create == nil || !create.Mutation() {
		t.Fatalf("createProduct: %+v, want a mutation entry", create)
	}
	count := s.NewExecCount(plan, nil)
	count.Add(create, "Mutation", nil, nil)
	count.Add(create, "Mutation", nil, nil)
	// argCost 4 + 1 × (10 + 3 × 1); touch was not called.
	if got, err := count.Cost(); err != nil || got != 17 {
		t.Errorf("cost %d, %v; want 17", got, err)
	}
}
