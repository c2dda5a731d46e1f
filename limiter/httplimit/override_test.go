package httplimit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
	"github.com/costgate/costgate/limiter/identity"
)

// What a client sees of each override action: a raised limit in the
// rate-limit headers, an exemption with no limit at all, a block as 403
// "blocked" charging nothing; each named in Costgate-Override, a valid
// RFC 8941 list.
func TestOverridesAsClientsSeeThem(t *testing.T) {
	ov := limiter.NewOverrides(nil)
	ids := resolver(t, identity.Config{APIKeys: identity.Table{
		"k-launch": {Tenant: "launch", Plan: "free"}, "k-vip": {Tenant: "vip", Plan: "free"}, "k-bad": {Tenant: "acme", Plan: "free"}, "k-ok": {Tenant: "acme", Plan: "free"},
	}, Overrides: ov})
	p := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Hour, Key: []string{"tenant", "api_key"}}
	lim := memLimiter(t)
	mw, err := httplimit.New(httplimit.Config{Limiter: lim, Identity: ids, Routes: []httplimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{p}}}})
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }))
	bad, err := ids.Named(t.Context(), identity.Parts{APIKey: "k-bad"})
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	ov.Set([]limiter.Override{
		{Name: "launch", Action: limiter.ActionLimit, Multiplier: 10, Expires: expires, Targets: []limiter.Target{{Policy: "api", Tenant: "launch"}}},
		{Name: "vip", Action: limiter.ActionAllow, Expires: expires, Targets: []limiter.Target{{Tenant: "vip"}}},
		{Name: "bad", Action: limiter.ActionDeny, Expires: expires, Targets: []limiter.Target{{Policy: "api", Key: ids.Request(p, bad, 1).Key}}},
	})
	get := func(key string) *http.Response {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/products", nil)
		r.Header.Set("X-API-Key", key)
		h.ServeHTTP(w, r)
		return w.Result()
	}
	overrideHeader := func(res *http.Response, action string) {
		t.Helper()
		items, err := parseSFList(res.Header.Get("Costgate-Override"))
		if err != nil || len(items) != 1 || items[0].value != "api" || len(items[0].params) != 2 ||
			items[0].params[0] != (sfParam{"action", sfToken(action)}) || items[0].params[1] != (sfParam{"expires", expires.Unix()}) {
			t.Errorf("Costgate-Override %q (%v): want \"api\";action=%s;expires=%d", res.Header.Get("Costgate-Override"), err, action, expires.Unix())
		}
	}

	res := get("k-launch")
	if res.StatusCode != 200 || res.Header.Get("X-RateLimit-Limit") != "100" || res.Header.Get("RateLimit-Policy") != `"api";q=100;w=3600` {
		t.Errorf("launch ×10: %d, limit %q, policy %q; want 100, q=100", res.StatusCode, res.Header.Get("X-RateLimit-Limit"), res.Header.Get("RateLimit-Policy"))
	}
	overrideHeader(res, "limit")

	for range 50 {
		if res = get("k-vip"); res.StatusCode != 200 {
			t.Fatalf("exempt: %d", res.StatusCode)
		}
	}
	if res.Header.Get("X-RateLimit-Limit") != "" || res.Header.Get("RateLimit") != "" {
		t.Errorf("exempt: rate-limit headers %v, want none (no limit applies)", res.Header)
	}
	overrideHeader(res, "allow")

	before := served
	res = get("k-bad")
	var body struct{ Error, Message, Policy string }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != 403 || body.Error != "blocked" || body.Policy != "api" || served != before {
		t.Errorf("blocked: %d %+v (%v), served %d; want 403 blocked, not served", res.StatusCode, body, err, served-before)
	}
	if res.Header.Get("Retry-After") != "" {
		t.Errorf("blocked: Retry-After %q, want none (retrying does not help)", res.Header.Get("Retry-After"))
	}
	overrideHeader(res, "deny")
	// The block charged nothing; another key of the tenant is not blocked.
	if d, err := lim.Peek(t.Context(), p, ids.Request(p, bad, 1).Key); err != nil || d.Remaining != 10 {
		t.Errorf("the blocked key's bucket: %+v %v, want 10 left", d, err)
	}
	if res = get("k-ok"); res.StatusCode != 200 || res.Header.Get("Costgate-Override") != "" || res.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(9) {
		t.Errorf("another key of the tenant: %d %v", res.StatusCode, res.Header)
	}
}
