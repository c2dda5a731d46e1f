package complexity_test

import (
	"context"
	"fmt"
	"testing"

	gqlcomplexity "github.com/99designs/gqlgen/complexity"
	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
)

// The benchmarks put costgate's pricing next to gqlgen's own complexity.Calculate, the
// peer a gqlgen server already has, on the same validated operations. gqlgen's numbers
// use its default cost (1 per field plus children); only the time is comparable.
//
//	go test -run='^$' -bench=. -benchmem ./complexity/

// typicalQuery has 30 fields: connections, a union, an interface fragment, variables.
const typicalQuery = `query Typical($n: Int = 20) {
  products(first: $n) {
    totalCount
    edges {
      cursor
      node {
        id title price
        variants(first: 5) { id sku }
        reviewConnection(first: 3) { totalCount nodes { id body author { id name } } }
      }
    }
  }
  shop { id name }
  search(term: "phone", limit: 10) {
    ... on Product { id title price }
    ... on Shop { id name }
    ... on Review { id body }
  }
}`

func gqlgenSchema(schema *ast.Schema) graphql.ExecutableSchema {
	return &graphql.ExecutableSchemaMock{
		SchemaFunc: func() *ast.Schema { return schema },
		ComplexityFunc: func(context.Context, string, string, int, map[string]any) (int, bool) {
			return 0, false // gqlgen's default pricing
		},
	}
}

func BenchmarkTypicalQuery(b *testing.B) {
	schema := loadAST(b)
	s := testSchema(b)
	doc := parseValid(b, schema, typicalQuery)
	op := doc.Operations[0]
	if m, _ := complexity.Measure(doc, ""); m.Fields != 30 {
		b.Fatalf("typical query has %d fields, want 30", m.Fields)
	}
	// edges 20×(1 + node(1 + price 2 + variants 5 + reviewConnection(1 + 3×(2 + author 7)))) = 740;
	// products 1+740; shop 5; search 10 × max(Product 1+2, Shop 5, Review 2) = 50
	if res, err := s.AnalyzeOperation(op, nil); err != nil || res.Cost != 741+5+50 {
		b.Fatalf("typical query costs %d, %v; want 796", res.Cost, err)
	}

	// gqlgen first: the base the others are compared with (bench/run.sh).
	b.Run("impl=gqlgen_Calculate", func(b *testing.B) {
		es := gqlgenSchema(schema)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			gqlcomplexity.Calculate(ctx, es, op, nil)
		}
	})
	b.Run("impl=costgate_AnalyzeOperation", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.AnalyzeOperation(op, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=costgate_Measure", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := complexity.Measure(doc, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// gqlgenFanOutMaxDepth caps the fan-out depth given to gqlgen's Calculate: it walks every
// expansion of the fragments, 2^depth leaves, so depth 30 would take minutes per call.
const gqlgenFanOutMaxDepth = 20

func BenchmarkFanOut(b *testing.B) {
	schema := loadAST(b)
	s := testSchema(b)
	for _, depth := range []int{5, 10, 20, 30} {
		doc := parseValid(b, schema, complexity.FanOutQuery(depth))
		op := doc.Operations[0]
		if depth <= gqlgenFanOutMaxDepth {
			b.Run(fmt.Sprintf("depth=%d/impl=gqlgen_Calculate", depth), func(b *testing.B) {
				es := gqlgenSchema(schema)
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					gqlcomplexity.Calculate(ctx, es, op, nil)
				}
			})
		}
		b.Run(fmt.Sprintf("depth=%d/impl=costgate_Analyze", depth), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.AnalyzeOperation(op, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("depth=%d/impl=costgate_Measure", depth), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := complexity.Measure(doc, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
