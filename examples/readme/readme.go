// Package readme holds the Go snippets of the README and of
// docs/embedding.md, each inside a function that gives it what it names, so
// that they compile; readme_test.go checks that every Go block of the
// README's "Embedding in one line" and of docs/embedding.md is here, line
// for line.
package readme

import (
	"context"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/go-chi/chi/v5"

	generated "github.com/costgate/costgate/graph" // stands in for your gqlgen package
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/header"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/identity"
)

type userKey struct{}

func handle(w http.ResponseWriter, r *http.Request) {}

func chiOneLine(keys identity.Table, auth func(http.Handler) http.Handler) *chi.Mux {
	hello, orders, upload := handle, handle, handle
	r := chi.NewRouter()
	r.With(httplimit.LimitByIP(100, time.Minute)).Get("/hello", hello)              // per client address
	r.With(httplimit.LimitByAPIKey(1000, time.Minute, keys)).Get("/orders", orders) // per API key (X-API-Key)
	r.With(auth, httplimit.Limit(50, time.Minute, httplimit.KeyFromContext(userKey{}))).Post("/upload", upload)
	return r
}

func gqlgenMaxCost(srv *handler.Server) {
	srv.Use(gqllimit.FixedCostLimit(1000)) // a maximum cost alone: no bucket, no middleware
}

func gqlgenBudget(srv *handler.Server) {
	http.Handle("/query", gqllimit.Handler(srv, gqllimit.Budget(50, time.Second, 1000))) // 1000 at once, 50 a second
}

func corsExposed(w http.ResponseWriter) {
	w.Header().Set("Access-Control-Expose-Headers", strings.Join(header.Exposed, ", ")) // the limits, readable by the page
}

func gqlgenSubscriptions(srv *handler.Server) {
	srv.AddTransport(transport.SSE{}) // before POST, which would take its requests
	srv.AddTransport(transport.Websocket{KeepAlivePingInterval: 10 * time.Second})
	http.Handle("/query", gqllimit.Handler(srv, gqllimit.Budget(50, time.Second, 1000)))
}

func gqlgenFull(store limiter.Store, cfg generated.Config) {
	lim, err := limiter.New(store) // memstore.New(nil), or redisstore.New(client, nil) shared by every gateway
	if err != nil {
		log.Fatal(err)
	}
	ids, err := identity.New(identity.Config{
		HashKey: []byte(os.Getenv("COSTGATE_HASH_KEY")),                   // 16+ bytes, the same on every gateway
		APIKeys: identity.Table{"key-123": {Tenant: "acme", Plan: "pro"}}, // or a Lookup of your own
	})
	if err != nil {
		log.Fatal(err) // says which field and why
	}
	cost, err := gqllimit.New(gqllimit.Config{
		Limiter:          lim,
		Identity:         ids,
		Policy:           gqllimit.Budget(50, time.Second, 1000), // or a token_bucket Policy of your own
		PersistedQueries: gqllimit.NewPersistedQueryCache(0, 0),  // APQ; nil answers PERSISTED_QUERY_NOT_SUPPORTED
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := handler.New(generated.NewExecutableSchema(cfg)) // your gqlgen server
	srv.AddTransport(transport.POST{})
	http.Handle("/query", cost.Handler(srv)) // installs the extension, wraps the server
}

func restFull(r chi.Router, lim *limiter.Limiter, ids *identity.Resolver, loginIP, loginUser, api *limiter.Policy) {
	mw, err := httplimit.New(httplimit.Config{
		Limiter:  lim,
		Identity: ids, // the same resolver: an identity resolved once serves every door
		Routes: []httplimit.Route{
			{Pattern: "POST /login", Policies: []*limiter.Policy{loginIP, loginUser}},
			{Pattern: "/api/*", Policies: []*limiter.Policy{api}}, // the config file's syntax
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	r.Use(mw.Handler) // or inside r.Group / r.With, where the route part is chi's pattern
}

// authService stands in for an application's authentication.
type authService struct{}

func (authService) UserID(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(userKey{}).(string)
	return id, ok
}

func whoPays(hashKey []byte, auth authService) []*limiter.Policy {
	ids, err := identity.New(identity.Config{
		HashKey: hashKey,
		Parts: map[string]identity.PartFunc{
			"user_id": func(r *http.Request) (string, bool) { return auth.UserID(r.Context()) },
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	perUser := &limiter.Policy{Name: "per_user", Algorithm: limiter.SlidingLog, Limit: 100, Period: time.Minute,
		Key: []string{"user_id"}} // a request without a user is keyed by its address
	perOrg := &limiter.Policy{Name: "per_org", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Minute,
		Key: []string{"header:X-Org-Id"}}
	_ = ids
	return []*limiter.Policy{perUser, perOrg}
}
