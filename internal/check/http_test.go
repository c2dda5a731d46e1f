package check_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/check"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/internal/username"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/redistest"
)

type checkReq struct {
	method string // default GET
	target string // default /v1/check
	remote string // default the gateway, 127.0.0.1:40000
	header map[string]string
	multi  map[string][]string
	body   string
}

func serve(h http.Handler, cr checkReq) *httptest.ResponseRecorder {
	if cr.method == "" {
		cr.method = "GET"
	}
	if cr.target == "" {
		cr.target = check.Path
	}
	var body io.Reader
	if cr.body != "" {
		body = strings.NewReader(cr.body)
	}
	r := httptest.NewRequest(cr.method, cr.target, body)
	r.RemoteAddr = "127.0.0.1:40000"
	if cr.remote != "" {
		r.RemoteAddr = cr.remote
	}
	for k, v := range cr.header {
		r.Header.Set(k, v)
	}
	for k, vs := range cr.multi {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// nginxCheck is the sub-request of docs/gateways.md's nginx config (without its
// deny_status=403: the tests compare with the middleware's 429).
func nginxCheck(method, uri, client string, extra map[string]string) checkReq {
	h := map[string]string{
		"X-Forwarded-Method": method, "X-Forwarded-Uri": uri, "X-Original-URI": uri,
		"X-Forwarded-Host": "shop.example", "X-Forwarded-For": client,
	}
	for k, v := range extra {
		h[k] = v
	}
	return checkReq{header: h}
}

type errorJSON struct {
	Error         string `json:"error"`
	Message       string `json:"message"`
	Policy        string `json:"policy"`
	RetryAfterSec int64  `json:"retry_after_sec"`
}

func decodeError(t *testing.T, w *httptest.ResponseRecorder) errorJSON {
	t.Helper()
	var e errorJSON
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" || e.Message == "" {
		t.Fatalf("status %d: body %q is not an error body: %v", w.Code, w.Body, err)
	}
	return e
}

// How a check names the original request, and what it answers when it
// does not; every refusal charges nothing.
func TestCheckNamesTheOriginalRequest(t *testing.T) {
	long := "/api/" + strings.Repeat("a", check.MaxURIBytes)
	for _, tc := range []struct {
		name   string
		req    checkReq
		status int
		policy string // RateLimit-Policy's first item name, "" for none
		code   string // the error code of a refusal
	}{
		{name: "nginx X-Original-URI", req: checkReq{target: "/v1/check?deny_status=403",
			header: map[string]string{"X-Forwarded-Method": "GET", "X-Original-URI": "/api/products?first=2"}}, status: 200, policy: "api"},
		{name: "Traefik X-Forwarded-Uri", req: checkReq{
			header: map[string]string{"X-Forwarded-Method": "GET", "X-Forwarded-Uri": "/api/products/7", "X-Forwarded-Host": "shop.example"}}, status: 200, policy: "api"},
		{name: "both, equal", req: nginxCheck("GET", "/api/products", "203.0.113.7", nil), status: 200, policy: "api"},
		{name: "Envoy path_prefix", req: checkReq{target: "/v1/check/api/products?first=2"}, status: 200, policy: "api"},
		{name: "Envoy path_prefix, its own method", req: checkReq{method: "POST", target: "/v1/check/login",
			header: map[string]string{"X-Login-User": "alice"}}, status: 200, policy: "login_ip"},
		{name: "Envoy path_prefix, the query is the original's", req: checkReq{target: "/v1/check/api/products?deny_status=7"}, status: 200, policy: "api"},
		{name: "dot segments resolved", req: nginxCheck("POST", "/x/../login", "203.0.113.7", map[string]string{"X-Login-User": "alice"}), status: 200, policy: "login_ip"},
		// Express and chi leave /api/.. under /api/: charged there.
		{name: "dot segments, read literally", req: nginxCheck("GET", "/api/../healthz", "203.0.113.7", nil), status: 200, policy: "api"},
		{name: "read as two limited routes", req: nginxCheck("POST", "/api/../login", "203.0.113.7", nil), status: 400, code: "bad_request"},
		{name: "read as two limited routes, ;", req: nginxCheck("POST", "/api/..;/login", "203.0.113.7", nil), status: 400, code: "bad_request"},
		{name: "percent-decoded", req: nginxCheck("GET", "/%61pi/products", "203.0.113.7", nil), status: 200, policy: "api"},
		{name: "repeated slashes", req: nginxCheck("GET", "//api//products", "203.0.113.7", nil), status: 200, policy: "api"},
		{name: "absolute form", req: nginxCheck("GET", "http://shop.example/api/products?x=1", "203.0.113.7", nil), status: 200, policy: "api"},
		{name: "no route: not limited", req: nginxCheck("GET", "/healthz", "203.0.113.7", nil), status: 200},
		{name: "no route, Envoy", req: checkReq{target: "/v1/check/static/app.js"}, status: 200},
		{name: "method outside the route", req: nginxCheck("GET", "/login", "203.0.113.7", nil), status: 200},

		{name: "no original path", req: checkReq{}, status: 400, code: "bad_request"},
		{name: "no original path, POST", req: checkReq{method: "POST", body: "{}"}, status: 400, code: "bad_request"},
		{name: "path without method", req: checkReq{header: map[string]string{"X-Forwarded-Uri": "/api/products"}}, status: 400, code: "bad_request"},
		{name: "URIs disagree", req: checkReq{header: map[string]string{"X-Forwarded-Method": "POST", "X-Forwarded-Uri": "/healthz", "X-Original-URI": "/login"}}, status: 400, code: "bad_request"},
		{name: "method twice", req: checkReq{header: map[string]string{"X-Forwarded-Uri": "/api/products"},
			multi: map[string][]string{"X-Forwarded-Method": {"GET", "POST"}}}, status: 400, code: "bad_request"},
		{name: "not a method", req: nginxCheck("GE T", "/api/products", "203.0.113.7", nil), status: 400, code: "bad_request"},
		{name: "not a path", req: nginxCheck("GET", "api/products", "203.0.113.7", nil), status: 400, code: "bad_request"},
		{name: "bad escape", req: nginxCheck("GET", "/api/%zz", "203.0.113.7", nil), status: 400, code: "bad_request"},
		{name: "NUL in the path", req: nginxCheck("GET", "/api/%00", "203.0.113.7", nil), status: 400, code: "bad_request"},
		{name: "URI too long", req: nginxCheck("GET", long, "203.0.113.7", nil), status: 400, code: "bad_request"},
		{name: "deny_status 500", req: checkReq{target: "/v1/check?deny_status=500",
			header: map[string]string{"X-Forwarded-Method": "GET", "X-Forwarded-Uri": "/api/products"}}, status: 400, code: "bad_request"},
		{name: "deny_status twice", req: checkReq{target: "/v1/check?deny_status=403&deny_status=429",
			header: map[string]string{"X-Forwarded-Method": "GET", "X-Forwarded-Uri": "/api/products"}}, status: 400, code: "bad_request"},
		{name: "path after the prefix", req: checkReq{target: "/v1/checkout"}, status: 400, code: "bad_request"},

		{name: "untrusted peer, forged forwarded headers", req: checkReq{remote: "192.0.2.10:5000",
			header: map[string]string{"X-Forwarded-Method": "POST", "X-Forwarded-Uri": "/login", "X-Forwarded-For": "203.0.113.7", "X-Login-User": "victim"}},
			status: 403, code: "untrusted_peer"},
		{name: "untrusted peer, Envoy style", req: checkReq{remote: "[2001:db8::1]:5000", target: "/v1/check/api/products"}, status: 403, code: "untrusted_peer"},
		{name: "untrusted peer next to the gateway", req: checkReq{remote: "127.0.0.2:5000", target: "/v1/check/api/products"}, status: 403, code: "untrusted_peer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rg := newRig(t, rigOpts{})
			w := serve(rg.handler(t, "X-Login-User"), tc.req)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			policy := w.Header().Get("RateLimit-Policy")
			if tc.policy == "" && policy != "" || tc.policy != "" && !strings.HasPrefix(policy, `"`+tc.policy+`"`) {
				t.Errorf("RateLimit-Policy %q, want policy %q first", policy, tc.policy)
			}
			if tc.code != "" {
				if e := decodeError(t, w); e.Error != tc.code {
					t.Errorf("error %q, want %q (%s)", e.Error, tc.code, e.Message)
				}
				// nginx drops a sub-request's body: the refusal of a peer must reach it in the header.
				if got := w.Header().Get(check.ErrorBodyHeader); tc.code == check.CodeUntrustedPeer && got != strings.TrimSpace(w.Body.String()) {
					t.Errorf("%s %q, want the body %s", check.ErrorBodyHeader, got, w.Body)
				}
				if keys := rg.keys(t); len(keys) != 0 {
					t.Errorf("a refused check charged %v", keys)
				}
			}
		})
	}
}

