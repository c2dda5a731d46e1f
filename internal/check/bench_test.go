package check_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/costgate/costgate/internal/check"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

// What a gateway's check adds over the embedded middleware, per check, on
// the same store and policy (always allowing): the middleware in process;
// /v1/check in process and over a loopback HTTP connection (as nginx,
// Traefik or Envoy's ext_authz call it, kept alive); ShouldRateLimit over
// a loopback gRPC connection (as Envoy calls it). The difference between a
// door and "middleware" is its added latency.
//
//	go test -run '^$' -bench BenchmarkGatewayCheck -benchmem ./internal/check
func BenchmarkGatewayCheck(b *testing.B) {
	for _, store := range []struct {
		name   string
		memory bool
	}{{"memstore", true}, {"redis", false}} {
		b.Run(store.name, func(b *testing.B) {
			p := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 100_000_000, Period: time.Second, Key: []string{identity.PartIP}}
			rg := newRig(b, rigOpts{memory: store.memory, routes: []routelimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{p}}}})
			ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
			mw := rg.rest.Handler(ok)
			chk := rg.handler(b, "")
			rls := benchRLS(b, rg, map[string][]check.Descriptor{"edge": {{Key: "remote_address", Part: identity.PartIP, Policies: []*limiter.Policy{p}}}})

			b.Run("middleware", func(b *testing.B) {
				req := httptest.NewRequest("GET", "/api/products", nil)
				req.RemoteAddr = "203.0.113.7:5000"
				benchHandler(b, mw, req)
			})
			b.Run("v1-check-in-process", func(b *testing.B) {
				req := httptest.NewRequest("GET", "/v1/check", nil)
				req.RemoteAddr = "127.0.0.1:40000"
				req.Header.Set("X-Forwarded-Method", "GET")
				req.Header.Set("X-Forwarded-Uri", "/api/products")
				req.Header.Set("X-Forwarded-For", "203.0.113.7")
				benchHandler(b, chk, req)
			})
			b.Run("v1-check-http", func(b *testing.B) {
				srv := httptest.NewServer(chk)
				b.Cleanup(srv.Close)
				client := srv.Client()
				req, _ := http.NewRequest("GET", srv.URL+"/v1/check", nil)
				req.Header.Set("X-Forwarded-Method", "GET")
				req.Header.Set("X-Forwarded-Uri", "/api/products")
				req.Header.Set("X-Forwarded-For", "203.0.113.7")
				b.ReportAllocs()
				for b.Loop() {
					res, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != 200 {
						b.Fatalf("status %d", res.StatusCode)
					}
				}
			})
			b.Run("grpc", func(b *testing.B) {
				req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{
					{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "203.0.113.7"}}}}}
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					resp, err := rls.ShouldRateLimit(ctx, req)
					if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
						b.Fatalf("%v %v", resp, err)
					}
				}
			})
		})
	}
}

func benchHandler(b *testing.B, h http.Handler, req *http.Request) {
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.code = 0
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
}

func benchRLS(b *testing.B, rg *rig, domains map[string][]check.Descriptor) rlsClient {
	b.Helper()
	svc, err := check.NewRateLimitService(check.EnvoyConfig{Limiter: rg.lim, Identity: rg.ids, Gateways: []netip.Prefix{gateway}, Domains: domains})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(g, svc)
	go g.Serve(ln)
	b.Cleanup(g.Stop)
	return dialRLS(b, ln.Addr().String(), "")
}

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return len(p), nil
}
func (w *discardWriter) WriteHeader(code int) { w.code = code }
