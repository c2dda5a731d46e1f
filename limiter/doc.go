// Package limiter is costgate's rate-limiting core: named policies ([Policy]),
// the decisions they make ([Decision]), the [Store] that keeps their state
// (package memstore in one process, redisstore shared through Redis, with
// identical decisions for the same calls), and a [Limiter] that applies a
// policy's mode and fail mode:
//
//	lim, err := limiter.New(memstore.New(nil))
//	d := lim.Allow(ctx, &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket,
//		Limit: 1000, Period: time.Minute, Burst: 150, Key: []string{"api_key"}}, key, 1)
//
// The doors (httplimit, gqllimit, the gateway check) are built on it; the
// algorithms are defined on their [Algorithm] constants, and
// docs/configuration.md sets them side by side.
package limiter
