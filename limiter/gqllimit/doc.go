// Package gqllimit charges GraphQL operations by their cost: it prices each
// operation from the schema (package complexity), charges the caller's token
// bucket, refunds what the operation did not use, and reports both in
// extensions.cost, in Shopify's shape.
//
// # Pieces
//
// [Limiter.Handler] serves a gqlgen server behind the limit: it installs
// the extension and wraps the server in the middleware. The two halves:
// [Limiter.Middleware] wraps the GraphQL handler: it enforces the body size, refuses batches, parses with the
// token limit and checks depth, aliases and field count before validation
// (gqlparser's overlapping-fields rule is quadratic; these checks are
// linear), and turns the limiter's decisions into HTTP statuses and
// rate-limit headers, which a gqlgen extension cannot set.
// [Limiter.Extension] is the gqlgen extension: after validation it prices
// the operation, rejects it over max_cost or the bucket's capacity, charges
// it, and after execution prices what the response holds and refunds the
// difference. Package gqlproxy does the same in front of any GraphQL
// upstream, with the upstream's SDL (complexity.LoadSDL), through [Limiter.Admit]
// and [Limiter.Finish].
//
// # Who pays
//
// The caller is worked out by an identity.Resolver shared with the other
// doors: an identity resolved by httplimit earlier in the chain is read back
// from the context, not worked out again. [New] refuses a setup that would
// charge nothing (no policy, a policy that is not a token_bucket or has no
// key), and the middleware refuses to serve a gqlgen server that does not
// run the extension.
//
// # Answers
//
// A throttled operation is HTTP 429 with Retry-After and THROTTLED in the
// errors; rejections before execution charge nothing and carry their code
// (MAX_COST_EXCEEDED, COST_EXCEEDS_CAPACITY, SLICING_ARGUMENT_REQUIRED,
// MAX_DEPTH_EXCEEDED, MAX_ALIASES_EXCEEDED, MAX_FIELDS_EXCEEDED,
// MAX_TOKENS_EXCEEDED, BODY_TOO_LARGE, BATCH_NOT_SUPPORTED). The
// Costgate-Dry-Run header prices without charging or executing;
// Costgate-Cost-Debug adds the per-field breakdown; [Measure] mode enforces
// nothing and reports what enforcement would do. Resolvers read the
// operation's cost with [GetStats].
package gqllimit
