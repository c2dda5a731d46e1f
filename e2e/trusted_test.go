package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/metricstest"
)

// The documents of these tests: a query whose price depends on a variable,
// one whose price is fixed, and the cheapest.
const (
	docShop  = "query Shop($n: Int) { products(first: $n) { nodes { id title variants(first: 2) { id } } } }"
	docFixed = "query Fixed { products(first: 3) { nodes { id } } }"
	docCheap = "{ __typename }"
	unlisted = "{ products(first: 2) { nodes { id title } } }"
)

func sum256(s string) string {
	b := sha256.Sum256([]byte(s))
	return hex.EncodeToString(b[:])
}

// apolloManifest is Apollo's persisted query manifest of bodies.
func apolloManifest(bodies ...string) []byte {
	var ops []map[string]string
	for _, b := range bodies {
		ops = append(ops, map[string]string{"id": sum256(b), "name": "", "type": "query", "body": b})
	}
	out, _ := json.Marshal(map[string]any{"format": "apollo-persisted-query-manifest", "version": 1, "operations": ops})
	return out
}

// replaceFile replaces path with data as a deployment does, by a rename.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path+".new", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// trustedConfig writes a config with graphql.trusted_documents (mode, and
// extra graphql keys) and its manifest beside it, relative.
func trustedConfig(t *testing.T, mode, graphqlExtra string, manifest []byte) (config, manifestPath string) {
	t.Helper()
	config = writeConfig(t, `listen: "127.0.0.1:0"
identity:
  api_keys: {demo-free: {tenant: acme, plan: free}}
policies:
  graphql: {algorithm: token_bucket, limit: 1, period: 1h, burst: 100000, key: [tenant, api_key], on_store_error: deny}
graphql:
  trusted_documents: {file: persisted-documents.json, mode: `+mode+`}
`+graphqlExtra)
	manifestPath = filepath.Join(filepath.Dir(config), "persisted-documents.json")
	replaceFile(t, manifestPath, manifest)
	return config, manifestPath
}

// gqlAnswer is a GraphQL answer as a client reads it.
type gqlAnswer struct {
	Status    int
	Remaining int64
	Data      json.RawMessage `json:"data"`
	Errors    []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
	Extensions struct {
		Cost struct {
			RequestedQueryCost int64 `json:"requestedQueryCost"`
		} `json:"cost"`
	} `json:"extensions"`
}

func (a gqlAnswer) code() string {
	if len(a.Errors) == 0 {
		return ""
	}
	c, _ := a.Errors[0].Extensions["code"].(string)
	return c
}

// ask posts body with the demo key and reads the answer and the bucket's
// X-RateLimit-Remaining.
func ask(t *testing.T, base, body string) gqlAnswer {
	t.Helper()
	res, text := postGraphQL(t, base, body, "X-API-Key", "demo-free")
	a := gqlAnswer{Status: res.StatusCode}
	if err := json.Unmarshal([]byte(text), &a); err != nil {
		t.Fatalf("%s: not JSON: %s", body, text)
	}
	a.Remaining, _ = strconv.ParseInt(res.Header.Get("X-RateLimit-Remaining"), 10, 64)
	return a
}

func byDocumentID(text string, vars map[string]any) string {
	b, _ := json.Marshal(map[string]any{"documentId": "sha256:" + sum256(text), "variables": vars})
	return string(b)
}

func byHash(text string) string {
	return `{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + sum256(text) + `"}}}`
}

func byText(text string, vars map[string]any) string {
	b, _ := json.Marshal(map[string]any{"query": text, "variables": vars})
	return string(b)
}

