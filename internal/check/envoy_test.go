package check_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/costgate/costgate/internal/check"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/redistest"
)

// edgeDomain is docs/gateways.md's mapping: Envoy's actions generic_key,
// remote_address and request_headers (skip_if_absent) produce these
// descriptors.
func edgeDomain(extra ...check.Descriptor) map[string][]check.Descriptor {
	return map[string][]check.Descriptor{"edge": append([]check.Descriptor{
		{Key: "generic_key", Value: "api", Descriptors: []check.Descriptor{
			{Key: "remote_address", Part: identity.PartIP, Policies: []*limiter.Policy{apiPolicy()}, Descriptors: []check.Descriptor{
				{Key: "api_key", Part: identity.PartAPIKey, Policies: []*limiter.Policy{apiPolicy()}},
			}},
		}},
		{Key: "generic_key", Value: "login", Descriptors: []check.Descriptor{
			{Key: "remote_address", Part: identity.PartIP, Policies: []*limiter.Policy{loginIP()}, Descriptors: []check.Descriptor{
				{Key: "login_user", Part: identity.PartUsername, Policies: []*limiter.Policy{loginIP(), loginUser()}},
			}},
		}},
	}, extra...)}
}

type rlsClient struct {
	rlsv3.RateLimitServiceClient
	cc *grpc.ClientConn
}

// startRLS serves the service over real gRPC on loopback and returns a
// client dialling from the gateway's address, and the service's address.
func startRLS(t *testing.T, rg *rig, domains map[string][]check.Descriptor) (rlsClient, string) {
	t.Helper()
	svc, err := check.NewRateLimitService(check.EnvoyConfig{Limiter: rg.lim, Identity: rg.ids, Gateways: []netip.Prefix{gateway},
		Domains: domains, Clock: rg.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.ForceServerCodecV2(check.Codec()))
	rlsv3.RegisterRateLimitServiceServer(g, svc)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return dialRLS(t, ln.Addr().String(), ""), ln.Addr().String()
}

func dialRLS(t testing.TB, addr, local string) rlsClient {
	t.Helper()
	if local == "" {
		local = "127.0.0.1"
	}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsClient{rlsv3.NewRateLimitServiceClient(conn), conn}
}

func (c rlsClient) call(t *testing.T, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	if len(resp.GetStatuses()) != len(req.GetDescriptors()) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(req.GetDescriptors()))
	}
	return resp
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withHits(d *rlcommon.RateLimitDescriptor, n uint64) *rlcommon.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func headerOf(resp *rlsv3.RateLimitResponse, name string) string {
	for _, h := range resp.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetKey(), name) {
			return h.GetValue()
		}
	}
	return ""
}

func codesOf(resp *rlsv3.RateLimitResponse) []rlsv3.RateLimitResponse_Code {
	var out []rlsv3.RateLimitResponse_Code
	for _, s := range resp.GetStatuses() {
		out = append(out, s.GetCode())
	}
	return out
}

// hits_addend is the cost, for every algorithm: the request's, or a
// descriptor's own; a denial charges nothing, so a smaller cost still fits.
func TestEnvoyWeightedHits(t *testing.T) {
	for _, alg := range limiter.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			p := &limiter.Policy{Name: "weighted", Algorithm: alg, Limit: 10, Period: time.Hour, Key: []string{identity.PartIP}}
			rg := newRig(t, rigOpts{})
			c, _ := startRLS(t, rg, edgeDomain(check.Descriptor{Key: "generic_key", Value: "weighted", Descriptors: []check.Descriptor{
				{Key: "remote_address", Part: identity.PartIP, Policies: []*limiter.Policy{p}}}}))
			weighted := func(hits uint32, d *rlcommon.RateLimitDescriptor) *rlsv3.RateLimitResponse {
				return c.call(t, &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: hits, Descriptors: []*rlcommon.RateLimitDescriptor{d}})
			}
			for i, step := range []struct {
				hits      uint32
				own       uint64 // the descriptor's hits_addend, 0 for none
				code      rlsv3.RateLimitResponse_Code
				remaining uint32
			}{
				{hits: 4, code: rlsv3.RateLimitResponse_OK, remaining: 6},
				{hits: 1, own: 4, code: rlsv3.RateLimitResponse_OK, remaining: 2},
				{hits: 4, code: rlsv3.RateLimitResponse_OVER_LIMIT, remaining: 2},
				{hits: 2, code: rlsv3.RateLimitResponse_OK, remaining: 0},
			} {
				d := desc("generic_key", "weighted", "remote_address", "203.0.113.7")
				if step.own > 0 {
					d = withHits(d, step.own)
				}
				resp := weighted(step.hits, d)
				st := resp.GetStatuses()[0]
				if resp.GetOverallCode() != step.code || st.GetCode() != step.code || st.GetLimitRemaining() != step.remaining {
					t.Fatalf("step %d: overall %v status %v remaining %d, want %v remaining %d", i, resp.GetOverallCode(), st.GetCode(), st.GetLimitRemaining(), step.code, step.remaining)
				}
				if st.GetCurrentLimit().GetName() != "weighted" || st.GetCurrentLimit().GetRequestsPerUnit() != 10 || st.GetCurrentLimit().GetUnit() != rlsv3.RateLimitResponse_RateLimit_HOUR {
					t.Errorf("step %d: current_limit %v", i, st.GetCurrentLimit())
				}
			}
		})
	}
}

