// Command upstream is a plain GraphQL server, the example shop without any
// limiter, for trying costgate's proxy mode (examples/proxy/costgate.yaml).
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/graph"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "listen address")
	flag.Parse()
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Shop: graph.NewShop()}}))
	srv.AddTransport(transport.POST{})
	// costgate-introspect.yaml reads the schema from here.
	srv.Use(extension.Introspection{})
	http.Handle("/graphql", srv)
	log.Printf("upstream GraphQL on %s/graphql", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