// The burst through the check: 150 at once, each with the headers of the
// state it left, then 429 with Retry-After and the body of docs/rest.md's "Headers and denials"; with
// deny_status=403 the same denial as 403, its body also in a header for
// nginx. A denial charges nothing.
func TestCheckBurst(t *testing.T) {
	rg := newRig(t, rigOpts{})
	h := rg.handler(t, "")
	for i := range 150 {
		w := serve(h, nginxCheck("GET", "/api/products", "203.0.113.7", nil))
		if w.Code != 200 {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
		if got, want := w.Header().Get("X-RateLimit-Remaining"), strconv.Itoa(149-i); got != want {
			t.Fatalf("request %d: X-RateLimit-Remaining %q, want %q", i, got, want)
		}
		if got, want := w.Header().Get("RateLimit-Policy"), `"api";q=150;w=3600`; got != want {
			t.Fatalf("RateLimit-Policy %q, want %q", got, want)
		}
	}
	for _, tc := range []struct {
		target string
		status int
	}{{"/v1/check", 429}, {"/v1/check?deny_status=429", 429}, {"/v1/check?deny_status=403", 403}} {
		req := nginxCheck("GET", "/api/products", "203.0.113.7", nil)
		req.target = tc.target
		w := serve(h, req)
		if w.Code != tc.status {
			t.Fatalf("%s: status %d, want %d: %s", tc.target, w.Code, tc.status, w.Body)
		}
		e := decodeError(t, w)
		if e.Error != routelimit.CodeRateLimit || e.Policy != "api" || e.RetryAfterSec < 1 {
			t.Errorf("%s: body %s", tc.target, w.Body)
		}
		if got := w.Header().Get("Retry-After"); got != strconv.FormatInt(e.RetryAfterSec, 10) {
			t.Errorf("%s: Retry-After %q, body says %d", tc.target, got, e.RetryAfterSec)
		}
		if w.Header().Get("X-RateLimit-Remaining") != "0" || w.Header().Get("RateLimit") == "" {
			t.Errorf("%s: denial headers %v", tc.target, w.Header())
		}
		copied := w.Header().Get(check.ErrorBodyHeader)
		if tc.status == 403 && copied != strings.TrimSpace(w.Body.String()) {
			t.Errorf("%s header %q, want the body %q", check.ErrorBodyHeader, copied, w.Body)
		}
		if tc.status == 429 && copied != "" {
			t.Errorf("a 429 carries %s", check.ErrorBodyHeader)
		}
	}
	// Another client has its own budget; an allowed 403-mode check is a plain 200.
	if w := serve(h, nginxCheck("GET", "/api/products", "203.0.113.8", nil)); w.Code != 200 || w.Header().Get(check.ErrorBodyHeader) != "" {
		t.Errorf("another client: %d %v", w.Code, w.Header())
	}
}

// loginAttempt is one POST /login, as a client sends it to the embedded
// middleware (the username in the body) and as a gateway asks about it
// (the username in X-Login-User).
type loginAttempt struct {
	client, username string
}

type answer struct {
	status                          int
	policy, state, remaining, retry string
	errorCode, errorPolicy          string
}

func answerOf(w *httptest.ResponseRecorder) answer {
	a := answer{status: w.Code, policy: w.Header().Get("RateLimit-Policy"), state: w.Header().Get("RateLimit"),
		remaining: w.Header().Get("X-RateLimit-Remaining"), retry: w.Header().Get("Retry-After")}
	var e errorJSON
	if json.Unmarshal(w.Body.Bytes(), &e) == nil {
		a.errorCode, a.errorPolicy = e.Error, e.Policy
	}
	return a
}

// The login limit per IP and per username through /v1/check, decision for
// decision and header for header what the embedded middleware answers,
// the username normalised alike.
func TestCheckLoginAsTheMiddleware(t *testing.T) {
	var attempts []loginAttempt
	for i := range 12 { // one address, many usernames: login_ip
		attempts = append(attempts, loginAttempt{client: "203.0.113.7", username: fmt.Sprintf("user%d", i)})
	}
	for i := range 12 { // one username, many addresses, spelt differently: login_user
		name := []string{"victim", " Victim ", "VICTIM", "ｖｉｃｔｉｍ", "vic\u200btim", "VIC\u00adTIM"}[i%6]
		attempts = append(attempts, loginAttempt{client: fmt.Sprintf("198.51.100.%d", i+1), username: name})
	}
	// A denied attempt charged nothing: 198.51.100.11 still has its attempts.
	attempts = append(attempts, loginAttempt{client: "198.51.100.11", username: "someone"})

	embedded := newRig(t, rigOpts{})
	mw := embedded.rest.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK) // what the check answers when allowed
	}))
	gw := newRig(t, rigOpts{})
	h := gw.handler(t, "X-Login-User")
	for i, a := range attempts {
		body, _ := json.Marshal(map[string]string{"username": a.username, "password": "guess"})
		direct := serve(mw, checkReq{method: "POST", target: "/login", remote: a.client + ":5000", body: string(body)})
		via := serve(h, nginxCheck("POST", "/login", a.client, map[string]string{"X-Login-User": a.username}))
		if got, want := answerOf(via), answerOf(direct); got != want {
			t.Errorf("attempt %d (%s, %q): check answered %+v, the middleware %+v", i, a.client, a.username, got, want)
		}
	}
	// The pattern itself: 10 per address, then 10 per username.
	want := map[int]string{10: "login_ip", 11: "login_ip", 22: "login_user", 23: "login_user"}
	gw2 := newRig(t, rigOpts{})
	h2 := gw2.handler(t, "X-Login-User")
	for i, a := range attempts {
		w := serve(h2, nginxCheck("POST", "/login", a.client, map[string]string{"X-Login-User": a.username}))
		if p, denied := want[i]; denied {
			if e := decodeError(t, w); w.Code != 429 || e.Policy != p {
				t.Errorf("attempt %d: %d %s, want 429 by %s", i, w.Code, w.Body, p)
			}
		} else if w.Code != 200 {
			t.Errorf("attempt %d: %d %s, want 200", i, w.Code, w.Body)
		}
	}
}

