// Package gqllimit charges GraphQL operations by their cost: it prices each
// operation from the schema (package complexity) before it runs, charges the
// caller's token bucket, refunds what the operation did not use, and reports
// both in extensions.cost, in Shopify's shape.
//
// A maximum cost alone is a gqlgen extension, [FixedCostLimit]; a cost
// budget per caller is one call around the server, [Handler]:
//
//	http.Handle("/query", gqllimit.Handler(srv, gqllimit.Budget(50, time.Second, 1000)))
//
// [New] takes the full [Config] (a shared store and identity, the limits,
// trusted documents); [Limiter.Handler] then serves the server behind it.
// docs/embedding.md shows both; docs/graphql.md is the formula, the answers
// and their codes.
package gqllimit
