package admin

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

type topClock struct{ t time.Time }

func (c *topClock) now() time.Time { return c.t }

func topCaller(t *testing.T, res *identity.Resolver, apiKey, ip string) *identity.Identity {
	t.Helper()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = ip + ":1234"
	if apiKey != "" {
		r.Header.Set("X-API-Key", apiKey)
	}
	id, err := res.Resolve(r)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// top names who a policy denies most over the last minute, in the parts
// its key is made of, and forgets what is older; a flood of identities
// denied once each neither grows it past TopSize nor pushes out the one
// denied most.
func TestTop(t *testing.T) {
	clk := &topClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	top := NewTop(clk.now)
	res, err := identity.New(identity.Config{HashKey: []byte("top-test-hash-key-0123"), APIKeys: identity.Table{"k-hot": {Tenant: "acme", Plan: "free"}}})
	if err != nil {
		t.Fatal(err)
	}
	api := &limiter.Policy{Name: "api", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Hour, Key: []string{"tenant", "api_key"}}
	deny := func(id *identity.Identity) { top.Denied(res.Request(api, id, 1), limiter.Decision{}) }
	hot := topCaller(t, res, "k-hot", "198.51.100.7")
	for range 50 {
		deny(hot)
	}
	for i := range 5000 {
		deny(topCaller(t, res, "", fmt.Sprintf("203.0.%d.%d", i/256, i%256)))
		if i%100 == 0 {
			deny(hot)
		}
	}
	got := top.Top("api")
	if len(got) > TopSize {
		t.Errorf("%d entries, want at most %d", len(got), TopSize)
	}
	if len(got) == 0 || got[0].APIKey != "k-hot" || got[0].Tenant != "acme" || got[0].IP != "" || got[0].Denied != 100 {
		t.Fatalf("first entry %+v, want k-hot of acme denied 100 times (no address: the key stands alone)", got[0])
	}
	if got[1].APIKey != "" || got[1].IP == "" || got[1].Tenant != "anonymous" {
		t.Errorf("an anonymous caller's entry %+v: want its address for its key", got[1])
	}
	clk.t = clk.t.Add(30 * time.Second)
	deny(hot)
	if got := top.Top("api"); got[0].Denied != 101 {
		t.Errorf("30 s later: %d, want 101", got[0].Denied)
	}
	clk.t = clk.t.Add(45 * time.Second)
	if got := top.Top("api"); len(got) != 1 || got[0].Denied != 1 {
		t.Errorf("75 s after the flood: %+v, want only the denial of 45 s ago", got)
	}
	if got := top.Top("nope"); got == nil || len(got) != 0 {
		t.Errorf("a policy that denied nothing: %v, want an empty list", got)
	}
}