// The descriptors of one call are all or nothing: one over its limit makes
// the call OVER_LIMIT and charges none of the others.
func TestEnvoyDescriptorsAllOrNothing(t *testing.T) {
	tight := &limiter.Policy{Name: "tight", Algorithm: limiter.FixedWindow, Limit: 1, Period: time.Hour, Key: []string{identity.PartIP}}
	rg := newRig(t, rigOpts{})
	c, _ := startRLS(t, rg, edgeDomain(check.Descriptor{Key: "generic_key", Value: "tight", Descriptors: []check.Descriptor{
		{Key: "remote_address", Part: identity.PartIP, Policies: []*limiter.Policy{tight}}}}))
	api := desc("generic_key", "api", "remote_address", "203.0.113.7")
	both := func() *rlsv3.RateLimitRequest {
		return &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{
			api, desc("generic_key", "tight", "remote_address", "203.0.113.7"), desc("generic_key", "login", "remote_address", "203.0.113.7")}}
	}
	resp := c.call(t, both())
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != 149 || resp.GetStatuses()[2].GetLimitRemaining() != 9 {
		t.Fatalf("first call: %v", resp)
	}
	resp = c.call(t, both())
	want := []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_UNKNOWN}
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || !equalCodes(codesOf(resp), want) {
		t.Fatalf("second call: overall %v statuses %v, want OVER_LIMIT %v", resp.GetOverallCode(), codesOf(resp), want)
	}
	// The api descriptor was charged and given back: it reports, and keeps, 149.
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 149 {
		t.Errorf("api after the denied call reports %d, want 149 (nothing charged)", got)
	}
	var body errorJSON
	if err := json.Unmarshal(resp.GetRawBody(), &body); err != nil || body.Error != routelimit.CodeRateLimit || body.Policy != "tight" {
		t.Errorf("raw_body %q: %v", resp.GetRawBody(), err)
	}
	if headerOf(resp, "Retry-After") == "" || headerOf(resp, "X-RateLimit-Remaining") != "0" || headerOf(resp, "Content-Type") != "application/json" {
		t.Errorf("denial headers %v", resp.GetResponseHeadersToAdd())
	}
	resp = c.call(t, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{api}})
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 148 {
		t.Errorf("api alone after the denial: remaining %d, want 148", got)
	}
	resp = c.call(t, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{desc("generic_key", "login", "remote_address", "203.0.113.7")}})
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 8 {
		t.Errorf("login after the denial: remaining %d, want 8 (one charge, not two)", got)
	}
	if got, want := resp.GetStatuses()[0].GetCurrentLimit(), "MINUTE×5"; unitString(got) != want {
		t.Errorf("login current_limit %v, want 10 per %s", got, want)
	}
}

func unitString(rl *rlsv3.RateLimitResponse_RateLimit) string {
	s := rl.GetUnit().String()
	if m := rl.GetUnitMultiplier(); m != nil {
		s += "×" + strconv.FormatUint(uint64(m.GetValue()), 10)
	}
	return s
}

