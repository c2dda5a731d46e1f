// Command embed is a gqlgen server of your own with costgate embedded: the
// extension prices, charges and refunds each operation, and the middleware
// around the handler turns its decisions into HTTP statuses and headers.
//
//	go run ./examples/embed
//	curl -s localhost:8082/graphql -H 'Content-Type: application/json' \
//	  -d '{"query":"{ products(first: 10) { nodes { title variants(first: 5) { sku } } } }"}'
package main

import (
	"crypto/rand"
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/graph" // stands in for your gqlgen package
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/memstore"
)

func main() {
	addr := flag.String("addr", ":8082", "listen address")
	flag.Parse()

	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		log.Fatal(err)
	}
	// 50 cost units a second per caller, 1000 at once; refunds need a token bucket.
	policy := &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 50, Period: time.Second, Burst: 1000,
		Key: []string{httplimit.PartTenant, httplimit.PartAPIKey}}
	if err := policy.Validate(); err != nil {
		log.Fatal(err)
	}
	hashKey := make([]byte, 32)
	rand.Read(hashKey)
	// httplimit resolves who pays: API key, tenant and plan, or the client IP.
	identity, err := httplimit.New(httplimit.Config{
		Limiter: lim,
		APIKeys: map[string]httplimit.APIKey{"key-123": {Tenant: "example", Plan: "pro"}},
		Plans:   map[string]int64{"pro": 5},
		HashKey: hashKey,
	})
	if err != nil {
		log.Fatal(err)
	}
	cost, err := gqllimit.New(gqllimit.Config{Limiter: lim, Policy: policy, Identity: identity, MaxCost: 1000, Refund: true})
	if err != nil {
		log.Fatal(err)
	}

	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	srv.AddTransport(transport.GET{})
	srv.Use(cost.Extension())

	http.Handle("/graphql", cost.Middleware(srv))
	log.Printf("listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
