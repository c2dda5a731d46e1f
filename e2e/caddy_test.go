package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/costgate/costgate/internal/caddytest"
)

// A real Caddy (Debian's), configured with docs/gateways.md's Caddyfile, in front
// of a service, costgate as its forward_auth: what the client sees is what
// it sees through nginx (frontedLimits); on a path no route limits, neither
// the client nor the service sees a rate-limit header, not even one the
// client forged.
func TestCaddyInFront(t *testing.T) {
	conf := gatewayBlock(t, "<!-- the Caddy config of TestCaddyInFront -->")
	if file, err := os.ReadFile(repoFile("examples/gateway/Caddyfile")); err != nil || string(file) != conf {
		t.Errorf("examples/gateway/Caddyfile (%v) is not docs/gateways.md's Caddyfile", err)
	}
	up := startShop(t)
	var mu sync.Mutex
	var served []http.Header // what the service got on the unlimited path
	unlimited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			up.Config.Handler.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		served = append(served, r.Header.Clone())
		mu.Unlock()
		w.Write([]byte("ok"))
	}))
	t.Cleanup(unlimited.Close)
	at := start(t, nil, "-addr", "127.0.0.1:0", "-config", writeConfig(t, gatewayConfig))
	caddy := caddytest.Start(t, func(port string) string {
		return substitute(t, conf,
			":8000 {", ":"+port+" {",
			"forward_auth 127.0.0.1:8080 {", "forward_auth "+at.Host+" {",
			"reverse_proxy 127.0.0.1:9000", "reverse_proxy "+strings.TrimPrefix(unlimited.URL, "http://"))
	})
	frontedLimits(t, "http://"+caddy.Addr, "http://"+at.Host, "through Caddy")

	forged := map[string]string{"X-RateLimit-Limit": "999", "X-RateLimit-Remaining": "999", "RateLimit": `"api";r=999;t=1`}
	r := send(t, clientFrom("127.0.0.9"), "GET", "http://"+caddy.Addr+"/healthz", "", forged)
	if r.status != 200 || r.body != "ok" {
		t.Fatalf("GET /healthz through Caddy: %d %s", r.status, r.body)
	}
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"} {
		if v := r.header.Values(h); len(v) > 0 {
			t.Errorf("an unlimited path: the client got %s: %q", h, v)
		}
		mu.Lock()
		for _, got := range served {
			if v := got.Values(h); len(v) > 0 {
				t.Errorf("an unlimited path: the service got %s: %q", h, v)
			}
		}
		mu.Unlock()
	}
}
