package gqllimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/internal/syncbuf"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// The trusted documents of these tests: a query whose price depends on a
// variable, one whose price is fixed, the cheapest query (a dry run of it
// reads the bucket), a mutation, and a subscription.
const (
	listedShop  = "query Shop($n: Int) { products(first: $n) { nodes { id title variants(first: 2) { id } } } }"
	listedFixed = "query Fixed { products(first: 3) { nodes { id } } }"
	listedCheap = "{ __typename }"
	listedWrite = `mutation Review { createReview(input: {productId: "p1", rating: 5, body: "ok"}) { id } }`
	listedTicks = threeTicks
)

var listed = []string{listedShop, listedFixed, listedCheap, listedWrite, listedTicks}

// apolloManifest is Apollo's persisted query manifest of bodies.
func apolloManifest(bodies ...string) []byte {
	var ops []map[string]string
	for _, b := range bodies {
		ops = append(ops, map[string]string{"id": sha(b), "name": "", "type": "query", "body": b})
	}
	out, _ := json.Marshal(map[string]any{"format": "apollo-persisted-query-manifest", "version": 1, "operations": ops})
	return out
}

// idMap is a {"id": "document"} map, as GraphQL Codegen and Relay write.
func idMap(entries map[string]string) []byte {
	out, _ := json.Marshal(entries)
	return out
}

// newTrustedEnv serves the example API behind costgate with td, recording
// what gqlgen ran; the bucket does not run dry during a test.
func newTrustedEnv(t *testing.T, td gqllimit.TrustedDocuments, cfg func(*gqllimit.Config)) (*env, *executed, *counts) {
	t.Helper()
	ran, by := &executed{}, &counts{}
	td.OnRequest = by.add
	e := newEnv(t, envOpts{
		policy: &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Hour,
			Burst: 1_000_000, Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailDeny},
		cfg: func(c *gqllimit.Config) {
			c.TrustedDocuments = &td
			c.PersistedQueries = gqllimit.NewPersistedQueryCache(100, 0)
			if cfg != nil {
				cfg(c)
			}
		},
		server: func(srv *handler.Server) {
			srv.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
				rc := graphql.GetOperationContext(ctx)
				ran.mu.Lock()
				ran.ops = append(ran.ops, ranOp{rc.RawQuery, rc.OperationName, rc.Variables})
				ran.mu.Unlock()
				return next(ctx)
			})
		},
		streams: true,
	})
	return e, ran, by
}

func jsonBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// trustedCase is a request and what a server with the listed documents of
// this file, in enforce mode, answers it.
type trustedCase struct {
	name   string
	method string
	target string
	body   []byte
	status int
	code   string // "" for an operation that runs
	runs   string // the listed text gqlgen must run
	vars   map[string]any
}