// Usernames a check cannot limit by, as the middleware treats them: 400
// after being charged to login_ip (the address), a body naming "username"
// twice or in another case included; without the header the body is read.
func TestCheckUsernameRefusals(t *testing.T) {
	rg := newRig(t, rigOpts{})
	h := rg.handler(t, "X-Login-User")
	for _, tc := range []struct {
		name      string
		req       checkReq
		status    int
		charged   bool
		rateLimit string
	}{
		{name: "no username at all", req: nginxCheck("POST", "/login", "203.0.113.1", nil), status: 400, charged: true, rateLimit: `"login_ip";r=9;t=300`},
		{name: "empty", req: nginxCheck("POST", "/login", "203.0.113.2", map[string]string{"X-Login-User": "  "}), status: 400, charged: true, rateLimit: `"login_ip";r=9;t=300`},
		{name: "not UTF-8", req: nginxCheck("POST", "/login", "203.0.113.3", map[string]string{"X-Login-User": "\xff\xfe"}), status: 400, charged: true, rateLimit: `"login_ip";r=9;t=300`},
		{name: "twice", req: checkReq{header: map[string]string{"X-Forwarded-Method": "POST", "X-Forwarded-Uri": "/login", "X-Forwarded-For": "203.0.113.4"},
			multi: map[string][]string{"X-Login-User": {"a", "b"}}}, status: 400, charged: true, rateLimit: `"login_ip";r=9;t=300`},
		{name: "too long", req: nginxCheck("POST", "/login", "203.0.113.5", map[string]string{"X-Login-User": strings.Repeat("a", username.MaxBytes+1)}),
			status: 400, charged: true, rateLimit: `"login_ip";r=9;t=300`},
		{name: "from the body (Envoy with_request_body)", req: checkReq{method: "POST", target: "/v1/check/login", body: `{"username":"alice"}`},
			status: 200, charged: true, rateLimit: `"login_ip";r=9;t=300, "login_user";r=9;t=300`},
		// The service could read the other member: refused, after login_ip.
		{name: "ambiguous body", req: checkReq{method: "POST", target: "/v1/check/login", header: map[string]string{"X-Forwarded-For": "192.0.2.9"},
			body: `{"username":"alice","USERNAME":"bob"}`}, status: 400, charged: true, rateLimit: `"login_ip";r=9;t=300`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rg.keys(t))
			w := serve(h, tc.req)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if charged := len(rg.keys(t)) > before; charged != tc.charged {
				t.Errorf("charged %v, want %v", charged, tc.charged)
			}
			if got := w.Header().Get("RateLimit"); got != tc.rateLimit {
				t.Errorf("RateLimit %q, want %q", got, tc.rateLimit)
			}
		})
	}
}

