package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/metricstest"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// serve runs the server for yaml on a real listener and returns its URL.
func serve(t *testing.T, yaml string) string {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return serveHandler(t, s)
}

// serveHandler serves s on a real listener and returns its URL.
func serveHandler(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := HTTPServer(s, slog.New(slog.DiscardHandler))
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String()
}

// cost is extensions.cost of one GraphQL answer.
func postOperation(t *testing.T, url, query string) gqllimit.Cost {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"query": query})
	resp, err := http.Post(url+"/graphql", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return gqllimit.Cost{}
	}
	defer resp.Body.Close()
	var res struct {
		Extensions struct{ Cost gqllimit.Cost } `json:"extensions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Errorf("%s: %d, %v", query, resp.StatusCode, err)
	}
	return res.Extensions.Cost
}

const operationsConfig = `
policies:
  graphql: {algorithm: token_bucket, limit: 1000000, period: 1s, burst: 1000000, key: [ip]}
graphql: {max_depth: 4, metrics: {max_operations: 10}}
`

// The operation label is bounded, whatever names clients invent, and a
// known operation's estimated, actual and delta costs are its own.
func TestOperationMetrics(t *testing.T) {
	url := serve(t, operationsConfig)
	const shop = `query Shop { products(first: 3) { nodes { id reviews(first: 10) { id } } } }`
	var want gqllimit.Cost
	for range 10 {
		want = postOperation(t, url, shop)
	}
	if want.ActualQueryCost == nil || *want.ActualQueryCost >= want.RequestedQueryCost {
		t.Fatalf("Shop: want an actual cost below the estimate, got %+v", want)
	}
	for range 3 {
		postOperation(t, url, `{ products(first: 2) { nodes { id } } }`)
	}
	for range 3 {
		postOperation(t, url, `query Deep { products { nodes { reviews { author { name } } } } }`)
	}

	// 10,000 invented names, from a few clients at once.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < 10_000; i += 4 {
				postOperation(t, url, fmt.Sprintf("query Invented%d { __typename }", i))
			}
		})
	}
	wg.Wait()

	m := metricstest.Scrape(t, url+"/metrics")
	names := m.LabelValues("costgate_graphql_operation_", "operation")
	if len(names) > 10+2 {
		t.Errorf("%d operation labels, want at most max_operations + 2 = 12: %v", len(names), names)
	}
	for _, label := range []string{"Shop", "anonymous", "other", "Deep"} {
		if !names[label] {
			t.Errorf("no series for operation %q: %v", label, names)
		}
	}
	requested, actual := float64(want.RequestedQueryCost), float64(*want.ActualQueryCost)
	for kind, sum := range map[string]float64{"estimated": 10 * requested, "actual": 10 * actual, "delta": 10 * (requested - actual)} {
		labels := map[string]string{"operation": "Shop", "kind": kind}
		if got, _ := m.Value("costgate_graphql_operation_cost_count", labels); got != 10 {
			t.Errorf("Shop %s: count %v, want 10", kind, got)
		}
		if got, _ := m.Value("costgate_graphql_operation_cost_sum", labels); got != sum {
			t.Errorf("Shop %s: sum %v, want %v", kind, got, sum)
		}
	}
	if got, _ := m.Value("costgate_graphql_operation_cost_count", map[string]string{"operation": "anonymous", "kind": "actual"}); got != 3 {
		t.Errorf("anonymous actual: count %v, want 3", got)
	}
	if got, _ := m.Value("costgate_graphql_operation_rejections_total", map[string]string{"operation": "Deep", "code": gqllimit.CodeMaxDepthExceeded}); got != 3 {
		t.Errorf("Deep MAX_DEPTH_EXCEEDED: %v, want 3", got)
	}
	other, _ := m.Value("costgate_graphql_operation_cost_count", map[string]string{"operation": "other", "kind": "estimated"})
	if other < 9_900 {
		t.Errorf("other counted %v operations, want nearly all of the 10,000 invented names", other)
	}
}

// A name that becomes frequent after the slots were taken gets one of its own.
func TestOperationMetricsLaterFrequentName(t *testing.T) {
	url := serve(t, operationsConfig)
	for i := range 10 {
		for range 5 {
			postOperation(t, url, fmt.Sprintf("query Early%d { __typename }", i))
		}
	}
	for range 10 {
		postOperation(t, url, `query Later { __typename }`)
	}
	names := metricstest.Scrape(t, url+"/metrics").LabelValues("costgate_graphql_operation_cost", "operation")
	if !names["Later"] {
		t.Errorf("Later, the most frequent operation, has no series: %v", names)
	}
	if len(names) > 12 {
		t.Errorf("%d operation labels, want at most 12: %v", len(names), names)
	}
}

// The per-operation metrics of a known name cost no allocation.
func BenchmarkOperationMetrics(b *testing.B) {
	m := newMetrics()
	m.operations = newOperationMetrics(m.registry)
	ev := gqllimit.OperationEvent{Name: "GetProducts", Estimated: 42, Actual: 30, HasActual: true}
	m.operations.observe(ev)
	b.ReportAllocs()
	for b.Loop() {
		m.operations.observe(ev)
	}
}

// A reload applies graphql.metrics.max_operations: a smaller one keeps the
// most frequent names and deletes the others' series.
func TestOperationMetricsReload(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte(operationsConfig))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	url := serveHandler(t, s)
	for i, name := range []string{"Rare", "Common", "Frequent"} {
		for range 2 * (i + 1) {
			postOperation(t, url, "query "+name+" { __typename }")
		}
	}
	smaller, err := config.Parse("test.yaml", []byte(strings.Replace(operationsConfig, "max_operations: 10", "max_operations: 2", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(smaller); err != nil {
		t.Fatal(err)
	}
	names := metricstest.Scrape(t, url+"/metrics").LabelValues("costgate_graphql_operation_", "operation")
	if !names["Frequent"] || !names["Common"] || names["Rare"] || len(names) != 4 {
		t.Errorf("after max_operations 10 → 2: labels %v, want Frequent, Common, anonymous, other", names)
	}
}
