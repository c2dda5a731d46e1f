package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/redistest"
	"github.com/costgate/costgate/playground/browsertest"
)

// The demo server as `go run .` starts it: the REST routes carry the
// headers, the 151st burst request is 429, /metrics counts it, and login
// answers an unknown user exactly as a wrong password.
func TestDemoServer(t *testing.T) {
	base := start(t, nil, "-addr", "127.0.0.1:0").Base

	res, body := get(t, base+"/healthz", nil)
	if res.StatusCode != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/healthz: %d %s", res.StatusCode, body)
	}
	res, body = get(t, base+"/readyz", nil)
	if res.StatusCode != 200 || !strings.Contains(body, `"kind":"memory","state":"up"`) {
		t.Errorf("/readyz: %d %s", res.StatusCode, body)
	}

	// The burst: 150 at once, then a token every 60ms. Sequential requests
	// over HTTP take real time, so count what passed before the first 429
	// against what the bucket can have refilled meanwhile.
	key := map[string]string{"X-API-Key": "demo-free"}
	start := time.Now()
	allowed := 0
	for allowed < 1000 {
		res, body = get(t, base+"/api/products/3", key)
		if res.StatusCode != 200 {
			break
		}
		allowed++
	}
	refilled := int(time.Since(start)/(60*time.Millisecond)) + 1
	if allowed < 150 || allowed > 150+refilled {
		t.Errorf("allowed %d before the first 429, want 150 plus at most %d refilled", allowed, refilled)
	}
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "1" || !strings.Contains(body, `"error":"rate_limit"`) {
		t.Errorf("first denial: %d Retry-After %q %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if got := res.Header.Get("RateLimit-Policy"); got != `"api";q=150;w=9` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	// Another tenant's key has its own bucket.
	if res, _ := get(t, base+"/api/products", map[string]string{"X-API-Key": "demo-enterprise"}); res.StatusCode != 200 || res.Header.Get("X-RateLimit-Limit") != "1500" {
		t.Errorf("enterprise key: %d, limit %q", res.StatusCode, res.Header.Get("X-RateLimit-Limit"))
	}
	if res, body := get(t, base+"/api/products", map[string]string{"X-API-Key": "guessed"}); res.StatusCode != 401 {
		t.Errorf("unknown key: %d %s", res.StatusCode, body)
	}

	_, metrics := get(t, base+"/metrics", nil)
	for _, want := range []string{
		fmt.Sprintf(`costgate_decisions_total{decision="allowed",policy="api"} %d`, allowed+2),
		`costgate_decisions_total{decision="denied",policy="api"} 1`,
		`costgate_check_duration_seconds_count{store="memory"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	wrong, wrongBody := post(t, base+"/login", `{"username":"alice","password":"guess"}`)
	unknown, unknownBody := post(t, base+"/login", `{"username":"mallory","password":"guess"}`)
	if wrong.StatusCode != 401 || unknown.StatusCode != 401 || wrongBody != unknownBody {
		t.Errorf("wrong password: %d %s; unknown user: %d %s; want the same 401", wrong.StatusCode, wrongBody, unknown.StatusCode, unknownBody)
	}
	ok, okBody := post(t, base+"/login", `{"username":" Alice ","password":"wonderland"}`)
	if ok.StatusCode != 200 || !strings.Contains(okBody, `"token"`) {
		t.Errorf("right password: %d %s", ok.StatusCode, okBody)
	}
	if res, body := post(t, base+"/login", `{"username":`); res.StatusCode != 400 || !strings.Contains(body, `"error"`) {
		t.Errorf("broken JSON: %d %s", res.StatusCode, body)
	}
	if res, body := get(t, base+"/nowhere", nil); res.StatusCode != 404 || !strings.Contains(body, `"not_found"`) {
		t.Errorf("unknown route: %d %s", res.StatusCode, body)
	}
}

// With Redis: limits are shared through it, readiness reports it, and when
// it goes away readiness stays 200 (reporting it down) while login fails
// closed with 503 and the API fails open.
func TestServerWithRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "costgate.yaml")
	cfg := `
identity:
  hash_key: "a-test-secret-of-32-bytes-length"
policies:
  # refill negligible during the test: 150 an hour
  api:      {algorithm: token_bucket, limit: 150, period: 1h, key: [tenant, api_key], on_store_error: allow}
  login_ip: {algorithm: sliding_log, limit: 10, period: 5m, key: [ip], on_store_error: deny}
routes:
  - {match: "POST /login", policies: [login_ip]}
  - {match: "/api/*", policies: [api]}
graphql: {path: ""}
`
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"COSTGATE_CONFIG=" + cfgFile, "COSTGATE_REDIS_URL=redis://" + srv.Addr() + "/0"}
	a := start(t, env, "-addr", "127.0.0.1:0").Base
	b := start(t, env, "-addr", "127.0.0.1:0").Base

	// Two gateways, one bucket: 75 requests through each use it up.
	for i := range 150 {
		base := []string{a, b}[i%2]
		if res, body := get(t, base+"/api/products", nil); res.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, res.StatusCode, body)
		}
	}
	for _, base := range []string{a, b} {
		if res, _ := get(t, base+"/api/products", nil); res.StatusCode != 429 {
			t.Errorf("%s after the shared burst: %d, want 429", base, res.StatusCode)
		}
	}
	// Identities are hashed: no address in Redis.
	keys, err := srv.Client().Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, "127.0.0.1") {
			t.Errorf("Redis key %q holds the client address", k)
		}
	}
	if res, body := get(t, a+"/readyz", nil); res.StatusCode != 200 || !strings.Contains(body, `"kind":"redis","state":"up"`) {
		t.Errorf("/readyz: %d %s", res.StatusCode, body)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if res, body := get(t, a+"/readyz", nil); res.StatusCode != 200 || !strings.Contains(body, `"state":"down"`) {
		t.Errorf("/readyz with Redis down: %d %s, want 200 reporting down", res.StatusCode, body)
	}
	if res, body := post(t, a+"/login", `{"username":"alice","password":"wonderland"}`); res.StatusCode != 503 || !strings.Contains(body, "rate_limiter_unavailable") {
		t.Errorf("login with Redis down: %d %s, want 503", res.StatusCode, body)
	}
	if res, _ := get(t, a+"/api/products", map[string]string{"X-API-Key": "x"}); res.StatusCode != 401 {
		// no api keys in this config: every key is unknown; fail-open charge, then 401
		t.Errorf("api with Redis down: %d, want 401 (served past the limiter)", res.StatusCode)
	}
	_, metrics := get(t, a+"/metrics", nil)
	if !regexp.MustCompile(`costgate_store_errors_total\{store="redis"\} [1-9]`).MatchString(metrics) {
		t.Errorf("/metrics does not count the store errors")
	}
}

// The built binary: a bad config stops it at start naming the file, field
// and reason; SIGTERM shuts it down gracefully, letting a request in flight
// finish.
func TestBinary(t *testing.T) {
	t.Run("bad config", func(t *testing.T) {
		cfgFile := filepath.Join(t.TempDir(), "bad.yaml")
		os.WriteFile(cfgFile, []byte("policies:\n  api: {algorithm: token_bucket, limit: 0, period: 1m}\n"), 0o600)
		code, out := runToExit(t, nil, "-config", cfgFile)
		if code == 0 {
			t.Fatalf("started with a bad config:\n%s", out)
		}
		for _, want := range []string{"bad.yaml", "policies.api.limit", "at least 1"} {
			if !strings.Contains(out, want) {
				t.Errorf("error output lacks %q:\n%s", want, out)
			}
		}
	})

	// 300 connections from one address that send half a request and stall,
	// under an open-file limit of 256: the per-address cap (64) keeps the
	// descriptors free, and another address is served at once.
	t.Run("stalled connections under a low open-file limit", func(t *testing.T) {
		g := startCmd(t, underFileLimit(256, command(release, nil, "-addr", "127.0.0.1:0")))
		base, host := g.Base, g.Host
		var stalled []net.Conn
		for range 300 {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, Timeout: 5 * time.Second}
			c, err := d.Dial("tcp", host)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // never finished
			stalled = append(stalled, c)
		}
		t.Cleanup(func() {
			for _, c := range stalled {
				c.Close()
			}
		})
		other := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext,
		}}
		for i := range 20 {
			res, err := other.Get(base + "/healthz")
			if err != nil {
				t.Fatalf("request %d from another address while one holds 300 stalled connections: %v", i, err)
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("request %d from another address: %d", i, res.StatusCode)
			}
		}
	})

	// A request in flight at SIGTERM (its upstream still thinking) is
	// answered in full after the listener has closed to new connections.
	t.Run("graceful shutdown", func(t *testing.T) {
		var once sync.Once
		arrived, answer := make(chan struct{}), make(chan struct{})
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			once.Do(func() { close(arrived) })
			<-answer
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"data":{"products":{"nodes":[{"id":"p1"}]}}}`)
		}))
		t.Cleanup(up.Close)
		g := startCmd(t, command(release, nil, "-config", proxyConfig(t, up.URL, "")))
		if res, _ := get(t, g.Base+"/healthz", nil); res.StatusCode != 200 {
			t.Fatalf("/healthz: %d", res.StatusCode)
		}
		type result struct {
			status int
			body   string
			err    error
		}
		inFlight := make(chan result, 1)
		go func() {
			res, err := http.Post(g.Base+"/graphql", "application/json", strings.NewReader(`{"query":"{ products(first: 1) { nodes { id } } }"}`))
			if err != nil {
				inFlight <- result{err: err}
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			inFlight <- result{res.StatusCode, string(b), err}
		}()
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the request did not reach the upstream within 10s")
		}
		g.Terminate(t)
		g.WaitLog(t, "shutting down", 1)
		for deadline := time.Now().Add(10 * time.Second); ; {
			c, err := net.DialTimeout("tcp", g.Host, time.Second)
			if err != nil {
				break // the listener is closed: Shutdown is waiting for the request
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Fatal("still accepting connections 10s after SIGTERM")
			}
			time.Sleep(10 * time.Millisecond) // polling a child's listener: no clock to inject
		}
		close(answer)
		select {
		case r := <-inFlight:
			if r.err != nil || r.status != 200 || !strings.Contains(r.body, `"id":"p1"`) || !strings.Contains(r.body, `"actualQueryCost":2`) {
				t.Errorf("the request in flight at SIGTERM: %d %s %v; want 200 with the upstream's data and its cost", r.status, r.body, r.err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the request in flight at SIGTERM got no answer within 15s")
		}
		if code, took := g.Stop(t); code != 0 || took > 15*time.Second {
			t.Errorf("exit after SIGTERM: status %d after %v, want 0 within 15s", code, took)
		}
		if !strings.Contains(g.Log.String(), "shutting down") {
			t.Errorf("logs lack the shutdown:\n%s", g.Log.String())
		}
	})
}

