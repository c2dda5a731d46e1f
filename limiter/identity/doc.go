// Package identity decides who pays for a request: the client address, the
// API key and what it stands for (tenant, plan), the login username, the
// route, and any key part of the application's own. Every door of costgate
// (REST and login in httplimit, GraphQL in gqllimit, the gateway check
// service) asks the same [Resolver], so an identity is worked out once per
// request, stored in its context ([Resolver.Attach], [Resolver.Middleware])
// and read back by every later step ([FromContext]):
//
//	ids, err := identity.New(identity.Config{HashKey: key, APIKeys: identity.Table{"key-123": {Tenant: "acme"}}})
//
// The key parts a policy names are the Part constants ([PartIP] ...).
package identity
