// Package gqllimit charges GraphQL operations by their cost: it prices each
// operation from the schema (package complexity), charges the caller's token
// bucket, refunds what the operation did not use, and reports both in
// extensions.cost, in Shopify's shape.
//
// # One call
//
// A maximum cost alone is an extension, as gqlgen's FixedComplexityLimit
// is; a cost budget per caller is one call around the server:
//
//	srv.Use(gqllimit.FixedCostLimit(1000))
//	http.Handle("/query", gqllimit.Handler(srv, gqllimit.Budget(50, time.Second, 1000)))
//
// [Handler] keeps the budgets in process memory unless [WithStore] says
// otherwise, and serves Automatic Persisted Queries itself, so the server
// `gqlgen init` generates keeps its APQ as it is. It panics at setup on a
// programmer's error; [New] takes the full [Config] and returns errors.
//
// # Pieces
//
// [Limiter.Handler] serves a gqlgen server behind the limit: it installs
// the extension and wraps the server in the middleware. The two halves:
// [Limiter.Middleware] wraps the GraphQL handler: it enforces the body size,
// refuses batches, parses with the token limit, checks the depth, aliases
// and field count of the whole document (every operation and fragment, used
// or not) and validates it with rules linear in the document (at most 100
// errors), and turns the limiter's decisions into HTTP statuses and
// rate-limit headers, which a gqlgen extension cannot set. gqlgen runs the
// document it validated ([Limiter.QueryCache]).
// [Limiter.Extension] is the gqlgen extension: after validation it prices
// the operation, rejects it over max_cost or the bucket's capacity, charges
// it, counts the actual cost as gqlgen executes it (the lists the resolvers
// return, the concrete type of each abstract item, the root fields called:
// never read back from the reply, which a failing non-null field or a
// client's alias can make say less than what ran), and refunds the
// difference. A root mutation field that was called keeps its whole price.
// Package gqlproxy does the same in front of any GraphQL
// upstream, with the upstream's SDL (complexity.LoadSDL), through the same
// middleware.
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
// errors; rejections before execution are charged Limits.RejectionCost (or
// what reading the request took, when more: docs/graphql.md) and carry their code
// (MAX_COST_EXCEEDED, COST_EXCEEDS_CAPACITY, SLICING_ARGUMENT_REQUIRED,
// MAX_DEPTH_EXCEEDED, MAX_ALIASES_EXCEEDED, MAX_FIELDS_EXCEEDED,
// MAX_TOKENS_EXCEEDED, BODY_TOO_LARGE, BATCH_NOT_SUPPORTED,
// GRAPHQL_VALIDATION_FAILED, INTROSPECTION_DISABLED, ...). Every answer to a
// document that parsed carries extensions.cost, rejections included: the
// caller's bucket in throttleStatus (read without charging when nothing was
// charged) and requestedQueryCost once the operation was priced. Operations
// turned away before validation (depth, aliases, fields) are priced from the
// document as it stands when the pricing can read it; validation failures
// are not priced. Each rejection is reported to [Config.OnRejection], in
// measure mode (Mode [limiter.Shadow]) also the ones enforcement would have made, and each
// operation, with its name, estimated and actual cost and rejection code,
// to [Config.OnOperation].
//
// The Costgate-Dry-Run header prices without charging or executing and
// answers data null; a root rateLimit(dryRun: true) field (GitHub's) does the
// same but answers data.rateLimit, the other root fields left out;
// Costgate-Cost-Debug adds the per-field breakdown. Resolvers read the
// operation's cost with [GetStats].
//
// # Subscriptions
//
// Over websockets (graphql-transport-ws, graphql-ws) and SSE, a
// subscription is priced like a query of its selection and charged when it
// starts; each event is charged its actual cost as it is sent (at most one
// store call a second per subscription), and when the bucket cannot pay the
// subscription ends with a THROTTLED error, then complete
// ([Limits].FreeSubscriptionEvents: events are free). A refusal reaches the
// client in the protocol's error message. [Limits].MaxSubscriptions bounds the
// subscriptions one key has open at once, in each process
// (TOO_MANY_SUBSCRIPTIONS); a slot is freed when the subscription ends or
// its connection closes.
//
// # Repeated operations
//
// The middleware keeps documents parsed and measured, keyed by their text
// and operation name, and their prices keyed by the values of the variables
// the price depends on (complexity.Schema.CostVariables): an operation sent
// again is not parsed, measured or priced again unless those values change
// ([Config.DocumentCache]). With [Config.PersistedQueries] it serves
// Automatic Persisted Queries: a query sent by its hash is the same document
// as its text, at the same price and under the same limits.
// [NewQueryCache] bounds gqlgen's own query cache by memory as well.
//
// # Trusted documents
//
// [Config.TrustedDocuments] (one call: [WithTrustedDocuments]) lets only the
// operations of a list run: Apollo's persisted query manifest, or the
// {"id": "document"} map of Relay and GraphQL Codegen, each document
// validated and priced when the list loads. A request names one by
// documentId, by its persisted-query hash or by its exact text; anything
// else is refused before it is parsed (PERSISTED_QUERY_NOT_FOUND,
// PERSISTED_QUERY_NOT_IN_LIST), or, in log mode, runs and is counted.
package gqllimit
