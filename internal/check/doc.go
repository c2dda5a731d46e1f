// Package check is the server's gateway check service: the REST and login
// limits of the config, answered for a gateway that sits in front of a
// service in any language, so that the same policies, the same store keys
// and the same budget apply whether a request reaches costgate's embedded
// middleware, /v1/check or Envoy's rate-limit gRPC.
//
// # Forward auth: /v1/check
//
// [Handler] answers a forward-auth sub-request (nginx auth_request, Traefik
// ForwardAuth, Envoy ext_authz over HTTP). The original request is named by
// X-Forwarded-Method and X-Forwarded-Uri (or X-Original-URI), or, for
// Envoy's path_prefix, by the check's own method and the path after
// /v1/check. Its route is matched (the path normalised by
// routelimit.NormalizePath, the method compared without case) and charged
// exactly as httplimit does it;
// the answer is 200 or 429 with the body and headers of the middleware, and
// the rate-limit headers on both so that the gateway can copy them to the
// client. Only the gateways (identity.trusted_proxies) may ask: anyone else
// could name any client address and spend its budget.
//
// # Envoy: RateLimitService
//
// [RateLimitService] implements envoy.service.ratelimit.v3.RateLimitService.
// A domain and the entries of each descriptor select policies through a
// tree shaped like envoyproxy/ratelimit's config ([Descriptor]); entries
// marked with a key part (remote_address as ip, a header as api_key) build
// the same identity, and so the same store key, as the HTTP doors. The
// descriptors of one call are charged all or nothing.
//
// # Values a client controls
//
// Neither door turns a value the client controls (an API key, a username,
// a header, bytes that are not UTF-8) into an error, which a gateway
// failing open would answer by letting the request through unlimited: each
// is charged to the client address and answered as the middleware answers
// it, a refusal being 400 or OVER_LIMIT. Errors are for the gateway's own
// mistakes. Serve the gRPC service with [Codec].
package check
