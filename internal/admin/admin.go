// Package admin is costgate's admin API, console and command line, for the
// people on call: see who is limited, reset a key, and override limits at
// runtime (the docs' operators page). The server serves [New]'s handler on
// a listener of its own; [Command] is `costgate admin`.
//
//	h, err := admin.New(admin.Config{View: currentView, Tokens: map[string]string{"oncall": token}})
//	go http.Serve(adminListener, h)
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/costgate/costgate/internal/jsonerror"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redisstore"
)

// View is what the admin calls act on: the config and the store in effect
// when the call comes (a reload may change them between two calls).
type View struct {
	// Policies are the config's policies by name.
	Policies map[string]*limiter.Policy
	// Identity names identities as requests are named, overrides applied.
	Identity  *identity.Resolver
	Limiter   *limiter.Limiter
	Overrides *limiter.Overrides
	// Store keeps the overrides for every gateway (the Redis store); nil
	// keeps them in Overrides alone, in this process.
	Store OverrideStore
	// Redis, when the store is Redis, tells this gateway's leases of
	// local-first policies and their shared state.
	Redis *redisstore.Store
}

// OverrideStore keeps overrides where every gateway reads them
// (redisstore.Store is one).
type OverrideStore interface {
	PutOverride(ctx context.Context, o limiter.Override) error
	DeleteOverride(ctx context.Context, name string) (bool, error)
	Overrides(ctx context.Context) ([]limiter.Override, error)
}

var _ OverrideStore = (*redisstore.Store)(nil)

// Config configures a Handler. View is required; Tokens may be set later
// (SetTokens), but no call is served without one.
type Config struct {
	// View returns what the calls act on now.
	View func() (View, error)
	// Tokens maps a token's name to the token.
	Tokens map[string]string
	// Top counts denials for the top call (nil: top lists none).
	Top *Top
	// Logger takes the audit log: every call, with the token's name
	// (default slog.Default()).
	Logger *slog.Logger
	// Registerer, when set, registers costgate_admin_actions_total and
	// costgate_overrides_active.
	Registerer prometheus.Registerer
	// Clock is the time overrides are made and expire by (default time.Now).
	Clock func() time.Time
}

// Actions, as costgate_admin_actions_total{action} and the audit log name
// them: the verbs of `costgate admin`.
const (
	ActionState      = "state"
	ActionReset      = "reset"
	ActionOverride   = "override"
	ActionOverrides  = "overrides"
	ActionUnoverride = "unoverride"
	ActionTop        = "top"
)

// Results of a call, as costgate_admin_actions_total{result} names them.
const (
	ResultOK           = "ok"
	ResultBadRequest   = "bad_request"
	ResultUnauthorized = "unauthorized"
	ResultThrottled    = "throttled"
	ResultNotFound     = "not_found"
	ResultStoreError   = "store_error"
)

// Error codes of the admin API's answers.
const (
	CodeBadRequest      = "bad_request"
	CodeUnauthorized    = jsonerror.CodeUnauthorized
	CodeTooManyAttempts = "too_many_attempts"
	CodeNotFound        = "not_found"
	CodeStoreError      = "store_error"
)

// Failed token attempts are slowed per peer: a peer gets failedBurst
// attempts, then one per failedEvery.
const (
	failedBurst = 10
	failedEvery = 6 * time.Second
)

// Handler serves the admin API and the console.
type Handler struct {
	cfg     Config
	tokens  atomic.Pointer[[]namedToken]
	failed  *limiter.Limiter // failed token attempts, per peer
	failPol *limiter.Policy
	actions *prometheus.CounterVec
	mux     *http.ServeMux
	// memoryMu serialises the changes of overrides kept in process.
	memoryMu sync.Mutex
}

type namedToken struct {
	name string
	sum  [sha256.Size]byte
}

// New returns a Handler. It refuses a Config without View.
func New(cfg Config) (*Handler, error) {
	if cfg.View == nil {
		return nil, &limiter.FieldError{Field: "View", Reason: "required: what the admin calls act on"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	h := &Handler{cfg: cfg,
		failPol: &limiter.Policy{Name: "admin_token_failures", Algorithm: limiter.TokenBucket,
			Limit: 1, Period: failedEvery, Burst: failedBurst},
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "costgate_admin_actions_total",
			Help: "Calls of the admin API by action (state, reset, override, overrides, unoverride, top) and result (ok, bad_request, unauthorized, throttled, not_found, store_error).",
		}, []string{"action", "result"}),
	}
	var err error
	if h.failed, err = limiter.New(memstore.New(&memstore.Options{MaxKeys: 1 << 16})); err != nil {
		return nil, err
	}
	if err := h.SetTokens(cfg.Tokens); err != nil && cfg.Tokens != nil {
		return nil, err
	}
	if cfg.Registerer != nil {
		active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "costgate_overrides_active",
			Help: "Operator overrides in effect on this gateway (not expired).",
		}, func() float64 {
			v, err := cfg.View()
			if err != nil {
				return 0
			}
			return float64(v.Overrides.Len())
		})
		for _, c := range []prometheus.Collector{h.actions, active} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("admin: metrics: %w", err)
			}
		}
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/admin/state", h.state)
	api.HandleFunc("POST /v1/admin/reset", h.reset)
	api.HandleFunc("GET /v1/admin/overrides", h.listOverrides)
	api.HandleFunc("PUT /v1/admin/overrides/{name}", h.putOverride)
	api.HandleFunc("DELETE /v1/admin/overrides/{name}", h.deleteOverride)
	api.HandleFunc("GET /v1/admin/top", h.top)
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		call(r).result(ResultNotFound)
		writeError(w, http.StatusNotFound, CodeNotFound, "", "no such admin call: "+r.Method+" "+r.URL.Path)
	})
	h.mux = http.NewServeMux()
	h.mux.Handle("/v1/admin/", h.authorized(api))
	h.mux.Handle("GET /{$}", consoleHandler())
	h.mux.Handle("GET /assets/", consoleHandler())
	h.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, "", "no such route")
	})
	return h, nil
}

