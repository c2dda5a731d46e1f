package redisstore_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
)

// A gateway that closes pushes what it granted from its lease in one last
// sync: two gateways on one key of a 100-token bucket (no refill to speak
// of), the second granting 15 from its lease and closing before any sync,
// admit 100 between them, not 115. Before, the second's grants were never
// charged and the store gave its lease back whole three intervals later,
// for the first to grant again. After Close nothing is granted.
func TestCloseSyncsLast(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			clk := newFakeClock()
			gws := newGateways(t, b.client, 2, clk)
			p := mustValidate(t, &limiter.Policy{Name: "last", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Hour, Sync: 100 * time.Millisecond})
			admitted := 0
			take := func(gw *redisstore.Store) bool {
				t.Helper()
				d, err := gw.Take(ctx, p, "k", 1)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
				return d.Allowed
			}
			take(gws[0]) // a lease of half
			for range 16 {
				if !take(gws[1]) { // a round trip, then its lease, a third of what is left
					t.Fatalf("the second gateway was denied after %d", admitted)
				}
			}
			if err := gws[1].Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := gws[1].Take(ctx, p, "k", 1); err == nil {
				t.Error("a check after Close succeeded")
			}
			clk.advance(time.Second) // past three intervals: a lease left behind is given back
			for range 1000 {
				if !take(gws[0]) {
					redisstore.FlushSync(gws[0])
					if !take(gws[0]) {
						break
					}
				}
			}
			if admitted != 100 {
				t.Errorf("admitted %d on a 100-token bucket, the second gateway having closed with 15 granted from its lease; want 100", admitted)
			}
		})
	}
}

// A last sync that cannot reach Redis says so: the grants it could not push.
func TestCloseLogsLostGrants(t *testing.T) {
	srv := redistest.StartServer(t)
	var buf bytes.Buffer
	clk := newFakeClock()
	s, err := redisstore.Open(redisstore.ClientOptions{URL: "redis://" + srv.Addr(), Timeout: storeTimeout},
		&redisstore.Options{KeyPrefix: newPrefix(t), Clock: clk.now, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	redisstore.ManualSync(s)
	p := mustValidate(t, &limiter.Policy{Name: "lost", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Hour, Sync: 100 * time.Millisecond})
	for range 10 {
		if d, err := s.Take(context.Background(), p, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("take: %+v, %v", d, err)
		}
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if out := buf.String(); !strings.Contains(out, "last sync") || !strings.Contains(out, "units=9") {
		t.Errorf("log after a last sync with Redis gone: %q, want the 9 grants from the lease reported", out)
	}
}