// An unknown API key is 401 after being charged to the client address, as
// in the middleware; a known one is limited by its tenant and plan.
func TestCheckAPIKeys(t *testing.T) {
	rg := newRig(t, rigOpts{})
	h := rg.handler(t, "")
	w := serve(h, nginxCheck("GET", "/api/products", "203.0.113.7", map[string]string{"X-API-Key": "guessed"}))
	if e := decodeError(t, w); w.Code != 401 || e.Error != "unauthorized" || w.Header().Get("X-RateLimit-Remaining") != "149" {
		t.Errorf("unknown key: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// The guess spent the address's anonymous budget.
	if w := serve(h, nginxCheck("GET", "/api/products", "203.0.113.7", nil)); w.Header().Get("X-RateLimit-Remaining") != "148" {
		t.Errorf("anonymous after a guess: remaining %q, want 148", w.Header().Get("X-RateLimit-Remaining"))
	}
	w = serve(h, nginxCheck("GET", "/api/products", "203.0.113.7", map[string]string{"X-API-Key": "demo-enterprise"}))
	if w.Code != 200 || w.Header().Get("X-RateLimit-Limit") != "1500" {
		t.Errorf("enterprise key: %d limit %q", w.Code, w.Header().Get("X-RateLimit-Limit"))
	}
}

// With the store down, each route's on_store_error decides, as in the
// middleware: login (deny) is 503 with Retry-After, the API (allow) is
// served without rate-limit headers.
func TestCheckStoreDown(t *testing.T) {
	srv := redistest.StartServer(t)
	rg := newRig(t, rigOpts{redis: srv})
	h := rg.handler(t, "X-Login-User")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	w := serve(h, nginxCheck("POST", "/login", "203.0.113.7", map[string]string{"X-Login-User": "alice"}))
	if e := decodeError(t, w); w.Code != 503 || e.Error != routelimit.CodeUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Errorf("login: %d %v %s", w.Code, w.Header(), w.Body)
	}
	w = serve(h, nginxCheck("GET", "/api/products", "203.0.113.7", nil))
	if w.Code != 200 || w.Header().Get("X-RateLimit-Limit") != "" {
		t.Errorf("api: %d %v", w.Code, w.Header())
	}
}

// A policy keyed by header:NAME takes the header the gateway forwards, and
// a shadow policy never denies and sends no headers.
func TestCheckHeaderPartAndShadow(t *testing.T) {
	perOrg := &limiter.Policy{Name: "per_org", Algorithm: limiter.FixedWindow, Limit: 2, Period: time.Hour, Key: []string{"header:X-Org-Id"}}
	shadow := &limiter.Policy{Name: "shadow", Algorithm: limiter.TokenBucket, Limit: 1, Period: time.Hour, Key: []string{identity.PartIP}, Mode: limiter.Shadow}
	rg := newRig(t, rigOpts{routes: []routelimit.Route{
		{Pattern: "/orgs/*", Policies: []*limiter.Policy{perOrg}},
		{Pattern: "/shadow", Policies: []*limiter.Policy{shadow}},
	}})
	h := rg.handler(t, "")
	var got []int
	for _, client := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"} {
		w := serve(h, nginxCheck("GET", "/orgs/7", client, map[string]string{"X-Org-Id": "7"}))
		got = append(got, w.Code)
	}
	if want := []int{200, 200, 429}; !slices.Equal(got, want) {
		t.Errorf("one org from three addresses: %v, want %v", got, want)
	}
	for i := range 3 {
		w := serve(h, nginxCheck("GET", "/shadow", "203.0.113.9", nil))
		if w.Code != 200 || w.Header().Get("RateLimit-Policy") != "" {
			t.Errorf("shadow %d: %d %v", i, w.Code, w.Header())
		}
	}
}

