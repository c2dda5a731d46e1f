package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/costgate/costgate/internal/loggate"

	"github.com/costgate/costgate/internal/keyparts"

	"github.com/costgate/costgate/internal/peer"

	"github.com/costgate/costgate/internal/jsonerror"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/internal/username"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"golang.org/x/net/http/httpguts"
)

// Path is where the server mounts the forward-auth check; Envoy's
// path_prefix appends the original path to it.
const Path = "/v1/check"

// Headers a gateway names the original request with.
const (
	ForwardedMethod = "X-Forwarded-Method"
	ForwardedHost   = "X-Forwarded-Host"
	ForwardedURI    = "X-Forwarded-Uri" // Traefik
	OriginalURI     = "X-Original-URI"  // the nginx convention
)

// ErrorBodyHeader carries the JSON body of a refusal when the check was
// asked for ?deny_status=403: nginx's auth_request drops the body of the
// sub-request's answer, and gives the client this header's value instead.
const ErrorBodyHeader = "Costgate-Error-Body"

// MaxURIBytes bounds the original request-target a check may name.
const MaxURIBytes = 8 << 10

// Error codes of the check's own refusals (the limiter's are httplimit's).
const (
	CodeBadRequest    = "bad_request"
	CodeUntrustedPeer = "untrusted_peer"
	CodeUnauthorized  = jsonerror.CodeUnauthorized
)

// HTTPConfig configures a Handler. Limits, Identity and Gateways are
// required.
type HTTPConfig struct {
	// Limits is the REST middleware whose routes and policies the check
	// applies, charged exactly as it charges them.
	Limits *routelimit.Middleware
	// Identity is the Resolver Limits was built with.
	Identity *identity.Resolver
	// Gateways are the peers allowed to ask (the config's
	// identity.trusted_proxies). A check from any other peer is refused
	// with 403: it could name any client and spend its budget.
	Gateways []netip.Prefix
	// UsernameHeader, when set, is the header a gateway passes the login
	// username in, for policies keyed by username: normalised and limited
	// exactly as httplimit limits the username of a JSON login body (which
	// is read instead when the header is absent).
	UsernameHeader string
	// Clock returns the time for X-RateLimit-Reset (default time.Now).
	Clock func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Handler is the forward-auth check, mounted at Path and below it.
type Handler struct {
	cfg            HTTPConfig
	usernameHeader string
	refusals       *refusalLog
}

// NewHandler checks cfg and returns the Handler.
func NewHandler(cfg HTTPConfig) (*Handler, error) {
	var errs []error
	fail := func(field, reason string) {
		errs = append(errs, &limiter.FieldError{Field: field, Reason: reason})
	}
	if cfg.Limits == nil {
		fail("Limits", "required: the routes and policies to check (routelimit.New)")
	} else if p := cfg.Limits.EndingPolicy(); p != nil {
		fail("Limits", EndingPolicyReason(p))
	}
	if cfg.Identity == nil {
		fail("Identity", "required: it says who pays")
	}
	if len(cfg.Gateways) == 0 {
		fail("Gateways", "empty: no gateway could ask (list their addresses in identity.trusted_proxies)")
	}
	if cfg.UsernameHeader != "" && !httpguts.ValidHeaderFieldName(cfg.UsernameHeader) {
		fail("UsernameHeader", fmt.Sprintf("want an HTTP header name, got %q", cfg.UsernameHeader))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{cfg: cfg, usernameHeader: http.CanonicalHeaderKey(cfg.UsernameHeader), refusals: &refusalLog{logger: cfg.Logger}}, nil
}

// ServeHTTP answers one check: 200 when the original request may go on
// (with the rate-limit headers when a route matched), 429 (or 403 with
// ?deny_status=403) when a policy denies it, 503 when the store is down and
// a policy fails closed, 401 for an unknown API key and 400 for a login
// username it cannot limit by (both charged to the client address first),
// 400 for a check that does not name its original request or whose path
// does not decode, 403 for a peer that is not a gateway. A value the client
// controls is never answered with a 5xx, which Envoy's ext_authz with
// failure_mode_allow lets through.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !peer.In(r.RemoteAddr, h.cfg.Gateways) {
		h.refusals.refused("/v1/check", r.RemoteAddr)
		refuseUntrusted(w, fmt.Sprintf("/v1/check answers only the gateways listed in identity.trusted_proxies: add this gateway's address (%s) to it", peerIP(r.RemoteAddr)))
		return
	}
	orig, target, denyStatus, err := originalRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	// The one normalisation of the original path, in Match: every spelling
	// the upstream may route to a limited handler is charged as its route.
	route, err := h.cfg.Limits.Match(orig.Method, target)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "the original path: "+err.Error())
		return
	}
	if route == nil || len(route.Policies) == 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	out := w
	var buf *bufferedWriter
	if denyStatus == http.StatusForbidden {
		buf = &bufferedWriter{ResponseWriter: w}
		out = buf
	}
	h.check(out, orig, route)
	if buf != nil {
		buf.flush()
	}
}

