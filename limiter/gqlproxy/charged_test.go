package gqlproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// bigBucket holds 5000 and refills nothing in a test's time.
func bigBucket(c *gqllimit.Config) {
	c.Policy = &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 1, Period: 24 * time.Hour, Burst: 5000,
		Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailAllow}
}

// A client alias that could pass for the type of an abstract item, or for
// costgate's own typename, is refused before anything is forwarded,
// charged the rejection cost (1) as any refusal before execution. Before, `__typename: body` on a Review made the reply price the
// item as the Product its body named.
func TestProxyRefusesTypenameAliases(t *testing.T) {
	up := startUpstream(t)
	e := newProxyEnv(t, up.URL)
	before := e.available(t)
	refused := []string{
		`{ search(text: "a") { ... on Review { __typename: body product { variants(first: 5) { id } } } } }`,
		`{ search(text: "a") { ...R } } fragment R on Review { __typename: body }`,
		`{ search(text: "a") { ... on Product { id __costgate_typename: title } } }`,
		`{ products(first: 1) { nodes { __costgateX: id } } }`,
	}
	for _, q := range refused {
		r := e.post(t, q, nil, nil)
		if r.Status != http.StatusBadRequest || r.Code() != gqllimit.CodeBadRequest {
			t.Errorf("%s: %d %s, want 400 %s", q, r.Status, r.Body, gqllimit.CodeBadRequest)
		}
	}
	if up.calls.Load() != 0 {
		t.Errorf("the upstream got %d calls", up.calls.Load())
	}
	if got, want := before-e.available(t), int64(len(refused)); got != want {
		t.Errorf("charged %d for %d refusals, want %d (the rejection cost of each)", got, len(refused), want)
	}
	// Aliasing __typename itself is the client's business, and so is an
	// alias named __typename in the selection of an object.
	for _, q := range []string{
		`{ search(text: "lamp", first: 2) { t: __typename } }`,
		`{ products(first: 1) { nodes { __typename: title } } }`,
	} {
		if r := e.post(t, q, nil, nil); r.Status != http.StatusOK || len(r.Res.Errors) > 0 {
			t.Errorf("%s: %d %s", q, r.Status, r.Body)
		}
	}
}

// A mutation forwarded keeps its whole charge: its fields ran, whatever the
// reply says. 29 createReview fields and one that fails a non-null check: the
// upstream writes the 29 reviews and answers data: null; the 300 charged stay
// charged. Before, the reply priced it at 0 and all but 1 was refunded.
func TestProxyMutationChargedInFull(t *testing.T) {
	up := startUpstream(t)
	e := newProxyEnv(t, up.URL)
	count := func() int {
		t.Helper()
		r := e.post(t, `{ product(id: "p1") { reviews(first: 100) { id } } }`, nil, nil)
		var data struct {
			Product struct{ Reviews []struct{ ID string } }
		}
		if err := json.Unmarshal(r.Res.Data, &data); err != nil {
			t.Fatalf("%s: %v", r.Body, err)
		}
		return len(data.Product.Reviews)
	}
	written := count()
	before := e.available(t)
	var q strings.Builder
	q.WriteString("mutation {")
	for i := range 29 {
		fmt.Fprintf(&q, ` r%d: createReview(input: {productId: "p1", rating: 5, body: "fine"}) { id }`, i)
	}
	q.WriteString(` bad: createReview(input: {productId: "p1", rating: 0, body: "no"}) { id } }`)
	r := e.post(t, q.String(), nil, nil)
	if r.Status != http.StatusOK || string(r.Res.Data) != "null" || len(r.Res.Errors) == 0 {
		t.Fatalf("%d %s, want data null and the failing field's error", r.Status, r.Body)
	}
	if c := r.Cost(t); c.RequestedQueryCost != 300 || c.ActualQueryCost == nil || *c.ActualQueryCost != 300 {
		t.Errorf("cost %+v, want 300 requested and actual", c)
	}
	if got := before - e.available(t); got != 300 {
		t.Errorf("charged %d after the refund, want 300", got)
	}
	if got := count() - written; got != 29 {
		t.Errorf("%d reviews written, want 29", got)
	}
}