// The playground at / in a real headless browser with the network closed:
// it loads, runs a query against the server, and the result shows
// extensions.cost.
func TestPlaygroundInBrowser(t *testing.T) {
	base := start(t, nil, "-addr", "127.0.0.1:0").Base
	// The demo's page opens on the worked example with a demo key in its
	// headers, so that a newcomer's first run is charged and shows its budget.
	if _, page := get(t, base+"/", nil); !strings.Contains(page, `"X-API-Key":"demo-free"`) || !strings.Contains(page, "products(first: 10)") {
		t.Errorf("the demo playground lacks the demo key or the example query:\n%s", page)
	}
	text := browsertest.RunQuery(t, base+"/", `{ products(first: 2) { nodes { title } } }`)
	for _, want := range []string{`"requestedQueryCost": 3`, `"actualQueryCost": 3`, `"throttleStatus"`, `"Quiet Kettle"`} {
		if !strings.Contains(text, want) {
			t.Errorf("the result pane lacks %s:\n%s", want, text)
		}
	}
}

// The playground's Cost panel against the demo server: it prices the typed
// query with a dry run under the page's demo key, charging nothing, and
// after a run shows the actual cost and the budget left.
func TestPlaygroundCostPanel(t *testing.T) {
	base := start(t, nil, "-addr", "127.0.0.1:0").Base
	budget := func() int64 { // the demo-free key's GraphQL bucket, read with a dry run
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/graphql", strings.NewReader(`{"query":"{ products(first: 2) { nodes { title } } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", "demo-free")
		req.Header.Set("Costgate-Dry-Run", "1")
		_, body := do(t, req)
		var out struct {
			Extensions struct{ Cost gqllimit.Cost }
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil || out.Extensions.Cost.ThrottleStatus == nil {
			t.Fatalf("dry run: %v %s", err, body)
		}
		return out.Extensions.Cost.ThrottleStatus.CurrentlyAvailable
	}
	s, err := browsertest.Open(t.Context(), base+"/", browsertest.Options{})
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	defer s.Close()
	defer s.Check(t)
	if err := s.Click(`.graphiql-sidebar button[aria-label="Show Cost"]`); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	before := budget()
	if err := s.TypeQuery(`{ products(first: 2) { nodes { title } } }`); err != nil {
		t.Fatal(err)
	}
	if got, err := s.WaitText(`[data-costgate="estimate"]`, func(s string) bool { return s == "3" }); err != nil {
		t.Fatalf("the panel's estimate is %q, want 3: %v", got, err)
	}
	if after := budget(); after < before {
		t.Errorf("typing charged the demo key: %d available before, %d after", before, after)
	}
	if err := s.ClickRun(); err != nil {
		t.Fatal(err)
	}
	for sel, want := range map[string]string{`[data-costgate="run-actual"]`: "3", `[data-costgate="run-budget-maximum"]`: "1,000"} {
		if got, err := s.WaitText(sel, func(s string) bool { return s == want }); err != nil {
			t.Errorf("%s shows %q, want %s: %v", sel, got, want, err)
		}
	}
	if got, err := s.WaitText(`[data-costgate="run-budget-available"]`, func(s string) bool { return s != "" }); err != nil {
		t.Errorf("no budget left shown: %v", err)
	} else {
		t.Logf("after the run: %s of 1,000 left", got)
	}
}

// Shadow mode through the server: everything is served, would-be denials
// are counted in /metrics, and no rate-limit headers are sent.
func TestShadowModeMetrics(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "shadow.yaml")
	cfg := `
policies:
  api: {algorithm: token_bucket, limit: 5, period: 1h, key: [ip], mode: shadow}
routes:
  - {match: "/api/*", policies: [api]}
graphql: {path: ""}
`
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := start(t, nil, "-addr", "127.0.0.1:0", "-config", cfgFile).Base
	for i := range 12 {
		res, _ := get(t, base+"/api/products", nil)
		if res.StatusCode != 200 {
			t.Fatalf("request %d: %d in shadow mode", i, res.StatusCode)
		}
		for _, h := range []string{"X-RateLimit-Limit", "RateLimit", "RateLimit-Policy", "Retry-After"} {
			if v := res.Header.Get(h); v != "" {
				t.Fatalf("request %d: shadow mode sent %s: %s", i, h, v)
			}
		}
	}
	_, metrics := get(t, base+"/metrics", nil)
	for _, want := range []string{
		`costgate_decisions_total{decision="allowed",policy="api"} 5`,
		`costgate_decisions_total{decision="shadow_denied",policy="api"} 7`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The proxy example end to end: its config loads, and costgate in front of
// the example upstream prices, forwards and refunds.
func TestProxyExample(t *testing.T) {
	up := httptest.NewServer(upstreamHandler())
	t.Cleanup(up.Close)
	cfg, err := config.Load(repoFile("examples/proxy/costgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(repoFile("examples/proxy/costgate.yaml"))
	file := filepath.Join(t.TempDir(), "costgate.yaml")
	patched := strings.Replace(string(data), "http://127.0.0.1:9000/graphql", up.URL+"/graphql", 1)
	schema, err := filepath.Abs(cfg.GraphQL.Schema)
	if err != nil {
		t.Fatal(err)
	}
	patched = strings.Replace(patched, "schema.graphqls", schema, 1)
	if err := os.WriteFile(file, []byte(patched), 0o600); err != nil {
		t.Fatal(err)
	}
	base := start(t, nil, "-addr", "127.0.0.1:0", "-config", file).Base
	req, _ := http.NewRequest("POST", base+"/graphql", strings.NewReader(`{"query":"{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "partner-key-1")
	res, body := do(t, req)
	if res.StatusCode != 200 || !strings.Contains(body, `"requestedQueryCost":61,"actualQueryCost":45`) || !strings.Contains(body, `"maximumAvailable":5000`) {
		t.Errorf("proxy: %d %s", res.StatusCode, body)
	}
	// Proxy mode serves the proxied API, the playground, metrics and health;
	// never the example shop's REST routes or its login.
	for _, path := range []string{"/", "/metrics", "/healthz", "/readyz"} {
		if res, body := get(t, base+path, nil); res.StatusCode != 200 {
			t.Errorf("GET %s in proxy mode: %d %.200s", path, res.StatusCode, body)
		}
	}
	for _, path := range []string{"/api/products", "/api/products/1"} {
		if res, _ := get(t, base+path, nil); res.StatusCode != 404 {
			t.Errorf("GET %s in proxy mode: %d, want 404", path, res.StatusCode)
		}
	}
	if res, _ := post(t, base+"/login", `{"username":"alice","password":"wonderland"}`); res.StatusCode != 404 {
		t.Errorf("POST /login in proxy mode: %d, want 404 (the demo users must not log in)", res.StatusCode)
	}
}

// upstreamHandler is examples/proxy/upstream's handler: the example shop,
// introspection answered.
func upstreamHandler() http.Handler {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	srv.Use(extension.Introspection{})
	mux := http.NewServeMux()
	mux.Handle("/graphql", srv)
	return mux
}

// Redis through Sentinel: the server finds the master through a sentinel and
// keeps its limits there.
func TestServerWithSentinel(t *testing.T) {
	master := redistest.StartServer(t)
	sentinel := redistest.StartSentinel(t, master, "mymaster")
	cfgFile := filepath.Join(t.TempDir(), "costgate.yaml")
	cfg := fmt.Sprintf(`
store:
  redis:
    sentinel: {master: mymaster, addrs: ["%s"]}
identity:
  hash_key: "a-test-secret-of-32-bytes-length"
policies:
  api: {algorithm: token_bucket, limit: 3, period: 1h, key: [ip]}
routes:
  - {match: "/api/*", policies: [api]}
graphql: {path: ""}
`, sentinel.Addr())
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := start(t, nil, "-addr", "127.0.0.1:0", "-config", cfgFile).Base
	for i := range 3 {
		if res, body := get(t, base+"/api/products", nil); res.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, res.StatusCode, body)
		}
	}
	if res, _ := get(t, base+"/api/products", nil); res.StatusCode != 429 {
		t.Errorf("4th request: %d, want 429", res.StatusCode)
	}
	keys, err := master.Client().Keys(context.Background(), "rl:{*").Result()
	if err != nil || len(keys) != 1 {
		t.Errorf("keys on the master: %v %v, want the one bucket", keys, err)
	}
}

// A browser page on another origin calls /graphql and reads the rate-limit
// headers when its origin is allowed; a page on an origin that is not
// allowed cannot read the answer at all.
func TestCORSInBrowser(t *testing.T) {
	page := `<!doctype html><title>other origin</title>`
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
	}))
	t.Cleanup(other.Close)
	stranger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
	}))
	t.Cleanup(stranger.Close)

	file := filepath.Join(t.TempDir(), "costgate.yaml")
	cfg := fmt.Sprintf(`identity:
  api_keys: {k1: {tenant: acme, plan: free}}
policies:
  graphql: {algorithm: token_bucket, limit: 50, period: 1s, burst: 1000, key: [tenant, api_key]}
cors: {allowed_origins: [%q]}
`, other.URL)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := start(t, nil, "-addr", "127.0.0.1:0", "-config", file).Base
	// The page sends a JSON body and an API key: a preflight first, then the call.
	fetch := fmt.Sprintf(`fetch(%q, {method: "POST", headers: {"Content-Type": "application/json", "X-API-Key": "k1"},
  body: JSON.stringify({query: "{ products(first: 3) { nodes { id } } }"})})
  .then(async r => ({status: r.status, remaining: r.headers.get("X-RateLimit-Remaining"),
    policy: r.headers.get("RateLimit-Policy"), cost: (await r.json()).extensions.cost.requestedQueryCost}))
  .catch(e => ({error: String(e)}))`, base+"/graphql")
	var got struct {
		Status    int
		Remaining string
		Policy    string
		Cost      int
		Error     string
	}
	if err := browsertest.Eval(context.Background(), other.URL+"/", fetch, &got); err != nil {
		t.Fatal(err)
	}
	if got.Error != "" || got.Status != 200 || got.Remaining != "996" || got.Policy != `"graphql";q=1000;w=20` || got.Cost != 4 {
		t.Errorf("allowed origin: %+v; want 200, X-RateLimit-Remaining 996, the policy header and cost 4", got)
	}
	got = struct {
		Status    int
		Remaining string
		Policy    string
		Cost      int
		Error     string
	}{}
	if err := browsertest.Eval(context.Background(), stranger.URL+"/", fetch, &got); err != nil {
		t.Fatal(err)
	}
	if got.Error == "" {
		t.Errorf("an origin that is not allowed read the answer: %+v", got)
	}
}
