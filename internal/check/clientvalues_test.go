package check_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/costgate/costgate/internal/check"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

// No value a client controls makes the service answer an error, which
// Envoy with failure_mode_deny: false would let through unlimited.

func orgPolicy() *limiter.Policy {
	return &limiter.Policy{Name: "org", Algorithm: limiter.FixedWindow, Limit: 2, Period: time.Hour, Key: []string{"header:X-Org-Id"}}
}

func routePolicy() *limiter.Policy {
	return &limiter.Policy{Name: "per_route", Algorithm: limiter.FixedWindow, Limit: 100, Period: time.Hour, Key: []string{identity.PartRoute}}
}

func ipPolicy() *limiter.Policy {
	return &limiter.Policy{Name: "per_ip", Algorithm: limiter.FixedWindow, Limit: 3, Period: time.Hour, Key: []string{identity.PartIP}}
}

// clientValueDomain is docs/gateways.md's edge domain with a header part (with
// and without an address entry on its path) and a route part.
func clientValueDomain() map[string][]check.Descriptor {
	return edgeDomain(
		check.Descriptor{Key: "generic_key", Value: "org", Descriptors: []check.Descriptor{
			{Key: "remote_address", Part: identity.PartIP, Policies: []*limiter.Policy{orgPolicy()}, Descriptors: []check.Descriptor{
				{Key: "org_id", Part: "header:X-Org-Id", Policies: []*limiter.Policy{orgPolicy()}},
			}},
		}},
		check.Descriptor{Key: "generic_key", Value: "org_only", Descriptors: []check.Descriptor{
			{Key: "org_id", Part: "header:X-Org-Id", Policies: []*limiter.Policy{orgPolicy()}},
		}},
		check.Descriptor{Key: "generic_key", Value: "routed", Descriptors: []check.Descriptor{
			{Key: "remote_address", Part: identity.PartIP, Descriptors: []check.Descriptor{
				{Key: "path", Part: identity.PartRoute, Policies: []*limiter.Policy{routePolicy(), ipPolicy()}},
			}},
		}},
	)
}

func rlsCall(domain string, d ...*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: d}
}

func rawError(t *testing.T, resp *rlsv3.RateLimitResponse) errorJSON {
	t.Helper()
	var e errorJSON
	if err := json.Unmarshal(resp.GetRawBody(), &e); err != nil {
		t.Fatalf("raw_body %q: %v", resp.GetRawBody(), err)
	}
	return e
}

// An API key over 4 KiB is an unknown key: charged to the address, as
// anonymous, so an anonymous client cannot leave its per-IP limit by
// sending one.
func TestEnvoyLongAPIKeyChargedToTheAddress(t *testing.T) {
	rg := newRig(t, rigOpts{})
	c, _ := startRLS(t, rg, edgeDomain())
	const client = "203.0.113.20"
	long := strings.Repeat("k", 5000)
	resp := c.call(t, rlsCall("edge", desc("generic_key", "api", "remote_address", client, "api_key", long)))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != 149 {
		t.Fatalf("a 5 KB key: %v remaining %d, want OK with the address's 149", resp.GetOverallCode(), resp.GetStatuses()[0].GetLimitRemaining())
	}
	// The anonymous budget of the address spends what is left.
	resp = c.call(t, rlsCall("edge", withHits(desc("generic_key", "api", "remote_address", client), 149)))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != 0 {
		t.Fatalf("anonymous after the long key: %v remaining %d, want OK with 0 left (one budget)", resp.GetOverallCode(), resp.GetStatuses()[0].GetLimitRemaining())
	}
	for _, key := range []string{long, strings.Repeat("z", 64<<10), "", "guessed"} {
		resp := c.call(t, rlsCall("edge", desc("generic_key", "api", "remote_address", client, "api_key", key)))
		if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || rawError(t, resp).Error != routelimit.CodeRateLimit {
			t.Errorf("a %d-byte key once the address is spent: %v %s, want OVER_LIMIT", len(key), resp.GetOverallCode(), resp.GetRawBody())
		}
	}
	// A known key is its tenant's budget, not the address's.
	resp = c.call(t, rlsCall("edge", desc("generic_key", "api", "remote_address", client, "api_key", "demo-free")))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Errorf("a known key from the spent address: %v", resp.GetOverallCode())
	}
}

