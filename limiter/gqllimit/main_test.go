package gqllimit_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
	"github.com/costgate/costgate/limiter/storetest"
)

var redisServer *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &redisServer) }

var prefixSeq atomic.Int64

type env struct {
	gqltest.Client
	handler    http.Handler
	clock      *storetest.Clock
	gl         *gqllimit.Limiter
	policy     *limiter.Policy
	rejections *counts // Config.OnRejection, by code
	resolved   *counts // root fields gqlgen resolved, by name
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

// snapshot is a copy of the tally.
func (c *counts) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

type envOpts struct {
	cfg    func(*gqllimit.Config)
	policy *limiter.Policy
	client *redis.Client         // default: the package's server
	server func(*handler.Server) // called before the limiter wraps the server
	// streams serves subscriptions too: SSE and websockets (both
	// protocols), installed as a gqlgen server installs them.
	streams bool
}

// graphqlPolicy holds 1000 at once, like the demo's, but refills a token
// every 10 s (0.1/s). The store's clock is frozen, so nothing refills during
// a test unless it moves the clock; but Redis expires a key on its own clock
// once the real time to refill its deficit has passed, and at the demo's 50/s
// a deficit of one token lived 20 ms, less than a busy machine can take
// between two requests.
func graphqlPolicy() *limiter.Policy {
	return &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 360, Period: time.Hour, Burst: 1000,
		Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailAllow}
}

// newEnv serves the example API behind the cost limiter, over Redis.
func newEnv(t testing.TB, o envOpts) *env {
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
	t.Cleanup(func() { store.Close() })
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
	ids, err := identity.New(identity.Config{
		APIKeys: identity.Table{"demo-free": {Tenant: "acme", Plan: "free"}},
		Plans:   map[string]int64{"anonymous": 1, "free": 1},
		HashKey: []byte("gqllimit-test-hash-key"),
	})
	if err != nil {
		t.Fatal(err)
	}
	rejections, resolved := &counts{}, &counts{}
	cfg := gqllimit.Config{Limiter: lim, Policy: p, Identity: ids, Clock: clock.Now, Logger: slog.New(slog.DiscardHandler),
		OnRejection: rejections.add}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	gl, err := gqllimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop(), RateLimitInfo: graph.CostgateRateLimit}}))
	if o.streams {
		srv.AddTransport(transport.SSE{})
		srv.AddTransport(transport.Websocket{})
	}
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(gqllimit.NewQueryCache(100, 0))
	srv.AroundRootFields(func(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
		resolved.add(graphql.GetRootFieldContext(ctx).Field.Name)
		return next(ctx)
	})
	if o.server != nil {
		o.server(srv)
	}
	h := gl.Handler(srv)
	return &env{Client: gqltest.Client{Handler: h}, handler: h, clock: clock, gl: gl, policy: p, rejections: rejections, resolved: resolved}
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

func must(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if !cond {
		t.Errorf(format, args...)
	}
}

// startStoppedRedis returns a client of a redis-server that has stopped:
// every check is a store error.
func startStoppedRedis(t *testing.T) *redis.Client {
	t.Helper()
	srv := redistest.StartServer(t)
	client := srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.DialerRetries = 1 })
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	return client
}
