package identity_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/keyparts"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

// A header:NAME value that is empty or over 4 KiB is keyed by the client
// address, as a missing header is: a client cannot buy itself a new bucket
// with a value nobody would send, nor share one with every empty header.
func TestHeaderPartBadValuesKeyedByTheAddress(t *testing.T) {
	res := newResolver(t, identity.Config{})
	p := &limiter.Policy{Name: "org", Algorithm: limiter.FixedWindow, Limit: 1, Period: time.Minute, Key: []string{"header:X-Org-Id"}}
	key := func(remote string, org *string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if org != nil {
			r.Header.Set("X-Org-Id", *org)
		}
		id, err := res.Resolve(r)
		if err != nil {
			t.Fatal(err)
		}
		return res.Key(p, id)
	}
	str := func(s string) *string { return &s }
	missing := key("203.0.113.7:1", nil)
	for _, org := range []string{"", strings.Repeat("a", keyparts.MaxHeaderBytes+1), strings.Repeat("b", 64<<10)} {
		if got := key("203.0.113.7:1", &org); got != missing {
			t.Errorf("a %d-byte X-Org-Id: key %q, want the address's %q", len(org), got, missing)
		}
	}
	if key("203.0.113.8:1", str("")) == key("203.0.113.9:1", str("")) {
		t.Error("two clients with an empty header share a key")
	}
	full := strings.Repeat("c", keyparts.MaxHeaderBytes)
	if a, b := key("203.0.113.7:1", &full), key("198.51.100.1:1", &full); a != b || a == missing {
		t.Errorf("a %d-byte X-Org-Id: keys %q and %q, want one key of its own", len(full), a, b)
	}
}