// A login_user the limits cannot take (empty, blank, not UTF-8, over 256
// bytes) is denied, as the HTTP doors answer 400, after the policies that
// do not key by username were charged to the address.
func TestEnvoyBadUsernameChargedToTheAddress(t *testing.T) {
	rg := newRig(t, rigOpts{})
	c, _ := startRLS(t, rg, edgeDomain())
	const client = "203.0.113.21"
	bad := []string{"", "   ", "\t", strings.Repeat("a", 300), strings.Repeat("\ufdfa", 100)}
	for i := range 10 {
		name := bad[i%len(bad)]
		resp := c.call(t, rlsCall("edge", desc("generic_key", "login", "remote_address", client, "login_user", name)))
		st := resp.GetStatuses()[0]
		if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || st.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("username %q: %v, want OVER_LIMIT", name, resp)
		}
		if e := rawError(t, resp); e.Error != check.CodeBadRequest || !strings.Contains(e.Message, "username") {
			t.Errorf("username %q: body %s, want bad_request about the username", name, resp.GetRawBody())
		}
		if got, want := st.GetLimitRemaining(), uint32(9-i); got != want || st.GetCurrentLimit().GetName() != "login_ip" {
			t.Errorf("username %q: %s remaining %d, want login_ip %d", name, st.GetCurrentLimit().GetName(), got, want)
		}
		if headerOf(resp, "X-RateLimit-Remaining") != fmt.Sprint(9-i) || headerOf(resp, "Content-Type") != "application/json" {
			t.Errorf("username %q: headers %v", name, resp.GetResponseHeadersToAdd())
		}
	}
	// The address's attempts are spent: a good name and a bad one are both
	// denied by login_ip, and no username was ever charged.
	for _, name := range []string{"alice", " ", strings.Repeat("a", 300)} {
		resp := c.call(t, rlsCall("edge", desc("generic_key", "login", "remote_address", client, "login_user", name)))
		if e := rawError(t, resp); resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || e.Error != routelimit.CodeRateLimit || e.Policy != "login_ip" {
			t.Errorf("username %q after 10 bad ones: %v %s, want OVER_LIMIT by login_ip", name, resp.GetOverallCode(), resp.GetRawBody())
		}
	}
	if tags := hashTags(rg.keys(t)); len(tags) != 1 {
		t.Errorf("state of %v, want login_ip's only", tags)
	}
	// A descriptor beside the refused one is charged with it.
	resp := c.call(t, rlsCall("edge", desc("generic_key", "api", "remote_address", "203.0.113.22"),
		desc("generic_key", "login", "remote_address", "203.0.113.22", "login_user", "")))
	if got := codesOf(resp); resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT ||
		!equalCodes(got, []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}) || resp.GetStatuses()[0].GetLimitRemaining() != 149 {
		t.Errorf("api beside a blank username: %v", resp)
	}
}

// A header part over 4 KiB is keyed by the address, as a missing header
// is; without an address entry on its path it is denied, charging nothing.
func TestEnvoyLongHeaderPartChargedToTheAddress(t *testing.T) {
	rg := newRig(t, rigOpts{})
	c, _ := startRLS(t, rg, clientValueDomain())
	const client = "203.0.113.23"
	long := func(b byte) string { return strings.Repeat(string(b), 5000) }
	steps := []struct {
		d    *rlcommon.RateLimitDescriptor
		code rlsv3.RateLimitResponse_Code
	}{
		{desc("generic_key", "org", "remote_address", client), rlsv3.RateLimitResponse_OK},
		{desc("generic_key", "org", "remote_address", client, "org_id", long('a')), rlsv3.RateLimitResponse_OK},
		{desc("generic_key", "org", "remote_address", client, "org_id", long('b')), rlsv3.RateLimitResponse_OVER_LIMIT},
		{desc("generic_key", "org", "remote_address", client, "org_id", ""), rlsv3.RateLimitResponse_OVER_LIMIT},
		{desc("generic_key", "org", "remote_address", client, "org_id", "acme"), rlsv3.RateLimitResponse_OK},
	}
	for i, step := range steps {
		resp := c.call(t, rlsCall("edge", step.d))
		if resp.GetOverallCode() != step.code {
			t.Errorf("step %d: %v %s, want %v", i, resp.GetOverallCode(), resp.GetRawBody(), step.code)
		}
	}
	// No address to stand in: denied, nothing charged to a shared bucket.
	before := len(rg.keys(t))
	for _, v := range []string{long('c'), ""} {
		resp := c.call(t, rlsCall("edge", desc("generic_key", "org_only", "org_id", v)))
		if e := rawError(t, resp); resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || e.Error != check.CodeBadRequest {
			t.Errorf("a %d-byte header without an address: %v %s, want OVER_LIMIT bad_request", len(v), resp.GetOverallCode(), resp.GetRawBody())
		}
	}
	if after := len(rg.keys(t)); after != before {
		t.Errorf("headers without an address charged %d keys", after-before)
	}
}

