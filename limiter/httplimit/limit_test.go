package httplimit_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// burst sends n requests at once, each from goroutine of its own, and
// returns the answers in no particular order.
func burst(h http.Handler, n int, newReq func() *http.Request) []*httptest.ResponseRecorder {
	out := make([]*httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := newReq()
			<-start
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			out[i] = w
		}()
	}
	close(start)
	wg.Wait()
	return out
}

func from(method, target, addr string) func() *http.Request {
	return func() *http.Request {
		req := httptest.NewRequest(method, target, nil)
		req.RemoteAddr = addr
		return req
	}
}

// checkBurst asserts that exactly allowed of ws were served, the rest
// refused 429 with Retry-After, all with the policy's headers.
func checkBurst(t *testing.T, ws []*httptest.ResponseRecorder, allowed int, policy string) {
	t.Helper()
	codes := map[int]int{}
	for _, w := range ws {
		codes[w.Code]++
		if got := w.Header().Get("RateLimit-Policy"); got != policy {
			t.Fatalf("RateLimit-Policy = %q, want %q", got, policy)
		}
		if got := w.Header().Get("X-RateLimit-Limit"); got != "150" {
			t.Fatalf("X-RateLimit-Limit = %q, want 150", got)
		}
		if w.Code == http.StatusTooManyRequests {
			if w.Header().Get("Retry-After") == "" || w.Header().Get("X-RateLimit-Remaining") != "0" {
				t.Fatalf("429 without Retry-After or with remaining %q", w.Header().Get("X-RateLimit-Remaining"))
			}
		}
	}
	if codes[http.StatusOK] != allowed || codes[http.StatusTooManyRequests] != len(ws)-allowed {
		t.Fatalf("answers %v, want %d × 200 and %d × 429", codes, allowed, len(ws)-allowed)
	}
}

func ok(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }

func TestLimitByIPUnderWith(t *testing.T) {
	r := chi.NewRouter()
	r.With(httplimit.LimitByIP(150, time.Hour)).Get("/limited", ok)
	r.Get("/free", ok)

	checkBurst(t, burst(r, 200, from("GET", "/limited", "192.0.2.1:1234")), 150, `"ip";q=150;w=3600`)
	// Another address has a count of its own; another port is the same client.
	checkBurst(t, burst(r, 10, from("GET", "/limited", "192.0.2.2:1234")), 10, `"ip";q=150;w=3600`)
	checkBurst(t, burst(r, 1, from("GET", "/limited", "192.0.2.1:999")), 0, `"ip";q=150;w=3600`)
	// The route without the middleware is neither limited nor counted.
	for _, w := range burst(r, 20, from("GET", "/free", "192.0.2.1:1234")) {
		if w.Code != http.StatusOK || w.Header().Get("RateLimit-Policy") != "" {
			t.Fatalf("/free: %d, RateLimit-Policy %q: want 200 and no limit", w.Code, w.Header().Get("RateLimit-Policy"))
		}
	}
}

func TestLimitByAPIKey(t *testing.T) {
	keys := identity.Table{"key-a": {Tenant: "acme", Plan: "pro"}, "key-b": {Tenant: "beta", Plan: "pro"}}
	t.Run("own resolver", func(t *testing.T) {
		testLimitByAPIKey(t, httplimit.LimitByAPIKey(150, time.Hour, keys))
	})
	t.Run("shared store and resolver", func(t *testing.T) {
		ids, err := identity.New(identity.Config{HashKey: []byte("a secret every gateway shares"), APIKeys: keys})
		if err != nil {
			t.Fatal(err)
		}
		testLimitByAPIKey(t, httplimit.LimitByAPIKey(150, time.Hour, nil,
			httplimit.WithStore(notLocal{memstore.New(nil)}), httplimit.WithIdentity(ids)))
	})
}

func testLimitByAPIKey(t *testing.T, limit func(http.Handler) http.Handler) {
	r := chi.NewRouter()
	r.With(limit).Get("/api", ok)
	withKey := func(key string) func() *http.Request {
		return func() *http.Request {
			req := from("GET", "/api", "192.0.2.1:1")()
			if key != "" {
				req.Header.Set("X-API-Key", key)
			}
			return req
		}
	}
	const policy = `"api_key";q=150;w=3600`
	checkBurst(t, burst(r, 200, withKey("key-a")), 150, policy)
	// The same address with another key, or with none, counts apart.
	checkBurst(t, burst(r, 10, withKey("key-b")), 10, policy)
	checkBurst(t, burst(r, 140, withKey("")), 140, policy)
	// A guessed key is 401, charged to its sender's address: after the
	// address's 10 left, guessing is throttled as well.
	var unauthorized, throttled int
	for _, w := range burst(r, 20, withKey("guess")) {
		switch w.Code {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusTooManyRequests:
			throttled++
		default:
			t.Fatalf("guessed key: %d", w.Code)
		}
	}
	if unauthorized != 10 || throttled != 10 {
		t.Fatalf("guessed keys: %d × 401 and %d × 429, want 10 and 10", unauthorized, throttled)
	}
}

type authUser struct{}

