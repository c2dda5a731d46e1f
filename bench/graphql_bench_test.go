package bench

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/gqlproxy"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// shopQuery selects 30 fields of the example shop (graph/), the query of
// the load test's GraphQL contender.
const shopQuery = `query Shop($first: Int) {
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

func shopBody(b *testing.B) []byte {
	b.Helper()
	body, err := json.Marshal(map[string]any{"query": shopQuery, "variables": map[string]any{"first": 10}})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// shopServer is the example shop served by gqlgen, as `gqlgen init` sets
// one up: the POST transport and a cache of parsed documents.
func shopServer() *handler.Server {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	return srv
}

// graphqlLimiter is costgate's GraphQL limiter over memstore, with a
// bucket per client address that never runs dry during a benchmark; schema
// is nil embedded (the extension takes gqlgen's) and the upstream's in
// proxy mode.
func graphqlLimiter(b *testing.B, schema *complexity.Schema) *gqllimit.Limiter {
	b.Helper()
	discard := slog.New(slog.DiscardHandler)
	lim, err := limiter.New(memstore.New(nil), limiter.WithLogger(discard))
	if err != nil {
		b.Fatal(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("bench-hash-key-0123456789")})
	if err != nil {
		b.Fatal(err)
	}
	p := &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 1 << 30, Period: time.Second, Key: []string{"ip"}}
	gl, err := gqllimit.New(gqllimit.Config{Limiter: lim, Policy: p, Identity: ids, Schema: schema, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	return gl
}

// serveLoop posts body to h until the benchmark ends, failing it on any
// answer but a 200 whose body has no "errors". Besides the wall time it
// reports cpu-ns/op, the CPU time of the whole process per request (every
// goroutine, the garbage collector and, in proxy mode, the upstream's
// included): on a shared machine it moves much less than the wall time.
func serveLoop(b *testing.B, h http.Handler, body []byte) {
	b.Helper()
	serve := func() {
		req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	serve() // the document parsed, validated and priced once, as in a server that runs
	b.ReportAllocs()
	cpu0, ok := processCPU()
	b.ResetTimer()
	for b.Loop() {
		serve()
	}
	if cpu1, _ := processCPU(); ok {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkGraphQL is the 30-field query through the same gqlgen server,
// alone (impl=gqlgen, the base) and behind costgate (impl=costgate:
// gqllimit's Handler on memstore): the difference is costgate's own part,
// reading the body, pricing, charging, refunding and writing
// extensions.cost.
func BenchmarkGraphQL(b *testing.B) {
	body := shopBody(b)
	b.Run("impl=gqlgen", func(b *testing.B) {
		serveLoop(b, shopServer(), body)
	})
	b.Run("impl=costgate", func(b *testing.B) {
		serveLoop(b, graphqlLimiter(b, nil).Handler(shopServer()), body)
	})
}

// BenchmarkGraphQLProxy is the 30-field query sent through a proxy to an
// upstream over loopback: a bare httputil.ReverseProxy (impl=reverseproxy,
// the base) and costgate's proxy mode (impl=costgate: gqlproxy on memstore,
// priced from the shop's schema). The upstream answers every request with
// the reply the example shop gave to the query, recorded once, so that the
// difference is what costgate adds: reading and checking the request,
// validating and pricing it, charging, forwarding, counting the reply's
// actual cost as it streams, refunding, and extensions.cost.
func BenchmarkGraphQLProxy(b *testing.B) {
	body := shopBody(b)
	upstream := cannedUpstream(b, body)
	target, err := url.Parse(upstream.URL + "/graphql")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("impl=reverseproxy", func(b *testing.B) {
		rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = target.Path
		}}
		serveLoop(b, rp, body)
	})
	b.Run("impl=costgate", func(b *testing.B) {
		schema, err := complexity.NewSchema(graph.NewExecutableSchema(graph.Config{}).Schema())
		if err != nil {
			b.Fatal(err)
		}
		p, err := gqlproxy.New(gqlproxy.Config{Limiter: graphqlLimiter(b, schema), Upstream: target.String()})
		if err != nil {
			b.Fatal(err)
		}
		serveLoop(b, p, body)
	})
}

// cannedUpstream records the example shop's reply to body and serves it to
// every request, after reading the request's body.
func cannedUpstream(b *testing.B, body []byte) *httptest.Server {
	b.Helper()
	req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	shopServer().ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("the shop answered %d: %s", w.Code, w.Body)
	}
	reply := w.Body.Bytes()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(reply)
	}))
	b.Cleanup(s.Close)
	return s
}

// BenchmarkGraphQLShare measures costgate's share of a GraphQL request on a
// busy machine, where BenchmarkGraphQL's two runs, seconds apart, meet
// different loads: it serves the 30-field query to gqlgen alone and behind
// costgate alternately, request by request, and adds up the CPU time of the
// whole process during each (every goroutine included). The garbage
// collector, whose cycles would land on one request or the other at random,
// runs between batches of requests instead, outside what is measured: the
// memory costgate adds shows in B/op and allocs/op (two requests per op). It
// reports each contender's cpu-ns per request and share-%: costgate's added
// CPU time in percent of gqlgen's.
//
// trusted=none is costgate without trusted documents, sent the query's
// text; trusted=text and trusted=id list the query among trusted documents
// and send it by its text and by its documentId. gqlgen alone is always
// sent the text.
func BenchmarkGraphQLShare(b *testing.B) {
	text := shopBody(b)
	byID, err := json.Marshal(map[string]any{"documentId": "sha256:" + sha256Hex(shopQuery), "variables": map[string]any{"first": 10}})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		trusted bool
		body    []byte
	}{{"trusted=none", false, text}, {"trusted=text", true, text}, {"trusted=id", true, byID}} {
		b.Run(tc.name, func(b *testing.B) {
			gl := graphqlLimiter(b, nil)
			if tc.trusted {
				gl = trustedLimiter(b, shopQuery)
			}
			shareLoop(b, shopServer(), text, gl.Handler(shopServer()), tc.body)
		})
	}
}

// shareLoop serves aloneBody to alone and limitedBody to limited,
// alternately, as BenchmarkGraphQLShare describes.
func shareLoop(b *testing.B, alone http.Handler, aloneBody []byte, limited http.Handler, limitedBody []byte) {
	serve := func(h http.Handler, body []byte) time.Duration {
		req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		start := processCPUNow(b)
		h.ServeHTTP(w, req)
		spent := processCPUNow(b) - start
		if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
		return spent
	}
	serve(alone, aloneBody)
	serve(limited, limitedBody)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	b.ReportAllocs()
	var gqlgen, costgate time.Duration
	for i := 0; b.Loop(); i++ {
		if i%64 == 0 {
			runtime.GC()
		}
		if i%2 == 0 { // each goes first half the time
			gqlgen += serve(alone, aloneBody)
			costgate += serve(limited, limitedBody)
		} else {
			costgate += serve(limited, limitedBody)
			gqlgen += serve(alone, aloneBody)
		}
	}
	b.ReportMetric(float64(gqlgen)/float64(b.N), "gqlgen-cpu-ns/op")
	b.ReportMetric(float64(costgate)/float64(b.N), "costgate-cpu-ns/op")
	b.ReportMetric(100*float64(costgate-gqlgen)/float64(gqlgen), "share-%")
}

// trustedLimiter is graphqlLimiter with documents as its trusted documents
// (Apollo's manifest), priced with the shop's schema.
func trustedLimiter(b *testing.B, documents ...string) *gqllimit.Limiter {
	b.Helper()
	var ops []map[string]string
	for _, d := range documents {
		ops = append(ops, map[string]string{"id": sha256Hex(d), "name": "", "type": "query", "body": d})
	}
	manifest, err := json.Marshal(map[string]any{"format": "apollo-persisted-query-manifest", "version": 1, "operations": ops})
	if err != nil {
		b.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	lim, err := limiter.New(memstore.New(nil), limiter.WithLogger(discard))
	if err != nil {
		b.Fatal(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("bench-hash-key-0123456789")})
	if err != nil {
		b.Fatal(err)
	}
	schema, err := complexity.NewSchema(graph.NewExecutableSchema(graph.Config{}).Schema())
	if err != nil {
		b.Fatal(err)
	}
	p := &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 1 << 30, Period: time.Second, Key: []string{"ip"}}
	gl, err := gqllimit.New(gqllimit.Config{Limiter: lim, Policy: p, Identity: ids, Schema: schema, Logger: discard,
		TrustedDocuments: &gqllimit.TrustedDocuments{Manifest: manifest}})
	if err != nil {
		b.Fatal(err)
	}
	return gl
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// processCPUNow is the CPU time of the whole process so far, to the
// nanosecond (CLOCK_PROCESS_CPUTIME_ID; getrusage counts in ticks).
func processCPUNow(b *testing.B) time.Duration {
	const clockProcessCPUTime = 2 // CLOCK_PROCESS_CPUTIME_ID (Linux)
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockProcessCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		b.Fatalf("clock_gettime: %v", errno)
	}
	return time.Duration(ts.Nano())
}
