package gqlproxy_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/costgate/costgate/limiter/gqlproxy"
	"github.com/costgate/costgate/limiter/identity"
)

// recorder is an upstream that keeps the headers of the last request it
// got and answers a small GraphQL response.
type recorder struct {
	*httptest.Server
	mu     sync.Mutex
	header http.Header
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.header = r.Header.Clone()
		rec.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data":{"__typename":"Query"}}`))
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) got() http.Header {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.header
}

// clientHeaders is what a client sends: its own forwarding claims, headers
// of its connection to the proxy (and one its Connection header names),
// and end-to-end headers the upstream needs.
var clientHeaders = map[string]string{
	"X-Api-Key":           "partner-key",
	"Authorization":       "Bearer for-the-upstream",
	"X-Forwarded-For":     "203.0.113.9",
	"X-Forwarded-Host":    "evil.example",
	"X-Forwarded-Proto":   "https",
	"X-Real-Ip":           "203.0.113.10",
	"Forwarded":           "for=203.0.113.11",
	"Connection":          "X-Hop-Secret, keep-alive",
	"X-Hop-Secret":        "for the proxy only",
	"Proxy-Connection":    "keep-alive",
	"Keep-Alive":          "timeout=5",
	"Te":                  "trailers",
	"Trailer":             "X-Checksum",
	"Proxy-Authorization": "Basic cHJveHk6c2VjcmV0",
	"Costgate-Dry-Run":    "0",
}

func forwardEnv(t *testing.T, upstream string, trusted []netip.Prefix, strip bool) *env {
	t.Helper()
	return newProxyEnvWith(t, upstream, proxyOptions{
		identity: func(c *identity.Config) {
			c.TrustedProxies = trusted
			c.APIKeys = identity.Table{"partner-key": {Tenant: "partner", Plan: "pro"}}
		},
		proxy: func(c *gqlproxy.Config) { c.StripAPIKey = strip },
	})
}

// The request forwarded upstream follows RFC 9110 §7.6.1 and Go's
// httputil.ReverseProxy: hop-by-hop headers (those Connection names
// included) are dropped, the peer's address is appended to
// X-Forwarded-For, and the client's own forwarding claims are dropped
// unless the peer is a trusted proxy. The API key is forwarded unless
// turned off.
func TestProxyForwardedHeaders(t *testing.T) {
	peer := "192.0.2.1" // httptest.NewRequest's RemoteAddr
	hopByHop := []string{"Connection", "X-Hop-Secret", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Proxy-Authorization", "Costgate-Dry-Run"}
	claims := []string{"X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "Forwarded"}

	t.Run("untrusted peer", func(t *testing.T) {
		rec := startRecorder(t)
		e := forwardEnv(t, rec.URL, nil, false)
		r := e.post(t, `{ __typename }`, nil, clientHeaders)
		must(t, r.Status == 200, "%d %s", r.Status, r.Body)
		h := rec.got()
		must(t, strings.Join(h.Values("X-Forwarded-For"), ",") == peer, "X-Forwarded-For %q, want the peer alone %q", h.Values("X-Forwarded-For"), peer)
		for _, name := range append(hopByHop, claims...) {
			must(t, h.Get(name) == "", "%s reached the upstream: %q", name, h.Get(name))
		}
		must(t, h.Get("Authorization") == "Bearer for-the-upstream" && h.Get("X-Api-Key") == "partner-key", "end-to-end headers lost: %v", h)
	})

	t.Run("trusted peer, as ReverseProxy forwards", func(t *testing.T) {
		rec := startRecorder(t)
		e := forwardEnv(t, rec.URL, []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, false)
		r := e.post(t, `{ __typename }`, nil, clientHeaders)
		must(t, r.Status == 200, "%d %s", r.Status, r.Body)
		ours := rec.got()

		// The same request through httputil.ReverseProxy, to the same upstream.
		target, _ := url.Parse(rec.URL)
		rp := httputil.NewSingleHostReverseProxy(target)
		req := httptest.NewRequest("POST", "/graphql", strings.NewReader(`{"query":"{ __typename }"}`))
		for k, v := range clientHeaders {
			req.Header.Set(k, v)
		}
		rp.ServeHTTP(httptest.NewRecorder(), req)
		theirs := rec.got()

		must(t, ours.Get("X-Forwarded-For") == theirs.Get("X-Forwarded-For") && ours.Get("X-Forwarded-For") == "203.0.113.9, "+peer,
			"X-Forwarded-For %q, ReverseProxy's %q", ours.Get("X-Forwarded-For"), theirs.Get("X-Forwarded-For"))
		for _, name := range hopByHop {
			must(t, ours.Get(name) == "", "%s reached the upstream: %q", name, ours.Get(name))
		}
		for _, name := range claims {
			must(t, ours.Get(name) == clientHeaders[name], "%s from a trusted proxy: %q, want it kept", name, ours.Get(name))
		}
	})

	t.Run("forward_api_key: false", func(t *testing.T) {
		rec := startRecorder(t)
		e := forwardEnv(t, rec.URL, nil, true)
		r := e.post(t, `{ __typename }`, nil, clientHeaders)
		must(t, r.Status == 200 && r.Res.Extensions.Cost != nil, "%d %s", r.Status, r.Body)
		must(t, rec.got().Get("X-Api-Key") == "" && rec.got().Get("Authorization") != "", "headers %v", rec.got())
		// The key still decided who paid: the partner's bucket, not the anonymous one.
		must(t, e.Available(t, map[string]string{"X-Api-Key": "partner-key"}) < e.available(t), "the API key did not pick the bucket")
	})
}

// A redirect is never followed, and a 307 whose body looks like a GraphQL
// response is still no answer: 502, with actualQueryCost saying what the
// failure kept charged.
func TestProxyRedirectWithGraphQLBody(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://127.0.0.1:9/graphql")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTemporaryRedirect)
		w.Write([]byte(`{"data":{"products":{"nodes":[]}}}`))
	}))
	t.Cleanup(up.Close)
	e := newProxyEnv(t, up.URL)
	before := e.available(t)
	r := e.post(t, `{ products(first: 10) { nodes { id } } }`, nil, nil)
	must(t, r.Status == http.StatusBadGateway && r.Code() == gqlproxy.CodeUpstreamError, "%d %s", r.Status, r.Body)
	c := r.Res.Extensions.Cost
	charged := before - e.available(t)
	must(t, charged == 1 && c.ActualQueryCost != nil && *c.ActualQueryCost == charged, "charged %d, actualQueryCost %v", charged, c.ActualQueryCost)
	must(t, !strings.Contains(r.Body, "127.0.0.1:9") && !strings.Contains(r.Body, "307"), "the answer tells the upstream's detail: %s", r.Body)
}
