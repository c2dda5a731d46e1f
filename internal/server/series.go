package server

import (
	"sync"
	"sync/atomic"
)

// series resolves a metric's series by their label values once: the first
// use of a key calls resolve (the metric vector's WithLabelValues, which hashes
// the labels and locks the vector) and later ones read it from a map that
// is never written, only replaced, so the hot path takes no lock. A series
// is made on first use, as WithLabelValues would, so /metrics shows the
// same series it would without the cache. Keys are label values the
// config bounds (policy and store names, codes, kinds); a series deleted
// from its vector must not be cached here.
type series[K comparable, T any] struct {
	mu      sync.Mutex // serialises misses
	m       atomic.Pointer[map[K]T]
	resolve func(K) T
}

func newSeries[K comparable, T any](resolve func(K) T) *series[K, T] {
	s := &series[K, T]{resolve: resolve}
	s.m.Store(&map[K]T{})
	return s
}

// get returns the series of k, made on its first use.
func (s *series[K, T]) get(k K) T {
	if v, ok := (*s.m.Load())[k]; ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.m.Load()
	if v, ok := old[k]; ok {
		return v
	}
	v := s.resolve(k)
	next := make(map[K]T, len(old)+1)
	for key, val := range old {
		next[key] = val
	}
	next[k] = v
	s.m.Store(&next)
	return v
}
