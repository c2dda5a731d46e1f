package gqlproxy_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redistest"
)

var redisServer *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &redisServer) }

var prefixSeq atomic.Int64

// graphqlPolicy holds 1000 at once, like the demo's, but refills a token
// every 10 s. The store's clock is frozen, so nothing refills during a test;
// but Redis expires a key on its own clock once the real time to refill its
// deficit has passed, and at the demo's 50/s a deficit of one token lived
// 20 ms, less than a busy machine can take between two requests.
func graphqlPolicy() *limiter.Policy {
	return &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 360, Period: time.Hour, Burst: 1000,
		Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailAllow}
}

func must(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if !cond {
		t.Fatalf(format, args...)
	}
}
