package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/nginxtest"
	"github.com/costgate/costgate/limiter/redistest"
)

// accessConfig runs the example API on Redis behind a trusted proxy on the
// same host (nginx, on loopback): every TCP peer is loopback, the clients
// it forwards are not.
const accessConfig = `listen: "127.0.0.1:0"
store: {redis: {url: "redis://%s/0"}}
identity:
  trusted_proxies: ["127.0.0.1/32"]
  hash_key: "a-test-secret-of-32-bytes-length"
  api_keys:
    k-acme: {tenant: acme, plan: free}
policies:
  graphql: {algorithm: token_bucket, limit: 50, period: 1s, burst: 1000, key: [tenant, api_key]}
%s`

// getWith sends GET url with X-Forwarded-For set to xff ("" for none).
func getWith(t *testing.T, url, xff string) (*http.Response, string) {
	t.Helper()
	req := mustRequest(t, "GET", url)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	return do(t, req)
}

// /metrics names tenants' operations: on the main listener it answers only
// a client whose address, after the trusted-proxy walk, is loopback, and
// 404 to anyone else, a public client that a trusted nginx on the same
// host forwards included (before, every such request came from a loopback
// peer and was answered). /readyz's store details follow the client too:
// the public client sees the store's state, not Redis's address.
func TestBinaryMetricsForLoopbackClientsOnly(t *testing.T) {
	rds := redistest.StartServer(t)
	g := start(t, nil, "-config", writeConfig(t, fmt.Sprintf(accessConfig, rds.Addr(), "")))
	ngx := nginxtest.Start(t, func(listen string) string {
		return fmt.Sprintf(`    server {
        listen %s;
        location / {
            proxy_pass %s;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }
    }`, listen, g.Base)
	})
	front := "http://" + ngx.Addr
	// An operation name for the metrics to hold.
	if res, body := postGraphQL(t, g.Base, `{"query":"query SecretTenantReport { __typename }"}`, "X-API-Key", "k-acme"); res.StatusCode != 200 {
		t.Fatalf("the operation: %d %s", res.StatusCode, body)
	}
	for _, tc := range []struct {
		name, base, xff string
		want            int
	}{
		{"a loopback client", g.Base, "", 200},
		{"a loopback client through nginx (a local Prometheus)", front, "", 200},
		{"a public client through nginx", front, "203.0.113.5", 404},
		{"a public client a trusted peer forwards", g.Base, "203.0.113.5", 404},
		{"an IPv6 public client through nginx", front, "2001:db8::5", 404},
	} {
		res, body := getWith(t, tc.base+"/metrics", tc.xff)
		if res.StatusCode != tc.want {
			t.Errorf("/metrics for %s: %d, want %d", tc.name, res.StatusCode, tc.want)
		}
		if leaked := strings.Contains(body, "SecretTenantReport"); leaked != (tc.want == 200) {
			t.Errorf("/metrics for %s: the operation name shown %v (status %d)", tc.name, leaked, res.StatusCode)
		}
		if tc.want == 404 && !strings.Contains(body, `"error":"not_found"`) {
			t.Errorf("/metrics for %s: %s, want the answer of a path that does not exist", tc.name, body)
		}
	}
	for _, tc := range []struct {
		name, base, xff string
		details         bool
	}{
		{"a loopback client", g.Base, "", true},
		{"a public client through nginx", front, "203.0.113.5", false},
	} {
		res, body := getWith(t, tc.base+"/readyz", tc.xff)
		var ready struct {
			Status string
			Store  struct {
				State string
				Nodes []json.RawMessage
			}
		}
		if err := json.Unmarshal([]byte(body), &ready); err != nil || res.StatusCode != 200 || ready.Store.State != "up" {
			t.Fatalf("/readyz for %s: %d %s", tc.name, res.StatusCode, body)
		}
		if shown := len(ready.Store.Nodes) > 0 || strings.Contains(body, rds.Addr()); shown != tc.details {
			t.Errorf("/readyz for %s: store details shown %v, want %v: %s", tc.name, shown, tc.details, body)
		}
	}
}

// metrics.listen serves /metrics on a listener of its own, to whoever
// reaches it (its address is the operator's choice), and the main listener
// answers /metrics 404 even to loopback.
func TestBinaryMetricsListen(t *testing.T) {
	rds := redistest.StartServer(t)
	g := start(t, nil, "-config", writeConfig(t, fmt.Sprintf(accessConfig, rds.Addr(), `metrics: {listen: "127.0.0.1:0"}`+"\n")))
	own := "http://" + g.Addr(t, "costgate metrics listening")
	if res, body := getWith(t, g.Base+"/metrics", ""); res.StatusCode != 404 {
		t.Errorf("/metrics on the main listener with metrics.listen set: %d %.100s, want 404", res.StatusCode, body)
	}
	res, body := getWith(t, own+"/metrics", "")
	if res.StatusCode != 200 || !strings.Contains(body, "costgate_store_evictions_total") {
		t.Errorf("/metrics on metrics.listen: %d %.200s, want the metrics", res.StatusCode, body)
	}
	for _, path := range []string{"/", "/graphql", "/readyz"} {
		if res, _ := getWith(t, own+path, ""); res.StatusCode != 404 {
			t.Errorf("GET %s on metrics.listen: %d, want 404 (it serves /metrics alone)", path, res.StatusCode)
		}
	}
	if res, _ := getWith(t, g.Base+"/healthz", ""); res.StatusCode != 200 {
		t.Errorf("/healthz on the main listener: %d", res.StatusCode)
	}
}
