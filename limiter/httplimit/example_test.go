package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// A chi service with a REST limit: 2 requests an hour per client address on
// everything below /api/.
func Example() {
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		panic(err)
	}
	ids, err := identity.New(identity.Config{HashKey: []byte("a secret every gateway shares")})
	if err != nil {
		panic(err)
	}
	perIP := &limiter.Policy{Name: "api", Algorithm: limiter.FixedWindow, Limit: 2, Period: time.Hour, Key: []string{"ip"}}
	mw, err := httplimit.New(httplimit.Config{
		Limiter:  lim,
		Identity: ids,
		Routes:   []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{perIP}}},
	})
	if err != nil {
		panic(err)
	}
	r := chi.NewRouter()
	r.Use(mw.Handler)
	r.Get("/api/hello", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })

	for range 3 {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/api/hello", nil))
		fmt.Println(w.Code, "remaining", w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// 200 remaining 1 "api";q=2;w=3600
	// 200 remaining 0 "api";q=2;w=3600
	// 429 remaining 0 "api";q=2;w=3600
}