// A client that goes away once its operation was forwarded keeps its whole
// charge: the upstream runs the operation anyway. Five 601-cost operations,
// each abandoned while the upstream holds it, cost 5 × 601; the upstream
// then finishes all five. Before, each was refunded all but 1.
func TestProxyClientThatLeavesKeepsItsCharge(t *testing.T) {
	shop := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	shop.AddTransport(transport.POST{})
	got, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- struct{}{}
		<-release
		// The upstream finishes what it started, whoever is still listening.
		req := httptest.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		shop.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK && !strings.Contains(rec.Body.String(), `"errors"`) {
			finished.Add(1)
		}
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(slow.Close)
	e := newProxyEnv(t, slow.URL, bigBucket)
	before := e.available(t)
	const query = `{ products(first: 100) { nodes { variants(first: 5) { id } } } }` // 1 + 100 × (1 + 5)
	body, _ := json.Marshal(map[string]any{"query": query})
	done := make(chan struct{}, 5)
	for range 5 {
		ctx, leave := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		go func() {
			e.Client.Handler.ServeHTTP(httptest.NewRecorder(), req)
			done <- struct{}{}
		}()
		<-got // forwarded: the upstream holds it
		leave()
		<-done
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second) // bounds a failing test only
	for finished.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := finished.Load(); n != 5 {
		t.Fatalf("the upstream finished %d of the 5", n)
	}
	if got := before - e.available(t); got != 5*601 {
		t.Errorf("charged %d for five abandoned operations, want 5 × 601", got)
	}
}

// The proxy forwards the client's text with its __typename written into the
// abstract selections, and moves the upstream's error locations back: an
// error the upstream locates after an insertion on the same line points at
// the same token of the client's document.
func TestProxyErrorLocationsPointIntoTheClientsDocument(t *testing.T) {
	var forwarded atomic.Value
	locating := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct{ Query string }
		json.NewDecoder(r.Body).Decode(&p)
		forwarded.Store(p.Query)
		line, column := locate(p.Query, "product(id")
		fmt.Fprintf(w, `{"data":{"search":[],"product":null},"errors":[{"message":"boom","locations":[{"line":%d,"column":%d}],"path":["product"]}]}`, line, column)
	}))
	t.Cleanup(locating.Close)
	e := newProxyEnv(t, locating.URL)
	for _, q := range []string{
		`{ search(text: "é") { ... on Product { id } } product(id: "p1") { id } }`,
		"query Q {\n  search(text: \"x\") { ...F }\n  # a comment {\n  s2: search(text: \"y\") { __typename } product(id: \"p1\") { id }\n}\nfragment F on SearchResult { ... on Review { id } }",
	} {
		r := e.post(t, q, nil, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		fwd := forwarded.Load().(string)
		if got, want := strings.ReplaceAll(fwd, " __costgate_typename: __typename ", ""), q; got != want {
			t.Errorf("forwarded %q, want the client's text with the typenames inserted", fwd)
		}
		var res struct {
			Errors []struct {
				Locations []struct{ Line, Column int } `json:"locations"`
			} `json:"errors"`
		}
		if err := json.Unmarshal([]byte(r.Body), &res); err != nil || len(res.Errors) != 1 || len(res.Errors[0].Locations) != 1 {
			t.Fatalf("%s: %v", r.Body, err)
		}
		line, column := locate(q, "product(id")
		if got := res.Errors[0].Locations[0]; got.Line != line || got.Column != column {
			t.Errorf("%q: location %d:%d, want %d:%d, where the client wrote product(id", q, got.Line, got.Column, line, column)
		}
	}
}

// locate is the line and column (1-based, in runes) of the first s in text.
func locate(text, s string) (int, int) {
	i := strings.Index(text, s)
	before := text[:i]
	line := strings.Count(before, "\n") + 1
	return line, utf8.RuneCountInString(before[strings.LastIndex(before, "\n")+1:]) + 1
}
