// Package deploy_test checks the Grafana dashboard and the Prometheus alert
// rules of deploy/: the rules load and fire as alerts_test.yml says
// (promtool), and every metric they name is one the server exports; and
// docs/metrics.md lists every metric the server exports.
package deploy_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/metricstest"
	"github.com/costgate/costgate/internal/server"
	"github.com/costgate/costgate/limiter/redistest"
)

const (
	dashboard = "grafana/costgate.json"
	rules     = "prometheus/alerts.yml"
	rulesTest = "prometheus/alerts_test.yml"
)

func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): it comes with Debian's prometheus package: sudo apt-get install -y prometheus (make deps installs it)", err)
	}
	return path
}

// The rules load, and alerts_test.yml's series fire each alert, or do not,
// as it says.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", rulesTest}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// The dashboard is JSON Grafana can import, and every costgate metric it
// and the rules name is one a server exports after some traffic.
func TestDashboardAndRulesNameExportedMetrics(t *testing.T) {
	dash, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string            `json:"uid"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: not a dashboard (%v)", dashboard, err)
	}
	rulesText, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	exported := metricstest.Scrape(t, serverAfterTraffic(t)+"/metrics").Families()
	for file, text := range map[string][]byte{dashboard: dash, rules: rulesText} {
		names := metricNames(text)
		if len(names) < 4 {
			t.Errorf("%s names only %v", file, names)
		}
		for _, name := range names {
			if !exported[name] {
				t.Errorf("%s names %s, which the server does not export", file, name)
			}
		}
	}
}

// Every costgate metric a server exports is in docs/metrics.md's table.
func TestMetricsPageListsExportedMetrics(t *testing.T) {
	page, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := metricNames(page)
	exported := metricstest.Scrape(t, serverAfterTraffic(t)+"/metrics").Families()
	n := 0
	for name := range exported {
		if !strings.HasPrefix(name, "costgate_") {
			continue
		}
		n++
		base := name
		for _, suffix := range []string{"_sum", "_count", "_bucket"} {
			base = strings.TrimSuffix(base, suffix)
		}
		if !slices.Contains(documented, name) && !slices.Contains(documented, base) {
			t.Errorf("the server exports %s, which docs/metrics.md does not list", name)
		}
	}
	if n < 10 {
		t.Errorf("the server exported %d costgate metrics; serverAfterTraffic makes more appear", n)
	}
}

var metricName = regexp.MustCompile(`\bcostgate_[a-zA-Z0-9_]+`)

// metricNames are the distinct costgate_ names in text.
func metricNames(text []byte) []string {
	var names []string
	for _, m := range metricName.FindAll(text, -1) {
		if !slices.Contains(names, string(m)) {
			names = append(names, string(m))
		}
	}
	return names
}

// serverAfterTraffic starts a server over Redis and sends it what makes
// every metric appear: GraphQL operations that run and that are refused, a
// denial, then store errors until the breaker opens. It returns its URL.
func serverAfterTraffic(t *testing.T) string {
	t.Helper()
	redis := redistest.StartServer(t)
	cfg, err := config.Parse("deploy.yaml", []byte(`
identity: {hash_key: "a-test-secret-of-32-bytes-length"}
store: {redis: {url: "redis://`+redis.Addr()+`/0"}}
policies:
  api:     {algorithm: token_bucket, limit: 1, period: 1h, key: [ip], on_store_error: allow}
  graphql: {algorithm: token_bucket, limit: 1000, period: 1s, burst: 1000, key: [ip], on_store_error: allow}
routes:
  - {match: "/api/*", policies: [api]}
graphql: {max_depth: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := server.HTTPServer(s, slog.New(slog.DiscardHandler))
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	url := "http://" + ln.Addr().String()

	send := func(method, path, body string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want != 0 && resp.StatusCode != want {
			t.Fatalf("%s %s %s: %d, want %d", method, path, body, resp.StatusCode, want)
		}
	}
	send("POST", "/graphql", `{"query":"query Shop { products(first: 2) { nodes { id } } }"}`, 200)
	send("POST", "/graphql", `{"query":"query Deep { products { nodes { reviews { author { name } } } } }"}`, 400)
	send("GET", "/api/products", "", 200)
	send("GET", "/api/products", "", 429)
	if err := redis.Stop(); err != nil {
		t.Fatal(err)
	}
	for range 20 { // store errors, failing open, until the breaker opens
		send("GET", "/api/products", "", 200)
	}
	return url
}
