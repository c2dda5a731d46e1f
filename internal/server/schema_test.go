package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/internal/syncbuf"
	"github.com/costgate/costgate/limiter/gqlproxy"
)

// shopUpstream is the example shop as an upstream that answers
// introspection, whose schema can gain a field (Query.brandNew, answered
// here) and whose introspection can fail. It records the headers of every
// introspection request.
type shopUpstream struct {
	*httptest.Server
	fail, brandNew atomic.Bool
	mu             sync.Mutex
	introspections []http.Header
}

func startShopUpstream(t *testing.T) *shopUpstream {
	t.Helper()
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	srv.Use(extension.Introspection{})
	u := &shopUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		introspection := bytes.Contains(body, []byte("CostgateIntrospection"))
		if introspection {
			u.mu.Lock()
			u.introspections = append(u.introspections, r.Header.Clone())
			u.mu.Unlock()
			if u.fail.Load() {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
		}
		if bytes.Contains(body, []byte("brandNew")) && !introspection {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"data":{"brandNew":7}}`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !introspection || !u.brandNew.Load() {
			srv.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		w.Header().Set("Content-Type", "application/json")
		w.Write(withBrandNew(t, rec.Body.Bytes()))
	}))
	t.Cleanup(u.Close)
	return u
}

// withBrandNew adds brandNew: Int to Query in an introspection reply.
func withBrandNew(t *testing.T, reply []byte) []byte {
	var r map[string]any
	if err := json.Unmarshal(reply, &r); err != nil {
		t.Errorf("introspection reply: %v", err)
		return reply
	}
	for _, typ := range r["data"].(map[string]any)["__schema"].(map[string]any)["types"].([]any) {
		if typ := typ.(map[string]any); typ["name"] == "Query" {
			typ["fields"] = append(typ["fields"].([]any), map[string]any{"name": "brandNew", "args": []any{},
				"type": map[string]any{"kind": "SCALAR", "name": "Int", "ofType": nil}})
		}
	}
	out, _ := json.Marshal(r)
	return out
}

func (u *shopUpstream) introspectionHeaders() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.introspections...)
}

const introspectedYAML = `policies:
  graphql: {algorithm: token_bucket, limit: 50, period: 1s, burst: 1000, key: [tenant, api_key]}
graphql:
  schema: introspect
  upstream: UPSTREAM
  schema_refresh: 1h
  introspection_headers: {Authorization: "Bearer introspector", X-Upstream-Tenant: costgate}
  costs:
    "Query.products": {listSize: {slicingArguments: [first], sizedFields: [edges, nodes]}}
    "Product.inventory": {cost: 5}
    "Product.variants": {listSize: {slicingArguments: [first]}}
`

// newIntrospectedServer serves proxy mode over up's schema read by
// introspection; extra is appended to the graphql.costs entries.
func newIntrospectedServer(t *testing.T, up *shopUpstream, extra string) (*Server, *gqltest.Client, *syncbuf.Buffer) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(strings.Replace(introspectedYAML, "UPSTREAM", up.URL, 1)+extra))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	s, err := New(cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, &gqltest.Client{Handler: s}, logs
}

// waitForSchema waits for the first read the server started itself.
func waitForSchema(t *testing.T, s *Server) {
	t.Helper()
	select {
	case <-s.schemas.ready:
	case <-time.After(10 * time.Second): // a bound on a hang, not a timing margin
		t.Fatal("no schema read in 10s")
	}
}

func readyStatus(s *Server) int {
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
	return w.Code
}

const specQuery = `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`

// Until the upstream's schema is first read, GraphQL answers 503
// SCHEMA_UNAVAILABLE with Retry-After and the server is not ready; once
// read, operations are priced from it and the overlay.
func TestIntrospectedSchemaUnavailableUntilRead(t *testing.T) {
	up := startShopUpstream(t)
	up.fail.Store(true)
	s, c, _ := newIntrospectedServer(t, up, "")
	r := c.Post(t, specQuery, nil, nil)
	if r.Status != http.StatusServiceUnavailable || r.Code() != gqlproxy.CodeSchemaUnavailable || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("before a schema: %d Retry-After %q %s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	if got := readyStatus(s); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz before a schema: %d, want 503", got)
	}
	if got := rejections(t, s, gqlproxy.CodeSchemaUnavailable); got == "absent" {
		t.Errorf("SCHEMA_UNAVAILABLE not counted")
	}
	up.fail.Store(false)
	if err := s.schemas.read(context.Background()); err != nil {
		t.Fatal(err)
	}
	r = c.Post(t, specQuery, nil, nil)
	if cost := r.Cost(t); r.Status != 200 || cost.RequestedQueryCost != 61 || *cost.ActualQueryCost != 45 {
		t.Errorf("after the schema: %d %s", r.Status, r.Body)
	}
	if got := readyStatus(s); got != http.StatusOK {
		t.Errorf("/readyz after the schema: %d, want 200", got)
	}
}

// A refresh picks up a new field (priced by an overlay entry that waited
// for it), logs what changed, and a field the upstream drops leaves its
// overlay entry out with a warning, the schema in use.
func TestIntrospectedSchemaRefresh(t *testing.T) {
	up := startShopUpstream(t)
	up.brandNew.Store(true)
	s, c, logs := newIntrospectedServer(t, up, `    "Query.brandNew": {cost: 3}`+"\n")
	waitForSchema(t, s)
	if r := c.Post(t, `{ brandNew }`, nil, nil); r.Status != 200 || r.Cost(t).RequestedQueryCost != 3 {
		t.Fatalf("brandNew: %d %s", r.Status, r.Body)
	}

	up.brandNew.Store(false)
	if err := s.schemas.read(context.Background()); err != nil {
		t.Fatalf("a schema without an overlay entry's field: %v", err)
	}
	if r := c.Post(t, `{ brandNew }`, nil, nil); r.Status != 400 {
		t.Errorf("brandNew after the upstream dropped it: %d %s", r.Status, r.Body)
	}
	if r := c.Post(t, specQuery, nil, nil); r.Status != 200 || r.Cost(t).RequestedQueryCost != 61 {
		t.Errorf("the rest of the schema after the drop: %d %s", r.Status, r.Body)
	}
	for _, want := range []string{
		`"fields_removed":["Query.brandNew"]`,
		`"costs_changed":["Query.brandNew: cost 3 -> none"]`,
		`test.yaml:12: graphql.costs[\"Query.brandNew\"]: the upstream's schema has no such coordinate`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
	}

	up.brandNew.Store(true)
	if err := s.schemas.read(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := c.Post(t, `{ brandNew }`, nil, nil); r.Status != 200 || r.Cost(t).RequestedQueryCost != 3 {
		t.Errorf("brandNew back: %d %s", r.Status, r.Body)
	}
	if want := `"fields_added":["Query.brandNew"]`; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %s", want)
	}
}

// A failed refresh keeps the last good schema, and is logged and counted.
func TestIntrospectedSchemaFailedRefresh(t *testing.T) {
	up := startShopUpstream(t)
	s, c, logs := newIntrospectedServer(t, up, "")
	waitForSchema(t, s)
	up.fail.Store(true)
	if err := s.schemas.read(context.Background()); err == nil {
		t.Fatal("a refresh from a failing upstream succeeded")
	}
	if r := c.Post(t, specQuery, nil, nil); r.Status != 200 || r.Cost(t).RequestedQueryCost != 61 {
		t.Errorf("after a failed refresh: %d %s", r.Status, r.Body)
	}
	if got := readyStatus(s); got != http.StatusOK {
		t.Errorf("/readyz after a failed refresh: %d", got)
	}
	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.RemoteAddr = "127.0.0.1:4321" // /metrics answers loopback only
	s.ServeHTTP(w, req)
	if want := "costgate_schema_refresh_errors_total 1\n"; !strings.Contains(w.Body.String(), want) {
		t.Errorf("/metrics lacks %q", want)
	}
	if want := "the last good schema stays"; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %q", want)
	}
}

