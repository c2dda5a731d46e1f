// Package identity decides who pays for a request: the client address, the
// API key and what it stands for (tenant, plan), the login username, the
// route, and any key part of the application's own. Every door of costgate
// (REST and login in httplimit, GraphQL in gqllimit, the gateway check
// service) asks the same [Resolver], so an identity is worked out once per
// request, stored in its context ([Resolver.Attach], [Resolver.Middleware])
// and read back by every later step ([FromContext]).
//
// # Key parts
//
// A policy's Key lists the parts its store key is built from:
//
//   - ip: the client address (see [ClientIP]); IPv6 grouped by /64.
//   - api_key: the key from the API-key header, when the [Lookup] knows it;
//     a caller without one is anonymous and its address stands in.
//   - tenant, plan: what the Lookup says of the key; "anonymous" without one.
//   - username: the login username, read by httplimit from a JSON body
//     (NFKC, case folded, so "Alice" and "ＡＬＩＣＥ" are one user).
//   - route: the method and route pattern the request matched.
//   - header:NAME: the value of request header NAME.
//   - a name of Config.Parts: a function of the application's own (a JWT
//     subject, a user id from the context).
//
// A request that has no value for api_key, header:NAME or an application
// part is keyed by its client address in that place, never by an empty
// value: a missing header can never put every caller into one bucket.
//
// API keys, addresses, usernames, header values and application parts enter
// a store key only through a keyed hash (HMAC-SHA-256 with Config.HashKey):
// no secret or personal data reaches Redis. Gateways sharing a store must
// share the hash key.
//
// # Unknown keys
//
// An API key the Lookup does not know marks the identity UnknownKey: the
// doors answer 401 after charging the request to the anonymous identity (the
// client address), so guessing keys is itself limited, and no state is ever
// keyed by a guessed key.
package identity