// trustedCases are the requests both the full configuration (New) and the
// one-call Handler must answer alike.
func trustedCases(t *testing.T) []trustedCase {
	vars := map[string]any{"n": 4}
	getVars, _ := json.Marshal(vars)
	return []trustedCase{
		{name: "by documentId, sha256:", method: "POST", body: jsonBody(t, map[string]any{"documentId": "sha256:" + sha(listedShop), "variables": vars}),
			status: 200, runs: listedShop, vars: vars},
		{name: "by documentId, the list's id", method: "POST", body: jsonBody(t, map[string]any{"documentId": sha(listedFixed)}),
			status: 200, runs: listedFixed},
		{name: "by documentId, GET", method: "GET",
			target: "/graphql?documentId=sha256:" + sha(listedShop) + "&variables=" + url.QueryEscape(string(getVars)),
			status: 200, runs: listedShop, vars: vars},
		{name: "by hash", method: "POST", body: persistedBody("", sha(listedShop)), status: 200, runs: listedShop},
		{name: "by hash, GET", method: "GET",
			target: "/graphql?extensions=" + url.QueryEscape(`{"persistedQuery":{"version":1,"sha256Hash":"`+sha(listedFixed)+`"}}`),
			status: 200, runs: listedFixed},
		{name: "by text", method: "POST", body: jsonBody(t, map[string]any{"query": listedShop, "variables": vars}), status: 200, runs: listedShop, vars: vars},
		{name: "by text with its hash", method: "POST", body: persistedBody(listedFixed, sha(listedFixed)), status: 200, runs: listedFixed},
		{name: "a mutation by documentId", method: "POST", body: jsonBody(t, map[string]any{"documentId": "sha256:" + sha(listedWrite)}),
			status: 200, runs: listedWrite},

		{name: "an unknown documentId", method: "POST", body: jsonBody(t, map[string]any{"documentId": "sha256:" + sha("{ x }")}),
			status: 400, code: gqllimit.CodePersistedQueryNotFound},
		{name: "an unknown hash", method: "POST", body: persistedBody("", sha("{ x }")), status: 400, code: gqllimit.CodePersistedQueryNotFound},
		{name: "an unlisted text", method: "POST", body: jsonBody(t, map[string]any{"query": "{ products { nodes { id } } }"}),
			status: 400, code: gqllimit.CodePersistedQueryNotInList},
		{name: "a listed text, changed by a space", method: "POST", body: jsonBody(t, map[string]any{"query": listedFixed + " "}),
			status: 400, code: gqllimit.CodePersistedQueryNotInList},
		{name: "an unlisted text, GET", method: "GET", target: "/graphql?query=" + url.QueryEscape("{ products { nodes { id } } }"),
			status: 400, code: gqllimit.CodePersistedQueryNotInList},
		{name: "an unlisted text with its hash", method: "POST", body: persistedBody("{ product(id: \"p1\") { id } }", sha("{ product(id: \"p1\") { id } }")),
			status: 400, code: gqllimit.CodePersistedQueryNotInList},
		{name: "a listed hash with another text", method: "POST", body: persistedBody("{ product(id: \"p1\") { id } }", sha(listedFixed)),
			status: 400, code: gqllimit.CodePersistedQueryNotInList},
		{name: "documentId and query", method: "POST", body: jsonBody(t, map[string]any{"documentId": "sha256:" + sha(listedFixed), "query": listedFixed}),
			status: 400, code: gqllimit.CodeBadRequest},
		{name: "a mutation by documentId over GET", method: "GET", target: "/graphql?documentId=sha256:" + sha(listedWrite),
			status: 405, code: gqllimit.CodeBadRequest},
	}
}

// checkTrustedAnswers sends each case to h: a listed document runs (gqlgen
// runs its listed text, with the variables sent) at the price of its text;
// anything else is refused with its code, before it is parsed, charged 1
// and run not at all.
func checkTrustedAnswers(t *testing.T, h http.Handler, ran *executed, available func(t *testing.T) int64) {
	t.Helper()
	send := func(c trustedCase) *answer {
		t.Helper()
		var req *http.Request
		if c.method == "GET" {
			req = httptest.NewRequest("GET", c.target, nil)
		} else {
			req = httptest.NewRequest("POST", "/graphql", strings.NewReader(string(c.body)))
			req.Header.Set("Content-Type", "application/json")
		}
		req.RemoteAddr = "192.0.2.1:1"
		return serve(t, h, req)
	}
	for _, c := range trustedCases(t) {
		t.Run(c.name, func(t *testing.T) {
			before := available(t)
			a := send(c)
			if a.status != c.status || a.code() != c.code {
				t.Fatalf("got %d %q %+v, want %d %q", a.status, a.code(), a.Errors, c.status, c.code)
			}
			ops := ran.take()
			spent := before - available(t)
			if c.code != "" {
				if len(ops) > 0 {
					t.Errorf("gqlgen ran %q", ops[0].query)
				}
				if c.status != http.StatusMethodNotAllowed && spent != 1 { // a mutation over GET is refused after parsing, as any is
					t.Errorf("charged %d, want the rejection cost, 1", spent)
				}
				return
			}
			if len(ops) != 1 || ops[0].query != c.runs {
				t.Fatalf("gqlgen ran %+v, want the listed text %q", ops, c.runs)
			}
			if c.vars != nil && fmt.Sprint(ops[0].variables["n"]) != "4" {
				t.Errorf("gqlgen ran it with %v, want %v", ops[0].variables, c.vars)
			}
			if got, want := a.Extensions.Cost.RequestedQueryCost, price(t, c.runs, c.vars); got != want {
				t.Errorf("requestedQueryCost %d, want %d, the price of the listed text", got, want)
			}
		})
	}
}

