package gqllimit

import "github.com/costgate/costgate/complexity"

// Error codes, in errors[0].extensions.code. docs/graphql.md ("Answers")
// gives each one's HTTP status and when it is answered. A request refused
// before it runs is charged Limits.RejectionCost, or what reading it took
// when that is more; a throttled one (429 with Retry-After) is charged
// nothing, so that a client that backs off recovers.
const (
	CodeThrottled = "THROTTLED"
	// An operator's deny override blocks the caller (403).
	CodeBlocked                 = "BLOCKED"
	CodeMaxCostExceeded         = "MAX_COST_EXCEEDED"
	CodeCostExceedsCapacity     = "COST_EXCEEDS_CAPACITY"
	CodeSlicingArgumentRequired = complexity.CodeSlicingArgumentRequired
	CodeMaxDepthExceeded        = "MAX_DEPTH_EXCEEDED"
	CodeMaxAliasesExceeded      = "MAX_ALIASES_EXCEEDED"
	CodeMaxFieldsExceeded       = "MAX_FIELDS_EXCEEDED"
	CodeMaxTokensExceeded       = "MAX_TOKENS_EXCEEDED"
	CodeBodyTooLarge            = "BODY_TOO_LARGE"
	CodeBatchNotSupported       = "BATCH_NOT_SUPPORTED"
	CodeBadRequest              = "BAD_REQUEST"
	CodeParseFailed             = "GRAPHQL_PARSE_FAILED"
	CodeValidationFailed        = "GRAPHQL_VALIDATION_FAILED"
	CodeUnauthenticated         = "UNAUTHENTICATED"
	CodeLimiterUnavailable      = "RATE_LIMITER_UNAVAILABLE"
	CodeIntrospectionDisabled   = "INTROSPECTION_DISABLED"
	CodeIdentityUnavailable     = "IDENTITY_UNAVAILABLE"
	CodeInternal                = "INTERNAL"
	// A websocket upgrade in proxy mode: an upstream's subscriptions are
	// refused rather than served unlimited.
	CodeSubscriptionsNotSupported = "SUBSCRIPTIONS_NOT_SUPPORTED"
	// A subscription over Limits.MaxSubscriptions open for its key (429).
	CodeTooManySubscriptions = "TOO_MANY_SUBSCRIPTIONS"

	// Automatic Persisted Queries, with the messages Apollo's clients look for.
	CodePersistedQueryNotFound     = "PERSISTED_QUERY_NOT_FOUND"     // 200: send the query with its hash
	CodePersistedQueryNotSupported = "PERSISTED_QUERY_NOT_SUPPORTED" // no cache configured
	CodePersistedQueryHashMismatch = "PERSISTED_QUERY_HASH_MISMATCH" // 400: the hash is not the query's

	// Trusted documents (Apollo Router's codes): in enforce mode, a document
	// not in the list (400); an id or hash the list lacks is
	// CodePersistedQueryNotFound (400).
	CodePersistedQueryNotInList = "PERSISTED_QUERY_NOT_IN_LIST"
)

// Request headers.
const (
	// HeaderDryRun: "1" prices the operation, charges nothing, executes
	// nothing, and answers data null with extensions.cost. A root
	// rateLimit(dryRun: true) field (GitHub's) does the same but answers
	// data.rateLimit, the other root fields left out.
	HeaderDryRun = "Costgate-Dry-Run"
	// HeaderCostDebug: "1" adds extensions.cost.fields, the cost per field path.
	HeaderCostDebug = "Costgate-Cost-Debug"
)
