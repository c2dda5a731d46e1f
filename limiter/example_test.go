package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
)

// The API tier: 1000 requests a minute per key, 150 at once.
func Example() {
	api := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute, Burst: 150}
	if err := api.Validate(); err != nil {
		panic(err)
	}
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	d := lim.Allow(ctx, api, "acme", 1)
	fmt.Println(d.Allowed, d.Remaining)

	d = lim.Allow(ctx, api, "acme", 149) // a weighted request: the rest of the burst
	fmt.Println(d.Allowed, d.Remaining)

	d = lim.Allow(ctx, api, "acme", 5)
	fmt.Println(d.Allowed, d.Outcome, d.RetryAfter.Round(10*time.Millisecond))
	// Output:
	// true 149
	// true 0
	// false denied 300ms
}