// Enforce mode, the full configuration: the requests by documentId, by
// hash and by text of a listed document run it, priced as its text; an
// unknown id or hash and an unlisted text are refused with Apollo Router's
// codes, charged the rejection cost, and counted.
func TestTrustedDocumentsEnforce(t *testing.T) {
	e, ran, by := newTrustedEnv(t, gqllimit.TrustedDocuments{Manifest: apolloManifest(listed...)}, nil)
	checkTrustedAnswers(t, e.handler, ran, func(t *testing.T) int64 { return e.Available(t, nil) })
	for _, how := range []string{gqllimit.TrustedByDocumentID, gqllimit.TrustedByHash, gqllimit.TrustedByText} {
		if by.get(how) == 0 {
			t.Errorf("no request counted %s: %v", how, by.snapshot())
		}
	}
	if by.get(gqllimit.TrustedUnlisted) != 0 {
		t.Errorf("enforce mode counted unlisted requests: %v", by.snapshot())
	}
	if e.rejections.get(gqllimit.CodePersistedQueryNotFound) != 2 || e.rejections.get(gqllimit.CodePersistedQueryNotInList) != 5 {
		t.Errorf("rejections %v, want 2 %s and 5 %s", e.rejections.snapshot(), gqllimit.CodePersistedQueryNotFound, gqllimit.CodePersistedQueryNotInList)
	}
}

// The one-call Handler of an embedded gqlgen server (the server `gqlgen
// init` writes, its own APQ extension and query cache included) with
// WithTrustedDocuments answers the same.
func TestHandlerWithTrustedDocuments(t *testing.T) {
	ran := &executed{}
	var resolved atomic.Int64
	srv := initServer(&resolved)
	srv.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		rc := graphql.GetOperationContext(ctx)
		ran.mu.Lock()
		ran.ops = append(ran.ops, ranOp{rc.RawQuery, rc.OperationName, rc.Variables})
		ran.mu.Unlock()
		return next(ctx)
	})
	h := gqllimit.Handler(srv, gqllimit.Budget(1, time.Hour, 1_000_000),
		gqllimit.WithTrustedDocuments(gqllimit.TrustedDocuments{Manifest: apolloManifest(listed...)}))
	available := func(t *testing.T) int64 {
		t.Helper()
		req := postFrom("192.0.2.1:1", map[string]any{"query": listedCheap})
		req.Header.Set(gqllimit.HeaderDryRun, "1")
		a := serve(t, h, req)
		if a.Extensions.Cost == nil || a.Extensions.Cost.ThrottleStatus == nil {
			t.Fatalf("dry run: %d %+v", a.status, a.Errors)
		}
		return a.Extensions.Cost.ThrottleStatus.CurrentlyAvailable
	}
	checkTrustedAnswers(t, h, ran, available)
}