// A route value over 4 KiB is denied after the policies that do not key
// by route were charged; a remote_address that is not an address is
// denied with nothing to charge.
func TestEnvoyBadRouteAndAddressDenied(t *testing.T) {
	rg := newRig(t, rigOpts{})
	c, _ := startRLS(t, rg, clientValueDomain())
	const client = "203.0.113.24"
	for i := range 3 {
		resp := c.call(t, rlsCall("edge", desc("generic_key", "routed", "remote_address", client, "path", "/"+strings.Repeat("r", 5000))))
		st := resp.GetStatuses()[0]
		if e := rawError(t, resp); resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || e.Error != check.CodeBadRequest ||
			st.GetCurrentLimit().GetName() != "per_ip" || st.GetLimitRemaining() != uint32(2-i) {
			t.Errorf("long route %d: %v %s, want OVER_LIMIT bad_request after per_ip charged", i, resp, resp.GetRawBody())
		}
	}
	if resp := c.call(t, rlsCall("edge", desc("generic_key", "routed", "remote_address", client, "path", "/products"))); resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("a good route once per_ip is spent: %v", resp.GetOverallCode())
	}
	before := len(rg.keys(t))
	for _, addr := range []string{"unknown", "", strings.Repeat("1", 5000)} {
		resp := c.call(t, rlsCall("edge", desc("generic_key", "login", "remote_address", addr, "login_user", "alice")))
		if e := rawError(t, resp); resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || e.Error != check.CodeBadRequest {
			t.Errorf("remote_address %.10q: %v %s, want OVER_LIMIT bad_request", addr, resp.GetOverallCode(), resp.GetRawBody())
		}
	}
	if after := len(rg.keys(t)); after != before {
		t.Errorf("bad addresses charged %d keys", after-before)
	}
}

// /v1/check answers what a client controls as the middleware does, never
// with a 5xx (Envoy's ext_authz lets a 5xx through with failure_mode_allow):
// a username it cannot limit by is 400 after the address was charged, and
// 429 once the address is spent.
func TestCheckBadUsernameChargedToTheAddress(t *testing.T) {
	rg := newRig(t, rigOpts{})
	h := rg.handler(t, "X-Login-User")
	const client = "203.0.113.31"
	bad := []checkReq{
		nginxCheck("POST", "/login", client, map[string]string{"X-Login-User": ""}),
		nginxCheck("POST", "/login", client, map[string]string{"X-Login-User": "   "}),
		nginxCheck("POST", "/login", client, map[string]string{"X-Login-User": "\xff\xfe"}),
		nginxCheck("POST", "/login", client, map[string]string{"X-Login-User": strings.Repeat("a", 300)}),
		{header: map[string]string{"X-Forwarded-Method": "POST", "X-Forwarded-Uri": "/login", "X-Forwarded-For": client},
			multi: map[string][]string{"X-Login-User": {"alice", "bob"}}},
	}
	for i := range 10 {
		w := serve(h, bad[i%len(bad)])
		if e := decodeError(t, w); w.Code != 400 || e.Error != check.CodeBadRequest || w.Header().Get("X-RateLimit-Remaining") != fmt.Sprint(9-i) {
			t.Errorf("bad username %d: %d %s remaining %q, want 400 with login_ip's %d", i, w.Code, w.Body, w.Header().Get("X-RateLimit-Remaining"), 9-i)
		}
	}
	for _, req := range append(bad, nginxCheck("POST", "/login", client, map[string]string{"X-Login-User": "alice"})) {
		if w := serve(h, req); w.Code != 429 || decodeError(t, w).Policy != "login_ip" {
			t.Errorf("after 10 bad usernames: %d %s, want 429 by login_ip", w.Code, w.Body)
		}
	}
}

