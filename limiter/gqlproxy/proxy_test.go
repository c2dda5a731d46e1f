package gqlproxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/gqlproxy"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/storetest"
)

// upstream is a GraphQL server the test starts: the example shop, plain
// gqlgen, no limiter. It records the queries it received.
type upstream struct {
	*httptest.Server
	queries atomic.Value // last query string
	bodies  atomic.Value // last body, as received
	calls   atomic.Int64
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		var p struct {
			Query         string         `json:"query"`
			OperationName string         `json:"operationName,omitempty"`
			Variables     map[string]any `json:"variables,omitempty"`
		}
		raw, _ := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		u.bodies.Store(string(raw))
		if err := json.Unmarshal(raw, &p); err == nil {
			u.queries.Store(p.Query)
		}
		r.Body = http.NoBody
		// gqlgen reads the body again: hand it the query we decoded.
		b, _ := json.Marshal(p)
		r.Body = readCloser{strings.NewReader(string(b))}
		r.ContentLength = int64(len(b))
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

// env is the proxy under test and a client for it.
type env struct {
	gqltest.Client
	clock      *storetest.Clock
	rejections *counts // Config.OnRejection, by code
}

// counts is a concurrency-safe tally.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *counts) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func (e *env) post(t *testing.T, query string, vars map[string]any, header map[string]string) *gqltest.Result {
	t.Helper()
	return e.Post(t, query, vars, header)
}

func (e *env) raw(t *testing.T, method, target string, body []byte, header map[string]string) *gqltest.Result {
	t.Helper()
	return e.Raw(t, method, target, body, header)
}

func (e *env) available(t *testing.T) int64 {
	t.Helper()
	return e.Available(t, nil)
}

// newProxyEnv puts costgate's proxy, priced from graph/schema.graphqls,
// in front of upstreamURL.
func newProxyEnv(t *testing.T, upstreamURL string, opts ...func(*gqllimit.Config)) *env {
	t.Helper()
	return newProxyEnvWith(t, upstreamURL, proxyOptions{}, opts...)
}

// proxyOptions change the identity and the proxy's configuration of a test's proxy.
type proxyOptions struct {
	identity func(*identity.Config)
	proxy    func(*gqlproxy.Config)
}

