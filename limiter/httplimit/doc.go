// Package httplimit limits the REST routes and login of a net/http or chi
// service by costgate's policies, and answers as a client of a rate limit
// expects: the X-RateLimit-* and IETF RateLimit headers on every response,
// 429 with Retry-After and a JSON body on a denial.
//
// The common cases take one call, [LimitByIP], [LimitByAPIKey] or [Limit]
// with a [KeyFunc]:
//
//	r.With(httplimit.LimitByIP(100, time.Minute)).Get("/hello", hello)
//
// [New] takes the full [Config]: routes by pattern, policies of any
// algorithm and key, plans, a store shared through Redis. docs/embedding.md
// shows both; docs/rest.md is what clients see.
package httplimit
