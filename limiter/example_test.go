package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
)

// An API tier: 1000 requests an hour per key, 150 at once (a token every
// 3.6s, so the figures below stand however slowly the example runs).
func Example() {
	api := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Hour, Burst: 150}
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
	fmt.Println(d.Allowed, d.Outcome, d.RetryAfter.Round(time.Second)) // 5 tokens
	// Output:
	// true 149
	// true 0
	// false denied 18s
}
