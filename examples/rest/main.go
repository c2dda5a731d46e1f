// Command rest is a chi REST service limited by costgate's httplimit alone:
// no config file, no GraphQL. Each API key gets 100 requests a minute with a
// burst of 20, and anonymous callers share a bucket per client address.
//
//	go run ./examples/rest                       # in-memory store
//	go run ./examples/rest -redis 127.0.0.1:6379 # shared by every instance
package main

import (
	"crypto/rand"
	"encoding/json"
	"flag"
	"log"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redisstore"
)

func main() {
	addr := flag.String("addr", ":8081", "listen address")
	redisAddr := flag.String("redis", "", "Redis address; empty: the in-memory store")
	flag.Parse()

	var store limiter.Store = memstore.New(nil)
	hashKey := []byte(os.Getenv("HASH_KEY")) // gateways sharing Redis must share it
	if *redisAddr != "" {
		// The store makes its own client: warm connections, no retried scripts.
		rs, err := redisstore.Open(redisstore.ClientOptions{URL: "redis://" + *redisAddr}, nil)
		if err != nil {
			log.Fatal(err)
		}
		defer rs.Close()
		store = rs
		if len(hashKey) == 0 {
			log.Fatal("set HASH_KEY: every instance sharing Redis must hash identities alike")
		}
	}
	if len(hashKey) == 0 {
		hashKey = make([]byte, 32)
		rand.Read(hashKey)
	}

	perKey := &limiter.Policy{
		Name: "per_key", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Minute, Burst: 20,
		Key: []string{identity.PartTenant, identity.PartAPIKey}, OnStoreError: limiter.FailAllow,
	}
	lim, err := limiter.New(store, limiter.WithLogger(slog.Default()))
	if err != nil {
		log.Fatal(err)
	}
	ids, err := identity.New(identity.Config{
		HashKey: hashKey,
		APIKeys: identity.Table{"key-123": {Tenant: "example", Plan: "free"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{
		Limiter:  lim,
		Identity: ids,
		Routes:   []httplimit.Route{{Pattern: "/v1/*", Policies: []*limiter.Policy{perKey}}}, // the config file's syntax
	})
	if err != nil {
		log.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(mw.Handler)
	r.Get("/v1/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"hello": "world"})
	})
	log.Printf("listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, r))
}
