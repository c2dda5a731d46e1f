package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/costgate/costgate/internal/config"
)

func newServer(t *testing.T, yaml string) (*Server, string) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

func checkStatus(t *testing.T, url string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

const limits = `
identity: {trusted_proxies: ["127.0.0.1"]}
policies:
  api: {algorithm: token_bucket, limit: 2, period: 1h, key: [ip]}
routes:
  - {match: "/api/*", policies: [api]}
`

// In proxy mode the server serves no example REST routes, but /v1/check
// applies the config's routes for the gateways in front of other services.
func TestCheckInProxyMode(t *testing.T) {
	schema, err := filepath.Abs("../../examples/proxy/schema.graphqls")
	if err != nil {
		t.Fatal(err)
	}
	_, base := newServer(t, limits+`
graphql:
  policy: api
  schema: `+schema+`
  upstream: http://127.0.0.1:9/graphql
`)
	if code, _, _ := checkStatus(t, base+"/api/products", nil); code != http.StatusNotFound {
		t.Errorf("/api/products in proxy mode: %d, want 404", code)
	}
	code, h, body := checkStatus(t, base+"/v1/check/api/products", nil)
	if code != 200 || h.Get("RateLimit-Policy") != `"api";q=2;w=3600` {
		t.Errorf("/v1/check in proxy mode: %d %v %s", code, h, body)
	}
}

// Without trusted proxies no gateway may ask: every check is 403, saying
// which address to add, with the body in Costgate-Error-Body for nginx
// (which drops the body of a sub-request's answer).
func TestCheckWithoutTrustedProxies(t *testing.T) {
	_, base := newServer(t, strings.Replace(limits, `identity: {trusted_proxies: ["127.0.0.1"]}`, "", 1)+"graphql: {path: \"\"}\n")
	code, h, body := checkStatus(t, base+"/v1/check/api/products", nil)
	if code != http.StatusForbidden || !strings.Contains(body, "untrusted_peer") || !strings.Contains(body, "identity.trusted_proxies") ||
		!strings.Contains(body, "(127.0.0.1)") || h.Get("Costgate-Error-Body") != strings.TrimSpace(body) {
		t.Errorf("got %d %v %s, want 403 untrusted_peer naming 127.0.0.1, the body in Costgate-Error-Body", code, h, body)
	}
}

// gateway.check: false answers no gateway, a trusted one included, and says
// so.
func TestCheckDoorOff(t *testing.T) {
	_, base := newServer(t, strings.Replace(limits, `identity: {trusted_proxies: ["127.0.0.1"]}`,
		`identity: {trusted_proxies: ["127.0.0.1"]}
gateway: {check: false}`, 1)+"graphql: {path: \"\"}\n")
	code, _, body := checkStatus(t, base+"/v1/check/api/products", nil)
	if code != http.StatusForbidden || !strings.Contains(body, "untrusted_peer") || !strings.Contains(body, "gateway.check is false") {
		t.Errorf("got %d %s, want 403 untrusted_peer saying gateway.check is false", code, body)
	}
}

// Reload swaps the descriptor mapping the gRPC service answers with, and
// keeps the limiter state.
func TestReloadSwapsEnvoyMapping(t *testing.T) {
	mapping := func(domain string) string {
		return limits + "graphql: {path: \"\"}\ngrpc_listen: \"127.0.0.1:0\"\nenvoy: {domains: {" + domain + ": [{key: remote_address, part: ip, policies: [api]}]}}\n"
	}
	srv, base := newServer(t, mapping("edge"))
	conn := dialGRPC(t, srv)
	client := rlsv3.NewRateLimitServiceClient(conn)
	call := func(domain string) rlsv3.RateLimitResponse_Code {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*rlcommon.RateLimitDescriptor{
			{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "203.0.113.7"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatuses()[0].GetCurrentLimit() == nil {
			return rlsv3.RateLimitResponse_UNKNOWN // no limit applied
		}
		return resp.GetOverallCode()
	}
	if got := call("edge"); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("edge: %v", got)
	}
	// The same bucket through /v1/check: the state the reload must keep.
	if code, _, body := checkStatus(t, base+"/v1/check/api/x", map[string]string{"X-Forwarded-For": "203.0.113.7"}); code != 200 {
		t.Fatalf("check: %d %s", code, body)
	}
	cfg, err := config.Parse("test.yaml", []byte(mapping("mesh")))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if got := call("edge"); got != rlsv3.RateLimitResponse_UNKNOWN {
		t.Errorf("edge after the reload: %v, want no limit (an unknown domain)", got)
	}
	if got := call("mesh"); got != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("mesh after the reload: %v, want OVER_LIMIT (the bucket kept its two charges)", got)
	}
	// A caller that is no gateway is refused.
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	other, err := grpc.NewClient(conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	_, err = rlsv3.NewRateLimitServiceClient(other).ShouldRateLimit(t.Context(), &rlsv3.RateLimitRequest{Domain: "mesh",
		Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "203.0.113.7"}}}}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("from 127.0.0.2: %v, want PermissionDenied", err)
	}
}

// dialGRPC serves srv's rate-limit service on a loopback listener and
// returns a client connection to it; both end with the test.
func dialGRPC(t *testing.T, srv *Server) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := srv.GRPCServer()
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
