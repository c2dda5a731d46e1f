package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/identity"
)

// chi's CleanPath and StripSlashes route other spellings of /login to the
// login handler without changing r.URL.Path: the middleware in the route's
// group charges them as /login, and an undecodable path is refused.
func TestHandlerChargesWhatTheRouterRoutes(t *testing.T) {
	login := &limiter.Policy{Name: "login_ip", Algorithm: limiter.SlidingLog, Limit: 3, Period: time.Hour, Key: []string{identity.PartIP, identity.PartRoute}}
	mw, err := httplimit.New(httplimit.Config{Limiter: memLimiter(t), Identity: resolver(t, identity.Config{}),
		Routes: []httplimit.Route{{Pattern: "POST /login", Policies: []*limiter.Policy{login}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(middleware.CleanPath, middleware.StripSlashes)
	served := 0
	r.Group(func(r chi.Router) {
		r.Use(mw.Handler)
		r.Post("/login", func(w http.ResponseWriter, r *http.Request) { served++ })
	})
	post := func(target string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("POST", target, nil))
		return w
	}
	for _, target := range []string{"/login", "/login", "/login"} {
		if w := post(target); w.Code != http.StatusOK {
			t.Fatalf("POST %s: %d, want 200", target, w.Code)
		}
	}
	for target, want := range map[string]int{"/login/": 429, "//login": 429, "/x/../login": 429, "/login": 429, "/login%2F": 404} {
		if w := post(target); w.Code != want || want == 429 && w.Header().Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("POST %s after 3: %d %v, want %d", target, w.Code, w.Header(), want)
		}
	}
	if served != 3 {
		t.Errorf("the login handler ran %d times, want 3", served)
	}
	// In front of the router, a path that does not decode is refused.
	w := httptest.NewRecorder()
	mw.Handler(r).ServeHTTP(w, httptest.NewRequest("POST", "/login%C0%AF", nil))
	if w.Code != http.StatusBadRequest || served != 3 {
		t.Errorf("POST /login%%C0%%AF: %d, want 400", w.Code)
	}
}
