package gqlproxy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/gqlproxy"
)

func sha(query string) string {
	sum := sha256.Sum256([]byte(query))
	return hex.EncodeToString(sum[:])
}

func apqBody(query, hash string, vars map[string]any) []byte {
	body := map[string]any{"variables": vars, "extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}, "tracing": true}}
	if query != "" {
		body["query"] = query
	}
	b, _ := json.Marshal(body)
	return b
}

// Automatic Persisted Queries in proxy mode, served by the proxy itself: the
// upstream always gets the whole query (and never the persistedQuery
// extension, whose hash would not match the query as forwarded), a hash
// costs what its query costs and meets the same limits, an unknown hash is
// PERSISTED_QUERY_NOT_FOUND and a wrong one is refused, neither forwarded.
func TestProxyPersistedQueries(t *testing.T) {
	up := startUpstream(t)
	cache := gqllimit.NewPersistedQueryCache(10, 0)
	e := newProxyEnv(t, up.URL, func(c *gqllimit.Config) { c.PersistedQueries = cache; c.MaxDepth = 4 })
	q := `query($n: Int) { products(first: $n) { nodes { id title } } }`
	vars := map[string]any{"n": 4}

	r := e.raw(t, "POST", "/graphql", apqBody("", sha(q), vars), nil)
	must(t, r.Status == 200 && r.Code() == gqllimit.CodePersistedQueryNotFound && up.calls.Load() == 0, "unknown hash: %d %s", r.Status, r.Body)

	full := e.raw(t, "POST", "/graphql", apqBody(q, sha(q), vars), nil)
	must(t, full.Status == 200 && len(full.Res.Errors) == 0, "registration: %d %s", full.Status, full.Body)
	forwarded := up.bodies.Load().(string)
	must(t, !strings.Contains(forwarded, "persistedQuery") && strings.Contains(forwarded, `"tracing":true`),
		"forwarded %s: want the other extensions and not persistedQuery", forwarded)

	byHash := e.raw(t, "POST", "/graphql", apqBody("", sha(q), vars), nil)
	must(t, byHash.Status == 200 && string(byHash.Res.Data) == string(full.Res.Data), "by hash: %d %s", byHash.Status, byHash.Body)
	must(t, byHash.Cost(t).RequestedQueryCost == full.Cost(t).RequestedQueryCost && byHash.Cost(t).RequestedQueryCost == 5,
		"by hash costs %d, in full %d, want 1 + 4", byHash.Cost(t).RequestedQueryCost, full.Cost(t).RequestedQueryCost)
	must(t, up.queries.Load().(string) != "" && up.calls.Load() == 2, "the upstream got %d calls, last query %q", up.calls.Load(), up.queries.Load())
	r = e.raw(t, "POST", "/graphql", apqBody("", sha(q), map[string]any{"n": 9}), nil)
	must(t, r.Cost(t).RequestedQueryCost == 10, "n: 9 by hash costs %d, want 10", r.Cost(t).RequestedQueryCost)

	calls := up.calls.Load()
	r = e.raw(t, "POST", "/graphql", apqBody(q, sha("something else"), vars), nil)
	must(t, r.Status == 400 && r.Code() == gqllimit.CodePersistedQueryHashMismatch && up.calls.Load() == calls, "wrong hash: %d %s", r.Status, r.Body)

	deep := `{ products { nodes { reviews { author { name } } } } }`
	cache.Add(context.Background(), sha(deep), deep)
	r = e.raw(t, "POST", "/graphql", apqBody("", sha(deep), nil), nil)
	must(t, r.Status == 400 && r.Code() == gqllimit.CodeMaxDepthExceeded && up.calls.Load() == calls, "deep by hash: %d %s", r.Status, r.Body)
}

// rateLimit(dryRun: true) in proxy mode: the proxy answers data.rateLimit
// itself, in GitHub's shape, charges nothing and forwards nothing.
func TestProxyDryRunField(t *testing.T) {
	up := startUpstream(t)
	e := newProxyEnv(t, up.URL)
	before := e.available(t)
	q := `query($dry: Boolean!) { limits: rateLimit(dryRun: $dry) { cost remaining used limit resetAt __typename } products(first: 5) { nodes { id } } }`
	r := e.post(t, q, map[string]any{"dry": true}, nil)
	must(t, r.Status == 200 && len(r.Res.Errors) == 0 && up.calls.Load() == 0, "dry run: %d %s, upstream calls %d", r.Status, r.Body, up.calls.Load())
	var data map[string]map[string]any
	if err := json.Unmarshal(r.Res.Data, &data); err != nil {
		t.Fatal(err)
	}
	rl := data["limits"]
	must(t, len(data) == 1 && rl != nil, "data %s, want limits alone", r.Res.Data)
	cost := r.Cost(t).RequestedQueryCost
	must(t, rl["cost"] == float64(cost) && rl["remaining"] == float64(before) && rl["limit"] == float64(1000) && rl["used"] == float64(1000-before),
		"rateLimit %v, want cost %d and the bucket as it stands", rl, cost)
	must(t, rl["__typename"] == "RateLimit", "__typename %v", rl["__typename"])
	if at, err := time.Parse(time.RFC3339, rl["resetAt"].(string)); err != nil || at.After(e.clock.Now()) {
		t.Errorf("resetAt %v (%v), want now: the bucket is full", rl["resetAt"], err)
	}
	must(t, e.available(t) == before, "the dry run charged")
	// The same query for real is priced the same and forwarded.
	real := e.post(t, q, map[string]any{"dry": false}, nil)
	must(t, real.Cost(t).RequestedQueryCost == cost && up.calls.Load() == 1, "for real: %d %s", real.Status, real.Body)
}

// Whatever the upstream answers that is not a GraphQL response is
// UPSTREAM_ERROR, 502, with a generic message (the detail logged), all but 1
// refunded, and no rejection counted (the operation was admitted); a
// GraphQL response with errors passes through.
func TestProxyUpstreamReplies(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		passes bool
	}{
		{"html", 500, `<html>internal error at 10.1.2.3</html>`, false},
		{"empty object", 200, `{}`, false},
		{"data null, no errors", 200, `{"data":null}`, false},
		{"data not an object", 200, `{"data":5}`, false},
		{"errors not objects", 200, `{"data":null,"errors":[1]}`, false},
		{"a null error", 200, `{"data":null,"errors":[null]}`, false},
		{"errors not a list", 200, `{"errors":"boom"}`, false},
		{"truncated", 200, `{"data":{"products":`, false},
		{"GraphQL errors", 200, `{"data":null,"errors":[{"message":"rating must be between 1 and 5"}]}`, true},
		{"partial data", 200, `{"data":{"products":null},"errors":[{"message":"shop closed","path":["products"]}]}`, true},
		// A redirect is not followed: it would take the caller's headers elsewhere.
		{"redirect", http.StatusTemporaryRedirect, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var elsewhere atomic.Int64
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				w.Write([]byte(`{"data":{"products":{"nodes":[]}}}`))
			}))
			t.Cleanup(other.Close)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.status == http.StatusTemporaryRedirect {
					http.Redirect(w, r, other.URL+"/graphql", tc.status)
					return
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			t.Cleanup(func() {
				if elsewhere.Load() != 0 {
					t.Error("the proxy followed the upstream's redirect")
				}
			})
			t.Cleanup(up.Close)
			e := newProxyEnv(t, up.URL)
			before := e.available(t)
			r := e.post(t, `{ products(first: 10) { nodes { id } } }`, nil, nil)
			if tc.passes {
				must(t, r.Status == 200 && len(r.Res.Errors) == 1 && !strings.Contains(r.Body, "UPSTREAM_ERROR"), "%d %s", r.Status, r.Body)
				return
			}
			must(t, r.Status == http.StatusBadGateway && r.Code() == gqlproxy.CodeUpstreamError, "%d %s", r.Status, r.Body)
			must(t, !strings.Contains(r.Body, "10.1.2.3") && !strings.Contains(r.Body, "status"), "the answer tells the upstream's detail: %s", r.Body)
			must(t, e.available(t) == before-1, "bucket %d, want %d − 1", e.available(t), before)
			must(t, e.rejections.get(gqlproxy.CodeUpstreamError) == 0, "an upstream failure counted as a rejection")
		})
	}
}
