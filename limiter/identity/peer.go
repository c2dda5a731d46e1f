package identity

import "net/netip"

// PeerIn reports whether the TCP peer remoteAddr (as http.Request.RemoteAddr
// and gRPC's peer carry it: host:port) is in prefixes, zone dropped and
// IPv4-mapped addresses unmapped. It is the one test of "is this peer a
// trusted proxy" every door asks: the client-IP walk, /v1/check and the
// rate-limit service, the proxy's forwarded headers, readiness details.
func PeerIn(remoteAddr string, prefixes []netip.Prefix) bool {
	a, ok := parseHop(remoteAddr)
	return ok && isTrusted(a, prefixes)
}

// AddrIn is PeerIn for an address already parsed (a listener's accept).
func AddrIn(a netip.Addr, prefixes []netip.Prefix) bool {
	return isTrusted(a.WithZone("").Unmap(), prefixes)
}

// PeerTrusted reports whether the request came straight from one of
// Config.TrustedProxies: only then were its forwarded headers
// (X-Forwarded-For, Forwarded, X-Real-IP) written by a proxy the operator
// trusts, rather than by the client. A proxy of costgate's own forwards them
// only then.
func (id *Identity) PeerTrusted() bool {
	if id == nil || id.req == nil {
		return false
	}
	return PeerIn(id.req.RemoteAddr, id.trusted)
}