func equalCodes(a, b []rlsv3.RateLimitResponse_Code) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// What no policy limits is answered as envoyproxy/ratelimit answers it: OK,
// no current_limit, remaining 0, and no headers.
func TestEnvoyUnknownDescriptors(t *testing.T) {
	rg := newRig(t, rigOpts{})
	c, _ := startRLS(t, rg, edgeDomain())
	for _, tc := range []struct {
		name   string
		domain string
		d      *rlcommon.RateLimitDescriptor
	}{
		{"unknown domain", "other", desc("generic_key", "api", "remote_address", "203.0.113.7")},
		{"unknown key", "edge", desc("destination_cluster", "shop")},
		{"unknown value", "edge", desc("generic_key", "static", "remote_address", "203.0.113.7")},
		{"a level without policies", "edge", desc("generic_key", "api")},
		{"deeper than the tree", "edge", desc("generic_key", "api", "remote_address", "203.0.113.7", "api_key", "demo-free", "extra", "x")},
		{"no entries", "edge", desc()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := c.call(t, &rlsv3.RateLimitRequest{Domain: tc.domain, Descriptors: []*rlcommon.RateLimitDescriptor{tc.d}})
			st := resp.GetStatuses()[0]
			if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || st.GetCode() != rlsv3.RateLimitResponse_OK ||
				st.GetCurrentLimit() != nil || st.GetLimitRemaining() != 0 || len(resp.GetResponseHeadersToAdd()) != 0 {
				t.Errorf("got %v", resp)
			}
		})
	}
	if keys := rg.keys(t); len(keys) != 0 {
		t.Errorf("unlimited descriptors charged %v", keys)
	}
	// Beside a limited one, an unknown descriptor stays OK without a limit.
	resp := c.call(t, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{
		desc("destination_cluster", "shop"), desc("generic_key", "api", "remote_address", "203.0.113.7", "api_key", "demo-free")}})
	if st := resp.GetStatuses(); st[0].GetCurrentLimit() != nil || st[1].GetCurrentLimit().GetName() != "api" || headerOf(resp, "RateLimit-Policy") != `"api";q=150;w=3600` {
		t.Errorf("mixed: %v", resp)
	}
}

// With the store down each policy's on_store_error decides, and shadow
// mode never denies and adds no headers.
func TestEnvoyFailModesAndShadow(t *testing.T) {
	srv := redistest.StartServer(t)
	rg := newRig(t, rigOpts{redis: srv})
	mode := func(name string, fail limiter.FailMode, m limiter.Mode) check.Descriptor {
		p := &limiter.Policy{Name: name, Algorithm: limiter.TokenBucket, Limit: 4, Period: time.Hour, Key: []string{identity.PartIP}, OnStoreError: fail, Mode: m}
		return check.Descriptor{Key: "generic_key", Value: name, Descriptors: []check.Descriptor{
			{Key: "remote_address", Part: identity.PartIP, Policies: []*limiter.Policy{p}}}}
	}
	c, _ := startRLS(t, rg, edgeDomain(mode("allow", limiter.FailAllow, ""), mode("deny", limiter.FailDeny, ""),
		mode("local", limiter.FailLocal, ""), mode("shadow", limiter.FailAllow, limiter.Shadow)))
	one := func(name string) *rlsv3.RateLimitResponse {
		return c.call(t, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{desc("generic_key", name, "remote_address", "203.0.113.7")}})
	}
	for i := range 6 {
		resp := one("shadow")
		if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(resp.GetResponseHeadersToAdd()) != 0 || resp.GetStatuses()[0].GetCurrentLimit() != nil {
			t.Fatalf("shadow call %d: %v", i, resp)
		}
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if resp := one("allow"); resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(resp.GetResponseHeadersToAdd()) != 0 {
		t.Errorf("allow, store down: %v", resp)
	}
	resp := one("deny")
	var body errorJSON
	json.Unmarshal(resp.GetRawBody(), &body)
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || body.Error != routelimit.CodeUnavailable || headerOf(resp, "Retry-After") != "1" {
		t.Errorf("deny, store down: %v (body %s)", resp, resp.GetRawBody())
	}
	// local: the in-process fallback grants limit/gateways (4/2) per gateway.
	var got []rlsv3.RateLimitResponse_Code
	for range 3 {
		got = append(got, one("local").GetOverallCode())
	}
	if want := []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}; !equalCodes(got, want) {
		t.Errorf("local, store down: %v, want %v", got, want)
	}
	if resp := one("shadow"); resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Errorf("shadow, store down: %v", resp)
	}
}

