package gqllimit

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// lru is a least-recently-used cache bounded by a number of entries and by the memory
// its entries are estimated to hold. It is safe for concurrent use.
type lru[K comparable, V any] struct {
	mu         sync.Mutex
	entries    map[K]*lruEntry[K, V]
	head       lruEntry[K, V] // head.next is the most recently used, head.prev the least
	maxEntries int
	maxBytes   int64
	bytes      int64
}

type lruEntry[K comparable, V any] struct {
	key        K
	value      V
	size       int64
	prev, next *lruEntry[K, V]
}

func newLRU[K comparable, V any](maxEntries int, maxBytes int64) *lru[K, V] {
	c := &lru[K, V]{entries: make(map[K]*lruEntry[K, V]), maxEntries: maxEntries, maxBytes: maxBytes}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

func (c *lru[K, V]) get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.unlink(e)
	c.pushFront(e)
	return e.value, true
}

// add keeps value under key, size its estimated memory; the least recently used
// entries make room. A value larger than the whole budget is not kept.
func (c *lru[K, V]) add(key K, value V, size int64) {
	if size > c.maxBytes || c.maxEntries <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.bytes += size - e.size
		e.value, e.size = value, size
		c.unlink(e)
		c.pushFront(e)
	} else {
		e := &lruEntry[K, V]{key: key, value: value, size: size}
		c.entries[key] = e
		c.bytes += size
		c.pushFront(e)
	}
	for len(c.entries) > c.maxEntries || c.bytes > c.maxBytes {
		old := c.head.prev
		c.unlink(old)
		delete(c.entries, old.key)
		c.bytes -= old.size
	}
}

func (c *lru[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *lru[K, V]) unlink(e *lruEntry[K, V]) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (c *lru[K, V]) pushFront(e *lruEntry[K, V]) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

// documentWeight estimates the memory a parsed document takes from its text: gqlparser's
// AST of a dense query is 25 to 50 times the size of the text.
func documentWeight(query string) int64 { return 50*int64(len(query)) + 1024 }

// Cache sizes taken when a size given to a constructor is zero or less.
const (
	defaultCacheEntries = 1000
	defaultCacheBytes   = 64 << 20
)

// NewQueryCache returns a cache of parsed and validated documents for gqlgen's
// handler.Server.SetQueryCache, bounded by entries and by an estimate of the memory the
// documents hold (maxBytes), not by their number alone: a thousand documents at the token
// limit would otherwise take gigabytes. Zero or less takes the defaults:
// 1000 entries, 64 MiB.
func NewQueryCache(entries int, maxBytes int64) graphql.Cache[*ast.QueryDocument] {
	return stringCache[*ast.QueryDocument]{newLRU[string, *ast.QueryDocument](orDefault(entries, defaultCacheEntries), orDefault(maxBytes, defaultCacheBytes)),
		func(key string, _ *ast.QueryDocument) int64 { return documentWeight(key) }}
}

// NewPersistedQueryCache returns a cache of Automatic Persisted Queries (hash → query),
// bounded by entries and by the bytes of the queries, for [Config.PersistedQueries] and
// gqlgen's extension.AutomaticPersistedQuery. Zero or less takes the defaults:
// 1000 entries, 64 MiB.
func NewPersistedQueryCache(entries int, maxBytes int64) graphql.Cache[string] {
	return stringCache[string]{newLRU[string, string](orDefault(entries, defaultCacheEntries), orDefault(maxBytes, defaultCacheBytes)),
		func(key, query string) int64 { return int64(len(key) + len(query) + 64) }}
}

func orDefault[N int | int64](v, def N) N {
	if v <= 0 {
		return def
	}
	return v
}

// stringCache is an lru as gqlgen's graphql.Cache.
type stringCache[V any] struct {
	c     *lru[string, V]
	weigh func(string, V) int64
}

func (s stringCache[V]) Get(_ context.Context, key string) (V, bool) { return s.c.get(key) }

func (s stringCache[V]) Add(_ context.Context, key string, value V) {
	s.c.add(key, value, s.weigh(key, value))
}
