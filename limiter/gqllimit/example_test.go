package gqllimit_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/graph" // stands in for your gqlgen package
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// A maximum cost on a gqlgen server, in one line: operations priced over
// 50 are refused before they run, nothing is charged.
func ExampleFixedCostLimit() {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	srv.Use(gqllimit.FixedCostLimit(50))

	body := `{"query":"{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }"}`
	req := httptest.NewRequest("POST", "/query", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	fmt.Println(w.Body.String())
	// Output:
	// {"errors":[{"message":"the operation costs 61, more than the maximum of 50","extensions":{"code":"MAX_COST_EXCEEDED","cost":61,"maxCost":50}}],"data":null}
}

// A cost budget on a gqlgen server in one call: 1000 points an hour per
// caller, all at once if it likes, kept in process memory.
func ExampleHandler() {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	h := gqllimit.Handler(srv, gqllimit.Budget(1000, time.Hour, 1000))

	body := `{"query":"{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }"}`
	req := httptest.NewRequest("POST", "/query", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)

	var res struct {
		Extensions struct{ Cost gqllimit.Cost } `json:"extensions"`
	}
	json.Unmarshal(w.Body.Bytes(), &res)
	c := res.Extensions.Cost
	fmt.Println("status", w.Code, "requested", c.RequestedQueryCost, "actual", *c.ActualQueryCost)
	fmt.Println("available", c.ThrottleStatus.CurrentlyAvailable, "of", c.ThrottleStatus.MaximumAvailable)
	// Output:
	// status 200 requested 61 actual 45
	// available 955 of 1000
}

// The full configuration: a store, a hash key and API keys of your choosing. The schema
// declares @cost and @listSize; gqlgen.yml marks both skip_runtime: true.
func ExampleLimiter_Handler() {
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		panic(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("a secret every gateway shares")})
	if err != nil {
		panic(err)
	}
	cost, err := gqllimit.New(gqllimit.Config{
		Limiter:  lim,
		Identity: ids,
		// 50 a second, 1000 at once, per tenant and key (the client address without one).
		Policy: &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 50, Period: time.Second, Burst: 1000,
			Key: []string{"tenant", "api_key"}},
	})
	if err != nil {
		panic(err)
	}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	h := cost.Handler(srv) // installs the extension, wraps the server

	body := `{"query":"{ products(first: 10) { nodes { id title variants(first: 5) { id } } } }"}`
	req := httptest.NewRequest("POST", "/graphql", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)

	var res struct {
		Extensions struct{ Cost gqllimit.Cost } `json:"extensions"`
	}
	json.Unmarshal(w.Body.Bytes(), &res)
	c := res.Extensions.Cost
	fmt.Println("status", w.Code)
	fmt.Println("requested", c.RequestedQueryCost, "actual", *c.ActualQueryCost)
	// currentlyAvailable is 1000 − 45 at the refund, and grows 50 a second.
	fmt.Println("bucket", c.ThrottleStatus.MaximumAvailable, "restoring", c.ThrottleStatus.RestoreRate, "a second")
	// Output:
	// status 200
	// requested 61 actual 45
	// bucket 1000 restoring 50 a second
}
