package server

import (
	"net/http"
	"net/netip"

	"github.com/costgate/costgate/internal/jsonerror"
	"github.com/costgate/costgate/limiter/identity"
)

// Who may read what the server says about itself. /metrics names GraphQL
// operations and their costs, a tenant's business; /readyz's store details
// name Redis's addresses and errors. Both go by the client as the
// trusted-proxy walk resolves it, never by the TCP peer alone: behind a
// trusted nginx on the same host every peer is loopback, and the client
// it forwards is not.

// loopbackClient reports whether r's client, resolved through trusted, is
// on loopback. An IPv6 client is known by its /64: ::/64 holds ::1 and no
// address a remote peer can have.
func loopbackClient(r *http.Request, trusted []netip.Prefix) bool {
	c := identity.ClientIP(r, trusted)
	if !c.Addr.IsValid() {
		return false
	}
	if c.Addr.Addr().Is4() {
		return c.Addr.Addr().IsLoopback()
	}
	return c.Addr.Contains(netip.IPv6Loopback())
}

// trustedClient reports whether r's client, resolved through trusted, is
// on loopback or is itself a trusted proxy (a load balancer's own health
// check), its whole group inside one of trusted.
func trustedClient(r *http.Request, trusted []netip.Prefix) bool {
	if loopbackClient(r, trusted) {
		return true
	}
	c := identity.ClientIP(r, trusted)
	if !c.Addr.IsValid() {
		return false
	}
	for _, p := range trusted {
		if p.Bits() <= c.Addr.Bits() && p.Contains(c.Addr.Addr()) {
			return true
		}
	}
	return false
}

// loopbackOnly serves h to loopback clients (resolved through trusted), and
// answers anyone else as a path that does not exist.
func loopbackOnly(h http.Handler, trusted []netip.Prefix) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackClient(r, trusted) {
			notFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// notFound is the answer to a path the server does not serve.
func notFound(w http.ResponseWriter, _ *http.Request) {
	jsonerror.Write(w, http.StatusNotFound, jsonerror.Body{Error: "not_found", Message: "no such route"})
}

// MetricsHandler serves /metrics to whoever reaches it: for the listener
// of metrics.listen, whose address the operator chose.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("/", notFound)
	return mux
}