// The introspection request carries graphql.introspection_headers and
// nothing of any client's request.
func TestIntrospectionHeaders(t *testing.T) {
	up := startShopUpstream(t)
	s, c, _ := newIntrospectedServer(t, up, "")
	waitForSchema(t, s)
	c.Post(t, specQuery, nil, map[string]string{"Authorization": "Bearer client", "X-Client-Secret": "s3cret", "X-API-Key": "k"})
	if err := s.schemas.read(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := up.introspectionHeaders()
	if len(got) < 2 {
		t.Fatalf("%d introspection requests, want 2 at least", len(got))
	}
	for _, h := range got {
		if h.Get("Authorization") != "Bearer introspector" || h.Get("X-Upstream-Tenant") != "costgate" {
			t.Errorf("introspection headers %v lack the configured ones", h)
		}
		for _, name := range []string{"X-Client-Secret", "X-Api-Key", "X-Forwarded-For"} {
			if v := h.Get(name); v != "" {
				t.Errorf("introspection request carries %s: %s", name, v)
			}
		}
	}
}

// An overlay entry the first schema lacks is refused with its line: the
// server does not become ready on a typo.
func TestIntrospectedOverlayTypo(t *testing.T) {
	up := startShopUpstream(t)
	s, c, _ := newIntrospectedServer(t, up, `    "Product.inventroy": {cost: 5}`+"\n")
	err := s.schemas.read(context.Background())
	want := `test.yaml:12: graphql.costs["Product.inventroy"]: names nothing: type Product has no field inventroy`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("read: %v\nwant: %s", err, want)
	}
	if r := c.Post(t, specQuery, nil, nil); r.Status != http.StatusServiceUnavailable {
		t.Errorf("with a refused overlay: %d %s", r.Status, r.Body)
	}
}

// A reload keeps the schema read, so the server stays ready, and applies
// the new overlay to it; an overlay the schema refuses fails the reload.
func TestIntrospectedSchemaReload(t *testing.T) {
	up := startShopUpstream(t)
	s, c, _ := newIntrospectedServer(t, up, "")
	waitForSchema(t, s)
	reload := func(extra string) error {
		cfg, err := config.Parse("test.yaml", []byte(strings.Replace(introspectedYAML, "UPSTREAM", up.URL, 1)+extra))
		if err != nil {
			t.Fatal(err)
		}
		return s.Reload(cfg)
	}
	up.fail.Store(true) // the new source must not need a read to be ready
	if err := reload(`    "Variant": {cost: 2}` + "\n"); err != nil {
		t.Fatal(err)
	}
	// 1 + 10 × (1 + 5 × 2) = 111
	if r := c.Post(t, specQuery, nil, nil); r.Status != 200 || r.Cost(t).RequestedQueryCost != 111 {
		t.Errorf("after the reload: %d %s", r.Status, r.Body)
	}
	if err := reload(`    "Variant.sku": {listSize: {assumedSize: 3}}` + "\n"); err == nil || !strings.Contains(err.Error(), `test.yaml:12: graphql.costs["Variant.sku"]`) {
		t.Errorf("reload with a refused overlay: %v", err)
	}
	if r := c.Post(t, specQuery, nil, nil); r.Status != 200 || r.Cost(t).RequestedQueryCost != 111 {
		t.Errorf("after a failed reload: %d %s", r.Status, r.Body)
	}
}
