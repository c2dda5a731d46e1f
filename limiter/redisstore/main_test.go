package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
)

// One standalone server and one 3-master cluster serve the whole package;
// every test writes under a prefix of its own.
var (
	standalone *redistest.Server
	cluster    *redistest.Cluster
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	if target := os.Getenv(proxyEnv); target != "" {
		os.Exit(runProxy(target))
	}
	redistest.MainWithCluster(m, &standalone, &cluster)
}

// backend is a Redis deployment the tests run against.
type backend struct {
	name   string
	client func() redis.UniversalClient
}

func backends() []backend {
	return []backend{
		{"standalone", func() redis.UniversalClient { return standalone.Client(withTimeouts) }},
		{"cluster", func() redis.UniversalClient { return cluster.Client(withClusterTimeouts) }},
	}
}

func withTimeouts(o *redis.Options)               { o.ContextTimeoutEnabled = true }
func withClusterTimeouts(o *redis.ClusterOptions) { o.ContextTimeoutEnabled = true }

var prefixSeq atomic.Int64

// newPrefix returns a key prefix no other test uses.
func newPrefix(t testing.TB) string {
	return fmt.Sprintf("t%d:%s:", prefixSeq.Add(1), strings.ReplaceAll(t.Name(), "/", "-"))
}

func newStore(t testing.TB, client redis.UniversalClient, prefix string, clock func() time.Time) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(client, &redisstore.Options{KeyPrefix: prefix, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// keysUnder returns every key starting with prefix, with its PTTL, from
// every master.
func keysUnder(t testing.TB, client redis.UniversalClient, prefix string) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	found := make(map[string]time.Duration)
	scan := func(c *redis.Client) error {
		iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 100).Iterator()
		for iter.Next(ctx) {
			ttl, err := c.PTTL(ctx, iter.Val()).Result()
			if err != nil {
				return err
			}
			if ttl == -2*time.Nanosecond { // expired between SCAN and PTTL
				continue
			}
			found[iter.Val()] = ttl
		}
		return iter.Err()
	}
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex // ForEachMaster runs the nodes concurrently
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(node)
		})
	case *redis.Client:
		err = scan(c)
	default:
		t.Fatalf("unexpected client %T", client)
	}
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)
	return r.Replace(s)
}

// ceilMillis is d rounded up to whole milliseconds, as PEXPIRE gets it.
func ceilMillis(d time.Duration) time.Duration {
	return time.Duration(math.Ceil(float64(d)/float64(time.Millisecond))) * time.Millisecond
}

func mustValidate(t testing.TB, p *limiter.Policy) *limiter.Policy {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}