func newProxyEnvWith(t *testing.T, upstreamURL string, po proxyOptions, opts ...func(*gqllimit.Config)) *env {
	t.Helper()
	sdl, err := os.ReadFile("../../graph/schema.graphqls")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := complexity.LoadSDL("schema.graphqls", string(sdl))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Now())
	store, err := redisstore.New(redisServer.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true }),
		&redisstore.Options{KeyPrefix: fmt.Sprintf("p%d:", prefixSeq.Add(1)), Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	lim, err := limiter.New(store, limiter.WithTimeout(10*time.Second), limiter.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	idCfg := identity.Config{HashKey: []byte("proxy-test-hash-key")}
	if po.identity != nil {
		po.identity(&idCfg)
	}
	ids, err := identity.New(idCfg)
	if err != nil {
		t.Fatal(err)
	}
	rejections := &counts{}
	cfg := gqllimit.Config{Limiter: lim, Policy: graphqlPolicy(), Identity: ids, Schema: schema, Clock: clock.Now, Logger: slog.New(slog.DiscardHandler),
		OnRejection: rejections.add}
	for _, o := range opts {
		o(&cfg)
	}
	gl, err := gqllimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc := gqlproxy.Config{Limiter: gl, Upstream: upstreamURL, Timeout: 2 * time.Second}
	if po.proxy != nil {
		po.proxy(&pc)
	}
	h, err := gqlproxy.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	return &env{Client: gqltest.Client{Handler: h}, clock: clock, rejections: rejections}
}

// Proxy mode against a real upstream: the same price, charge and refund as
// embedded, the actual cost read from the upstream's reply.
func TestProxyChargeAndRefund(t *testing.T) {
	up := startUpstream(t)
	e := newProxyEnv(t, up.URL)
	before := e.available(t)
	r := e.post(t, `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }`, nil, nil)
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	c := r.Res.Extensions.Cost
	must(t, c.RequestedQueryCost == 61 && c.ActualQueryCost != nil && *c.ActualQueryCost == 45, "cost %+v", c)
	must(t, c.ThrottleStatus.CurrentlyAvailable == before-45, "currentlyAvailable %d, want %d", c.ThrottleStatus.CurrentlyAvailable, before-45)
	must(t, strings.Contains(string(r.Res.Data), `"title":"Quiet Kettle"`), "data %s", r.Res.Data)
}

// Abstract selections: the proxy asks the upstream for __typename so that
// each item is priced by its concrete type, and removes it from the reply
// when the client did not ask for it, keeping the order of the rest.
func TestProxyPricesConcreteTypes(t *testing.T) {
	up := startUpstream(t)
	e := newProxyEnv(t, up.URL)
	// search: 10 × max(Product: 1 + reviews 5 × (1 + author 1), Review: 1 + author 1) = 10 × 11 = 110
	q := `{ search(text: "lamp", first: 10) { ... on Product { title reviews(first: 5) { author { name } } } ... on Review { body author { name } } } }`
	r := e.post(t, q, nil, nil)
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	must(t, strings.Contains(up.queries.Load().(string), "__costgate_typename: __typename"), "upstream query lacks the injected __typename: %s", up.queries.Load())
	must(t, !strings.Contains(r.Body, "__costgate_typename") && !strings.Contains(r.Body, "__typename"), "reply leaks __typename: %s", r.Body)
	must(t, r.Res.Extensions.Cost.RequestedQueryCost == 110, "requested %d, want 110", r.Res.Extensions.Cost.RequestedQueryCost)
	// Work the actual cost out from the reply: products cost 1 + reviews×2, reviews 2.
	var data struct {
		Search []map[string]json.RawMessage `json:"search"`
	}
	if err := json.Unmarshal(r.Res.Data, &data); err != nil {
		t.Fatal(err)
	}
	// search is a list: n × (per-item term), each item priced by its type.
	want := int64(0)
	for _, item := range data.Search {
		if revs, ok := item["reviews"]; ok {
			var rs []any
			json.Unmarshal(revs, &rs)
			want += 1 + 2*int64(len(rs))
		} else {
			want += 2
		}
	}
	must(t, r.Res.Extensions.Cost.ActualQueryCost != nil && *r.Res.Extensions.Cost.ActualQueryCost == want, "actual %v, want %d", r.Res.Extensions.Cost.ActualQueryCost, want)
	// The client's own __typename stays.
	r = e.post(t, `{ search(text: "lamp", first: 2) { __typename } }`, nil, nil)
	must(t, strings.Contains(r.Body, `"__typename":"Product"`) && !strings.Contains(r.Body, "__costgate_typename"), "own __typename: %s", r.Body)
}

// Upstream failures come back as GraphQL errors, and all but 1 of the
// charge is refunded.
func TestProxyUpstreamFailure(t *testing.T) {
	up := startUpstream(t)
	url := up.URL
	up.Close() // nothing listens there any more
	e := newProxyEnv(t, url)
	before := e.available(t)
	r := e.post(t, `{ products(first: 10) { nodes { id } } }`, nil, nil)
	must(t, r.Status == http.StatusBadGateway && r.Code() == gqlproxy.CodeUpstreamError, "%d %s", r.Status, r.Body)
	must(t, string(r.Res.Data) == "null", "data %s", r.Res.Data)
	// The client learns that the upstream failed, not where it is or why.
	must(t, !strings.Contains(r.Body, strings.TrimPrefix(url, "http://")) && !strings.Contains(r.Body, "refused") && !strings.Contains(r.Body, "dial"),
		"the error tells the client the upstream's address or error: %s", r.Body)
	must(t, r.Res.Extensions.Cost.RequestedQueryCost == 11, "requested %d", r.Res.Extensions.Cost.RequestedQueryCost)
	must(t, e.available(t) == before-1, "bucket %d, want %d − 1 (all but 1 refunded)", e.available(t), before)

	// An upstream that hangs: the timeout ends the wait, with 504.
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		hang.Close()
	})
	e = newProxyEnv(t, hang.URL)
	if r := e.post(t, `{ __typename }`, nil, nil); r.Status != http.StatusGatewayTimeout || r.Code() != gqlproxy.CodeUpstreamTimeout {
		t.Errorf("hung upstream: %d %s", r.Status, r.Body)
	}
}

