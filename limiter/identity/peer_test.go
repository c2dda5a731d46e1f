package identity_test

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/costgate/costgate/limiter/identity"
)

// PeerTrusted believes the TCP peer alone, never a forwarded header.
func TestPeerTrusted(t *testing.T) {
	res, err := identity.New(identity.Config{HashKey: []byte("peer-test-hash-key"), TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		remote, xff string
		want        bool
	}{
		{"10.1.2.3:443", "", true},
		{"[::ffff:10.1.2.3]:443", "", true},
		{"203.0.113.7:443", "10.1.2.3", false},
		{"garbage", "", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		id, _, err := res.Attach(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := id.PeerTrusted(); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q: PeerTrusted() = %v, want %v", tc.remote, tc.xff, got, tc.want)
		}
	}
	if (*identity.Identity)(nil).PeerTrusted() {
		t.Error("no identity: trusted")
	}
}
