// Command embed is a gqlgen server of your own with costgate embedded: the
// cost limit prices, charges and refunds each operation, and answers with
// the HTTP status and rate-limit headers its decision calls for.
//
//	go run ./examples/embed
//	curl -s localhost:8082/graphql -H 'Content-Type: application/json' \
//	  -d '{"query":"{ products(first: 10) { nodes { title variants(first: 5) { sku } } } }"}'
//
// Your schema declares @cost and @listSize (see graph/schema.graphqls), and
// gqlgen.yml marks them skip_runtime: true: costgate reads them, gqlgen
// must not try to run them.
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
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

func main() {
	addr := flag.String("addr", ":8082", "listen address")
	flag.Parse()

	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		log.Fatal(err)
	}
	// Who pays: the API key's tenant, or the client address without one.
	hashKey := make([]byte, 32)
	rand.Read(hashKey) // one process; gateways sharing Redis share one key
	ids, err := identity.New(identity.Config{
		HashKey: hashKey,
		APIKeys: identity.Table{"key-123": {Tenant: "example", Plan: "pro"}},
		Plans:   map[string]int64{"pro": 5},
	})
	if err != nil {
		log.Fatal(err)
	}
	// 50 cost units a second per caller, 1000 at once; refunds need a token bucket.
	cost, err := gqllimit.New(gqllimit.Config{
		Limiter:  lim,
		Identity: ids,
		Policy: &limiter.Policy{Name: "graphql", Algorithm: limiter.TokenBucket, Limit: 50, Period: time.Second, Burst: 1000,
			Key: []string{identity.PartTenant, identity.PartAPIKey}},
	})
	if err != nil {
		log.Fatal(err)
	}

	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	srv.AddTransport(transport.GET{})
	http.Handle("/graphql", cost.Handler(srv)) // installs the extension and wraps the server
	log.Printf("listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