// checkEnforced sends the requests of enforce mode to base: a listed
// document by documentId, by hash and by text runs, priced as its text;
// an unknown id and an unlisted text are refused with their codes, charged
// 1 each.
func checkEnforced(t *testing.T, base string) {
	t.Helper()
	vars := map[string]any{"n": 4}
	text := ask(t, base, byText(docShop, vars))
	if text.Status != 200 || len(text.Errors) > 0 || text.Extensions.Cost.RequestedQueryCost == 0 {
		t.Fatalf("by text: %+v", text)
	}
	for name, body := range map[string]string{
		"documentId": byDocumentID(docShop, vars),
		"hash":       `{"variables":{"n":4},"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + sum256(docShop) + `"}}}`,
	} {
		a := ask(t, base, body)
		if a.Status != 200 || len(a.Errors) > 0 || string(a.Data) != string(text.Data) {
			t.Errorf("by %s: %+v, want the data of the text", name, a)
		}
		if a.Extensions.Cost.RequestedQueryCost != text.Extensions.Cost.RequestedQueryCost {
			t.Errorf("by %s: requestedQueryCost %d, the text's is %d", name, a.Extensions.Cost.RequestedQueryCost, text.Extensions.Cost.RequestedQueryCost)
		}
	}
	for _, tc := range []struct{ name, body, code string }{
		{"an unknown documentId", byDocumentID("{ x }", nil), "PERSISTED_QUERY_NOT_FOUND"},
		{"an unknown hash", byHash("{ x }"), "PERSISTED_QUERY_NOT_FOUND"},
		{"an unlisted text", byText(unlisted, nil), "PERSISTED_QUERY_NOT_IN_LIST"},
	} {
		before := ask(t, base, byDocumentID(docCheap, nil)).Remaining // costs 1
		a := ask(t, base, tc.body)
		if a.Status != 400 || a.code() != tc.code || string(a.Data) != "null" {
			t.Errorf("%s: %d %q, want 400 %s", tc.name, a.Status, a.code(), tc.code)
		}
		if before-a.Remaining != 1 {
			t.Errorf("%s: charged %d (X-RateLimit-Remaining %d, then %d), want the rejection cost, 1", tc.name, before-a.Remaining, before, a.Remaining)
		}
	}
}

// Enforce mode through the binary, embedded (the example API) and in
// proxy mode: the listed documents run by id, hash and text at the text's
// price; the rest is refused, charged 1, and counted in /metrics.
func TestBinaryTrustedDocumentsEnforce(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		config, _ := trustedConfig(t, "enforce", "", apolloManifest(docShop, docFixed, docCheap))
		g := start(t, nil, "-config", config)
		checkEnforced(t, g.Base)
		m := metricstest.Scrape(t, g.Base+"/metrics")
		for _, want := range []struct {
			name   string
			labels map[string]string
			value  float64
		}{
			{"costgate_graphql_trusted_documents", nil, 3},
			{"costgate_graphql_trusted_requests_total", map[string]string{"by": "document_id"}, 4},
			{"costgate_graphql_trusted_requests_total", map[string]string{"by": "persisted_query"}, 1},
			{"costgate_graphql_trusted_requests_total", map[string]string{"by": "text"}, 1},
			{"costgate_graphql_trusted_requests_total", map[string]string{"by": "unlisted"}, 0},
			{"costgate_graphql_rejections_total", map[string]string{"code": "PERSISTED_QUERY_NOT_FOUND"}, 2},
			{"costgate_graphql_rejections_total", map[string]string{"code": "PERSISTED_QUERY_NOT_IN_LIST"}, 1},
		} {
			if got, _ := m.Value(want.name, want.labels); got != want.value {
				t.Errorf("%s%v = %v, want %v", want.name, want.labels, got, want.value)
			}
		}
	})
	t.Run("proxy mode", func(t *testing.T) {
		srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
		srv.AddTransport(transport.POST{})
		upstream := httptest.NewServer(srv)
		t.Cleanup(upstream.Close)
		config, _ := trustedConfig(t, "enforce", "  schema: "+repoFile("graph/schema.graphqls")+"\n  upstream: "+upstream.URL+"\n",
			apolloManifest(docShop, docFixed, docCheap))
		checkEnforced(t, start(t, nil, "-config", config).Base)
	})
}

// Log mode runs what the list lacks, logs it and counts it.
func TestBinaryTrustedDocumentsLog(t *testing.T) {
	config, _ := trustedConfig(t, "log", "", apolloManifest(docFixed, docCheap))
	g := start(t, nil, "-config", config)
	for range 2 {
		if a := ask(t, g.Base, byText(unlisted, nil)); a.Status != 200 || len(a.Errors) > 0 {
			t.Fatalf("an unlisted document in log mode: %+v", a)
		}
	}
	if a := ask(t, g.Base, byDocumentID(docFixed, nil)); a.Status != 200 {
		t.Errorf("a listed document by id in log mode: %+v", a)
	}
	m := metricstest.Scrape(t, g.Base+"/metrics")
	if got, _ := m.Value("costgate_graphql_trusted_requests_total", map[string]string{"by": "unlisted"}); got != 2 {
		t.Errorf("unlisted requests counted: %v, want 2", got)
	}
	if !strings.Contains(g.Log.String(), "not among the trusted documents") || !strings.Contains(g.Log.String(), sum256(unlisted)) {
		t.Errorf("the unlisted document was not logged:\n%s", g.Log)
	}
}

