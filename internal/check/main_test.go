package check_test

import (
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/internal/check"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
	"github.com/costgate/costgate/limiter/storetest"
)

var redisServer *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &redisServer) }

var prefixSeq atomic.Int64

// The demo config's policies, with refill negligible during a test.
func apiPolicy() *limiter.Policy {
	return &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 150, Period: time.Hour, Burst: 150,
		Key: []string{identity.PartTenant, identity.PartAPIKey}, OnStoreError: limiter.FailAllow}
}

func loginIP() *limiter.Policy {
	return &limiter.Policy{Name: "login_ip", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute,
		Key: []string{identity.PartIP}, OnStoreError: limiter.FailDeny}
}

func loginUser() *limiter.Policy {
	return &limiter.Policy{Name: "login_user", Algorithm: limiter.SlidingLog, Limit: 10, Period: 5 * time.Minute,
		Key: []string{identity.PartUsername}, OnStoreError: limiter.FailDeny}
}

// gateway is the trusted proxy of every test: the address the gateway
// calls from.
var gateway = netip.MustParsePrefix("127.0.0.1/32")

// rig is one limiter over a real store, with the identity and REST
// middleware of the doors, as the server builds them.
type rig struct {
	lim    *limiter.Limiter
	ids    *identity.Resolver
	rest   *routelimit.Middleware
	client *redis.Client
	store  *redisstore.Store // nil with the in-memory store
	redis  *redistest.Server
	prefix string
	clock  *storetest.Clock
}

type rigOpts struct {
	routes []routelimit.Route
	redis  *redistest.Server // default: the package's server
	memory bool              // the in-memory store instead of Redis
}

func newRig(t testing.TB, o rigOpts) *rig {
	t.Helper()
	srv := o.redis
	if srv == nil {
		srv = redisServer
	}
	rg := &rig{redis: srv, clock: storetest.NewClock(time.Now()), prefix: fmt.Sprintf("c%d:", prefixSeq.Add(1))}
	var store limiter.Store
	opts := []limiter.Option{limiter.WithLogger(slog.New(slog.DiscardHandler))}
	if o.memory {
		store = memstore.New(&memstore.Options{Clock: rg.clock.Now})
	} else {
		rg.client = srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.MaxRetries = -1 })
		rs, err := redisstore.New(rg.client, &redisstore.Options{KeyPrefix: rg.prefix, Clock: rg.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		store, rg.store = rs, rs
		// Generous: the tests are about decisions, not a busy machine's latency.
		opts = append(opts, limiter.WithTimeout(5*time.Second), limiter.WithLocalFallback(memstore.New(nil), 2))
	}
	lim, err := limiter.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := identity.New(identity.Config{
		HashKey:        []byte("check-test-hash-key-32-bytes...."),
		TrustedProxies: []netip.Prefix{gateway},
		APIKeys: identity.Table{
			"demo-free":       {Tenant: "acme", Plan: "free"},
			"demo-enterprise": {Tenant: "bigco", Plan: "enterprise"},
		},
		Plans: map[string]int64{"enterprise": 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	routes := o.routes
	if routes == nil {
		routes = []routelimit.Route{
			{Pattern: "POST /login", Policies: []*limiter.Policy{loginIP(), loginUser()}},
			{Pattern: "/api/*", Policies: []*limiter.Policy{apiPolicy()}},
		}
	}
	rest, err := routelimit.New(routelimit.Config{Limiter: lim, Identity: ids, Routes: routes, Clock: rg.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	rg.lim, rg.ids, rg.rest = lim, ids, rest
	return rg
}

func (rg *rig) handler(t testing.TB, usernameHeader string) *check.Handler {
	t.Helper()
	h, err := check.NewHandler(check.HTTPConfig{Limits: rg.rest, Identity: rg.ids, Gateways: []netip.Prefix{gateway},
		UsernameHeader: usernameHeader, Clock: rg.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// keys lists the store keys the rig wrote.
func (rg *rig) keys(t testing.TB) []string {
	t.Helper()
	if rg.client == nil {
		return nil
	}
	var keys []string
	iter := rg.client.Scan(t.Context(), 0, rg.prefix+"*", 1000).Iterator()
	for iter.Next(t.Context()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}
