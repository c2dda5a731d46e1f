package httplimit_test

import (
	"context"
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

// One route of a chi service limited by client address, in one line: 2
// requests an hour, counted in process memory.
func ExampleLimitByIP() {
	r := chi.NewRouter()
	r.With(httplimit.LimitByIP(2, time.Hour)).Get("/api/hello", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })

	for range 3 {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/api/hello", nil))
		fmt.Println(w.Code, "remaining", w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// 200 remaining 1 "ip";q=2;w=3600
	// 200 remaining 0 "ip";q=2;w=3600
	// 429 remaining 0 "ip";q=2;w=3600
}

// A limit per signed-in user: the key comes from what the authentication
// middleware put in the context, so the limiter runs after it. Run before
// it, the limiter finds no user and answers 500 (logged) instead of
// counting every user in one bucket.
func ExampleKeyFromContext() {
	type userKey struct{}
	auth := func(next http.Handler) http.Handler { // stands in for yours
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, r.Header.Get("X-User"))))
		})
	}
	r := chi.NewRouter()
	r.With(auth, httplimit.Limit(1, time.Minute, httplimit.KeyFromContext(userKey{}))).Get("/me", func(w http.ResponseWriter, r *http.Request) {})

	for _, user := range []string{"ann", "ann", "bob"} {
		req := httptest.NewRequest("GET", "/me", nil)
		req.Header.Set("X-User", user)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(user, w.Code)
	}
	// Output:
	// ann 200
	// ann 429
	// bob 200
}

// The full configuration: routes matched by pattern, a policy of any
// algorithm and key, a store and hash key of your choosing. Here, 2 requests
// an hour per client address on everything below /api/.
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