// SetTokens replaces the tokens (a reload): name → token. It refuses an
// empty set, and a token shorter than 16 bytes.
func (h *Handler) SetTokens(tokens map[string]string) error {
	if len(tokens) == 0 {
		return &limiter.FieldError{Field: "Tokens", Reason: "required: at least one named token"}
	}
	set := make([]namedToken, 0, len(tokens))
	for name, tok := range tokens {
		if len(tok) < 16 {
			return &limiter.FieldError{Field: "Tokens", Reason: fmt.Sprintf("token %q is shorter than 16 bytes", name)}
		}
		set = append(set, namedToken{name: name, sum: sha256.Sum256([]byte(tok))})
	}
	sort.Slice(set, func(i, j int) bool { return set[i].name < set[j].name })
	h.tokens.Store(&set)
	return nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// callInfo is one admin call, for the audit log and the metric: filled in
// as the call is understood, written once when it is answered.
type callInfo struct {
	action, token, target, outcome string
}

type callKey struct{}

func call(r *http.Request) *callInfo {
	c, _ := r.Context().Value(callKey{}).(*callInfo)
	if c == nil {
		c = &callInfo{}
	}
	return c
}

func (c *callInfo) result(res string) { c.outcome = res }

// actionOf names the action of a call from its method and path, before
// it is routed (a refused token is counted against the action it tried).
func actionOf(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, "/v1/admin/")
	switch {
	case p == "state":
		return ActionState
	case p == "reset":
		return ActionReset
	case p == "top":
		return ActionTop
	case p == "overrides":
		return ActionOverrides
	case strings.HasPrefix(p, "overrides/") && r.Method == http.MethodDelete:
		return ActionUnoverride
	case strings.HasPrefix(p, "overrides/"):
		return ActionOverride
	}
	return "unknown"
}

// authorized serves next to callers with a valid token, audits every
// call, and slows down peers whose tokens fail.
func (h *Handler) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &callInfo{action: actionOf(r)}
		peer := peerOf(r.RemoteAddr)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if c.outcome == "" {
				c.outcome = ResultOK
			}
			h.actions.WithLabelValues(c.action, c.outcome).Inc()
			attrs := []any{"action", c.action, "result", c.outcome, "status", sw.status, "token", c.token, "peer", peer}
			if c.target != "" {
				attrs = append(attrs, "target", c.target)
			}
			h.cfg.Logger.Info("admin call", attrs...)
		}()
		ctx := r.Context()
		if d, err := h.failed.Peek(ctx, h.failPol, peer); err == nil && d.Remaining < 1 {
			c.result(ResultThrottled)
			sw.Header().Set("Retry-After", fmt.Sprint(int(failedEvery/time.Second)))
			writeError(sw, http.StatusTooManyRequests, CodeTooManyAttempts, "",
				"too many failed token attempts from this address; retry later")
			return
		}
		name, ok := h.match(r.Header.Get("Authorization"))
		if !ok {
			h.failed.Allow(ctx, h.failPol, peer, 1)
			c.result(ResultUnauthorized)
			sw.Header().Set("WWW-Authenticate", `Bearer realm="costgate admin"`)
			writeError(sw, http.StatusUnauthorized, CodeUnauthorized, "", "a valid admin token is required: Authorization: Bearer TOKEN")
			return
		}
		c.token = name
		next.ServeHTTP(sw, r.WithContext(context.WithValue(ctx, callKey{}, c)))
	})
}

// match returns the name of the token auth carries ("Bearer TOKEN"). Every
// token is compared, in constant time, whatever matches: the answer's time
// tells nothing of the tokens.
func (h *Handler) match(auth string) (string, bool) {
	scheme, tok, ok := strings.Cut(auth, " ")
	tokens := h.tokens.Load()
	if !ok || !strings.EqualFold(scheme, "Bearer") || tokens == nil {
		return "", false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	found := ""
	for _, t := range *tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			found = t.name
		}
	}
	return found, found != ""
}

// peerOf is the TCP peer's address, IPv6 grouped by /64: the admin
// listener believes no forwarded header.
func peerOf(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// apiError is the body of a refused call.
type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	// Field names what the request got wrong (a query parameter or a body
	// member), when one thing did.
	Field string `json:"field,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, field, msg string) {
	jsonerror.WriteJSON(w, status, apiError{Error: code, Message: msg, Field: field})
}

// badRequest answers 400 for err, naming its field when it is a
// *limiter.FieldError.
func badRequest(w http.ResponseWriter, r *http.Request, err error) {
	call(r).result(ResultBadRequest)
	var fe *limiter.FieldError
	if errors.As(err, &fe) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, fe.Field, fe.Field+": "+fe.Reason)
		return
	}
	writeError(w, http.StatusBadRequest, CodeBadRequest, "", err.Error())
}

// view is what the call acts on; false when there is nothing to act on
// (answered 503).
func (h *Handler) view(w http.ResponseWriter, r *http.Request) (View, bool) {
	v, err := h.cfg.View()
	if err != nil {
		storeError(w, r, err)
		return View{}, false
	}
	return v, true
}

// storeError answers 503: the store could not do what the call asked.
func storeError(w http.ResponseWriter, r *http.Request, err error) {
	call(r).result(ResultStoreError)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, CodeStoreError, "", err.Error())
}
