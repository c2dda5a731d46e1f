package gqlproxy

import (
	"net"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/costgate/costgate/limiter/identity"
)

// hopByHop are the headers of one connection, never forwarded (RFC 9110
// §7.6.1), with those the Connection header names.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// ownHeaders describe the body the proxy sends, which is its own.
var ownHeaders = []string{"Content-Length", "Content-Type", "Content-Encoding", "Accept", "Accept-Encoding", "Expect", "Host"}

// upstreamHeader is the header of the request forwarded for r:
//   - hop-by-hop headers, and those Connection names, are dropped;
//   - X-Forwarded-For gets the peer's address appended, as
//     httputil.ReverseProxy does;
//   - Forwarded, X-Forwarded-* and X-Real-IP are kept only when the peer is
//     one of identity.trusted_proxies (the identity resolver says so):
//     from anyone else they are the client's own claims;
//   - the API-key header is dropped when stripAPIKey;
//   - costgate's own request headers (Costgate-*) stay here.
func upstreamHeader(r *http.Request, apiKeyHeader string, stripAPIKey bool) http.Header {
	h := r.Header.Clone()
	for _, v := range r.Header["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
	for _, name := range ownHeaders {
		h.Del(name)
	}
	trusted := identity.FromContext(r.Context()).PeerTrusted()
	for name := range h {
		switch lower := strings.ToLower(name); {
		case strings.HasPrefix(lower, "costgate-"):
			delete(h, name)
		case !trusted && (lower == "forwarded" || lower == "x-real-ip" || strings.HasPrefix(lower, "x-forwarded-")):
			delete(h, name)
		}
	}
	if stripAPIKey && apiKeyHeader != "" {
		h.Del(apiKeyHeader)
	}
	if peer, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := h["X-Forwarded-For"]; len(prior) > 0 {
			peer = strings.Join(prior, ", ") + ", " + peer
		}
		h.Set("X-Forwarded-For", peer)
	}
	return h
}
