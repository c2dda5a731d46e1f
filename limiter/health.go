package limiter

import "errors"

// ErrBreakerOpen is the store error of a check that skipped a store (or one
// node of it) whose circuit breaker is open: it failed repeatedly, and only a
// probe now and then goes through until it answers again.
var ErrBreakerOpen = errors.New("limiter: store circuit breaker open")

// StoreState is a store's health as readiness reports it.
type StoreState string

const (
	StoreUp          StoreState = "up"
	StoreDown        StoreState = "down"
	StoreBreakerOpen StoreState = "breaker open"
	// StoreOutOfMemory is a store that answers but refuses writes (Redis at
	// maxmemory with noeviction): PING works, every check fails.
	StoreOutOfMemory StoreState = "out of memory"
)
