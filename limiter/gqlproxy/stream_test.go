package gqlproxy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/syncbuf"
	"github.com/costgate/costgate/limiter/gqlproxy"
)

// teeUpstream is the example shop behind a recorder of the last query and
// reply it exchanged.
type teeUpstream struct {
	URL   string
	inner *upstream // records the query
	mu    sync.Mutex
	reply []byte
}

func startTeeUpstream(t *testing.T) *teeUpstream {
	t.Helper()
	inner := startUpstream(t)
	tu := &teeUpstream{inner: inner}
	tee := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequest("POST", inner.URL, r.Body)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		tu.mu.Lock()
		tu.reply = body
		tu.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(res.StatusCode)
		w.Write(body)
	}))
	t.Cleanup(tee.Close)
	tu.URL = tee.URL
	return tu
}

// actualBefore is what the proxy charged before it streamed: the upstream's
// reply decoded whole and priced by ActualJSON against the forwarded
// document, and the reply's data with the injected __typename removed.
func actualBefore(t *testing.T, schema *complexity.Schema, forwarded string, vars map[string]any, reply []byte) (int64, any) {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: forwarded})
	if err != nil {
		t.Fatal(err)
	}
	if errs := validator.Validate(schema.AST(), doc); len(errs) > 0 {
		t.Fatal(errs)
	}
	var res struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(reply, &res); err != nil {
		t.Fatalf("upstream reply %s: %v", reply, err)
	}
	actual, err := schema.ActualJSON(doc.Operations[0], vars, res.Data)
	if err != nil {
		t.Fatal(err)
	}
	var data any
	json.Unmarshal(res.Data, &data)
	return actual, withoutKey(data, "__costgate_typename")
}

func withoutKey(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, key)
		for k, e := range x {
			x[k] = withoutKey(e, key)
		}
	case []any:
		for i, e := range x {
			x[i] = withoutKey(e, key)
		}
	}
	return v
}

func loadShopSchema(t *testing.T) *complexity.Schema {
	t.Helper()
	sdl, err := os.ReadFile("../../graph/schema.graphqls")
	if err != nil {
		t.Fatal(err)
	}
	s, err := complexity.LoadSDL("schema.graphqls", string(sdl))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Streamed, the reply costs what it cost when the proxy read it whole:
// the same actual cost, the same refund, the same data (the injected
// __typename removed), for abstract types, nulls, lists, errors and
// aliases; but a mutation, which keeps its whole charge.
func TestProxyStreamedCostsAsBefore(t *testing.T) {
	up := startTeeUpstream(t)
	schema := loadShopSchema(t)
	for _, tc := range []struct {
		name, query string
		vars        map[string]any
	}{
		{"lists", `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`, nil},
		{"connection edges", `{ products(first: 3) { edges { cursor node { id reviews(first: 2) { id author { name } } } } pageInfo { hasNextPage } } }`, nil},
		{"abstract types", `{ search(text: "lamp", first: 10) { ... on Product { title reviews(first: 5) { author { name } } } ... on Review { body author { name } } } }`, nil},
		{"abstract with the client's own __typename", `{ search(text: "a", first: 5) { __typename ... on Review { id } } }`, nil},
		{"fragments", `{ search(text: "a", first: 5) { ...R } } fragment R on SearchResult { ... on Product { id variants(first: 2) { sku } } }`, nil},
		{"aliases", `{ a: product(id: "1") { id t: title } b: product(id: "2") { id } c: products(first: 2) { n: nodes { id } } }`, nil},
		{"nulls", `{ product(id: "no-such-product") { id } products(first: 2) { nodes { id } } }`, nil},
		{"variables", `query($n: Int) { products(first: $n) { nodes { id } } }`, map[string]any{"n": 4}},
		{"errors", `mutation { createReview(input: {productId: "no-such-product", rating: 9, body: "x"}) { id } }`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newProxyEnv(t, up.URL)
			before := e.available(t)
			r := e.post(t, tc.query, tc.vars, nil)
			must(t, r.Status == 200, "%d %s", r.Status, r.Body)
			up.mu.Lock()
			reply := append([]byte(nil), up.reply...)
			up.mu.Unlock()
			wantActual, wantData := actualBefore(t, schema, up.inner.queries.Load().(string), tc.vars, reply)
			c := r.Res.Extensions.Cost
			if strings.HasPrefix(tc.query, "mutation") {
				wantActual = c.RequestedQueryCost // its fields ran, whatever the reply holds
			}
			must(t, c.ActualQueryCost != nil && *c.ActualQueryCost == wantActual, "actual %v, want %d (reply %s)", c.ActualQueryCost, wantActual, reply)
			charged := max(c.RequestedQueryCost-max(wantActual, 1), 0)
			must(t, before-e.available(t) == c.RequestedQueryCost-charged, "bucket %d → %d: refund wrong (requested %d, actual %d)", before, e.available(t), c.RequestedQueryCost, wantActual)
			must(t, c.ThrottleStatus.CurrentlyAvailable == e.available(t), "throttleStatus %d, bucket %d: the refund came after the answer", c.ThrottleStatus.CurrentlyAvailable, e.available(t))
			var gotData any
			json.Unmarshal(r.Res.Data, &gotData)
			must(t, reflect.DeepEqual(gotData, wantData), "data %s, want the upstream's %v", r.Res.Data, wantData)
			must(t, !strings.Contains(r.Body, "__costgate_typename"), "the injected __typename leaked: %s", r.Body)
			must(t, json.Valid([]byte(r.Body)), "not JSON: %s", r.Body)
			if tc.name == "errors" {
				must(t, len(r.Res.Errors) > 0, "the upstream's errors were lost: %s (reply %s)", r.Body, reply)
			}
		})
	}
}

