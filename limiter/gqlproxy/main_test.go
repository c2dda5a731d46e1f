package gqlproxy_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redistest"
)

var redisServer *redistest.Server

func TestMain(m *testing.M) {
	var err error
	if redisServer, err = redistest.NewServer(); err != nil {
		fmt.Fprintln(os.Stderr, "gqlproxy tests need redis-server:", err)
		os.Exit(1)
	}
	code := m.Run()
	redisServer.Close()
	os.Exit(code)
}

var prefixSeq atomic.Int64

// graphqlPolicy is the demo's: 50 a second, 1000 at once. The store's clock
// is frozen, so nothing refills during a test.
func graphqlPolicy() *limiter.Policy {
	return &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 50, Period: time.Second, Burst: 1000,
		Key: []string{"tenant", "api_key"}, OnStoreError: limiter.FailAllow}
}

func must(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if !cond {
		t.Fatalf(format, args...)
	}
}
