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
//	// ... execute ...
//	actual, err := schema.ActualJSON(op, variables, resp.Data) // refund requested − actual
//
// [Schema.Analyze] gives the formula; docs/graphql.md works an example, and
// docs/cost-comparison.md sets it beside Apollo's, Cosmo's and IBM's.
package complexity
