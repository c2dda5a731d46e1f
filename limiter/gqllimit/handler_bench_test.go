package gqllimit_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// query30 selects 30 fields of the example shop.
const query30 = `query Shop($first: Int) {
  products(first: $first) {
    totalCount
    pageInfo { hasNextPage endCursor }
    nodes {
      id title priceCents description inventory
      variants(first: 3) { id sku color size priceCents }
      reviews(first: 2) { id rating body author { id name } }
    }
    edges { cursor node { id title priceCents } }
  }
}`

func check30(b *testing.B) {
	b.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: query30})
	if err != nil {
		b.Fatal(err)
	}
	if m, _ := complexity.Measure(doc, ""); m.Fields != 30 {
		b.Fatalf("query30 has %d fields, want 30", m.Fields)
	}
}

func shopServer() *handler.Server {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	return srv
}

func memLimited(b *testing.B, srv *handler.Server, trusted ...string) http.Handler {
	b.Helper()
	lim, err := limiter.New(memstore.New(nil), limiter.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("bench-hash-key-0123456789")})
	if err != nil {
		b.Fatal(err)
	}
	// A bucket that never runs dry during the benchmark.
	p := &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 1 << 30, Period: time.Second, Key: []string{"ip"}}
	cfg := gqllimit.Config{Limiter: lim, Policy: p, Identity: ids, Logger: slog.New(slog.DiscardHandler)}
	if len(trusted) > 0 {
		cfg.TrustedDocuments = &gqllimit.TrustedDocuments{Manifest: apolloManifest(trusted...)}
	}
	gl, err := gqllimit.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return gl.Handler(srv)
}

// BenchmarkHandler serves the 30-field query through the whole handler,
// gqlgen alone and behind costgate (memstore): the difference is
// costgate's part. costgate/trusted=text and costgate/trusted=id list the
// query among trusted documents and send it by its text and by its
// documentId.
//
//	go test -run='^$' -bench=Handler -benchmem ./limiter/gqllimit/
func BenchmarkHandler(b *testing.B) {
	check30(b)
	text, _ := json.Marshal(map[string]any{"query": query30, "variables": map[string]any{"first": 10}})
	byID, _ := json.Marshal(map[string]any{"documentId": "sha256:" + sha(query30), "variables": map[string]any{"first": 10}})
	for _, tc := range []struct {
		name string
		body []byte
		h    func(b *testing.B) http.Handler
	}{
		{"gqlgen", text, func(b *testing.B) http.Handler { return shopServer() }},
		{"costgate", text, func(b *testing.B) http.Handler { return memLimited(b, shopServer()) }},
		{"costgate/trusted=text", text, func(b *testing.B) http.Handler { return memLimited(b, shopServer(), query30) }},
		{"costgate/trusted=id", byID, func(b *testing.B) http.Handler { return memLimited(b, shopServer(), query30) }},
	} {
		body := tc.body
		b.Run(tc.name, func(b *testing.B) {
			h := tc.h(b)
			serve := func() {
				req := httptest.NewRequest("POST", "/graphql", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			serve()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				serve()
			}
		})
	}
}
