package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// The middleware's own overhead on the allowed path: a chi router serving a
// bare handler, with and without the middleware (memory store, one policy
// that always allows), in one run.
func BenchmarkMiddleware(b *testing.B) {
	hello := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }
	bare := chi.NewRouter()
	bare.Get("/api/products", hello)

	p := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1_000_000, Period: time.Second,
		Key: []string{identity.PartTenant, identity.PartAPIKey}}
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		b.Fatal(err)
	}
	limited := chi.NewRouter()
	ids, err := identity.New(identity.Config{
		APIKeys: identity.Table{"k": {Tenant: "t", Plan: "free"}},
		HashKey: []byte("bench-hash-key-16+bytes"),
	})
	if err != nil {
		b.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{
		Limiter:  lim,
		Identity: ids,
		Routes:   []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{p}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	limited.Use(mw.Handler)
	limited.Get("/api/products", hello)

	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"bare-chi", bare}, {"costgate-memstore", limited}} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/api/products", nil)
			req.Header.Set("X-API-Key", "k")
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				bc.h.ServeHTTP(w, req)
				if w.code != 0 && w.code != 200 {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}

// benchRound counts the rounds of a benchmark (one per -count).
var benchRound atomic.Int64

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// Overrides cost the middleware nothing measurable when none apply: the
// same request through identities without an override table, with an
// empty one, and with 1,000 overrides of other keys and tenants of its
// policy, in one run.
//
//	go test -run '^$' -bench BenchmarkMiddlewareOverrides -cpu 1 -count 21 ./limiter/httplimit/ | benchstat -col /table -
func BenchmarkMiddlewareOverrides(b *testing.B) {
	hello := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }
	p := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1_000_000, Period: time.Second,
		Key: []string{identity.PartTenant, identity.PartAPIKey}}
	lim, err := limiter.New(memstore.New(nil))
	if err != nil {
		b.Fatal(err)
	}
	full := limiter.NewOverrides(nil)
	var list []limiter.Override
	for i := range 1000 {
		tg := limiter.Target{Policy: "api", Key: fmt.Sprintf("t:%022d", i)}
		if i%10 == 0 {
			tg = limiter.Target{Policy: "api", Tenant: fmt.Sprintf("tenant%d", i)}
		}
		list = append(list, limiter.Override{Name: fmt.Sprintf("o%d", i), Action: limiter.ActionDeny,
			Expires: time.Now().Add(time.Hour), Targets: []limiter.Target{tg}})
	}
	full.Set(list)
	cases := []struct {
		name string
		ov   *limiter.Overrides
	}{{"none", nil}, {"empty", limiter.NewOverrides(nil)}, {"1000-others", full}}
	// Each round starts with another case: on a busy machine the first
	// sub-benchmark of a round runs measurably faster than the later ones.
	round := benchRound.Add(1)
	for i := range cases {
		bc := cases[(i+int(round))%len(cases)]
		ids, err := identity.New(identity.Config{
			APIKeys:   identity.Table{"k": {Tenant: "t", Plan: "free"}},
			HashKey:   []byte("bench-hash-key-16+bytes"),
			Overrides: bc.ov,
		})
		if err != nil {
			b.Fatal(err)
		}
		mw, err := httplimit.New(httplimit.Config{
			Limiter:  lim,
			Identity: ids,
			Routes:   []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{p}}},
		})
		if err != nil {
			b.Fatal(err)
		}
		r := chi.NewRouter()
		r.Use(mw.Handler)
		r.Get("/api/products", hello)
		b.Run("table="+bc.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/api/products", nil)
			req.Header.Set("X-API-Key", "k")
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				r.ServeHTTP(w, req)
				if w.code != 0 && w.code != 200 {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}
