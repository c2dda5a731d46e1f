// Package complexity prices GraphQL operations statically, over gqlparser ASTs, from the
// @cost and @listSize directives of the schema (the IBM GraphQL cost spec, as Apollo
// Router and Cosmo read it). It knows nothing of gqlgen, HTTP or Redis: the gqlgen
// extension and the proxy in limiter/gqllimit build on it.
//
//	schema, err := complexity.NewSchema(astSchema)          // once; checks the directives
//	schema, err := complexity.LoadSDL("upstream.graphql", sdl) // or from SDL (proxy mode)
//	limits, err := complexity.MeasureDocument(doc)          // parsed, before validation
//	// ... validate the document ...
//	res, err := schema.Analyze(doc, operationName, variables) // requested cost: res.Cost
//	plan, err := schema.NewExecPlan(op)                      // once per operation
//	count := schema.NewExecCount(plan, variables)            // per execution
//	// ... execute, telling count what each resolver returned (count.Add) ...
//	actual, err := count.Cost()                               // refund requested − actual
//
// The actual cost is counted as the operation executes ([Schema.NewExecPlan],
// [ExecCount]), not read back from the reply, which a failing non-null field or a
// client's alias can make say less than what ran.
//
// [Schema.Analyze] gives the formula; docs/graphql.md works an example, and
// docs/cost-comparison.md sets it beside Apollo's, Cosmo's and IBM's.
package complexity