// The proxy validates against the upstream's schema and rejects before
// forwarding: nothing reaches the upstream, and each refusal is charged the
// rejection cost (1).
func TestProxyValidates(t *testing.T) {
	up := startUpstream(t)
	e := newProxyEnv(t, up.URL)
	before := e.available(t)
	r := e.post(t, `{ products { nope } }`, nil, nil)
	must(t, r.Status == 400 && r.Code() == gqllimit.CodeValidationFailed, "%d %s", r.Status, r.Body)
	c := r.Cost(t)
	must(t, c.ThrottleStatus != nil && c.ThrottleStatus.CurrentlyAvailable == before-1 && c.RequestedQueryCost == 0,
		"validation error's extensions.cost %+v, want the bucket after the rejection cost and no price", c)
	must(t, e.rejections.get(gqllimit.CodeValidationFailed) == 1, "rejections %v", e.rejections.n)
	r = e.post(t, `query($n: Int) { products(first: $n) { nodes { id } } }`, map[string]any{"n": "ten"}, nil)
	must(t, r.Status == 400 && r.Code() == gqllimit.CodeValidationFailed && r.Cost(t).ThrottleStatus != nil, "variables: %d %s", r.Status, r.Body)
	r = e.post(t, `{ products(first: 100) { nodes { variants(first: 100) { id } } } }`, nil, nil)
	must(t, r.Status == 400 && r.Code() == gqllimit.CodeMaxCostExceeded, "%d %s", r.Status, r.Body)
	must(t, up.calls.Load() == 0, "the upstream got %d calls", up.calls.Load())
	must(t, e.available(t) == before-3, "charged %d for three refusals, want 3", before-e.available(t))
}

// The proxy refuses mutations over GET (they could be triggered cross-site).
func TestProxyRefusesMutationsOverGET(t *testing.T) {
	up := startUpstream(t)
	e := newProxyEnv(t, up.URL)
	q := url.QueryEscape(`mutation { createReview(input: {productId: "p1", rating: 5, body: "x"}) { id } }`)
	r := e.raw(t, "GET", "/graphql?query="+q, nil, nil)
	must(t, r.Status == http.StatusMethodNotAllowed && up.calls.Load() == 0, "GET mutation: %d %s, upstream calls %d", r.Status, r.Body, up.calls.Load())
	r = e.raw(t, "GET", "/graphql?query="+url.QueryEscape(`{ products(first: 1) { nodes { id } } }`), nil, nil)
	must(t, r.Status == http.StatusOK, "GET query: %d %s", r.Status, r.Body)
}

// The proxy refuses a websocket upgrade with 400 SUBSCRIPTIONS_NOT_SUPPORTED:
// an upstream's subscriptions are not served, so none is served unlimited.
func TestProxyRefusesWebsocketUpgrade(t *testing.T) {
	up := startUpstream(t)
	e := newProxyEnv(t, up.URL)
	r := e.raw(t, "GET", "/graphql", nil, map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"})
	must(t, r.Status == http.StatusBadRequest && r.Code() == gqllimit.CodeSubscriptionsNotSupported && up.calls.Load() == 0,
		"got %d %s, upstream calls %d; want 400 %s", r.Status, r.Body, up.calls.Load(), gqllimit.CodeSubscriptionsNotSupported)
}
