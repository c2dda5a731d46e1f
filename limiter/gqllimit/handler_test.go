package gqllimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
)

// initServer is the server `gqlgen init` generates (server.go), as it is,
// counting the operations it runs.
func initServer(resolved *atomic.Int64) *handler.Server {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop(), RateLimitInfo: graph.CostgateRateLimit}}))
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.Use(extension.Introspection{})
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	srv.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		resolved.Add(1)
		return next(ctx)
	})
	return srv
}

type answer struct {
	status int
	header http.Header
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
	Extensions struct {
		Cost *gqllimit.Cost `json:"cost"`
	} `json:"extensions"`
}

func (a *answer) code() string {
	if len(a.Errors) == 0 {
		return ""
	}
	c, _ := a.Errors[0].Extensions["code"].(string)
	return c
}

func serve(t *testing.T, h http.Handler, req *http.Request) *answer {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	a := &answer{status: w.Code, header: w.Header()}
	if w.Body.Len() > 0 {
		if err := json.Unmarshal(w.Body.Bytes(), a); err != nil {
			t.Fatalf("%d %q: %v", w.Code, w.Body, err)
		}
	}
	return a
}

func postFrom(addr string, body any) *http.Request {
	b, _ := json.Marshal(body)
	req := httptest.NewRequest("POST", "/query", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = addr
	return req
}

const expensive = `{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }` // costs 61

func TestFixedCostLimit(t *testing.T) {
	var resolved atomic.Int64
	srv := initServer(&resolved)
	srv.Use(gqllimit.FixedCostLimit(50))

	cheap := serve(t, srv, postFrom("192.0.2.1:1", map[string]any{"query": `{ products(first: 2) { nodes { id } } }`}))
	if cheap.status != 200 || len(cheap.Errors) > 0 || resolved.Load() != 1 {
		t.Fatalf("cheap operation: %d %v, %d operations ran", cheap.status, cheap.Errors, resolved.Load())
	}
	over := serve(t, srv, postFrom("192.0.2.1:1", map[string]any{"query": expensive}))
	if over.status != http.StatusUnprocessableEntity || over.code() != gqllimit.CodeMaxCostExceeded || over.Errors[0].Extensions["cost"] != 61.0 || over.Errors[0].Extensions["maxCost"] != 50.0 {
		t.Fatalf("over-cost operation: %d %+v, want MAX_COST_EXCEEDED with cost 61 and maxCost 50", over.status, over.Errors)
	}
	if resolved.Load() != 1 || string(over.Data) != "" && string(over.Data) != "null" {
		t.Fatalf("the over-cost operation ran: %d operations ran, data %s", resolved.Load(), over.Data)
	}
}

func TestFixedCostLimitRefusesZeroAtSetup(t *testing.T) {
	defer func() {
		if msg := recover(); msg == nil || !strings.Contains(msg.(error).Error(), "at least 1") {
			t.Fatalf("srv.Use(FixedCostLimit(0)) panicked with %v, want a refusal", msg)
		}
	}()
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.Use(gqllimit.FixedCostLimit(0))
}

// A cost budget of 150 for a `gqlgen init` server, in one call: 150
// operations of cost 1 at once, then THROTTLED (429) with the headers, per
// client address.
func TestHandlerBudget(t *testing.T) {
	var resolved atomic.Int64
	h := gqllimit.Handler(initServer(&resolved), gqllimit.Budget(1, time.Hour, 150))

	burst := func(addr string, n int) map[int]int {
		answers := make([]*answer, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := postFrom(addr, map[string]any{"query": `{ __typename }`})
				<-start
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				a := &answer{status: w.Code, header: w.Header()}
				json.Unmarshal(w.Body.Bytes(), a)
				answers[i] = a
			}()
		}
		close(start)
		wg.Wait()
		codes := map[int]int{}
		for _, a := range answers {
			codes[a.status]++
			if a.header.Get("X-RateLimit-Limit") != "150" || a.header.Get("RateLimit-Policy") != `"graphql";q=150;w=540000` {
				t.Fatalf("headers %v", a.header)
			}
			if a.status == http.StatusTooManyRequests && (a.code() != gqllimit.CodeThrottled || a.header.Get("Retry-After") == "") {
				t.Fatalf("429 %s without Retry-After %q", a.code(), a.header.Get("Retry-After"))
			}
		}
		return codes
	}
	if got := burst("192.0.2.1:1", 200); got[200] != 150 || got[429] != 50 {
		t.Fatalf("200 operations at once: %v, want 150 × 200 and 50 × 429", got)
	}
	if got := burst("192.0.2.2:1", 10); got[200] != 10 {
		t.Fatalf("another address: %v, want 10 × 200", got)
	}
	if resolved.Load() != 160 {
		t.Fatalf("%d operations ran, want 160", resolved.Load())
	}
	over := serve(t, h, postFrom("192.0.2.3:1", map[string]any{"query": `{ a: products(first: 100) { nodes { id variants(first: 100) { id } } } }`}))
	if over.status != http.StatusBadRequest || over.code() != gqllimit.CodeMaxCostExceeded {
		t.Fatalf("over the default max cost: %d %s, want 400 MAX_COST_EXCEEDED", over.status, over.code())
	}
}