// fixedUpstream answers every operation with body, in chunks of size chunk
// (flushed one by one), with status 200.
func fixedUpstream(t *testing.T, body []byte, chunk int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		for len(body) > 0 {
			n := min(chunk, len(body))
			w.Write(body[:n])
			w.(http.Flusher).Flush()
			body = body[n:]
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// productsReply is a valid reply to products(first: n) { nodes { id title } }
// with titles of titleLen bytes.
func productsReply(n, titleLen int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"data":{"products":{"nodes":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"%d","title":"%s"}`, i, strings.Repeat("x", titleLen))
	}
	b.WriteString(`]}}}`)
	return b.Bytes()
}

// The upstream's extensions come back with extensions.cost added (theirs
// replaced), its errors as they were, members GraphQL does not define
// dropped; escapes and unicode pass through intact.
func TestProxyReplyMembers(t *testing.T) {
	body := []byte(` {"errors":[{"message":"partial \"failure\" \u00e9\ud83d\ude00","path":["products"]}],"weird":[1,{"a":null}],` +
		`"data":{"products":{"nodes":[{"id":"1","title":"caf\u00e9 ☕ \\ \/"}]}},"extensions":{"tracing":{"ms":3},"cost":{"fake":1}}} `)
	e := newProxyEnv(t, fixedUpstream(t, body, 7).URL)
	r := e.post(t, `{ products(first: 10) { nodes { id title } } }`, nil, nil)
	must(t, r.Status == 200 && json.Valid([]byte(r.Body)), "%d %s", r.Status, r.Body)
	var got struct {
		Data       map[string]any
		Errors     []map[string]any
		Extensions map[string]json.RawMessage
		Weird      any
	}
	must(t, json.Unmarshal([]byte(r.Body), &got) == nil, "%s", r.Body)
	must(t, got.Errors[0]["message"] == "partial \"failure\" é😀" && got.Weird == nil, "errors or members: %s", r.Body)
	title := got.Data["products"].(map[string]any)["nodes"].([]any)[0].(map[string]any)["title"]
	must(t, title == `café ☕ \ /`, "title %q", title)
	must(t, string(got.Extensions["tracing"]) == `{"ms":3}` && !strings.Contains(r.Body, "fake"), "extensions %s", r.Body)
	must(t, r.Res.Extensions.Cost.ActualQueryCost != nil && *r.Res.Extensions.Cost.ActualQueryCost == 2, "actual %v", r.Res.Extensions.Cost.ActualQueryCost)
}

// A reply found malformed after the client got its first bytes: the
// connection is closed with the body unfinished, so that no client takes it
// for a complete answer; nothing is refunded. Before the first bytes (a
// small reply) it is a clean 502.
func TestProxyMalformedMidStream(t *testing.T) {
	big := productsReply(100, 2000) // 200 KB: past the first 64 KiB held back
	broken := append(big[:len(big)-4:len(big)-4], `]}}}garbage`...)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"text after the reply", broken},
		{"cut off", big[:150000]},
		{"bad string", append(append(big[:100000:100000], "\x01"...), big[100000:]...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newProxyEnv(t, fixedUpstream(t, tc.body, 16<<10).URL)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.RemoteAddr = "192.0.2.1:1234" // the bucket e.available reads
				e.Handler.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			before := e.available(t)
			res, err := http.Post(srv.URL+"/graphql", "application/json", strings.NewReader(`{"query":"{ products(first: 100) { nodes { id title } } }"}`))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			got, err := io.ReadAll(res.Body)
			if res.StatusCode != 200 {
				must(t, res.StatusCode == http.StatusBadGateway && err == nil, "%d %v", res.StatusCode, err)
				return
			}
			// Streamed: the 200 is out; its body must not end as a complete answer.
			must(t, err != nil && errors.Is(err, io.ErrUnexpectedEOF), "read %d bytes, err %v: the broken reply was finished as if complete", len(got), err)
			must(t, !json.Valid(got), "the client got valid JSON")
			must(t, before-e.available(t) == 101, "charged %d, want the full 101 (nothing refunded)", before-e.available(t))
		})
	}
	e := newProxyEnv(t, fixedUpstream(t, []byte(`{"data":{"products":{"nodes":[]}}} x`), 1<<10).URL)
	r := e.post(t, `{ products(first: 100) { nodes { id } } }`, nil, nil)
	must(t, r.Status == http.StatusBadGateway && r.Code() == gqlproxy.CodeUpstreamError, "small malformed reply: %d %s", r.Status, r.Body)
}

// graphql.max_response_bytes: a reply over it is 502 UPSTREAM_ERROR, its
// size in the log, whether the upstream announced its length or not.
func TestProxyMaxResponseBytes(t *testing.T) {
	reply := productsReply(100, 20000) // 2 MB
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if !chunked {
					w.Header().Set("Content-Length", fmt.Sprint(len(reply)))
				}
				w.Write(reply)
			}))
			t.Cleanup(up.Close)
			var log syncbuf.Buffer
			e := newProxyEnvWith(t, up.URL, proxyOptions{proxy: func(c *gqlproxy.Config) {
				c.MaxResponseBytes = 1 << 20
				c.Logger = slog.New(slog.NewTextHandler(&log, nil))
			}})
			before := e.available(t)
			r := e.post(t, `{ products(first: 100) { nodes { id title } } }`, nil, nil)
			must(t, r.Status == http.StatusBadGateway && r.Code() == gqlproxy.CodeUpstreamError, "%d %.300s", r.Status, r.Body)
			must(t, strings.Contains(log.String(), "max_response_bytes (1048576 bytes)"), "log: %s", log.String())
			must(t, before-e.available(t) == 1 && *r.Res.Extensions.Cost.ActualQueryCost == 1, "charged %d", before-e.available(t))
		})
	}
	// Under the bound, the reply passes.
	e := newProxyEnvWith(t, fixedUpstream(t, reply, 64<<10).URL, proxyOptions{proxy: func(c *gqlproxy.Config) { c.MaxResponseBytes = 4 << 20 }})
	r := e.post(t, `{ products(first: 100) { nodes { id title } } }`, nil, nil)
	must(t, r.Status == 200 && len(r.Body) > len(reply), "%d %.300s", r.Status, r.Body)
}
