package gqllimit_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"

	"github.com/costgate/costgate/limiter/gqllimit"
)

// apqBody is a POST body with a query (or none), variables and the
// persisted-query extension.
func apqBody(query, hash string, vars map[string]any) []byte {
	body := map[string]any{"variables": vars, "extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}}
	if query != "" {
		body["query"] = query
	}
	b, _ := json.Marshal(body)
	return b
}

// Automatic Persisted Queries, embedded: a query registered with its hash
// is then served by the hash alone, at the same price and under the same
// limits before validation; an unknown hash is PERSISTED_QUERY_NOT_FOUND; a
// hash that is not the query's is refused and registers nothing.
func TestPersistedQueries(t *testing.T) {
	cache := gqllimit.NewPersistedQueryCache(10, 0)
	e := newEnv(t, envOpts{cfg: func(c *gqllimit.Config) { c.PersistedQueries = cache; c.MaxDepth = 4 }})
	q := `query($n: Int) { products(first: $n) { nodes { id variants(first: 2) { id } } } }`
	h := sha(q)
	vars := map[string]any{"n": 5}

	if r := e.raw(t, "POST", "/graphql", apqBody("", h, vars), nil); r.Status != 200 || r.Code() != gqllimit.CodePersistedQueryNotFound {
		t.Fatalf("unknown hash: %d %s", r.Status, r.Body)
	}
	before := e.available(t)
	full := e.raw(t, "POST", "/graphql", apqBody(q, h, vars), nil)
	if full.Status != 200 || len(full.Res.Errors) > 0 {
		t.Fatalf("registration: %d %s", full.Status, full.Body)
	}
	want := price(t, q, vars)
	if full.Cost(t).RequestedQueryCost != want {
		t.Errorf("full text costs %d, want %d", full.Cost(t).RequestedQueryCost, want)
	}
	charged := before - e.available(t)

	before = e.available(t)
	byHash := e.raw(t, "POST", "/graphql", apqBody("", h, vars), nil)
	if byHash.Status != 200 || len(byHash.Res.Errors) > 0 {
		t.Fatalf("by hash: %d %s", byHash.Status, byHash.Body)
	}
	if got := byHash.Cost(t); got.RequestedQueryCost != want || *got.ActualQueryCost != *full.Cost(t).ActualQueryCost {
		t.Errorf("by hash: cost %+v, want that of the full text %+v", got, full.Cost(t))
	}
	if string(byHash.Res.Data) != string(full.Res.Data) {
		t.Errorf("by hash: data %s, want %s", byHash.Res.Data, full.Res.Data)
	}
	if got := before - e.available(t); got != charged {
		t.Errorf("by hash charged %d, the full text %d", got, charged)
	}

	// By GET, as CDNs like it.
	ext, _ := json.Marshal(map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": h}})
	get := e.raw(t, "GET", "/graphql?variables="+url.QueryEscape(`{"n":5}`)+"&extensions="+url.QueryEscape(string(ext)), nil, nil)
	if get.Status != 200 || get.Cost(t).RequestedQueryCost != want {
		t.Errorf("GET by hash: %d %s", get.Status, get.Body)
	}
	// A variable the price depends on is priced anew, by hash as in full.
	eight := map[string]any{"n": 8}
	if r := e.raw(t, "POST", "/graphql", apqBody("", h, eight), nil); r.Cost(t).RequestedQueryCost != price(t, q, eight) {
		t.Errorf("n: 8 by hash costs %d, want %d", r.Cost(t).RequestedQueryCost, price(t, q, eight))
	}

	// A wrong hash: refused, nothing registered under it.
	other, wrong := `{ products(first: 1) { nodes { id } } }`, sha("another query")
	if r := e.raw(t, "POST", "/graphql", apqBody(other, wrong, nil), nil); r.Status != 400 || r.Code() != gqllimit.CodePersistedQueryHashMismatch {
		t.Errorf("wrong hash: %d %s", r.Status, r.Body)
	}
	if r := e.raw(t, "POST", "/graphql", apqBody("", wrong, nil), nil); r.Code() != gqllimit.CodePersistedQueryNotFound {
		t.Errorf("the wrong hash was registered: %s", r.Body)
	}

	// The limits before validation hold for a query sent by hash: one in the
	// cache (as another gateway sharing it would have put it) is too deep.
	deep := `{ products { nodes { reviews { author { name } } } } }`
	cache.Add(context.Background(), sha(deep), deep)
	r := e.raw(t, "POST", "/graphql", apqBody("", sha(deep), nil), nil)
	if r.Status != 400 || r.Code() != gqllimit.CodeMaxDepthExceeded || r.Cost(t).RequestedQueryCost != price(t, deep, nil) {
		t.Errorf("deep query by hash: %d %s", r.Status, r.Body)
	}
	// And one sent in full is refused before it is registered.
	deeper := `{ products { nodes { reviews { product { reviews { id } } } } } }`
	e.raw(t, "POST", "/graphql", apqBody(deeper, sha(deeper), nil), nil)
	if _, ok := cache.Get(context.Background(), sha(deeper)); ok {
		t.Errorf("a query over max_depth was registered")
	}
}
