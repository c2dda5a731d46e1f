package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter/redisstore"
)

// A token bucket's lease is whole tokens: once the burst is spent, the
// fraction of a token refilled by the next sync is not granted before it
// is whole (B + r·W, as an exact policy), through one gateway or three.
func TestSyncLeaseIsWholeTokens(t *testing.T) {
	for _, n := range []int{1, 3} {
		clk := newFakeClock()
		gws := newGateways(t, backends()[0].client, n, clk)
		p := syncBucket(t, 20, time.Hour, 20, 100*time.Millisecond) // refill: a token every 3 minutes
		admitted := 0
		for range 30 { // 3 s: a sixtieth of a token refilled
			for _, gw := range gws {
				for range 10 {
					d, err := gw.Take(context.Background(), p, "k", 1)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed {
						admitted++
					}
				}
				redisstore.FlushSync(gw)
			}
			clk.advance(100 * time.Millisecond)
		}
		if admitted != 20 {
			t.Errorf("%d gateways: admitted %d in 3 s from a burst of 20 refilled 20 an hour; want 20", n, admitted)
		}
	}
}