// With a username locked out by ten failed POST /login, every spelling of
// POST /login an upstream may route to its login handler is denied, through
// both forms of the check, and charged to the one route key; a path that
// does not decode is refused, never let through.
func TestCheckEverySpellingOfALockedRoute(t *testing.T) {
	perRoute := &limiter.Policy{Name: "per_route", Algorithm: limiter.SlidingLog, Limit: 1000, Period: time.Hour,
		Key: []string{identity.PartRoute}, OnStoreError: limiter.FailDeny}
	rg := newRig(t, rigOpts{routes: []routelimit.Route{
		{Pattern: "POST /login", Policies: []*limiter.Policy{loginIP(), loginUser(), perRoute}},
	}})
	h := rg.handler(t, "X-Login-User")
	victim := map[string]string{"X-Login-User": "victim"}
	for i := range 10 {
		if w := serve(h, nginxCheck("POST", "/login", fmt.Sprintf("203.0.113.%d", i+1), victim)); w.Code != 200 {
			t.Fatalf("attempt %d: %d %s", i, w.Code, w.Body)
		}
	}
	spellings := []string{"/login/", "/LOGIN", "/login;x=1", "/login%2f", "/login%2F", "/Login%252F", "//login", "/./login",
		"/api/../login", "/api/..;/login", "/login%3Fx=1", `/\login`, `/api\..\login`, "/login%5c", "/%6Cogin", "/%u006Cogin", "/log%C4%B1n", "/login.json"}
	denied := func(t *testing.T, name string, w *httptest.ResponseRecorder) {
		t.Helper()
		if w.Code != http.StatusTooManyRequests || w.Header().Get("X-RateLimit-Remaining") != "0" || w.Header().Get("Retry-After") == "" ||
			!strings.Contains(w.Header().Get("RateLimit-Policy"), `"login_user"`) || decodeError(t, w).Policy != "login_user" {
			t.Errorf("%s: %d %v %s, want 429 by login_user with the rate-limit headers", name, w.Code, w.Header(), w.Body)
		}
	}
	for i, p := range spellings {
		client := fmt.Sprintf("198.51.100.%d", i+1)
		denied(t, "POST "+p+" (X-Forwarded-Uri)", serve(h, nginxCheck("POST", p, client, victim)))
		for _, method := range []string{"POST", "post", "Post"} {
			if strings.Contains(p, "%u") {
				continue // Go's server refuses IIS's escape before the check sees it
			}
			denied(t, method+" /v1/check"+p+" (Envoy)", serve(h, checkReq{method: method, target: check.Path + p,
				header: map[string]string{"X-Login-User": "victim", "X-Forwarded-For": client}}))
		}
		denied(t, "post "+p+" (X-Forwarded-Uri)", serve(h, nginxCheck("post", p, client, victim)))
	}
	for _, p := range []string{"/login%C0%AF", "/login%00", "/login%ff", "/login%2525252f", "/login%zz"} {
		if w := serve(h, nginxCheck("POST", p, "192.0.2.1", victim)); w.Code != http.StatusBadRequest {
			t.Errorf("POST %s: %d %s, want 400", p, w.Code, w.Body)
		}
	}
	// One route key, whichever spelling: per_route has one state in the
	// store, POST /login's, beside login_ip's of the ten addresses allowed
	// and login_user's of the victim (denials leave no state).
	keys := rg.keys(t)
	want := rg.store.Keys(perRoute, rg.ids.Key(perRoute, &identity.Identity{Route: "POST /login"}))[0]
	if !slices.Contains(keys, want) {
		t.Errorf("no per_route state of POST /login (%s) among %v", want, keys)
	}
	if tags := hashTags(keys); len(tags) != 12 {
		t.Errorf("%d states, want 12 (10 login_ip, 1 login_user, 1 per_route): %v", len(tags), keys)
	}
}

// A local-first policy (sync) through /v1/check: the decisions are made
// from the gateway's lease and never pass the limit, and the key's state
// is the shared, synced one.
func TestCheckLocalFirstPolicy(t *testing.T) {
	p := apiPolicy()
	p.Sync = 100 * time.Millisecond
	rg := newRig(t, rigOpts{routes: []routelimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{p}}}})
	h := rg.handler(t, "")
	allowed := 0
	for i := range 200 {
		w := serve(h, nginxCheck("GET", "/api/products", "203.0.113.9", nil))
		switch w.Code {
		case 200:
			allowed++
		case 429:
		default:
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
		if w.Header().Get("X-RateLimit-Remaining") == "" {
			t.Fatalf("request %d: no X-RateLimit-Remaining", i)
		}
	}
	// At least the first lease (half the bucket), never more than the bucket.
	if allowed < 76 || allowed > 150 {
		t.Errorf("allowed %d of 200 on a bucket of 150", allowed)
	}
	keys := rg.keys(t)
	if len(keys) != 1 || !strings.HasSuffix(keys[0], "}y") {
		t.Errorf("keys %v, want the policy's one synced state", keys)
	}
}
