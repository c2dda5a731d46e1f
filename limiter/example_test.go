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

// A concurrency policy: at most 2 requests of a key in flight. A door takes
// the request's ticket once its check granted, and ends it when the
// response has ended, whatever ends it (a defer covers a panic too).
func ExampleLimiter_Ticket() {
	streams := &limiter.Policy{Name: "streams", Algorithm: limiter.Concurrency, Limit: 2}
	if err := streams.Validate(); err != nil {
		panic(err)
	}
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	reqs := []limiter.Request{{Policy: streams, Key: "acme", Cost: 1}}

	// start checks a request; it returns the ticket to end it with.
	start := func() *limiter.Ticket {
		ds, ok := lim.AllowAll(ctx, reqs)
		if !ok {
			fmt.Println("denied", ds[len(ds)-1].Outcome, "retry in", ds[len(ds)-1].RetryAfter)
			return nil
		}
		fmt.Println("in flight, places left:", ds[0].Remaining)
		return lim.Ticket(reqs, ds)
	}
	first, second := start(), start()
	start()
	first.End(200) // its response has ended: its place is free
	third := start()
	second.End(200)
	third.End(200)
	// Output:
	// in flight, places left: 1
	// in flight, places left: 0
	// denied denied retry in 1s
	// in flight, places left: 0
}