// Log mode runs what the list lacks, counts it and logs it once; a listed
// document is served as in enforce mode; an unknown id has no text to run.
func TestTrustedDocumentsLog(t *testing.T) {
	logs := &syncbuf.Buffer{}
	e, ran, by := newTrustedEnv(t, gqllimit.TrustedDocuments{Manifest: apolloManifest(listed...), Mode: gqllimit.TrustLog},
		func(c *gqllimit.Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	unlisted := "{ products(first: 2) { nodes { id title } } }"
	for range 2 {
		r := e.post(t, unlisted, nil, nil)
		if r.Status != 200 || len(r.Res.Errors) > 0 {
			t.Fatalf("an unlisted document in log mode: %d %s", r.Status, r.Body)
		}
		if got, want := r.Cost(t).RequestedQueryCost, price(t, unlisted, nil); got != want {
			t.Errorf("requestedQueryCost %d, want %d", got, want)
		}
	}
	if ops := ran.take(); len(ops) != 2 || ops[0].query != unlisted {
		t.Errorf("gqlgen ran %+v, want the unlisted document twice", ops)
	}
	if n := by.get(gqllimit.TrustedUnlisted); n != 2 {
		t.Errorf("%d unlisted requests counted, want 2", n)
	}
	if n := strings.Count(logs.String(), "not among the trusted documents"); n != 1 || !strings.Contains(logs.String(), sha(unlisted)) {
		t.Errorf("logged %d times, want once with its SHA-256:\n%s", n, logs)
	}
	if r := e.raw(t, "POST", "/graphql", jsonBody(t, map[string]any{"documentId": "sha256:" + sha(listedFixed)}), nil); r.Status != 200 {
		t.Errorf("a listed document by id in log mode: %d %s", r.Status, r.Body)
	}
	if r := e.raw(t, "POST", "/graphql", jsonBody(t, map[string]any{"documentId": "nosuchid"}), nil); r.Status != 400 || r.Code() != gqllimit.CodePersistedQueryNotFound {
		t.Errorf("an unknown id in log mode: %d %s", r.Status, r.Body)
	}
	if by.get(gqllimit.TrustedByDocumentID) != 1 {
		t.Errorf("counts %v", by.snapshot())
	}
}

// newTrustedLimiter builds a Limiter over the example API's schema with
// td, or returns New's error.
func newTrustedLimiter(t *testing.T, td gqllimit.TrustedDocuments, cfg func(*gqllimit.Config)) (*gqllimit.Limiter, error) {
	t.Helper()
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("gqllimit-test-hash-key")})
	if err != nil {
		t.Fatal(err)
	}
	c := gqllimit.Config{Limiter: lim, Identity: ids, Policy: gqllimit.Budget(1, time.Hour, 1000), Schema: pricingSchema(t),
		TrustedDocuments: &td, Logger: slog.New(slog.DiscardHandler)}
	if cfg != nil {
		cfg(&c)
	}
	return gqllimit.New(c)
}