// check limits orig by route and answers on w.
func (h *Handler) check(w http.ResponseWriter, orig *http.Request, route *routelimit.Route) {
	id, orig, err := h.cfg.Identity.Attach(orig)
	if err != nil {
		jsonerror.LookupFailed(w)
		return
	}
	// The route key part: the matched route's path, as the middleware has
	// it when it runs before a router (chi routed this request to the check).
	id.Route = h.cfg.Limits.RouteName(orig.Method, route)
	ok := false
	switch values := orig.Header.Values(h.usernameHeader); {
	case h.usernameHeader == "" || len(values) == 0 || !keyparts.Needs(route.Policies, identity.PartUsername):
		// Without the header, the body (if the gateway forwards one) is read.
		ok = h.cfg.Limits.Limit(w, orig, id, route)
	case len(values) > 1:
		ok = h.cfg.Limits.RefuseUsername(w, orig, id, route, h.cfg.UsernameHeader+" appears more than once")
	default:
		ok = h.cfg.Limits.LimitUsername(w, orig, id, route, values[0])
	}
	if !ok {
		return
	}
	if id.UnknownKey {
		jsonerror.UnknownAPIKey(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func usernameReason(err error) string {
	var ue *username.Error
	if errors.As(err, &ue) {
		return ue.Reason
	}
	return err.Error()
}

// originalRequest is the request the gateway asks about, as a request the
// middleware can limit: the original method and host, the check's own
// headers (the gateway forwards the original ones: the API key, the
// username header, X-Forwarded-For), peer and body. target is the original
// path as sent (%-escaped), denyStatus the status a denial is answered with.
func originalRequest(r *http.Request) (orig *http.Request, target string, denyStatus int, err error) {
	fwdURI, err := oneOf(r.Header, ForwardedURI, OriginalURI)
	if err != nil {
		return nil, "", 0, err
	}
	method := r.Method
	denyStatus = http.StatusTooManyRequests
	if fwdURI != "" {
		// nginx and Traefik: the check's own query is the check's.
		if denyStatus, err = parseDenyStatus(r.URL.Query()); err != nil {
			return nil, "", 0, err
		}
		if method, err = single(r.Header, ForwardedMethod); err != nil {
			return nil, "", 0, err
		}
		if method == "" {
			return nil, "", 0, fmt.Errorf("%s names the original path but %s is missing: the gateway must send both", forwardedURIName(r.Header), ForwardedMethod)
		}
		if target, err = escapedPath(fwdURI); err != nil {
			return nil, "", 0, err
		}
	} else {
		// Envoy's path_prefix: the original method, the original path after
		// /v1/check, as sent (URL.Path is decoded, and URL.EscapedPath may
		// be re-escaped); the query is the original request's, left alone.
		uri := r.RequestURI
		if uri == "" {
			uri = r.URL.RequestURI() // a request made in process
		}
		sent, err := escapedPath(uri)
		if err != nil {
			return nil, "", 0, err
		}
		rest, ok := strings.CutPrefix(sent, Path)
		if !ok || rest == "" {
			return nil, "", 0, fmt.Errorf("the check names no original request: send %s and %s (or %s), or append the original path to %s",
				ForwardedMethod, ForwardedURI, OriginalURI, Path)
		}
		if !strings.HasPrefix(rest, "/") {
			return nil, "", 0, fmt.Errorf("the original path after %s must start with /", Path)
		}
		target = rest
	}
	if !isMethod(method) {
		return nil, "", 0, fmt.Errorf("%q is not an HTTP method", truncate(method))
	}
	host := r.Host
	if h, err := single(r.Header, ForwardedHost); err != nil {
		return nil, "", 0, err
	} else if h != "" {
		host = h
	}
	orig = r.WithContext(r.Context())
	orig.Method = method
	orig.URL = &url.URL{Opaque: target} // as sent: Match normalises it
	orig.Host = host
	orig.RequestURI = ""
	return orig, target, denyStatus, nil
}

func forwardedURIName(h http.Header) string {
	if h.Get(ForwardedURI) != "" {
		return ForwardedURI
	}
	return OriginalURI
}

// oneOf returns the value of whichever of two headers is set. Both set to
// different values is refused: a gateway sets one of them and passes the
// other on from the client (Traefik forwards a client's X-Original-URI), so
// a mismatch is a client naming another path to dodge its route's limit.
func oneOf(h http.Header, a, b string) (string, error) {
	va, err := single(h, a)
	if err != nil {
		return "", err
	}
	vb, err := single(h, b)
	if err != nil {
		return "", err
	}
	if va != "" && vb != "" && va != vb {
		return "", fmt.Errorf("%s and %s name different paths", a, b)
	}
	if va != "" {
		return va, nil
	}
	return vb, nil
}

// single is the one value of a header, "" when absent; several are refused.
func single(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", fmt.Errorf("%s appears more than once", name)
}

func parseDenyStatus(q url.Values) (int, error) {
	vs, ok := q["deny_status"]
	if !ok {
		return http.StatusTooManyRequests, nil
	}
	if len(vs) == 1 {
		switch vs[0] {
		case "429":
			return http.StatusTooManyRequests, nil
		case "403":
			return http.StatusForbidden, nil
		}
	}
	return 0, fmt.Errorf("deny_status must be 429 (the default) or 403, got %q", truncate(strings.Join(vs, ",")))
}

// escapedPath is the path of a request-target as a gateway passes it
// ($request_uri: "/a/b?q=1"; absolute form "http://host/a/b"), still
// %-escaped: Match decodes and normalises it.
func escapedPath(uri string) (string, error) {
	if len(uri) > MaxURIBytes {
		return "", fmt.Errorf("the original URI is longer than %d bytes", MaxURIBytes)
	}
	raw := uri
	if !strings.HasPrefix(raw, "/") {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", fmt.Errorf("the original URI %q is neither a path nor an http(s) URL", truncate(uri))
		}
		raw = u.EscapedPath()
		if raw == "" {
			raw = "/"
		}
	}
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	return raw, nil
}

// isMethod reports an RFC 9110 token (what a header name is) of at most 32 bytes.
func isMethod(s string) bool { return len(s) <= 32 && httpguts.ValidHeaderFieldName(s) }

func truncate(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	jsonerror.Write(w, status, jsonerror.Body{Error: code, Message: message})
}

// bufferedWriter holds an answer back so that a denial can leave as 403,
// its body copied into ErrorBodyHeader for nginx.
type bufferedWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *bufferedWriter) flush() {
	status := b.status
	if status == 0 {
		status = http.StatusOK
	}
	if status == http.StatusTooManyRequests {
		status = http.StatusForbidden
	}
	if status >= 300 && b.body.Len() > 0 {
		b.Header().Set(ErrorBodyHeader, strings.TrimSpace(b.body.String()))
	}
	b.Header().Set("Content-Length", strconv.Itoa(b.body.Len()))
	b.ResponseWriter.WriteHeader(status)
	b.ResponseWriter.Write(b.body.Bytes())
}

// RefuseAll answers every check with 403, logging the refusals: the
// server mounts it at Path while it answers no gateway (identity.trusted_proxies
// lists none, or gateway.check is false). why says which, with the fix.
func RefuseAll(logger *slog.Logger, why string) http.Handler {
	refusals := &refusalLog{logger: logger}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refusals.refused("/v1/check", r.RemoteAddr)
		refuseUntrusted(w, fmt.Sprintf(why, peerIP(r.RemoteAddr)))
	})
}

