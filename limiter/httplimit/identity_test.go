package httplimit_test

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/costgate/costgate/limiter/httplimit"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"untrusted peer, no header", "203.0.113.7:5555", nil, "203.0.113.7/32"},
		{"untrusted peer's XFF is ignored", "203.0.113.7:5555", []string{"198.51.100.1"}, "203.0.113.7/32"},
		{"trusted proxy: the hop it saw", "10.0.0.2:443", []string{"198.51.100.1"}, "198.51.100.1/32"},
		{"client-written hops left of the first untrusted are ignored", "10.0.0.2:443", []string{"1.1.1.1, 2.2.2.2, 198.51.100.1"}, "198.51.100.1/32"},
		{"chain of trusted proxies", "10.0.0.2:443", []string{"198.51.100.1, 10.1.1.1, 10.2.2.2"}, "198.51.100.1/32"},
		{"several header lines are one list", "10.0.0.2:443", []string{"6.6.6.6, 198.51.100.1", "10.3.3.3"}, "198.51.100.1/32"},
		{"all hops trusted: the left-most", "10.0.0.2:443", []string{"10.9.9.9, 10.8.8.8"}, "10.9.9.9/32"},
		{"garbage ends the walk at the last trusted hop", "10.0.0.2:443", []string{"198.51.100.1, not-an-ip, 10.4.4.4"}, "10.4.4.4/32"},
		{"garbage right next to the peer", "10.0.0.2:443", []string{"1.2.3.4, <script>"}, "10.0.0.2/32"},
		{"trusted peer without header", "10.0.0.2:443", nil, "10.0.0.2/32"},
		{"IPv6 grouped by /64", "[2001:db8:1:2:3:4:5:6]:443", nil, "2001:db8:1:2::/64"},
		{"IPv6 hop through a trusted v6 proxy", "[fd00::1]:443", []string{"2001:db8:aa:bb:cc::1"}, "2001:db8:aa:bb::/64"},
		{"IPv4-mapped IPv6 is IPv4", "[::ffff:198.51.100.9]:80", nil, "198.51.100.9/32"},
		{"zone is dropped", "[fe80::1%eth0]:80", nil, "fe80::/64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := httplimit.ClientIP(r, trusted).String(); got != tc.want {
				t.Errorf("ClientIP = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestNormalizeUsername(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"alice", "alice", true},
		{"  Alice\t", "alice", true},
		{"ＡＬＩＣＥ", "alice", true}, // fullwidth: NFKC folds it
		{"ﬁnn", "finn", true},    // ligature
		{"", "", false},
		{"   ", "", false},
		{"\xff\xfe", "", false},
	}
	for _, tc := range tests {
		got, ok := httplimit.NormalizeUsername(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("NormalizeUsername(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
