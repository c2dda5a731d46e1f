package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

func memLimiter(t *testing.T) *limiter.Limiter {
	t.Helper()
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func resolver(t *testing.T, cfg identity.Config) *identity.Resolver {
	t.Helper()
	cfg.HashKey = []byte("setup-test-hash-key")
	res, err := identity.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Every setup that would limit nothing, or limit as one global bucket, is
// refused at construction with the field and the reason.
func TestNewRefusesSetupsThatLimitNothing(t *testing.T) {
	lim, ids := memLimiter(t), resolver(t, identity.Config{})
	ok := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Second, Key: []string{"ip"}}
	noKey := &limiter.Policy{Name: "nokey", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Second}
	typo := &limiter.Policy{Name: "typo", Algorithm: "token-bucket", Limit: 10, Period: time.Second, Key: []string{"ip"}}
	local := &limiter.Policy{Name: "local", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Second, Key: []string{"ip"}, OnStoreError: limiter.FailLocal}
	tests := []struct {
		name  string
		cfg   httplimit.Config
		field string // of the FieldError, or the PolicyError's field
	}{
		{"no routes", httplimit.Config{Limiter: lim, Identity: ids}, "Routes"},
		{"no limiter", httplimit.Config{Identity: ids, Routes: []httplimit.Route{{Pattern: "/*", Policies: []*limiter.Policy{ok}}}}, "Limiter"},
		{"no identity", httplimit.Config{Limiter: lim, Routes: []httplimit.Route{{Pattern: "/*", Policies: []*limiter.Policy{ok}}}}, "Identity"},
		{"routes without policies", httplimit.Config{Limiter: lim, Identity: ids, Routes: []httplimit.Route{{Pattern: "/api/*"}}}, "Routes"},
		{"policy without a key", httplimit.Config{Limiter: lim, Identity: ids, Routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{noKey}}}}, "key"},
		{"unknown algorithm", httplimit.Config{Limiter: lim, Identity: ids, Routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{typo}}}}, "algorithm"},
		// Without a local fallback, a store error would let everything through.
		{"local fail mode, no fallback", httplimit.Config{Limiter: lim, Identity: ids, Routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{local}}}}, "on_store_error"},
		{"bad pattern", httplimit.Config{Limiter: lim, Identity: ids, Routes: []httplimit.Route{{Pattern: "api/*", Policies: []*limiter.Policy{ok}}}}, "Routes[0].Pattern"},
		{"shadowed route", httplimit.Config{Limiter: lim, Identity: ids, Routes: []httplimit.Route{
			{Pattern: "/api/*", Policies: []*limiter.Policy{ok}}, {Pattern: "GET /api/products", Policies: []*limiter.Policy{ok}}}}, "Routes[1].Pattern"},
		{"nil policy", httplimit.Config{Limiter: lim, Identity: ids, Routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{nil}}}}, "Routes[0].Policies[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := httplimit.New(tc.cfg)
			var fe *limiter.FieldError
			var pe *limiter.PolicyError
			switch {
			case errors.As(err, &fe) && fe.Field == tc.field:
			case errors.As(err, &pe) && pe.Field == tc.field:
			default:
				t.Errorf("New error = %v, want one on %s", err, tc.field)
			}
		})
	}
}