// The gateway's own mistakes are InvalidArgument (a caller that is no
// gateway, PermissionDenied), refused before anything is charged. What a
// client controls never is (clientvalues_test.go).
func TestEnvoyBadInput(t *testing.T) {
	rg := newRig(t, rigOpts{})
	c, addr := startRLS(t, rg, edgeDomain())
	good := desc("generic_key", "api", "remote_address", "203.0.113.7")
	huge := &rlcommon.RateLimitDescriptor{}
	for range 10_000 {
		huge.Entries = append(huge.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: "generic_key", Value: "api"})
	}
	many := make([]*rlcommon.RateLimitDescriptor, check.MaxDescriptors+1)
	for i := range many {
		many[i] = good
	}
	negative := desc("generic_key", "api", "remote_address", "203.0.113.7")
	negative.IsNegativeHits = true
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
	}{
		{"10k entries", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{good, huge}}},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: many}},
		{"no domain", &rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{good}}},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "edge"}},
		{"entry key too long", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{good, desc(strings.Repeat("x", check.MaxEntryBytes+1), "api")}}},
		{"hits over 2^53", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{withHits(desc("generic_key", "api", "remote_address", "203.0.113.7"), 1<<60)}}},
		{"negative hits", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{good, negative}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ShouldRateLimit(t.Context(), tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("got %v, want InvalidArgument", err)
			}
		})
	}
	untrusted := dialRLS(t, addr, "127.0.0.2")
	if _, err := untrusted.ShouldRateLimit(t.Context(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{good}}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a caller that is no gateway: %v, want PermissionDenied", err)
	}
	if keys := rg.keys(t); len(keys) != 0 {
		t.Errorf("refused calls charged %v", keys)
	}
}

// A descriptor's hits_addend 0 checks without charging, as Envoy's
// check-then-charge-at-stream-end pattern uses it.
func TestEnvoyHitsZeroChecksOnly(t *testing.T) {
	tight := &limiter.Policy{Name: "tight", Algorithm: limiter.TokenBucket, Limit: 2, Period: time.Hour, Key: []string{identity.PartIP}}
	rg := newRig(t, rigOpts{})
	c, _ := startRLS(t, rg, edgeDomain(check.Descriptor{Key: "generic_key", Value: "tight", Descriptors: []check.Descriptor{
		{Key: "remote_address", Part: identity.PartIP, Policies: []*limiter.Policy{tight}}}}))
	call := func(hits uint64) *rlsv3.RateLimitResponse {
		return c.call(t, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{
			withHits(desc("generic_key", "tight", "remote_address", "203.0.113.7"), hits)}})
	}
	for i, step := range []struct {
		hits      uint64
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}{{0, rlsv3.RateLimitResponse_OK, 2}, {2, rlsv3.RateLimitResponse_OK, 0}, {0, rlsv3.RateLimitResponse_OVER_LIMIT, 0}} {
		resp := call(step.hits)
		if resp.GetOverallCode() != step.code || resp.GetStatuses()[0].GetLimitRemaining() != step.remaining {
			t.Errorf("step %d: %v remaining %d, want %v %d", i, resp.GetOverallCode(), resp.GetStatuses()[0].GetLimitRemaining(), step.code, step.remaining)
		}
	}
}

// The same client through /v1/check and through gRPC is one store key.
func TestEnvoyAndCheckShareTheKey(t *testing.T) {
	rg := newRig(t, rigOpts{})
	c, _ := startRLS(t, rg, edgeDomain())
	h := rg.handler(t, "X-Login-User")
	for range 5 {
		if w := serve(h, nginxCheck("GET", "/api/products", "203.0.113.7", map[string]string{"X-API-Key": "demo-free"})); w.Code != 200 {
			t.Fatalf("check: %d", w.Code)
		}
		if w := serve(h, nginxCheck("POST", "/login", "203.0.113.7", map[string]string{"X-Login-User": "Alice"})); w.Code != 200 {
			t.Fatalf("check: %d", w.Code)
		}
	}
	resp := c.call(t, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{
		desc("generic_key", "api", "remote_address", "203.0.113.7", "api_key", "demo-free"),
		desc("generic_key", "login", "remote_address", "203.0.113.7", "login_user", "alice")}})
	if got := []uint32{resp.GetStatuses()[0].GetLimitRemaining(), resp.GetStatuses()[1].GetLimitRemaining()}; got[0] != 144 || got[1] != 4 {
		t.Errorf("remaining after 5 checks and 1 call: api %d, login %d; want 144 and 4", got[0], got[1])
	}
	if tags := hashTags(rg.keys(t)); len(tags) != 3 {
		t.Errorf("state of %v, want 3 identities (api, login_ip, login_user)", tags)
	}
}

// hashTags are the distinct {policy:identity} tags of store keys: one per
// policy and identity, whatever the keys an algorithm keeps.
func hashTags(keys []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range keys {
		i, j := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
		if i >= 0 && j > i && !seen[k[i:j+1]] {
			seen[k[i:j+1]] = true
			out = append(out, k[i:j+1])
		}
	}
	return out
}
