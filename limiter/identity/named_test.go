package identity_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

func namedResolver(t *testing.T, ov *limiter.Overrides) *identity.Resolver {
	t.Helper()
	res, err := identity.New(identity.Config{
		HashKey:   []byte("named-test-hash-key-0123"),
		APIKeys:   identity.Table{"demo-free": {Tenant: "acme", Plan: "free"}, "demo-ent": {Tenant: "bigco", Plan: "enterprise"}},
		Plans:     map[string]int64{"enterprise": 10},
		Overrides: ov,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// An identity named by its parts gets the very store key (and plan-scaled
// policy) a request of that client gets: the same lookup, normalisation
// and hashing, so that an operator never handles a hash.
func TestNamedIsWhatARequestIs(t *testing.T) {
	res := namedResolver(t, nil)
	policies := []*limiter.Policy{
		{Name: "api", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Minute, Key: []string{"tenant", "api_key"}},
		{Name: "ip", Algorithm: limiter.SlidingLog, Limit: 10, Period: time.Minute, Key: []string{"ip"}},
		{Name: "user", Algorithm: limiter.SlidingLog, Limit: 10, Period: time.Minute, Key: []string{"username"}},
		{Name: "org", Algorithm: limiter.FixedWindow, Limit: 10, Period: time.Minute, Key: []string{"header:X-Org", "plan"}},
	}
	for _, tc := range []struct {
		name, remote, apiKey, user, org string
		parts                           identity.Parts
	}{
		{"a key of the table", "198.51.100.7:4000", "demo-ent", "Alice", "o1",
			identity.Parts{APIKey: "demo-ent", IP: "198.51.100.7", Username: "ＡＬＩＣＥ ", Headers: map[string]string{"x-org": "o1"}}},
		{"anonymous, IPv6 grouped", "[2001:db8:1:2:aa::1]:4000", "", "straße", "",
			identity.Parts{IP: "2001:db8:1:2:bb::9", Username: "STRASSE"}},
		{"an address with a port", "203.0.113.9:1", "demo-free", "bob", "o2",
			identity.Parts{APIKey: "demo-free", Tenant: "acme", IP: "203.0.113.9:443", Username: "bob", Headers: map[string]string{"X-Org": "o2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/login", nil)
			r.RemoteAddr = tc.remote
			if tc.apiKey != "" {
				r.Header.Set("X-API-Key", tc.apiKey)
			}
			if tc.org != "" {
				r.Header.Set("X-Org", tc.org)
			}
			sent, err := res.Resolve(r)
			if err != nil {
				t.Fatal(err)
			}
			sent.Username = mustNormalize(t, tc.user)
			named, err := res.Named(context.Background(), tc.parts)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range policies {
				if err := res.Names(p, named); err != nil {
					t.Fatalf("%s: %v", p.Name, err)
				}
				want, got := res.Request(p, sent, 1), res.Request(p, named, 1)
				if got.Key != want.Key || got.Policy != want.Policy || got.Tenant != want.Tenant {
					t.Errorf("%s: named %q %+v (tenant %q), the request %q %+v (tenant %q)", p.Name, got.Key, *got.Policy, got.Tenant, want.Key, *want.Policy, want.Tenant)
				}
			}
		})
	}
}

func mustNormalize(t *testing.T, name string) string {
	t.Helper()
	res := namedResolver(t, nil)
	id, err := res.Named(context.Background(), identity.Parts{Username: name})
	if err != nil {
		t.Fatal(err)
	}
	return id.Username
}

// What an operator cannot name is refused naming the part: an unknown key,
// the wrong tenant for a key, an address or a username that does not
// parse, a part the policy keys by that is missing.
func TestNamedRefusals(t *testing.T) {
	res := namedResolver(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		parts identity.Parts
		field string
	}{
		{identity.Parts{APIKey: "guessed"}, "api_key"},
		{identity.Parts{APIKey: "demo-free", Tenant: "bigco"}, "tenant"},
		{identity.Parts{Tenant: "acme", IP: "198.51.100.7"}, "tenant"},
		{identity.Parts{IP: "198.51.100.300"}, "ip"},
		{identity.Parts{Username: string(make([]byte, 300))}, "username"},
		{identity.Parts{Headers: map[string]string{"X-Org": ""}}, "header.X-Org"},
	} {
		_, err := res.Named(ctx, tc.parts)
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a FieldError on %s", tc.parts, err, tc.field)
		}
	}
	api := &limiter.Policy{Name: "api", Key: []string{"tenant", "api_key"}}
	user := &limiter.Policy{Name: "user", Key: []string{"username"}}
	ip := &limiter.Policy{Name: "ip", Key: []string{"ip"}}
	custom := &limiter.Policy{Name: "jwt", Key: []string{"subject"}}
	for _, tc := range []struct {
		p     *limiter.Policy
		parts identity.Parts
		field string
	}{
		{api, identity.Parts{}, "api_key"},
		{api, identity.Parts{Tenant: "acme"}, "api_key"}, // a tenant alone is every key of it
		{user, identity.Parts{IP: "198.51.100.7"}, "username"},
		{ip, identity.Parts{APIKey: "demo-free"}, "ip"},
		{custom, identity.Parts{IP: "198.51.100.7"}, "policy"},
	} {
		id, err := res.Named(ctx, tc.parts)
		if err != nil {
			t.Fatal(err)
		}
		err = res.Names(tc.p, id)
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s %+v: %v, want a FieldError on %s", tc.p.Name, tc.parts, err, tc.field)
		}
	}
	// An anonymous caller's api_key is its address, as in a request.
	id, _ := res.Named(ctx, identity.Parts{IP: "198.51.100.7"})
	if err := res.Names(api, id); err != nil {
		t.Errorf("an anonymous caller by its address under [tenant, api_key]: %v", err)
	}
}

// Request applies the overrides of the Resolver's table: by the key it
// builds, and by the caller's tenant.
func TestRequestAppliesOverrides(t *testing.T) {
	ov := limiter.NewOverrides(nil)
	res := namedResolver(t, ov)
	api := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Minute, Key: []string{"api_key"}}
	ent, err := res.Named(context.Background(), identity.Parts{APIKey: "demo-ent"})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Request(api, ent, 1); r.Override != nil || r.Policy.Limit != 1000 {
		t.Fatalf("no override yet: %+v", r)
	}
	ov.Set([]limiter.Override{{Name: "x3", Action: limiter.ActionLimit, Multiplier: 3, Expires: time.Now().Add(time.Hour),
		Targets: []limiter.Target{{Policy: "api", Tenant: "bigco"}}}})
	r := res.Request(api, ent, 1)
	if r.Override == nil || r.Policy.Limit != 3000 || r.Policy.Burst != 3000 || r.Caller != ent {
		t.Errorf("a tenant's ×3 over the enterprise plan's ×10: %+v (policy %+v), want limit 3000", r, *r.Policy)
	}
}