// refuseUntrusted answers a peer that is no gateway: 403, the body copied
// into ErrorBodyHeader too, so that nginx, which drops the body of a
// sub-request, can show the client why rather than an empty answer.
func refuseUntrusted(w http.ResponseWriter, message string) {
	body, _ := json.Marshal(jsonerror.Body{Error: CodeUntrustedPeer, Message: message})
	w.Header().Set(ErrorBodyHeader, string(body))
	writeError(w, http.StatusForbidden, CodeUntrustedPeer, message)
}

// peerIP is the address of a peer without its port.
func peerIP(remote string) string {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().String()
	}
	return remote
}

// refusalLog logs refused peers at most once a second, with the count in
// between: a gateway missing from trusted_proxies shows in the log, and a
// flood of forged checks does not flood it.
type refusalLog struct {
	logger *slog.Logger
	gate   loggate.Gate
}

func (l *refusalLog) refused(door, peer string) {
	if n, ok := l.gate.Pass(time.Now()); ok {
		l.logger.Warn("gateway check refused: the peer is not in identity.trusted_proxies (add its address there if it is your gateway)", "door", door, "peer", peer, "refused", n+1)
	}
}

// EndingPolicyReason says why the gateway doors refuse p, a policy that
// acts when its request's response has ended (limiter.Policy.EndsWithResponse):
// a check is answered before the request is served, and nothing tells the
// door when, or how, its response ended.
func EndingPolicyReason(p *limiter.Policy) string {
	what := "refund_status refunds by the response's status"
	if p.Algorithm == limiter.Concurrency {
		what = "a concurrency hold is released when the response has ended"
	}
	return "policy " + strconv.Quote(p.Name) + ": " + what + ", and a gateway's check (/v1/check, Envoy's rate-limit service) never sees the response"
}