// auth stands in for an application's authentication: it puts the user in
// the context.
func auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.Header.Get("X-User"); u != "" {
			r = r.WithContext(context.WithValue(r.Context(), authUser{}, u))
		}
		next.ServeHTTP(w, r)
	})
}

func TestLimitKeyFromContext(t *testing.T) {
	user := func(name string) func() *http.Request {
		return func() *http.Request {
			req := from("GET", "/me", "192.0.2.1:1")()
			req.Header.Set("X-User", name)
			return req
		}
	}
	t.Run("after auth", func(t *testing.T) {
		r := chi.NewRouter()
		r.With(auth, httplimit.Limit(150, time.Hour, httplimit.KeyFromContext(authUser{}))).Get("/me", ok)
		checkBurst(t, burst(r, 200, user("ann")), 150, `"key";q=150;w=3600`)
		checkBurst(t, burst(r, 5, user("bob")), 5, `"key";q=150;w=3600`) // same address, another user
	})
	t.Run("before auth", func(t *testing.T) {
		// The limiter runs first: no user yet. Refused and logged, never
		// counted in one bucket that every user would share.
		var log bytes.Buffer
		r := chi.NewRouter()
		r.With(httplimit.Limit(150, time.Hour, httplimit.KeyFromContext(authUser{}),
			httplimit.WithLogger(slog.New(slog.NewTextHandler(&log, nil)))), auth).Get("/me", ok)
		for _, w := range burst(r, 5, user("ann")) {
			if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "rate_limit_key_missing") {
				t.Fatalf("limiter before auth: %d %s, want 500 rate_limit_key_missing", w.Code, w.Body)
			}
		}
		if !strings.Contains(log.String(), "does the middleware that sets it run before the limiter?") {
			t.Fatalf("log %q does not say why", log.String())
		}
	})
}

func TestLimitByIPAndEndpoint(t *testing.T) {
	r := chi.NewRouter()
	r.Use(httplimit.Limit(150, time.Hour, httplimit.Keys(httplimit.KeyByIP, httplimit.KeyByEndpoint)))
	r.Get("/a", ok)
	r.Get("/b", ok)
	checkBurst(t, burst(r, 160, from("GET", "/a", "192.0.2.1:1")), 150, `"key";q=150;w=3600`)
	checkBurst(t, burst(r, 10, from("GET", "/b", "192.0.2.1:1")), 10, `"key";q=150;w=3600`)
}

// notLocal is a memstore seen as a store other processes share, as Redis is.
type notLocal struct{ limiter.Store }

func TestSharedStoreNeedsSharedHashKey(t *testing.T) {
	shared := notLocal{memstore.New(nil)}
	ids, err := identity.New(identity.Config{HashKey: []byte("a secret every gateway shares")})
	if err != nil {
		t.Fatal(err)
	}
	// Two gateways over one store and one hash key share the count.
	gw1 := httplimit.LimitByIP(150, time.Hour, httplimit.WithStore(shared), httplimit.WithIdentity(ids))(http.HandlerFunc(ok))
	gw2 := httplimit.LimitByIP(150, time.Hour, httplimit.WithStore(shared), httplimit.WithIdentity(ids))(http.HandlerFunc(ok))
	checkBurst(t, burst(gw1, 100, from("GET", "/", "192.0.2.1:1")), 100, `"ip";q=150;w=3600`)
	checkBurst(t, burst(gw2, 100, from("GET", "/", "192.0.2.1:1")), 50, `"ip";q=150;w=3600`)
}

func TestOneCallRefusesAtSetup(t *testing.T) {
	shared := notLocal{memstore.New(nil)}
	ids, err := identity.New(identity.Config{HashKey: []byte("a secret every gateway shares")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		build func()
		want  string
	}{
		{"zero limit", func() { httplimit.LimitByIP(0, time.Minute) }, "limit"},
		{"zero period", func() { httplimit.LimitByIP(10, 0) }, "period"},
		{"negative limit", func() { httplimit.LimitByIP(-1, time.Minute) }, "limit"},
		{"empty name", func() { httplimit.LimitByIP(10, time.Minute, httplimit.WithName("")) }, "name"},
		{"nil key", func() { httplimit.Limit(10, time.Minute, nil) }, "nil KeyFunc"},
		{"unknown algorithm", func() { httplimit.LimitByIP(10, time.Minute, httplimit.WithAlgorithm("fifo")) }, "algorithm"},
		{"shared store, random hash key", func() { httplimit.LimitByIP(10, time.Minute, httplimit.WithStore(shared)) }, "WithStore without WithIdentity: identity: HashKey: required: the store is shared"},
		{"nil lookup", func() { httplimit.LimitByAPIKey(10, time.Minute, nil) }, "LimitByAPIKey needs an identity.Lookup"},
		{"keys twice", func() {
			httplimit.LimitByAPIKey(10, time.Minute, identity.Table{"k": {Tenant: "t", Plan: "p"}}, httplimit.WithIdentity(ids))
		}, "both say who pays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.want) {
					t.Fatalf("panic %q, want one saying %q", msg, tc.want)
				}
			}()
			tc.build()
		})
	}
}
