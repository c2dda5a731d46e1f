package gqllimit

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/costgate/costgate/complexity"
)

// NewCountOnly returns an extension that counts each operation's actual cost
// as gqlgen runs it and does nothing else, for the benchmarks of the
// counting's own cost.
func NewCountOnly(schema *complexity.Schema) graphql.HandlerExtension {
	return &countOnly{schema: schema}
}

// countOnly counts each operation's actual cost as gqlgen runs it, and does
// nothing else: the counting's own cost, apart from pricing and charging.
type countOnly struct {
	schema *complexity.Schema
	plans  sync.Map // *ast.OperationDefinition → *complexity.ExecPlan
}

func (*countOnly) ExtensionName() string                   { return "CountOnly" }
func (*countOnly) Validate(graphql.ExecutableSchema) error { return nil }

func (c *countOnly) MutateOperationContext(ctx context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	plan, ok := c.plans.Load(rc.Operation)
	if !ok {
		p, err := c.schema.NewExecPlan(rc.Operation)
		if err != nil {
			return gqlerror.Errorf("%v", err)
		}
		plan, _ = c.plans.LoadOrStore(rc.Operation, p)
	}
	x := &execution{plan: plan.(*complexity.ExecPlan), prev: rc.ResolverMiddleware}
	x.count = c.schema.NewExecCount(x.plan, rc.Variables)
	rc.ResolverMiddleware = x.field
	return nil
}

// NewReplyPriced returns an extension that prices each response by reading
// its bytes (complexity.Schema.ActualJSONShared), as the extension did
// before it counted the execution: the peer of NewCountOnly's benchmark.
func NewReplyPriced(schema *complexity.Schema) graphql.HandlerExtension {
	return &replyPriced{schema: schema}
}

type replyPriced struct {
	schema *complexity.Schema
	plans  sync.Map // *ast.OperationDefinition → *complexity.ActualPlans
}

func (*replyPriced) ExtensionName() string                   { return "ReplyPriced" }
func (*replyPriced) Validate(graphql.ExecutableSchema) error { return nil }

func (r *replyPriced) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	rc := graphql.GetOperationContext(ctx)
	plans, _ := r.plans.LoadOrStore(rc.Operation, complexity.NewActualPlans(rc.Operation))
	if _, err := r.schema.ActualJSONShared(plans.(*complexity.ActualPlans), rc.Variables, resp.Data); err != nil {
		panic(err)
	}
	return resp
}
