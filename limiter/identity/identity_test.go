package identity_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		name   string
		remote string
		xff    []string
		fwd    []string
		want   string
	}{
		{"untrusted peer, no header", "203.0.113.7:5555", nil, nil, "203.0.113.7/32"},
		{"untrusted peer's XFF is ignored", "203.0.113.7:5555", []string{"198.51.100.1"}, nil, "203.0.113.7/32"},
		{"trusted proxy: the hop it saw", "10.0.0.2:443", []string{"198.51.100.1"}, nil, "198.51.100.1/32"},
		{"client-written hops left of the first untrusted are ignored", "10.0.0.2:443", []string{"1.1.1.1, 2.2.2.2, 198.51.100.1"}, nil, "198.51.100.1/32"},
		{"chain of trusted proxies", "10.0.0.2:443", []string{"198.51.100.1, 10.1.1.1, 10.2.2.2"}, nil, "198.51.100.1/32"},
		{"several header lines are one list", "10.0.0.2:443", []string{"6.6.6.6, 198.51.100.1", "10.3.3.3"}, nil, "198.51.100.1/32"},
		{"all hops trusted: the left-most", "10.0.0.2:443", []string{"10.9.9.9, 10.8.8.8"}, nil, "10.9.9.9/32"},
		{"trusted peer without header", "10.0.0.2:443", nil, nil, "10.0.0.2/32"},
		{"IPv6 grouped by /64", "[2001:db8:1:2:3:4:5:6]:443", nil, nil, "2001:db8:1:2::/64"},
		{"IPv6 hop through a trusted v6 proxy", "[fd00::1]:443", []string{"2001:db8:aa:bb:cc::1"}, nil, "2001:db8:aa:bb::/64"},
		{"IPv4-mapped IPv6 is IPv4", "[::ffff:198.51.100.9]:80", nil, nil, "198.51.100.9/32"},
		{"zone is dropped", "[fe80::1%eth0]:80", nil, nil, "fe80::/64"},
		// docs/rest.md ("Who pays"): hops may carry ports, brackets and zones.
		{"hop with a port", "10.0.0.2:443", []string{"198.51.100.7:4444"}, nil, "198.51.100.7/32"},
		{"bracketed v6 hop with a port", "10.0.0.2:443", []string{"[2001:db8::1]:4444"}, nil, "2001:db8::/64"},
		{"bracketed v6 hop", "10.0.0.2:443", []string{"[2001:db8::1]"}, nil, "2001:db8::/64"},
		{"v6 hop with a zone", "10.0.0.2:443", []string{"fe80::9%eth1"}, nil, "fe80::/64"},
		{"port out of range still names the host", "10.0.0.2:443", []string{"198.51.100.7:99999"}, nil, "198.51.100.7/32"},
		// A hop that does not parse is the client, by its text: never the proxy.
		{"unknown is a client of its own", "10.0.0.2:443", []string{"unknown"}, nil, `"unknown"`},
		{"garbage right of the real hops", "10.0.0.2:443", []string{"198.51.100.1, not-an-ip, 10.4.4.4"}, nil, `"not-an-ip"`},
		{"garbage right next to the peer", "10.0.0.2:443", []string{"1.2.3.4, <script>"}, nil, `"<script>"`},
		// RFC 7239 from a trusted proxy counts the same.
		{"Forwarded for=", "10.0.0.2:443", nil, []string{"for=198.51.100.17;proto=https;by=10.0.0.2"}, "198.51.100.17/32"},
		{"Forwarded quoted v6 with port", "10.0.0.2:443", nil, []string{`for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::/64"},
		{"Forwarded chain", "10.0.0.2:443", nil, []string{"for=6.6.6.6, for=198.51.100.2", "for=10.7.7.7"}, "198.51.100.2/32"},
		{"Forwarded obfuscated identifier", "10.0.0.2:443", nil, []string{"for=_hidden"}, `"_hidden"`},
		{"Forwarded ignored from an untrusted peer", "203.0.113.9:1", nil, []string{"for=198.51.100.2"}, "203.0.113.9/32"},
		{"X-Forwarded-For wins over Forwarded", "10.0.0.2:443", []string{"198.51.100.3"}, []string{"for=198.51.100.4"}, "198.51.100.3/32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range tc.fwd {
				r.Header.Add("Forwarded", v)
			}
			if got := identity.ClientIP(r, trusted).String(); got != tc.want {
				t.Errorf("ClientIP = %s, want %s", got, tc.want)
			}
		})
	}
}

// 10k hops behind a trusted proxy are answered in bounded work: the walk
// stops at the first untrusted hop, and reads at most 64 hops in any case.
func TestClientIPManyHops(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	many := strings.Repeat("10.1.1.1, ", 10_000) + "10.2.2.2"
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.2:443"
	r.Header.Set("X-Forwarded-For", "198.51.100.1, "+many)
	allocs := testing.AllocsPerRun(10, func() { identity.ClientIP(r, trusted) })
	if got := identity.ClientIP(r, trusted); got.Addr.String() != "10.1.1.1/32" {
		t.Errorf("ClientIP = %v, want the last trusted hop read (10.1.1.1/32) once the hop budget is spent", got)
	}
	if allocs > 4 {
		t.Errorf("%v allocations for 10k hops: the header must not be split whole", allocs)
	}
}

func newResolver(t *testing.T, cfg identity.Config) *identity.Resolver {
	t.Helper()
	if cfg.HashKey == nil {
		cfg.HashKey = []byte("identity-test-hash-key")
	}
	res, err := identity.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func request(remote string, header map[string]string) *http.Request {
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = remote
	for k, v := range header {
		r.Header.Set(k, v)
	}
	return r
}

func TestKeysHashIdentities(t *testing.T) {
	res := newResolver(t, identity.Config{APIKeys: identity.Table{"secret-key": {Tenant: "acme", Plan: "free"}}})
	p := &limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second,
		Key: []string{"tenant", "api_key", "ip", "header:X-Org-Id"}}
	id, err := res.Resolve(request("198.51.100.1:1", map[string]string{"X-API-Key": "secret-key", "X-Org-Id": "org-42"}))
	if err != nil {
		t.Fatal(err)
	}
	key := res.Key(p, id)
	for _, secret := range []string{"secret-key", "198.51.100.1", "org-42"} {
		if strings.Contains(key, secret) {
			t.Errorf("key %q holds %q in the clear", key, secret)
		}
	}
	if !strings.HasPrefix(key, "acme:") || strings.Count(key, ":") != 3 {
		t.Errorf("key %q: want tenant in the clear then three hashed parts", key)
	}
	// A different header value is a different key; the same is the same.
	other, _ := res.Resolve(request("198.51.100.1:1", map[string]string{"X-API-Key": "secret-key", "X-Org-Id": "org-43"}))
	same, _ := res.Resolve(request("198.51.100.1:2", map[string]string{"X-API-Key": "secret-key", "X-Org-Id": "org-42"}))
	if res.Key(p, other) == key || res.Key(p, same) != key {
		t.Errorf("header part does not tell values apart")
	}
}

// A missing header, an anonymous caller's api_key and an application part
// with no value all stand in the client address: never one shared bucket.
func TestMissingPartsStandInTheClient(t *testing.T) {
	res := newResolver(t, identity.Config{Parts: map[string]identity.PartFunc{
		"user_id": func(r *http.Request) (string, bool) { v, ok := r.Context().Value(userKey{}).(string); return v, ok },
	}})
	for _, part := range []string{"api_key", "header:X-Org-Id", "user_id"} {
		p := &limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second, Key: []string{part}}
		a, _ := res.Resolve(request("198.51.100.1:1", nil))
		b, _ := res.Resolve(request("198.51.100.2:1", nil))
		ip := &limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second, Key: []string{"ip"}}
		if res.Key(p, a) == res.Key(p, b) {
			t.Errorf("%s: two clients without a value share the key %q", part, res.Key(p, a))
		}
		if res.Key(p, a) != res.Key(ip, a) {
			t.Errorf("%s: without a value the key %q is not the client's address key %q", part, res.Key(p, a), res.Key(ip, a))
		}
	}
}

type userKey struct{}

func TestApplicationPartFromContext(t *testing.T) {
	res := newResolver(t, identity.Config{Parts: map[string]identity.PartFunc{
		"user_id": func(r *http.Request) (string, bool) { v, ok := r.Context().Value(userKey{}).(string); return v, ok },
	}})
	p := &limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second, Key: []string{"user_id"}}
	if err := res.CheckPolicy(p); err != nil {
		t.Fatal(err)
	}
	keyFor := func(user, remote string) string {
		r := request(remote, nil)
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, user))
		id, _ := res.Resolve(r)
		return res.Key(p, id)
	}
	if keyFor("u1", "198.51.100.1:1") != keyFor("u1", "198.51.100.2:1") {
		t.Error("one user from two addresses: two keys")
	}
	if keyFor("u1", "198.51.100.1:1") == keyFor("u2", "198.51.100.1:1") {
		t.Error("two users from one address: one key")
	}
}

func TestResolveOnce(t *testing.T) {
	calls := 0
	res := newResolver(t, identity.Config{APIKeys: lookupFunc(func(key string) (identity.APIKey, bool, error) {
		calls++
		return identity.APIKey{Tenant: "t", Plan: "p"}, true, nil
	})})
	r := request("198.51.100.1:1", map[string]string{"X-API-Key": "k"})
	id, r, err := res.Attach(r)
	if err != nil {
		t.Fatal(err)
	}
	again, _, _ := res.Attach(r)
	if again != id || identity.FromContext(r.Context()) != id || calls != 1 {
		t.Errorf("identity resolved %d times; want once, then read back from the context", calls)
	}
}

func TestLookupOfTheApplication(t *testing.T) {
	db := map[string]identity.APIKey{"db-key": {Tenant: "t1", Plan: "gold"}}
	res := newResolver(t, identity.Config{APIKeys: lookupFunc(func(key string) (identity.APIKey, bool, error) {
		if key == "broken" {
			return identity.APIKey{}, false, errors.New("database down")
		}
		k, ok := db[key]
		return k, ok, nil
	})})
	id, err := res.Resolve(request("198.51.100.1:1", map[string]string{"X-API-Key": "db-key"}))
	if err != nil || id.Tenant != "t1" || id.Plan != "gold" || id.UnknownKey {
		t.Errorf("known key: %+v, %v", id, err)
	}
	id, err = res.Resolve(request("198.51.100.1:1", map[string]string{"X-API-Key": "nope"}))
	if err != nil || !id.UnknownKey || id.Tenant != identity.Anonymous {
		t.Errorf("unknown key: %+v, %v", id, err)
	}
	if _, err := res.Resolve(request("198.51.100.1:1", map[string]string{"X-API-Key": "broken"})); err == nil {
		t.Error("a failing lookup is not reported")
	}
}

type lookupFunc func(key string) (identity.APIKey, bool, error)

func (f lookupFunc) LookupAPIKey(_ context.Context, key string) (identity.APIKey, bool, error) {
	return f(key)
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name  string
		cfg   identity.Config
		field string
	}{
		{"no hash key", identity.Config{}, "HashKey"},
		{"short hash key", identity.Config{HashKey: []byte("short")}, "HashKey"},
		{"bad header", identity.Config{HashKey: []byte("0123456789abcdef"), APIKeyHeader: "X API"}, "APIKeyHeader"},
		{"zero plan", identity.Config{HashKey: []byte("0123456789abcdef"), Plans: map[string]int64{"free": 0}}, `Plans["free"]`},
		{"part named like a built-in", identity.Config{HashKey: []byte("0123456789abcdef"), Parts: map[string]identity.PartFunc{"ip": func(*http.Request) (string, bool) { return "", false }}}, `Parts["ip"]`},
		{"key without tenant", identity.Config{HashKey: []byte("0123456789abcdef"), APIKeys: identity.Table{"k": {Plan: "free"}}}, "APIKeys[#1].Tenant"},
		{"anonymous plan", identity.Config{HashKey: []byte("0123456789abcdef"), APIKeys: identity.Table{"k": {Tenant: "t", Plan: "anonymous"}}}, "APIKeys[#1].Plan"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := identity.New(tc.cfg)
			var fe *limiter.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("New error = %v, want a FieldError on %s", err, tc.field)
			}
		})
	}
}

func TestCheckPolicy(t *testing.T) {
	res := newResolver(t, identity.Config{Plans: map[string]int64{"big": 1 << 20}})
	tests := []struct {
		name  string
		p     limiter.Policy
		field string
	}{
		{"no key: one global bucket", limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second}, "key"},
		{"unknown part", limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second, Key: []string{"tenantt"}}, "key[0]"},
		{"bad header name", limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second, Key: []string{"header:X Y"}}, "key[0]"},
		{"unknown algorithm", limiter.Policy{Name: "p", Algorithm: "gcra", Limit: 1, Period: time.Second, Key: []string{"ip"}}, "algorithm"},
		{"plan pushes past 2^53", limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Hour, Key: []string{"ip"}}, "limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pe *limiter.PolicyError
			if err := res.CheckPolicy(&tc.p); !errors.As(err, &pe) || pe.Field != tc.field {
				t.Errorf("CheckPolicy = %v, want a PolicyError on %s", err, tc.field)
			}
		})
	}
	ok := limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second, Key: []string{"header:X-Org-Id", "route"}}
	if err := res.CheckPolicy(&ok); err != nil {
		t.Errorf("CheckPolicy(%v) = %v", ok.Key, err)
	}
}

// Route patterns carry chi's braces; in a store key they would end Redis
// Cluster's hash tag early and put every caller of a route into one slot.
func TestRouteKeyHasNoBraces(t *testing.T) {
	res := newResolver(t, identity.Config{})
	p := &limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second, Key: []string{"route", "ip"}}
	id, _ := res.Resolve(request("198.51.100.1:1", nil))
	id.Route = "GET /api/products/{id}"
	if key := res.Key(p, id); strings.ContainsAny(key, "{}") {
		t.Errorf("key %q has braces", key)
	}
}

// A table key's store key under a policy keyed only by the table is cached;
// the cache gives what building it would, per policy and per key.
func TestTableKeysAreStable(t *testing.T) {
	res := newResolver(t, identity.Config{APIKeys: identity.Table{"k1": {Tenant: "t1", Plan: "p"}, "k2": {Tenant: "t2", Plan: "p"}}})
	a := &limiter.Policy{Name: "a", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second, Key: []string{"tenant", "api_key"}}
	b := &limiter.Policy{Name: "b", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Second, Key: []string{"api_key"}}
	keys := map[string]bool{}
	for range 3 {
		for _, k := range []string{"k1", "k2"} {
			id, _ := res.Resolve(request("198.51.100.1:1", map[string]string{"X-API-Key": k}))
			ka, kb := res.Key(a, id), res.Key(b, id)
			if !strings.HasPrefix(ka, map[string]string{"k1": "t1:", "k2": "t2:"}[k]) || !strings.HasSuffix(ka, ":"+kb) {
				t.Fatalf("key %s: %q under [tenant api_key], %q under [api_key]", k, ka, kb)
			}
			keys[ka], keys[kb] = true, true
		}
	}
	if len(keys) != 4 {
		t.Errorf("%d distinct keys for 2 keys × 2 policies, want 4", len(keys))
	}
}

// sharedStore is a memstore seen as a store other processes share, as Redis is.
type sharedStore struct{ limiter.Store }

func TestNewForStore(t *testing.T) {
	local := memstore.New(nil)
	a, err := identity.NewForStore(identity.Config{}, local)
	if err != nil {
		t.Fatalf("local store without a hash key: %v", err)
	}
	b, err := identity.NewForStore(identity.Config{}, local)
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash("ip", "192.0.2.1") == b.Hash("ip", "192.0.2.1") {
		t.Fatal("two resolvers drew the same hash key")
	}
	if _, err := identity.NewForStore(identity.Config{}, sharedStore{local}); err == nil || !strings.Contains(err.Error(), "HashKey: required: the store is shared") {
		t.Fatalf("shared store without a hash key: %v, want HashKey refused", err)
	}
	key := []byte("a secret every gateway shares")
	c, err := identity.NewForStore(identity.Config{HashKey: key}, sharedStore{local})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := identity.New(identity.Config{HashKey: key})
	if c.Hash("ip", "x") != d.Hash("ip", "x") {
		t.Fatal("the hash key given was not used")
	}
}

// Request scales the policy by the caller's plan and keys it for the
// caller, the one place every door turns a policy into a charge.
func TestRequestScalesByPlan(t *testing.T) {
	res := newResolver(t, identity.Config{
		APIKeys: identity.Table{"pro-key": {Tenant: "acme", Plan: "pro"}, "free-key": {Tenant: "acme", Plan: "free"}},
		Plans:   map[string]int64{"pro": 10},
	})
	p := &limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Limit: 5, Period: time.Second, Burst: 20, Key: []string{"api_key"}}
	tests := []struct {
		key          string
		limit, burst int64
	}{
		{"pro-key", 50, 200},
		{"free-key", 5, 20}, // a plan not in Plans is ×1
	}
	for _, tc := range tests {
		id, err := res.Resolve(request("198.51.100.1:1", map[string]string{"X-API-Key": tc.key}))
		if err != nil {
			t.Fatal(err)
		}
		got := res.Request(p, id, 3)
		if got.Policy.Limit != tc.limit || got.Policy.Capacity() != tc.burst {
			t.Errorf("%s: limit, burst = %d, %d; want %d, %d", tc.key, got.Policy.Limit, got.Policy.Capacity(), tc.limit, tc.burst)
		}
		if got.Key != res.Key(p, id) || got.Cost != 3 {
			t.Errorf("%s: key, cost = %q, %d; want %q, 3", tc.key, got.Key, got.Cost, res.Key(p, id))
		}
	}
	if p.Limit != 5 || p.Burst != 20 {
		t.Errorf("the configured policy changed: limit %d, burst %d", p.Limit, p.Burst)
	}
}

type failingLookup struct{}

func (failingLookup) LookupAPIKey(context.Context, string) (identity.APIKey, bool, error) {
	return identity.APIKey{}, false, errors.New("key store down")
}

// A failed key lookup answers like every other 503 of costgate: the same
// Retry-After in the header and in the body.
func TestMiddlewareLookupFailureSaysWhenToRetry(t *testing.T) {
	res := newResolver(t, identity.Config{APIKeys: failingLookup{}})
	h := res.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request("198.51.100.1:1", map[string]string{"X-API-Key": "k"}))
	var body struct {
		Error         string `json:"error"`
		RetryAfterSec int64  `json:"retry_after_sec"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	want := strconv.Itoa(header.UnavailableRetryAfter)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != want || body.Error != "identity_unavailable" || strconv.FormatInt(body.RetryAfterSec, 10) != want {
		t.Errorf("got %d, Retry-After %q, body %s; want 503, Retry-After %s, identity_unavailable with retry_after_sec %s", w.Code, w.Header().Get("Retry-After"), w.Body, want, want)
	}
}
