// Package memstore is the in-process limiter.Store: the same algorithms and
// decisions as limiter/redisstore, for a single instance or as the local
// fallback of a gateway whose Redis is down. Its memory is bounded: at most
// Options.MaxKeys keys, evicting the state whose loss grants the least and
// never one that is denying.
//
//	lim, err := limiter.New(memstore.New(nil))
package memstore
