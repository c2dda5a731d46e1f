package identity

import "github.com/costgate/costgate/internal/peer"

// PeerTrusted reports whether the request came straight from one of
// Config.TrustedProxies: only then were its forwarded headers
// (X-Forwarded-For, Forwarded, X-Real-IP) written by a proxy the operator
// trusts, rather than by the client. A proxy of costgate's own forwards them
// only then.
func (id *Identity) PeerTrusted() bool {
	if id == nil || id.req == nil {
		return false
	}
	return peer.In(id.req.RemoteAddr, id.trusted)
}