// The server `gqlgen init` generates keeps working behind the one-call
// Handler: Automatic Persisted Queries (the hash alone once registered, by
// POST and GET), and OPTIONS.
func TestHandlerKeepsInitServersAPQ(t *testing.T) {
	var resolved atomic.Int64
	h := gqllimit.Handler(initServer(&resolved), gqllimit.Budget(50, time.Second, 1000))
	q := `{ products(first: 2) { nodes { id } } }`
	pq := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": sha(q)}}

	if a := serve(t, h, postFrom("192.0.2.1:1", map[string]any{"extensions": pq})); a.status != 200 || a.code() != gqllimit.CodePersistedQueryNotFound {
		t.Fatalf("unknown hash: %d %s, want 200 PERSISTED_QUERY_NOT_FOUND", a.status, a.code())
	}
	full := serve(t, h, postFrom("192.0.2.1:1", map[string]any{"query": q, "extensions": pq}))
	if full.status != 200 || len(full.Errors) > 0 || full.Extensions.Cost == nil {
		t.Fatalf("query with its hash: %d %+v", full.status, full.Errors)
	}
	byHash := serve(t, h, postFrom("192.0.2.1:1", map[string]any{"extensions": pq}))
	if byHash.status != 200 || len(byHash.Errors) > 0 || string(byHash.Data) != string(full.Data) {
		t.Fatalf("hash alone (POST): %d %+v %s, want the data %s", byHash.status, byHash.Errors, byHash.Data, full.Data)
	}
	if byHash.Extensions.Cost == nil || byHash.Extensions.Cost.RequestedQueryCost != full.Extensions.Cost.RequestedQueryCost {
		t.Fatalf("hash alone was not priced as its query: %+v", byHash.Extensions.Cost)
	}
	ext, _ := json.Marshal(pq)
	get := httptest.NewRequest("GET", "/query?extensions="+url.QueryEscape(string(ext)), nil)
	if a := serve(t, h, get); a.status != 200 || len(a.Errors) > 0 || string(a.Data) != string(full.Data) {
		t.Fatalf("hash alone (GET): %d %+v", a.status, a.Errors)
	}
	if resolved.Load() != 3 {
		t.Fatalf("%d operations ran, want 3", resolved.Load())
	}
	// OPTIONS is answered as by gqlgen's transport.Options, which the
	// init server installs: 200, the methods served, no body, nothing run.
	opts := httptest.NewRecorder()
	h.ServeHTTP(opts, httptest.NewRequest("OPTIONS", "/query", nil))
	if opts.Code != http.StatusOK || opts.Header().Get("Allow") != "OPTIONS, GET, POST" || opts.Body.Len() != 0 || resolved.Load() != 3 {
		t.Fatalf("OPTIONS: %d Allow %q body %q, %d operations ran; want 200, OPTIONS, GET, POST, none, 3", opts.Code, opts.Header().Get("Allow"), opts.Body, resolved.Load())
	}
}

func TestHandlerRefusesAtSetup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *limiter.Policy
		opts   []gqllimit.Option
		want   string
	}{
		{"nil policy", nil, nil, "Policy: required"},
		{"zero budget", gqllimit.Budget(0, time.Second, 10), nil, "limit"},
		{"not a token bucket", &limiter.Policy{Name: "g", Algorithm: limiter.FixedWindow, Limit: 10, Period: time.Second, Key: []string{"ip"}}, nil, "token_bucket"},
		{"shared store, random hash key", gqllimit.Budget(1, time.Second, 10), []gqllimit.Option{gqllimit.WithStore(notLocal{})}, "WithStore without WithIdentity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.want) {
					t.Fatalf("panic %q, want one saying %q", msg, tc.want)
				}
			}()
			gqllimit.Handler(handler.New(graph.NewExecutableSchema(graph.Config{})), tc.policy, tc.opts...)
		})
	}
}

// notLocal stands for a store other processes share, as Redis is.
type notLocal struct{ limiter.Store }
