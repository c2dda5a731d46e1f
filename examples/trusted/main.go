// Command trusted is a gqlgen server of your own that runs only the
// operations its clients shipped: the persisted query manifest their build
// wrote (persisted-documents.json, built into the binary), every document
// of it validated and priced when the server starts.
//
//	go run ./examples/trusted
//	curl -s localhost:8083/graphql -H 'Content-Type: application/json' \
//	  -d '{"documentId":"sha256:19934132243bbd8a3a8d0f1c48de7f50b0a1ab907f2290ba6eb94d34dcd6591a"}'
//
// With -manifest FILE it reads the list from a file instead, and again
// when the file changes. docs/trusted-documents.md shows both.
package main

import (
	_ "embed"
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/costgate/costgate/complexity"
	generated "github.com/costgate/costgate/graph" // stands in for your gqlgen package
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

//go:embed persisted-documents.json
var persistedDocuments []byte

// oneCall serves the list built into the binary, behind a budget per caller.
func oneCall(srv *handler.Server) http.Handler {
	return gqllimit.Handler(srv, gqllimit.Budget(50, time.Second, 1000),
		gqllimit.WithTrustedDocuments(gqllimit.TrustedDocuments{Manifest: persistedDocuments}))
}

func main() {
	addr := flag.String("addr", ":8083", "listen address")
	manifest := flag.String("manifest", "", "read the trusted documents from this file (and again when it changes) instead of the list built in")
	flag.Parse()
	var (
		h   http.Handler
		err error
	)
	if *manifest == "" {
		h = oneCall(server())
	} else if h, err = fromFile(server(), *manifest); err != nil {
		log.Fatal(err) // names the document that could never run, and why
	}
	http.Handle("/graphql", h)
	log.Printf("listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}

// server is your gqlgen server.
func server() *handler.Server {
	srv := handler.New(generated.NewExecutableSchema(generated.Config{Resolvers: &generated.Resolver{Shop: generated.NewShop()}}))
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(gqllimit.NewQueryCache(0, 0)) // gqlgen keeps the documents it runs parsed
	return srv
}

// fromFile is the full configuration, the list read from a file.
func fromFile(srv *handler.Server, file string) (http.Handler, error) {
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		return nil, err
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("a secret every gateway shares")})
	if err != nil {
		return nil, err
	}
	schema, err := complexity.NewSchema(generated.NewExecutableSchema(generated.Config{}).Schema())
	if err != nil {
		return nil, err
	}
	cost, err := gqllimit.New(gqllimit.Config{
		Limiter:          lim,
		Identity:         ids,
		Policy:           gqllimit.Budget(50, time.Second, 1000),
		Schema:           schema, // with it, New checks every listed document and returns what is wrong
		TrustedDocuments: &gqllimit.TrustedDocuments{File: file, Mode: gqllimit.TrustEnforce},
	})
	if err != nil {
		return nil, err
	}
	return cost.Handler(srv), nil
}