// A listed document that does not validate, or costs more than max_cost,
// stops the start, named; so does a manifest that is not one.
func TestBinaryTrustedDocumentStopsTheStart(t *testing.T) {
	over := "query Over { products(first: 100) { nodes { id variants(first: 100) { id } } } }"
	invalid := "query Invalid { products { nodes { nosuchfield } } }"
	for _, tc := range []struct {
		name     string
		manifest []byte
		want     []string
	}{
		{"does not validate", apolloManifest(docFixed, invalid), []string{sum256(invalid), "Invalid", "GRAPHQL_VALIDATION_FAILED", "nosuchfield"}},
		{"over max_cost", apolloManifest(over, docFixed), []string{sum256(over), "Over", "MAX_COST_EXCEEDED", "costs 10101, more than the maximum of 1000"}},
		{"not a manifest", []byte("query { a }"), []string{"persisted-documents.json", "not a JSON object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config, _ := trustedConfig(t, "enforce", "", tc.manifest)
			status, out := runToExit(t, nil, "-config", config)
			if status != 1 {
				t.Fatalf("exit status %d, want 1:\n%s", status, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the error does not say %q:\n%s", w, out)
				}
			}
		})
	}
}

// awaitLog waits up to 10 s for the process to log a line containing
// each of want, after the first skip lines.
func awaitLog(t *testing.T, g *Gateway, skip int, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lines := g.Log.Lines()
		for _, line := range lines[min(skip, len(lines)):] {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("costgate did not log %q within 10s", want)
		}
		time.Sleep(20 * time.Millisecond) // polling a child's log: no clock to inject
	}
}

// SIGHUP and a changed file bring new documents in; a broken file, and a
// SIGHUP with it, keep the list in effect and say why.
func TestBinaryTrustedDocumentsReload(t *testing.T) {
	config, manifest := trustedConfig(t, "enforce", "", apolloManifest(docFixed, docCheap))
	g := start(t, nil, "-config", config)
	if a := ask(t, g.Base, byDocumentID(docShop, nil)); a.code() != "PERSISTED_QUERY_NOT_FOUND" {
		t.Fatalf("not yet listed: %+v", a)
	}

	replaceFile(t, manifest, apolloManifest(docFixed, docCheap, docShop))
	mark := len(g.Log.Lines())
	if err := g.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	awaitLog(t, g, mark, "config reloaded")
	if a := ask(t, g.Base, byDocumentID(docShop, map[string]any{"n": 1})); a.Status != 200 || len(a.Errors) > 0 {
		t.Errorf("after SIGHUP, the new document: %+v", a)
	}

	// A changed file, no signal: the requests look at it (at most every
	// second) and load it in the background.
	replaceFile(t, manifest, apolloManifest(docCheap, docShop, unlisted))
	deadline := time.Now().Add(10 * time.Second)
	for ask(t, g.Base, byText(unlisted, nil)).Status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the changed file's new document was not served within 10s")
		}
		time.Sleep(50 * time.Millisecond) // the look runs in the background
	}
	if a := ask(t, g.Base, byDocumentID(docFixed, nil)); a.code() != "PERSISTED_QUERY_NOT_FOUND" {
		t.Errorf("a document the changed file dropped: %+v", a)
	}

	mark = len(g.Log.Lines())
	replaceFile(t, manifest, []byte(`{"format":"apollo-persisted-query-manifest","version":1,"operations":[`)) // cut off
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(strings.Join(g.Log.Lines()[mark:], "\n"), "the list in effect stays"); {
		if time.Now().After(deadline) {
			t.Fatalf("the broken file was not reported within 10s:\n%s", g.Log)
		}
		ask(t, g.Base, byDocumentID(docCheap, nil)) // requests look at the file
		time.Sleep(50 * time.Millisecond)
	}
	mark = len(g.Log.Lines())
	if err := g.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	awaitLog(t, g, mark, "config reload failed", "persisted-documents.json", "not a JSON object")
	for _, text := range []string{docShop, unlisted} {
		if a := ask(t, g.Base, byText(text, nil)); a.Status != 200 {
			t.Errorf("the list in effect after a broken file and SIGHUP: %+v", a)
		}
	}
	m := metricstest.Scrape(t, g.Base+"/metrics")
	if got, _ := m.Value("costgate_graphql_trusted_load_errors_total", nil); got < 1 {
		t.Errorf("costgate_graphql_trusted_load_errors_total = %v, want the broken file counted", got)
	}
	if got, _ := m.Value("costgate_graphql_trusted_documents", nil); got != 3 {
		t.Errorf("costgate_graphql_trusted_documents = %v, want the 3 in effect", got)
	}
}
