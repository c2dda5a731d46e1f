// Package peer answers "is this peer a trusted proxy" for every door of
// costgate, from one parse of the address.
package peer

import (
	"net/netip"
	"strings"
)

// In reports whether the TCP peer remoteAddr (as http.Request.RemoteAddr
// and gRPC's peer carry it: host:port) is in prefixes, zone dropped and
// IPv4-mapped addresses unmapped. It is the one test of "is this peer a
// trusted proxy" every door asks: the client-IP walk, /v1/check and the
// rate-limit service, the proxy's forwarded headers, readiness details.
func In(remoteAddr string, prefixes []netip.Prefix) bool {
	a, ok := ParseHop(remoteAddr)
	return ok && Contains(a, prefixes)
}

// AddrIn is In for an address already parsed (a listener's accept).
func AddrIn(a netip.Addr, prefixes []netip.Prefix) bool {
	return Contains(a.WithZone("").Unmap(), prefixes)
}

// ParseHop parses an address as hops and RemoteAddr carry it: bare,
// host:port, [v6], [v6]:port, with or without a zone.
func ParseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return netip.Addr{}, false
	}
	// Try the form the text has first: a failed parse allocates its error.
	colons := strings.Count(s, ":")
	if s[0] == '[' || colons == 1 {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			return ap.Addr().WithZone("").Unmap(), true
		}
		switch {
		case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
			s = s[1 : len(s)-1]
		case colons == 1:
			s = s[:strings.IndexByte(s, ':')] // an IPv4 whose port did not parse (out of range)
		}
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// Contains reports whether a is in one of trusted.
func Contains(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
