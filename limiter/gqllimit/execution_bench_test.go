package gqllimit_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// BenchmarkExecutionCount serves the 30-field query of the example shop (10
// products) to gqlgen alone, to gqlgen counting its actual cost as it runs
// (the counter alone: no pricing, no charge), and to gqlgen whose responses
// are priced by reading their bytes (what the extension did before),
// round-robin, request by request; it adds up the process's CPU time during
// each, the garbage collector run between rounds. counted-% and replied-%
// are what each adds, in percent of gqlgen's own CPU time.
func BenchmarkExecutionCount(b *testing.B) {
	body, _ := json.Marshal(map[string]any{"query": query30, "variables": map[string]any{"first": 10}})
	es := graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}})
	schema, err := complexity.NewSchema(es.Schema())
	if err != nil {
		b.Fatal(err)
	}
	server := func(ext graphql.HandlerExtension) *handler.Server {
		srv := handler.New(es)
		srv.AddTransport(transport.POST{})
		srv.SetQueryCache(lru.New[*ast.QueryDocument](100))
		if ext != nil {
			srv.Use(ext)
		}
		return srv
	}
	servers := []http.Handler{server(nil), server(gqllimit.NewCountOnly(schema)), server(gqllimit.NewReplyPriced(schema))}
	serve := func(h http.Handler) time.Duration {
		req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		start := processCPU(b)
		h.ServeHTTP(w, req)
		spent := processCPU(b) - start
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
		return spent
	}
	for _, h := range servers {
		serve(h)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	b.ReportAllocs()
	var spent [3]time.Duration
	for i := 0; b.Loop(); i++ {
		if i%64 == 0 {
			runtime.GC()
		}
		for k := range servers { // each goes first a third of the time
			j := (i + k) % len(servers)
			spent[j] += serve(servers[j])
		}
	}
	b.ReportMetric(100*float64(spent[1]-spent[0])/float64(spent[0]), "counted-%")
	b.ReportMetric(100*float64(spent[2]-spent[0])/float64(spent[0]), "replied-%")
}

// processCPU is the CPU time of the whole process so far, to the nanosecond.
func processCPU(b *testing.B) time.Duration {
	var ts syscall.Timespec
	const clockProcessCPUTime = 2 // CLOCK_PROCESS_CPUTIME_ID (Linux)
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockProcessCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		b.Fatalf("clock_gettime: %v", errno)
	}
	return time.Duration(ts.Nano())
}