// An API key over 4 KiB is unknown: 401 after the address was charged, and
// 429 once the address's anonymous budget is spent.
func TestCheckLongAPIKeyChargedToTheAddress(t *testing.T) {
	rg := newRig(t, rigOpts{})
	h := rg.handler(t, "")
	const client = "203.0.113.32"
	long := map[string]string{"X-API-Key": strings.Repeat("k", 5000)}
	if w := serve(h, nginxCheck("GET", "/api/products", client, long)); w.Code != 401 || w.Header().Get("X-RateLimit-Remaining") != "149" {
		t.Fatalf("a 5 KB key: %d remaining %q, want 401 with the address's 149", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	for range 149 {
		if w := serve(h, nginxCheck("GET", "/api/products", client, nil)); w.Code != 200 {
			t.Fatalf("anonymous: %d", w.Code)
		}
	}
	if w := serve(h, nginxCheck("GET", "/api/products", client, long)); w.Code != 429 {
		t.Errorf("a 5 KB key once the address is spent: %d %s, want 429", w.Code, w.Body)
	}
}

// A header part over 4 KiB, or empty, is keyed by the address, as a
// missing header is: a client cannot make itself new budgets that way.
func TestCheckLongHeaderPartChargedToTheAddress(t *testing.T) {
	rg := newRig(t, rigOpts{routes: []routelimit.Route{{Pattern: "/org/*", Policies: []*limiter.Policy{orgPolicy()}}}})
	h := rg.handler(t, "")
	const client = "203.0.113.33"
	for i, tc := range []struct {
		org    string
		status int
	}{{strings.Repeat("a", 5000), 200}, {"", 200}, {strings.Repeat("b", 5000), 429}, {"acme", 200}} {
		w := serve(h, nginxCheck("GET", "/org/x", client, map[string]string{"X-Org-Id": tc.org}))
		if w.Code != tc.status {
			t.Errorf("step %d (a %d-byte X-Org-Id): %d, want %d", i, len(tc.org), w.Code, tc.status)
		}
	}
}

// rawRequest is a RateLimitRequest as Envoy encodes it, whatever bytes its
// values hold (protobuf-go refuses to encode a string that is not UTF-8;
// Envoy's C++ encoder sends it).
func rawRequest(domain string, descriptors ...[]string) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, domain)
	for _, kv := range descriptors {
		var d []byte
		for i := 0; i+1 < len(kv); i += 2 {
			var e []byte
			e = protowire.AppendTag(e, 1, protowire.BytesType)
			e = protowire.AppendString(e, kv[i])
			e = protowire.AppendTag(e, 2, protowire.BytesType)
			e = protowire.AppendString(e, kv[i+1])
			d = protowire.AppendTag(d, 1, protowire.BytesType)
			d = protowire.AppendBytes(d, e)
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, d)
	}
	return b
}

// rawCodec sends a request's bytes as they are and decodes the answer.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func callRaw(t *testing.T, c rlsClient, req []byte) *rlsv3.RateLimitResponse {
	t.Helper()
	resp := &rlsv3.RateLimitResponse{}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := c.cc.Invoke(ctx, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, req, resp, grpc.ForceCodecV2(rawCodec{})); err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// Values that are not UTF-8 (a header of bytes 0x80-0xFF, which Envoy
// copies as it came) are values, not a failed call: a key is unknown and
// charged to the address, a username is refused after the address paid.
func TestEnvoyNonUTF8Values(t *testing.T) {
	rg := newRig(t, rigOpts{})
	c, _ := startRLS(t, rg, clientValueDomain())
	const client = "203.0.113.25"
	resp := callRaw(t, c, rawRequest("edge", []string{"generic_key", "api", "remote_address", client, "api_key", "demo-free\xff"}))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != 149 {
		t.Errorf("a key of bytes: %v", resp)
	}
	if resp := c.call(t, rlsCall("edge", desc("generic_key", "api", "remote_address", client))); resp.GetStatuses()[0].GetLimitRemaining() != 148 {
		t.Errorf("anonymous after a key of bytes: remaining %d, want 148 (one budget)", resp.GetStatuses()[0].GetLimitRemaining())
	}
	resp = callRaw(t, c, rawRequest("edge", []string{"generic_key", "login", "remote_address", client, "login_user", "al\xffice"}))
	if e := rawError(t, resp); resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || e.Error != check.CodeBadRequest || resp.GetStatuses()[0].GetLimitRemaining() != 9 {
		t.Errorf("a username of bytes: %v %s, want OVER_LIMIT bad_request after login_ip", resp, resp.GetRawBody())
	}
	resp = callRaw(t, c, rawRequest("edge", []string{"generic_key", "org", "remote_address", client, "org_id", "\xfe\xff"}, []string{"generic_key", "routed", "remote_address", client, "path", "/\xff"}))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Errorf("a header and a route of bytes: %v %s, want OK (hashed as any value)", resp, resp.GetRawBody())
	}
	resp = callRaw(t, c, rawRequest("edge", []string{"generic_key", "login", "remote_address", "\xff"}))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("an address of bytes: %v, want OVER_LIMIT", resp)
	}
}
