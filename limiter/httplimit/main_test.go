package httplimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
	"github.com/costgate/costgate/limiter/storetest"
)

var redisServer *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &redisServer) }

var prefixSeq atomic.Int64

// The policies of the demo config (docs/configuration.md).
func apiPolicy() *limiter.Policy {
	return &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150,
		Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailAllow}
}

// dayAPIPolicy is apiPolicy with a day's period, for tests that count
// what one burst admits. The store's clock is frozen, but Redis expires a
// bucket on its own clock, after the real time its deficit takes to refill:
// at 1000 a minute the first request's key lives 60ms, which a busy machine
// can outlast between two requests, and a bucket that expired is full
// again. At 1000 a day it lives 86s.
func dayAPIPolicy() *limiter.Policy {
	p := apiPolicy()
	p.Period = 24 * time.Hour
	return p
}

func loginPolicies() []*limiter.Policy {
	return []*limiter.Policy{
		{Name: "login_ip", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute, Key: []string{"ip"}, OnStoreError: limiter.FailDeny},
		{Name: "login_user", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute, Key: []string{"username"}, OnStoreError: limiter.FailDeny},
	}
}

type testServer struct {
	handler http.Handler
	mw      *httplimit.Middleware
	ids     *identity.Resolver
	client  *redis.Client
	store   *redisstore.Store
	prefix  string
	clock   *storetest.Clock
	events  *eventLog
}

type eventLog struct{ n [8]atomic.Int64 }

var outcomes = []limiter.Outcome{limiter.Allowed, limiter.Denied, limiter.ShadowDenied, limiter.ErrorAllowed, limiter.ErrorDenied, limiter.ErrorLocal}

func (e *eventLog) observe(ev limiter.Event) {
	for i, o := range outcomes {
		if ev.Outcome == o {
			e.n[i].Add(1)
		}
	}
}

func (e *eventLog) count(o limiter.Outcome) int64 {
	for i, x := range outcomes {
		if x == o {
			return e.n[i].Load()
		}
	}
	return 0
}

type serverOpts struct {
	trusted []netip.Prefix
	routes  []httplimit.Route
	redis   *redis.Client // default: the package's server
	// gateways > 0 gives on_store_error: local its in-process fallback.
	gateways int
}

// newTestServer builds a chi router with the middleware in front of the
// example routes, over a Redis store with an injected clock.
func newTestServer(t *testing.T, o serverOpts) *testServer {
	t.Helper()
	client := o.redis
	if client == nil {
		client = redisServer.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	}
	clock := storetest.NewClock(time.Now())
	prefix := fmt.Sprintf("t%d:", prefixSeq.Add(1))
	store, err := redisstore.New(client, &redisstore.Options{KeyPrefix: prefix, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ev := &eventLog{}
	// A generous store timeout: these tests are about decisions, and a busy
	// machine running -race must not turn them into fail-open store errors.
	opts := []limiter.Option{limiter.WithObserver(ev.observe), limiter.WithLogger(slog.New(slog.DiscardHandler)),
		limiter.WithTimeout(10 * time.Second)}
	if o.gateways > 0 {
		opts = append(opts, limiter.WithLocalFallback(memstore.New(&memstore.Options{Clock: clock.Now}), o.gateways))
	}
	lim, err := limiter.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	routes := o.routes
	if routes == nil {
		routes = []httplimit.Route{
			{Pattern: "POST /login", Policies: loginPolicies()},
			{Pattern: "/api/*", Policies: []*limiter.Policy{apiPolicy()}},
		}
	}
	for _, rt := range routes {
		for _, p := range rt.Policies {
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := chi.NewRouter()
	ids, err := identity.New(identity.Config{
		TrustedProxies: o.trusted,
		APIKeys: identity.Table{
			"demo-free":       {Tenant: "acme", Plan: "free"},
			"demo-enterprise": {Tenant: "bigco", Plan: "enterprise"},
		},
		Plans:   map[string]int64{"anonymous": 1, "free": 1, "enterprise": 10},
		HashKey: []byte("test-hash-key-of-16+-bytes"),
	})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{
		Limiter:  lim,
		Identity: ids,
		Routes:   routes,
		Clock:    clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Use(mw.Handler)
	r.Get("/api/products", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"products":[]}`) })
	r.Get("/api/products/{id}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"id":1}`) })
	r.Post("/login", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Username, Password string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Username == "" {
			http.Error(w, "handler could not read the body", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"invalid_credentials"}`)
	})
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	return &testServer{handler: r, mw: mw, ids: ids, client: client, store: store, prefix: prefix, clock: clock, events: ev}
}

type request struct {
	method, path, body string
	remote             string
	header             map[string]string
	xff                string
}

func (s *testServer) do(req request) *httptest.ResponseRecorder {
	if req.method == "" {
		req.method = "GET"
	}
	var body io.Reader
	if req.body != "" {
		body = strings.NewReader(req.body)
	}
	r := httptest.NewRequest(req.method, req.path, body)
	if req.remote != "" {
		r.RemoteAddr = req.remote
	}
	for k, v := range req.header {
		r.Header.Set(k, v)
	}
	if req.xff != "" {
		r.Header.Set("X-Forwarded-For", req.xff)
	}
	w := httptest.NewRecorder()
	s.handler.ServeHTTP(w, r)
	return w
}

// storeKeys lists the keys the test's store wrote.
func (s *testServer) storeKeys(t *testing.T) []string {
	t.Helper()
	var keys []string
	iter := s.client.Scan(t.Context(), 0, s.prefix+"*", 1000).Iterator()
	for iter.Next(t.Context()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// expiries watches Redis expire keys of the test's store (keyspace
// notifications) and returns a function listing those expired so far. The
// store's clock is frozen but Redis expires on its own: a key expiring
// during a test means the machine took longer than the key's real lifetime.
func (s *testServer) expiries(t *testing.T) func() []string {
	t.Helper()
	ctx := context.Background()
	c := redisServer.Client()
	t.Cleanup(func() { c.Close() })
	if err := c.ConfigSet(ctx, "notify-keyspace-events", "Ex").Err(); err != nil {
		t.Fatal(err)
	}
	ps := c.PSubscribe(ctx, "__keyevent@*__:expired")
	t.Cleanup(func() { ps.Close() })
	if _, err := ps.Receive(ctx); err != nil { // the subscription is in place
		t.Fatal(err)
	}
	var mu sync.Mutex
	var expired []string
	pong := make(chan struct{}, 1)
	go func() {
		for {
			msg, err := ps.Receive(ctx)
			if err != nil {
				return
			}
			switch m := msg.(type) {
			case *redis.Message:
				if strings.HasPrefix(m.Payload, s.prefix) {
					mu.Lock()
					expired = append(expired, m.Payload)
					mu.Unlock()
				}
			case *redis.Pong:
				pong <- struct{}{}
			}
		}
	}()
	return func() []string {
		t.Helper()
		// Notifications come before the PONG that follows them.
		if err := ps.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		<-pong
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(expired)
	}
}

type errorJSON struct {
	Error         string `json:"error"`
	Message       string `json:"message"`
	Policy        string `json:"policy"`
	RetryAfterSec int64  `json:"retry_after_sec"`
}

func decodeError(t *testing.T, w *httptest.ResponseRecorder) errorJSON {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("status %d: Content-Type %q, want application/json", w.Code, ct)
	}
	var e errorJSON
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("status %d: body %q is not JSON: %v", w.Code, w.Body, err)
	}
	if e.Error == "" || e.Message == "" {
		t.Errorf("status %d: error body %q lacks error or message", w.Code, w.Body)
	}
	return e
}
