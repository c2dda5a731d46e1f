package gqllimit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
	"github.com/costgate/costgate/limiter/storetest"
)

var redisServer *redistest.Server

func TestMain(m *testing.M) {
	var err error
	if redisServer, err = redistest.NewServer(); err != nil {
		fmt.Fprintln(os.Stderr, "gqllimit tests need redis-server:", err)
		os.Exit(1)
	}
	code := m.Run()
	redisServer.Close()
	os.Exit(code)
}

var prefixSeq atomic.Int64

type env struct {
	handler http.Handler
	clock   *storetest.Clock
	gl      *gqllimit.Limiter
	policy  *limiter.Policy
}

type envOpts struct {
	cfg    func(*gqllimit.Config)
	policy *limiter.Policy
	client *redis.Client // default: the package's server
}

// graphqlPolicy is the demo's: 50 a second, 1000 at once. The store's clock
// is frozen, so nothing refills during a test unless it moves the clock.
func graphqlPolicy() *limiter.Policy {
	return &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 50, Period: time.Second, Burst: 1000,
		Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailAllow}
}

// newEnv serves the example API behind the cost limiter, over Redis.
func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	clock := storetest.NewClock(time.Now())
	client := o.client
	if client == nil {
		client = redisServer.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	}
	store, err := redisstore.New(client, &redisstore.Options{KeyPrefix: fmt.Sprintf("g%d:", prefixSeq.Add(1)), Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(store, limiter.WithTimeout(10*time.Second), limiter.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	p := o.policy
	if p == nil {
		p = graphqlPolicy()
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	id, err := httplimit.New(httplimit.Config{
		Limiter: lim,
		APIKeys: map[string]httplimit.APIKey{"demo-free": {Tenant: "acme", Plan: "free"}},
		Plans:   map[string]int64{"anonymous": 1, "free": 1},
		HashKey: []byte("gqllimit-test-hash-key"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := gqllimit.Config{Limiter: lim, Policy: p, Identity: id, Refund: true, Clock: clock.Now, Logger: slog.New(slog.DiscardHandler)}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	gl, err := gqllimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.Use(gl.Extension())
	return &env{handler: gl.Middleware(srv), clock: clock, gl: gl, policy: p}
}

type gqlResult struct {
	status int
	header http.Header
	body   string
	res    struct {
		Data       json.RawMessage `json:"data"`
		Errors     []gqlError      `json:"errors"`
		Extensions struct {
			Cost *gqllimit.Cost `json:"cost"`
		} `json:"extensions"`
	}
}

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

func (r *gqlResult) code() string {
	if len(r.res.Errors) == 0 {
		return ""
	}
	c, _ := r.res.Errors[0].Extensions["code"].(string)
	return c
}

// post sends a GraphQL request; header may set extra headers.
func (e *env) post(t *testing.T, query string, vars map[string]any, header map[string]string) *gqlResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return e.raw(t, "POST", "/graphql", body, header)
}

func (e *env) raw(t *testing.T, method, target string, body []byte, header map[string]string) *gqlResult {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, req)
	r := &gqlResult{status: w.Code, header: w.Header(), body: w.Body.String()}
	if err := json.Unmarshal(w.Body.Bytes(), &r.res); err != nil {
		t.Fatalf("status %d: body is not JSON: %v\n%s", w.Code, err, w.Body)
	}
	return r
}

// available reads the bucket through a dry run of the cheapest query.
func (e *env) available(t *testing.T) int64 {
	t.Helper()
	r := e.post(t, `{ __typename }`, nil, map[string]string{gqllimit.HeaderDryRun: "1"})
	if r.res.Extensions.Cost == nil || r.res.Extensions.Cost.ThrottleStatus == nil {
		t.Fatalf("dry run without throttleStatus: %s", r.body)
	}
	return r.res.Extensions.Cost.ThrottleStatus.CurrentlyAvailable
}

func must(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if !cond {
		t.Errorf(format, args...)
	}
}
