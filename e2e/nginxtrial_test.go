package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/nginxtest"
)

// docs/gateways.md's local trial runs: costgate with examples/gateway/costgate.yaml
// and nginx with examples/gateway/nginx.conf, a whole config around the
// page's nginx snippet, serve a limited route with the rate-limit headers.
func TestNginxTrialConfig(t *testing.T) {
	snippet := gatewayBlock(t, "<!-- the nginx config of TestNginxInFront -->")
	data, err := os.ReadFile(repoFile("examples/gateway/nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(data)
	var indented strings.Builder
	for l := range strings.Lines(strings.Replace(snippet, "    listen 80;", "    listen 8000;", 1)) {
		if strings.TrimSpace(l) != "" {
			indented.WriteString("    ")
		}
		indented.WriteString(l)
	}
	if !strings.Contains(conf, indented.String()) {
		t.Fatalf("examples/gateway/nginx.conf does not hold docs/gateways.md's nginx snippet (listen 8000)")
	}
	up := startShop(t)
	at := start(t, nil, "-addr", "127.0.0.1:0", "-config", repoFile("examples/gateway/costgate.yaml"))
	ngx := nginxtest.StartConfig(t, func(listen, dir string) string {
		return substitute(t, conf,
			"server 127.0.0.1:8080;", "server "+at.Host+";",
			"proxy_pass http://127.0.0.1:9000;", "proxy_pass "+up.URL+";",
			"listen 8000;", "listen "+listen+";")
	})
	r := send(t, clientFrom("127.0.0.2"), "GET", "http://"+ngx.Addr+"/api/products", "", nil)
	if r.status != 200 || r.body != `{"products":[]}` || r.header.Get("X-RateLimit-Limit") != "150" ||
		r.header.Get("X-RateLimit-Remaining") != "149" || r.header.Get("RateLimit-Policy") == "" {
		t.Errorf("GET /api/products through the trial config: %d %v %s", r.status, r.header, r.body)
	}
	r = send(t, clientFrom("127.0.0.2"), "GET", "http://"+ngx.Addr+"/api/products", "", map[string]string{"X-API-Key": "demo-enterprise"})
	if r.status != 200 || r.header.Get("X-RateLimit-Limit") != "1500" {
		t.Errorf("GET /api/products with demo-enterprise: %d %v", r.status, r.header)
	}
}

// docs/gateways.md's nginx snippet in front of the demo config, which trusts no
// gateway: the client gets 500 with costgate's reason (add the gateway to
// identity.trusted_proxies), never a 429 that looks like a rate limit.
func TestNginxShowsAnUntrustedGateway(t *testing.T) {
	conf := gatewayBlock(t, "<!-- the nginx config of TestNginxInFront -->")
	up := startShop(t)
	at := start(t, nil, "-addr", "127.0.0.1:0") // the built-in demo config
	ngx := nginxtest.Start(t, func(listen string) string {
		return substitute(t, conf,
			"server 127.0.0.1:8080;", "server "+at.Host+";",
			"proxy_pass http://127.0.0.1:9000;", "proxy_pass "+up.URL+";",
			"listen 80;", "listen "+listen+";")
	})
	r := send(t, clientFrom("127.0.0.2"), "GET", "http://"+ngx.Addr+"/api/products", "", nil)
	if r.status != 500 || !strings.Contains(r.body, `"error":"untrusted_peer"`) ||
		!strings.Contains(r.body, "identity.trusted_proxies") || !strings.Contains(r.body, "127.0.0.1") {
		t.Errorf("through nginx, costgate not trusting it: %d %s; want 500 saying to add 127.0.0.1 to identity.trusted_proxies", r.status, r.body)
	}
}
