// Package httplimit is costgate's net/http middleware: it limits REST routes
// and login by the policies of the route a request matches, and writes the
// headers and bodies clients rely on.
//
// # Routes
//
// A [Route] pattern is the config file's syntax: "METHOD /path" or "/path",
// the path ending in "/*" to match everything below it. Routes are matched
// in order, first match wins; a request no route matches is not limited.
// A request's path is matched as [NormalizePath] spells it (decoded, dot
// segments resolved, without repeated or trailing slashes, ;parameters or
// case), and its method in upper case: every spelling of a limited path that
// a forgiving backend routes to its handler is charged as that route, to the
// one `route` key. The path is also read as servers that do not normalise
// read it ([Middleware.Match]); a path that does not decode, or that the
// two readings put on two different limited routes, is refused with 400.
// [New] refuses what would limit nothing or fail later: no routes, routes
// without policies, a policy without a key or that does not validate, a
// route an earlier one shadows.
//
// # Who pays
//
// The caller is worked out by an [identity.Resolver] shared with the other
// doors (gqllimit, the gateway check): once per request, then read back
// from the context. Each policy of the route is charged for that identity,
// all or nothing (a request denied by one policy consumes nothing from the
// others). A route whose policies key by username reads the JSON login body
// for it ([identity.ReadUsername]), without consuming it; a username over
// 256 bytes, or a body naming "username" twice or in another letter case,
// is refused (400) before any normalisation, after being charged to the
// route's other policies. An unknown API key answers 401 after being charged to the
// anonymous identity, so that guessing keys is limited too.
//
// # Responses
//
// Every limited response carries X-RateLimit-Limit, X-RateLimit-Remaining,
// X-RateLimit-Reset and the IETF draft's RateLimit-Policy and RateLimit
// ([header.Set]). A denial is 429 with Retry-After and a JSON body; a store
// outage on a fail-closed policy is 503 ([WriteDenied]). A leaky_bucket
// policy holds the request for its turn instead of rejecting it while its
// queue has room. Shadow-mode policies never deny and send no headers.
package httplimit