// The config file's syntax is the library's: "/api/*" limits /api and what is below it.
func TestRoutePatternsAreTheConfigSyntax(t *testing.T) {
	p := &limiter.Policy{Name: "api", Algorithm: limiter.FixedWindow, Limit: 2, Period: time.Hour, Key: []string{"ip"}}
	mw, err := httplimit.New(httplimit.Config{Limiter: memLimiter(t), Identity: resolver(t, identity.Config{}),
		Routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{p}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	codes := ""
	for _, path := range []string{"/api/a", "/API/b/c", "/api", "/apis", "/api/d"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		codes += fmt.Sprint(w.Code, " ")
	}
	if codes != "200 200 429 200 429 " {
		t.Errorf("statuses %q, want the third and later /api requests denied and /apis unlimited", codes)
	}
}

type userKey struct{}

// An application's own identity: one policy keys by a user id that an
// authentication middleware put in the context, another by header:X-Org-Id.
// Each limits exactly, whatever address the requests come from.
func TestCustomIdentityParts(t *testing.T) {
	byUser := &limiter.Policy{Name: "per_user", Algorithm: limiter.SlidingLog, Limit: 3, Period: time.Hour, Key: []string{"user_id"}}
	byOrg := &limiter.Policy{Name: "per_org", Algorithm: limiter.FixedWindow, Limit: 5, Period: time.Hour, Key: []string{"header:X-Org-Id"}}
	ids := resolver(t, identity.Config{Parts: map[string]identity.PartFunc{
		"user_id": func(r *http.Request) (string, bool) {
			v, ok := r.Context().Value(userKey{}).(string)
			return v, ok
		},
	}})
	mw, err := httplimit.New(httplimit.Config{Limiter: memLimiter(t), Identity: ids, Routes: []httplimit.Route{
		{Pattern: "/me/*", Policies: []*limiter.Policy{byUser}},
		{Pattern: "/org/*", Policies: []*limiter.Policy{byOrg}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The application's authentication: X-User names the user (a JWT's subject, say).
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u := r.Header.Get("X-User"); u != "" {
				r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
			}
			next.ServeHTTP(w, r)
		})
	}
	h := auth(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	send := func(path, remote string, header map[string]string) int {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = remote
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	count := func(n int, f func(i int) int) (ok int) {
		for i := range n {
			if f(i) == http.StatusOK {
				ok++
			}
		}
		return ok
	}
	// alice from 10 addresses: 3 admitted; bob is not affected.
	if got := count(10, func(i int) int {
		return send("/me/x", fmt.Sprintf("198.51.100.%d:1", i), map[string]string{"X-User": "alice"})
	}); got != 3 {
		t.Errorf("alice admitted %d times from 10 addresses, want 3", got)
	}
	if got := count(4, func(i int) int { return send("/me/x", "198.51.100.1:1", map[string]string{"X-User": "bob"}) }); got != 3 {
		t.Errorf("bob admitted %d of 4 from alice's address, want 3", got)
	}
	// org-1 from 12 addresses: 5 admitted; org-2: its own 5.
	if got := count(12, func(i int) int {
		return send("/org/x", fmt.Sprintf("203.0.113.%d:1", i), map[string]string{"X-Org-Id": "org-1"})
	}); got != 5 {
		t.Errorf("org-1 admitted %d of 12, want 5", got)
	}
	if got := count(7, func(i int) int { return send("/org/x", "203.0.113.1:1", map[string]string{"X-Org-Id": "org-2"}) }); got != 5 {
		t.Errorf("org-2 admitted %d of 7, want 5", got)
	}
}

// A username over 256 bytes is refused (400) without being normalised, after
// it was charged to the policies that do not key by username: flooding long
// names still spends the sender's per-IP login attempts.
func TestLongUsernameChargedToTheAddress(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	long := `{"username":"` + strings.Repeat("\ufdfa", 20_000) + `"}`
	for i := range 10 {
		w := s.do(request{method: "POST", path: "/login", body: long})
		if w.Code != http.StatusBadRequest || w.Header().Get("X-RateLimit-Remaining") != fmt.Sprint(9-i) {
			t.Fatalf("long username %d: status %d, remaining %q; want 400 with login_ip's remaining %d", i, w.Code, w.Header().Get("X-RateLimit-Remaining"), 9-i)
		}
	}
	if w := s.do(request{method: "POST", path: "/login", body: `{"username":"zed"}`}); w.Code != http.StatusTooManyRequests {
		t.Errorf("after 10 long names, a normal login from the address: status %d, want 429 (login_ip spent)", w.Code)
	}
}

// Usernames are one user however they are cased, composed or padded with
// invisible code points: ten failures from ten addresses as one spelling
// lock the other spelling out.
func TestLoginUsernameSpellingsShareOneLimit(t *testing.T) {
	for _, tc := range []struct{ failAs, thenAs string }{
		{"Straße", "strasse"},
		{"STRASSE", "straße"},
		{"ΣΑΣ", "σας"},
		{"ab\u200bc", "abc"},
		{`x\u200by`, "xy"}, // escaped in the JSON
		{"al\u00adice", "ALICE"},
		{"\ufeffbob", "bob"},
	} {
		t.Run(tc.failAs, func(t *testing.T) {
			s := newTestServer(t, serverOpts{})
			for i := range 10 {
				body := `{"username":"` + tc.failAs + `","password":"x"}`
				if w := s.do(request{method: "POST", path: "/login", remote: fmt.Sprintf("203.0.113.%d:1000", i), body: body}); w.Code != http.StatusUnauthorized {
					t.Fatalf("attempt %d as %q: status %d, want the handler's 401", i, tc.failAs, w.Code)
				}
			}
			w := s.do(request{method: "POST", path: "/login", remote: "192.0.2.200:1000", body: `{"username":"` + tc.thenAs + `","password":"x"}`})
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("after ten failures as %q, %q from a new address: status %d, want 429", tc.failAs, tc.thenAs, w.Code)
			}
			if e := decodeError(t, w); e.Policy != "login_user" {
				t.Errorf("denied by %q, want login_user", e.Policy)
			}
		})
	}
}

// A login body naming "username" twice, or in another letter case, could be
// limited as one user while the handler logs in another: it is refused (400)
// before the handler runs, after being charged to login_ip, and charges
// no username.
func TestAmbiguousLoginBodyChargedToTheAddress(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	bodies := []string{
		`{"username":"victim","username":"x","password":"p"}`,
		`{"username":"victim","USERNAME":"x","password":"p"}`,
		`{"USERNAME":"victim","password":"p"}`,
		`{"username":"victim","\u0075sername":"x","password":"p"}`,
		`{"username":"victim","\u0055sername":"x","password":"p"}`,
		`{"username":"victim","uſername":"x","password":"p"}`, // long s: encoding/json folds it to s
	}
	for i := range 10 {
		w := s.do(request{method: "POST", path: "/login", body: bodies[i%len(bodies)]})
		if w.Code != http.StatusBadRequest || w.Header().Get("X-RateLimit-Remaining") != fmt.Sprint(9-i) {
			t.Fatalf("body %s: status %d, remaining %q; want 400 with login_ip's remaining %d (%s)",
				bodies[i%len(bodies)], w.Code, w.Header().Get("X-RateLimit-Remaining"), 9-i, w.Body)
		}
		if e := decodeError(t, w); e.Error != "bad_request" {
			t.Errorf("error %q, want bad_request", e.Error)
		}
	}
	if w := s.do(request{method: "POST", path: "/login", body: `{"username":"zed"}`}); w.Code != http.StatusTooManyRequests {
		t.Errorf("after 10 ambiguous bodies, a normal login from the address: status %d, want 429 (login_ip spent)", w.Code)
	}
	for i := range 10 {
		w := s.do(request{method: "POST", path: "/login", remote: fmt.Sprintf("198.51.100.%d:1000", i), body: `{"username":"victim","password":"p"}`})
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("victim's attempt %d from another address: status %d, want 401 (the ambiguous bodies charged no username)", i, w.Code)
		}
	}
}

// Behind a trusted proxy, hops with ports identify their clients one by
// one: the proxy's own address never becomes one site-wide bucket.
func TestForwardedHopsWithPorts(t *testing.T) {
	s := newTestServer(t, serverOpts{trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	for c := range 3 {
		for i := range 10 {
			w := s.do(request{method: "POST", path: "/login", remote: "10.0.0.5:1234", xff: fmt.Sprintf("198.51.100.%d:4444", c+1),
				body: fmt.Sprintf(`{"username":"u%d-%d"}`, c, i)})
			if w.Code == http.StatusTooManyRequests {
				t.Fatalf("client %d attempt %d denied: clients behind the proxy share a bucket", c, i)
			}
		}
	}
	w := s.do(request{method: "POST", path: "/login", remote: "10.0.0.5:1234", xff: "198.51.100.1:5555", body: `{"username":"new"}`})
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("client 1's 11th attempt (another port): status %d, want 429", w.Code)
	}
}

// Used after chi routed the request, the route part is chi's pattern: every
// product page shares one per-route limit, the list has another.
func TestRoutePartIsChiPattern(t *testing.T) {
	p := &limiter.Policy{Name: "per_route", Algorithm: limiter.FixedWindow, Limit: 2, Period: time.Hour, Key: []string{"route"}}
	mw, err := httplimit.New(httplimit.Config{Limiter: memLimiter(t), Identity: resolver(t, identity.Config{}),
		Routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{p}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Group(func(r chi.Router) {
		r.Use(mw.Handler)
		r.Get("/api/products", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "list") })
		r.Get("/api/products/{id}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "one") })
	})
	codes := ""
	for _, path := range []string{"/api/products/1", "/api/products/2", "/api/products/3", "/api/products"} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		codes += fmt.Sprint(w.Code, " ")
	}
	if codes != "200 200 429 200 " {
		t.Errorf("statuses %q: want /api/products/{id} limited as one route, /api/products apart", codes)
	}
}
