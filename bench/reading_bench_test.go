package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// readingDocuments are the documents a client would send to cost the gateway
// the most work for the fewest tokens: each written anew for every request
// (a comment numbers it), so that no cache of parsed documents helps.
var readingDocuments = []struct {
	name string
	doc  func(n int) string
}{
	// The cheapest there is: what any request costs the gateway.
	{"typename", func(n int) string { return fmt.Sprintf("# %d\n{ __typename }", n) }},
	// Issue 24, item 5: 996 sibling fields under an empty list, 1 token before.
	{"fields996", func(n int) string {
		return fmt.Sprintf("# %d\n{ products(first: 0) { nodes { %s} } }", n, strings.Repeat("id ", 996))
	}},
	// Item 1: the 15 KB unused fragment whose fields conflict pair by pair.
	{"aliasBomb15k", func(n int) string {
		return fmt.Sprintf("# %d\n{ __typename } fragment F on Product { %s}", n, strings.Repeat("a: id a: title ", 1000))
	}},
	// The same conflicts within every limit: 498 selections of one list
	// field with two arguments by turns, in an operation not selected.
	{"argumentPairs", func(n int) string {
		var b strings.Builder
		for i := range 498 {
			fmt.Fprintf(&b, "variants(first: %d) { id } ", 1+i%2)
		}
		return fmt.Sprintf("# %d\nquery A { __typename } query B { products { nodes { %s} } }", n, b.String())
	}},
	// Item 1: 12,000 fields in an operation not selected.
	{"unselected12k", func(n int) string {
		return fmt.Sprintf("# %d\nquery A { __typename } query B { products { nodes { %s} } }", n, strings.Repeat("id ", 12000))
	}},
	// Tokens, not fields: 14,000 list items where an ID goes.
	{"listValues", func(n int) string {
		return fmt.Sprintf("# %d\n{ product(id: [%s]) { id } }", n, strings.Repeat("1,", 14000))
	}},
	// The same, failing to parse at its very end.
	{"parseFailsLate", func(n int) string {
		return fmt.Sprintf("# %d\n{ product(id: [%s]) { id } ", n, strings.Repeat("1,", 14000))
	}},
	// Fragments spread inside fragments, 15 deep, 60 times over.
	{"fragmentChains", func(n int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "# %d\n{ ", n)
		for c := range 60 {
			fmt.Fprintf(&b, "...C%d_0 ", c)
		}
		b.WriteString("} ")
		for c := range 60 {
			for i := range 14 {
				fmt.Fprintf(&b, "fragment C%d_%d on Query { ...C%d_%d } ", c, i, c, i+1)
			}
			fmt.Fprintf(&b, "fragment C%d_14 on Query { __typename } ", c)
		}
		return b.String()
	}},
	// Bytes: a 900 KB string where an ID goes.
	{"bigString", func(n int) string {
		return fmt.Sprintf("# %d\n{ product(id: \"%s\") { id } }", n, strings.Repeat("x", 900<<10))
	}},
}

// BenchmarkGraphQLReading is a client spending its refill on the documents
// that are cheapest to charge and costliest to read (readingDocuments), each
// sent anew, through gqllimit's Handler around the example shop as the
// server sets it up (POST and GET transports, memstore). Every answer counts,
// refusals included. It reports the process's CPU time per request
// (cpu-ns/op), the tokens the bucket lost per request (tokens/op: charges
// less refunds, read from the bucket, whose clock stands still), and their
// ratio as the share of one core that a client refilled 50 tokens a second
// keeps busy (core-%-at-50tok/s; the target is 5). Where nothing is charged
// the share is unbounded: it reports tokens/op 0 and no share.
func BenchmarkGraphQLReading(b *testing.B) {
	for _, d := range readingDocuments {
		b.Run("doc="+d.name, func(b *testing.B) {
			h, bucket := readingServer(b)
			bodies := make([][]byte, b.N+1)
			for i := range bodies {
				bodies[i], _ = json.Marshal(map[string]string{"query": d.doc(i), "operationName": operationOf(d.doc(i))})
			}
			serveReading(b, h, bodies[b.N]) // the first request of a server, apart
			b.ReportAllocs()
			before := bucket()
			cpu0 := processCPUNow(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				serveReading(b, h, bodies[i])
			}
			b.StopTimer()
			cpu := processCPUNow(b) - cpu0
			tokens := before - bucket()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(tokens)/float64(b.N), "tokens/op")
			if tokens > 0 {
				// 50 tokens a second buy 50/(tokens per request) requests a
				// second, each taking cpu/b.N of one core.
				b.ReportMetric(100*50*cpu.Seconds()/float64(tokens), "core-%-at-50tok/s")
			}
		})
	}
}

// operationOf names the operation to run: A where the document has one.
func operationOf(doc string) string {
	if strings.Contains(doc, "query A ") {
		return "A"
	}
	return ""
}

// readingServer is the example shop behind gqllimit's Handler, on a
// memstore whose clock stands still (nothing refills, so the bucket tells
// what was charged), and a function reading the client's bucket.
func readingServer(b *testing.B) (http.Handler, func() int64) {
	b.Helper()
	discard := slog.New(slog.DiscardHandler)
	now := time.Now()
	lim, err := limiter.New(memstore.New(&memstore.Options{Clock: func() time.Time { return now }}), limiter.WithLogger(discard))
	if err != nil {
		b.Fatal(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("bench-hash-key-0123456789")})
	if err != nil {
		b.Fatal(err)
	}
	p := &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 1_000_000_000, Period: time.Second, Key: []string{"ip"}}
	gl, err := gqllimit.New(gqllimit.Config{Limiter: lim, Policy: p, Identity: ids, Logger: discard,
		Limits: gqllimit.Limits{MaxBodyBytes: 1 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	h := gl.Handler(srv)
	bucket := func() int64 {
		req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(`{"query":"{ __typename }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(gqllimit.HeaderDryRun, "1") // prices, charges nothing
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var res struct {
			Extensions struct {
				Cost struct {
					ThrottleStatus struct{ CurrentlyAvailable int64 } `json:"throttleStatus"`
				} `json:"cost"`
			} `json:"extensions"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
			b.Fatalf("dry run: %v: %s", err, w.Body)
		}
		return res.Extensions.Cost.ThrottleStatus.CurrentlyAvailable
	}
	return h, bucket
}

// serveReading posts body to h; any answer but a throttled one (the bucket
// never runs dry here) is the document's.
func serveReading(b *testing.B, h http.Handler, body []byte) {
	req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code == http.StatusTooManyRequests || w.Code >= 500 {
		b.Fatalf("status %d: %.300s", w.Code, w.Body)
	}
}