// A list with a document that could never run is refused when it loads,
// naming the document and what a request for it would be answered; so is
// a list that is not one, with the entry at fault named.
func TestTrustedDocumentsRefusedAtLoad(t *testing.T) {
	over := "query Over { products(first: 100) { nodes { id variants(first: 100) { id } } } }"
	deep := "query Deep { products { nodes { reviews { author { name } } } } }"
	for _, tc := range []struct {
		name, manifest, id, code, reason string
		cfg                              func(*gqllimit.Config)
	}{
		{name: "does not validate", manifest: string(apolloManifest(listedFixed, "query Bad { products { nodes { nosuchfield } } }")),
			id: sha("query Bad { products { nodes { nosuchfield } } }"), code: gqllimit.CodeValidationFailed, reason: "nosuchfield"},
		{name: "does not parse", manifest: string(idMap(map[string]string{"broken-1": "query { products "})),
			id: "broken-1", code: gqllimit.CodeParseFailed},
		{name: "costs more than max_cost", manifest: string(apolloManifest(over)),
			id: sha(over), code: gqllimit.CodeMaxCostExceeded, reason: "costs 10101, more than the maximum of 1000"},
		{name: "deeper than max_depth", manifest: string(apolloManifest(deep)), cfg: func(c *gqllimit.Config) { c.MaxDepth = 4 },
			id: sha(deep), code: gqllimit.CodeMaxDepthExceeded},
		{name: "more tokens than max_tokens", manifest: string(apolloManifest(listedShop)), cfg: func(c *gqllimit.Config) { c.MaxTokens = 10 },
			id: sha(listedShop), code: gqllimit.CodeMaxTokensExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newTrustedLimiter(t, gqllimit.TrustedDocuments{Manifest: []byte(tc.manifest)}, tc.cfg)
			var de *gqllimit.DocumentError
			if !errors.As(err, &de) {
				t.Fatalf("got %v, want a *gqllimit.DocumentError", err)
			}
			if de.ID != tc.id || de.Code != tc.code || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), tc.id) {
				t.Errorf("got %v (id %q, code %s), want id %q, code %s, %q", err, de.ID, de.Code, tc.id, tc.code, tc.reason)
			}
		})
	}
	for _, tc := range []struct{ name, manifest, want string }{
		{"not JSON", "query Shop { products { nodes { id } } }", "not a JSON object"},
		{"an id twice, two documents", `{"shop":` + quote(listedFixed) + `,"shop":` + quote(listedCheap) + `}`, `entry "shop": given twice, with two different documents`},
		{"an id that is not its body's SHA-256", strings.Replace(string(apolloManifest(listedFixed)), sha(listedFixed), sha(listedCheap), 1),
			`entry "` + sha(listedCheap) + `": the id is not the SHA-256 of the body`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := newTrustedLimiter(t, gqllimit.TrustedDocuments{Manifest: []byte(tc.manifest)}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	t.Run("embedded, at install", func(t *testing.T) {
		defer func() {
			err, _ := recover().(error)
			if err == nil || !strings.Contains(err.Error(), sha(over)) || !strings.Contains(err.Error(), gqllimit.CodeMaxCostExceeded) {
				t.Fatalf("panic %v, want one naming the document and %s", err, gqllimit.CodeMaxCostExceeded)
			}
		}()
		gqllimit.Handler(handler.New(graph.NewExecutableSchema(graph.Config{})), gqllimit.Budget(1, time.Second, 10),
			gqllimit.WithTrustedDocuments(gqllimit.TrustedDocuments{Manifest: apolloManifest(listedFixed, over)}))
	})
}

// What a list may hold that a request could get past loads: a document
// whose price depends on its variables is priced with each request's (over
// max_cost, that request is refused); in measure mode a document over a
// limit is kept, with a warning; log mode leaves out a document that could
// never run, with a warning, and serves the rest.
func TestTrustedDocumentsLoadWhatCanRun(t *testing.T) {
	varying := "query Page($n: Int, $v: Int) { products(first: $n) { nodes { id variants(first: $v) { id } } } }"
	over := "query Over { products(first: 100) { nodes { id variants(first: 100) { id } } } }"
	bad := "query Bad { products { nodes { nosuchfield } } }"

	e, _, _ := newTrustedEnv(t, gqllimit.TrustedDocuments{Manifest: apolloManifest(varying, listedCheap)}, nil)
	if r := e.raw(t, "POST", "/graphql", jsonBody(t, map[string]any{"documentId": "sha256:" + sha(varying), "variables": map[string]any{"n": 2, "v": 2}}), nil); r.Status != 200 {
		t.Errorf("a varying price under max_cost: %d %s", r.Status, r.Body)
	}
	r := e.raw(t, "POST", "/graphql", jsonBody(t, map[string]any{"documentId": "sha256:" + sha(varying), "variables": map[string]any{"n": 100, "v": 100}}), nil)
	if r.Status != 400 || r.Code() != gqllimit.CodeMaxCostExceeded {
		t.Errorf("a varying price over max_cost: %d %s, want 400 %s", r.Status, r.Body, gqllimit.CodeMaxCostExceeded)
	}

	logs := &syncbuf.Buffer{}
	logTo := func(c *gqllimit.Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) }
	if _, err := newTrustedLimiter(t, gqllimit.TrustedDocuments{Manifest: apolloManifest(over, listedCheap)},
		func(c *gqllimit.Config) { logTo(c); c.Mode = limiter.Shadow }); err != nil {
		t.Errorf("measure mode refused a document over max_cost: %v", err)
	}
	if !strings.Contains(logs.String(), "over max_cost") || !strings.Contains(logs.String(), sha(over)) {
		t.Errorf("measure mode did not warn of the document over max_cost:\n%s", logs)
	}

	logs = &syncbuf.Buffer{}
	e, _, _ = newTrustedEnv(t, gqllimit.TrustedDocuments{Manifest: apolloManifest(bad, listedFixed, listedCheap), Mode: gqllimit.TrustLog}, logTo)
	if !strings.Contains(logs.String(), "left out") || !strings.Contains(logs.String(), sha(bad)) {
		t.Errorf("log mode did not warn of the document it left out:\n%s", logs)
	}
	if r := e.raw(t, "POST", "/graphql", jsonBody(t, map[string]any{"documentId": sha(listedFixed)}), nil); r.Status != 200 {
		t.Errorf("log mode: a good document of the list: %d %s", r.Status, r.Body)
	}
	if r := e.raw(t, "POST", "/graphql", jsonBody(t, map[string]any{"documentId": sha(bad)}), nil); r.Code() != gqllimit.CodePersistedQueryNotFound {
		t.Errorf("log mode: the document left out, by its id: %d %s", r.Status, r.Body)
	}
}

// writeManifest replaces path with data as deployments do, by a rename.
func writeManifest(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// The file is read again when it changes, looked at by the requests: new
// documents come in; a broken file keeps the list in effect, logged once
// and reported to OnLoad; ReloadTrustedDocuments reads it at once.
func TestTrustedDocumentsFileChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "persisted-documents.json")
	writeManifest(t, path, apolloManifest(listedFixed, listedCheap))
	type load struct {
		n   int
		err error
	}
	loads := make(chan load, 16)
	logs := &syncbuf.Buffer{}
	e, _, _ := newTrustedEnv(t, gqllimit.TrustedDocuments{File: path, CheckEvery: time.Nanosecond,
		OnLoad: func(n int, err error) { loads <- load{n, err} }},
		func(c *gqllimit.Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	if l := <-loads; l.n != 2 || l.err != nil {
		t.Fatalf("first load: %+v", l)
	}
	byID := func(text string) *gqltest.Result {
		return e.raw(t, "POST", "/graphql", jsonBody(t, map[string]any{"documentId": "sha256:" + sha(text), "variables": map[string]any{"n": 1}}), nil)
	}
	// awaitLoad sends requests, which look at the file, until it is loaded.
	awaitLoad := func() load {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			byID(listedFixed)
			select {
			case l := <-loads:
				return l
			case <-time.After(5 * time.Millisecond): // the look runs in the background
			}
		}
		t.Fatal("the changed file was not loaded within 10s")
		return load{}
	}
	if r := byID(listedShop); r.Code() != gqllimit.CodePersistedQueryNotFound {
		t.Fatalf("not yet listed: %d %s", r.Status, r.Body)
	}

	writeManifest(t, path, apolloManifest(listedFixed, listedCheap, listedShop))
	if l := awaitLoad(); l.n != 3 || l.err != nil {
		t.Fatalf("changed file: %+v", l)
	}
	if r := byID(listedShop); r.Status != 200 {
		t.Errorf("a document the changed file brought: %d %s", r.Status, r.Body)
	}

	writeManifest(t, path, []byte(`{"format":"apollo-persisted-query-manifest","version":1,"operations":[`)) // cut off
	if l := awaitLoad(); l.n != 3 || l.err == nil || !strings.Contains(l.err.Error(), "not a JSON object") {
		t.Fatalf("broken file: %+v, want the 3 documents in effect and the error", l)
	}
	for _, text := range []string{listedFixed, listedShop} {
		if r := byID(text); r.Status != 200 {
			t.Errorf("the list in effect after a broken file: %d %s", r.Status, r.Body)
		}
	}
	if n := strings.Count(logs.String(), "the list in effect stays"); n != 1 {
		t.Errorf("the broken file was logged %d times, want once:\n%s", n, logs)
	}
	// Put back as it was, then broken the same way again: news again.
	writeManifest(t, path, apolloManifest(listedFixed, listedCheap, listedShop))
	if err := e.gl.ReloadTrustedDocuments(); err != nil {
		t.Fatal(err)
	}
	<-loads
	writeManifest(t, path, []byte(`{"format":"apollo-persisted-query-manifest","version":1,"operations":[`))
	if l := awaitLoad(); l.err == nil {
		t.Fatalf("broken again: %+v", l)
	}
	if n := strings.Count(logs.String(), "the list in effect stays"); n != 2 {
		t.Errorf("broken twice, logged %d times, want twice:\n%s", n, logs)
	}

	writeManifest(t, path, apolloManifest(listedCheap, listedShop))
	if err := e.gl.ReloadTrustedDocuments(); err != nil {
		t.Fatal(err)
	}
	if r := byID(listedFixed); r.Code() != gqllimit.CodePersistedQueryNotFound {
		t.Errorf("a document the reloaded file dropped: %d %s", r.Status, r.Body)
	}
}

// Over a websocket, an operation a connection starts is held to the list
// as a request is: by hash or by its text it runs; an unlisted one is
// refused in the protocol's error message.
func TestTrustedDocumentsWebsocket(t *testing.T) {
	e, _, _ := newTrustedEnv(t, gqllimit.TrustedDocuments{Manifest: apolloManifest(listed...)}, nil)
	url := serveHTTP(t, e)
	for _, proto := range []wsProtocol{transportWS, legacyWS} {
		t.Run(proto.name, func(t *testing.T) {
			c := dialWS(t, url, proto, apiKey)
			c.subscribe("1", listedTicks)
			c.started("1")
			payload, _ := json.Marshal(map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": sha(listedTicks)}}})
			c.send(wsMessage{ID: "2", Type: proto.subscribe, Payload: payload})
			c.started("2")
			c.subscribe("3", held)
			if code, _ := c.refused("3"); code != gqllimit.CodePersistedQueryNotInList {
				t.Errorf("an unlisted subscription: %s, want %s", code, gqllimit.CodePersistedQueryNotInList)
			}
			// An unknown hash is a result, as gqlgen's own APQ answers it.
			payload, _ = json.Marshal(map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": sha(held)}}})
			c.send(wsMessage{ID: "4", Type: proto.subscribe, Payload: payload})
			if m := c.await("4"); m.Type != proto.next || !strings.Contains(string(m.Payload), gqllimit.CodePersistedQueryNotFound) {
				t.Errorf("an unknown hash: %s %s, want a result with %s", m.Type, m.Payload, gqllimit.CodePersistedQueryNotFound)
			}
		})
	}
}

// Without trusted documents, a request by documentId is told the server
// has none.
func TestDocumentIDWithoutTrustedDocuments(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.raw(t, "POST", "/graphql", jsonBody(t, map[string]any{"documentId": "sha256:" + sha(listedFixed)}), nil)
	if r.Status != 400 || r.Code() != gqllimit.CodePersistedQueryNotSupported {
		t.Errorf("got %d %s, want 400 %s", r.Status, r.Body, gqllimit.CodePersistedQueryNotSupported)
	}
}

// documentId is a member of the request like the others: given twice, or
// in another letter case, the request is ambiguous and refused before
// anything runs or is charged.
func TestTrustedDocumentIDReadOneWay(t *testing.T) {
	e, ran, _ := newTrustedEnv(t, gqllimit.TrustedDocuments{Manifest: apolloManifest(listed...)}, nil)
	cheap, dear := "sha256:"+sha(listedCheap), "sha256:"+sha(listedShop)
	for name, body := range map[string]string{
		"documentId twice":            `{"documentId":"` + dear + `","documentId":"` + cheap + `"}`,
		"documentId in another case":  `{"documentId":"` + dear + `","documentid":"` + cheap + `"}`,
		"documentId escaped":          `{"documentId":"` + dear + `","\u0064ocumentId":"` + cheap + `"}`,
		"documentId that is a number": `{"documentId":12}`,
	} {
		t.Run(name, func(t *testing.T) {
			before := e.available(t)
			r := e.raw(t, "POST", "/graphql", []byte(body), nil)
			if r.Status != 400 || r.Code() != gqllimit.CodeBadRequest {
				t.Errorf("got %d %s, want 400 %s", r.Status, r.Body, gqllimit.CodeBadRequest)
			}
			if ops := ran.take(); len(ops) > 0 {
				t.Errorf("gqlgen ran %q", ops[0].query)
			}
			if after := e.available(t); after != before {
				t.Errorf("charged %d", before-after)
			}
		})
	}
	r := e.raw(t, "GET", "/graphql?documentId="+url.QueryEscape(dear)+"&documentId="+url.QueryEscape(cheap), nil, nil)
	if r.Status != 400 || r.Code() != gqllimit.CodeBadRequest {
		t.Errorf("GET, documentId twice: %d %s", r.Status, r.Body)
	}
}
