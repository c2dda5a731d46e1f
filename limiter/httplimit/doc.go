// Package httplimit is costgate's net/http middleware: it limits REST routes
// and login by the policies of the route a request matches, and writes the
// headers and bodies clients rely on.
//
// # One call
//
// The common cases take one line, as go-chi/httprate's do:
//
//	r.Use(httplimit.LimitByIP(100, time.Minute))
//	r.With(httplimit.LimitByAPIKey(1000, time.Minute, keys)).Get("/api/orders", orders)
//	r.With(auth, httplimit.Limit(50, time.Minute, httplimit.KeyFromContext(userKey{}))).Post("/upload", upload)
//
// [Limit] limits every request it sees by the key a [KeyFunc] returns
// ([KeyByIP], [KeyByAPIKey], [KeyByEndpoint], [KeyFromContext], [Keys], or
// your own): under r.With or r.Group that is the route or group, with no
// Route to write. By default the count is a sliding window kept in process
// memory, and keys are hashed with a random key drawn at start; [WithStore]
// and [WithIdentity] share them between processes (a shared store needs a
// shared hash key, and is refused without one). The one-call forms panic at
// setup on a programmer's error (a limit below 1, a nil key function, a
// shared store without a shared hash key), never on a request; limits read
// from a file go through [New], which returns errors.
//
// # Middleware order
//
// A key function reads the request as it reaches the limiter. One that
// reads the context ([KeyFromContext], a user id your authentication put
// there) needs that middleware to run first: r.With(auth, limit), not
// r.With(limit, auth). Run too early, it finds nothing, and the request is
// refused with 500 and a log line rather than counted in one bucket with
// every other caller; an error or an empty key from any KeyFunc is refused
// the same way. With [New], an identity.PartFunc that finds nothing is keyed
// by the client address instead (see identity.Config.Parts).
//
// # Routes
//
// A [Route] pattern is the config file's syntax: "METHOD /path" or "/path",
// the path ending in "/*" to match everything below it. Routes are matched
// in order, first match wins; a request no route matches is not limited.
// A request's path is matched normalised (decoded, dot segments resolved,
// without repeated or trailing slashes, ;parameters or case; the README's
// "In front of any gateway" lists the rules), and its method in upper case: every spelling of a limited path that
// a forgiving backend routes to its handler is charged as that route, to the
// one `route` key. The path is also read as servers that do not normalise
// read it; a path that does not decode, or that the
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
// for it, without consuming it; a username over
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
// outage on a fail-closed policy is 503 with Retry-After. A leaky_bucket
// policy holds the request for its turn instead of rejecting it while its
// queue has room. Shadow-mode policies never deny and send no headers.
package httplimit
