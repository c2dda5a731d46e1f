// Package httplimit is costgate's net/http middleware: it limits REST routes
// and login by the policies of the route a request matches, and writes the
// headers and bodies clients rely on.
//
// # Routes and identities
//
// Routes are matched in order, first match wins; a request no route matches
// is not limited. Each policy of the route is charged for the request's
// identity, all or nothing (a request denied by one policy consumes nothing
// from the others). A policy's key names identity parts: ip (see
// [ClientIP]), api_key (the X-API-Key header, looked up in the key table;
// anonymous requests stand in their address), tenant and plan (from the key
// table), username (from a JSON login body, read without consuming it, see
// [NormalizeUsername]) and route (method and chi pattern). API keys,
// addresses and usernames enter store keys only through a keyed hash.
// A plan multiplies limit and burst. An unknown API key answers 401 after
// being charged to the anonymous identity, so that guessing keys is limited
// too.
//
// # Responses
//
// Every limited response carries X-RateLimit-Limit, X-RateLimit-Remaining,
// X-RateLimit-Reset and the IETF draft's RateLimit-Policy and RateLimit
// ([SetHeaders]). A denial is 429 with Retry-After and a JSON body; a store
// outage on a fail-closed policy is 503 ([WriteDenied]). A leaky_bucket
// policy holds the request for its turn instead of rejecting it while its
// queue has room. Shadow-mode policies never deny and send no headers.
package httplimit
