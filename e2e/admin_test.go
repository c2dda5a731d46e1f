package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter/redistest"
	"github.com/costgate/costgate/playground/browsertest"
)

// The admin API of the built binary: three gateways on one redis-server,
// each with its admin listener (the docs' operators page).

const e2eAdminToken = "e2e-admin-token-0123456789"

// fleetConfig is a gateway sharing Redis at addr: a login limit and an API
// limit, each remembered in the deny cache, the API's local-first.
func fleetConfig(addr string) string {
	return `
listen: 127.0.0.1:0
store: {redis: {url: "redis://` + addr + `/0"}, gateways: 3}
identity:
  hash_key: "e2e-admin-hash-key-0123456789"
  api_keys:
    k-acme: {tenant: acme, plan: free}
    k-bad: {tenant: acme, plan: free}
    k-big: {tenant: bigco, plan: free}
policies:
  login_user: {algorithm: sliding_log, limit: 3, period: 1h, key: [username], local_cache: true, on_store_error: deny}
  api: {algorithm: token_bucket, limit: 5, period: 1h, key: [tenant, api_key], sync: 100ms, local_cache: true}
routes:
  - {match: "POST /login", policies: [login_user]}
  - {match: "/api/*", policies: [api]}
graphql: {path: ""}
admin: {listen: "127.0.0.1:0", tokens: {oncall: "${ADMIN_TOKEN}"}}
`
}

// adminGateway is a running gateway and its admin listener's URL.
type adminGateway struct {
	*Gateway
	Admin string
}

func startAdminGateway(t *testing.T, config string) *adminGateway {
	t.Helper()
	g := start(t, []string{"ADMIN_TOKEN=" + e2eAdminToken}, "-config", config)
	return &adminGateway{Gateway: g, Admin: "http://" + g.Addr(t, "costgate admin listening")}
}

// admin makes an admin call and decodes its JSON answer.
func (g *adminGateway) admin(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, g.Admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
	res, text := do(t, req)
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, text)
	}
	return res.StatusCode, out
}

func (g *adminGateway) mustAdmin(t *testing.T, method, path, body string) map[string]any {
	t.Helper()
	code, out := g.admin(t, method, path, body)
	if code != http.StatusOK {
		t.Fatalf("%s %s %s: %d %v", method, path, body, code, out)
	}
	return out
}

// call sends a request to the gateway's main listener.
func (g *adminGateway) call(t *testing.T, method, path, apiKey, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, g.Base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if apiKey != "" {
		req.Header.Set("X-API-Key", apiKey)
	}
	res, _ := do(t, req)
	return res
}

func (g *adminGateway) login(t *testing.T, user string) int {
	return g.call(t, "POST", "/login", "", `{"username":"`+user+`","password":"wrong"}`).StatusCode
}

// within polls f (true: done) until it is done, and fails the test when
// that was later than limit after start plus the slowest poll seen (what
// the machine's load adds to one request); it returns how long after start.
func within(t *testing.T, what string, start time.Time, limit time.Duration, f func() bool) time.Duration {
	t.Helper()
	slowest := time.Duration(0)
	for {
		began := time.Now()
		done := f()
		slowest = max(slowest, time.Since(began))
		took := time.Since(start)
		if done {
			if took > limit+slowest {
				t.Errorf("%s took %s, more than %s (+%s, the slowest request)", what, took.Round(time.Millisecond), limit, slowest.Round(time.Millisecond))
			}
			return took
		}
		if took > limit+slowest+10*time.Second {
			t.Fatalf("%s: not after %s", what, took.Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startFleet(t *testing.T) (config string, gws []*adminGateway) {
	t.Helper()
	redis := redistest.StartServer(t)
	config = writeConfig(t, fleetConfig(redis.Addr()))
	gws = make([]*adminGateway, 3)
	var wg sync.WaitGroup
	for i := range gws {
		wg.Go(func() { gws[i] = startAdminGateway(t, config) })
	}
	wg.Wait()
	return config, gws
}

// A login user locked through gateway 1 (and denied from the deny cache of
// every gateway) is unlocked on gateways 2 and 3 within 1 s of a reset sent
// to gateway 1; so is an API key locked under a local-first policy.
func TestAdminResetEveryGateway(t *testing.T) {
	_, gws := startFleet(t)
	for range 3 {
		gws[0].login(t, "alice")
	}
	for i, g := range gws {
		for range 2 { // the second from the deny cache
			if code := g.login(t, "Alice"); code != http.StatusTooManyRequests {
				t.Fatalf("gateway %d: alice's login %d, want 429", i+1, code)
			}
		}
	}
	for i, g := range gws {
		locked := false
		for range 20 {
			if g.call(t, "GET", "/api/products", "k-acme", "").StatusCode == http.StatusTooManyRequests {
				locked = true
				break
			}
		}
		if !locked {
			t.Fatalf("gateway %d: k-acme never denied", i+1)
		}
	}
	st := gws[1].mustAdmin(t, "GET", "/v1/admin/state?policy=login_user&username=alice", "")
	if p := st["policies"].([]any)[0].(map[string]any); p["denying"] != true || p["deny_cache"] == nil {
		t.Fatalf("gateway 2's state of alice: %v, want denying, from its deny cache", p)
	}

	reset := time.Now()
	gws[0].mustAdmin(t, "POST", "/v1/admin/reset", `{"username":"alice"}`)
	gws[0].mustAdmin(t, "POST", "/v1/admin/reset", `{"api_key":"k-acme"}`)
	for i, g := range gws[1:] {
		took := within(t, fmt.Sprintf("alice unlocked on gateway %d", i+2), reset, time.Second, func() bool {
			return g.login(t, "alice") != http.StatusTooManyRequests
		})
		t.Logf("alice admitted on gateway %d %s after the reset was sent", i+2, took.Round(time.Millisecond))
		took = within(t, fmt.Sprintf("k-acme admitted on gateway %d", i+2), reset, time.Second, func() bool {
			return g.call(t, "GET", "/api/products", "k-acme", "").StatusCode == http.StatusOK
		})
		t.Logf("k-acme (local-first) admitted on gateway %d %s after the reset was sent", i+2, took.Round(time.Millisecond))
	}
}

// An override put through one gateway applies on the others within 1 s,
// shows in the rate-limit headers, expires on time, and survives a
// gateway's restart; allow exempts and deny blocks.
func TestAdminOverridesEveryGateway(t *testing.T) {
	config, gws := startFleet(t)
	put := time.Now()
	gws[0].mustAdmin(t, "PUT", "/v1/admin/overrides/abuse", `{"api_key":"k-bad","action":"deny","expires":"1h"}`)
	for i, g := range gws[1:] {
		within(t, fmt.Sprintf("the block on gateway %d", i+2), put, time.Second, func() bool {
			return g.call(t, "GET", "/api/products", "k-bad", "").StatusCode == http.StatusForbidden
		})
	}
	res := gws[2].call(t, "GET", "/api/products", "k-bad", "")
	if !strings.HasPrefix(res.Header.Get("Costgate-Override"), `"api";action=deny;expires=`) {
		t.Errorf("a blocked answer's Costgate-Override: %q", res.Header.Get("Costgate-Override"))
	}

	put = time.Now()
	gws[1].mustAdmin(t, "PUT", "/v1/admin/overrides/vip", `{"tenant":"bigco","action":"allow","expires":"1h"}`)
	gws[1].mustAdmin(t, "PUT", "/v1/admin/overrides/launch", `{"tenant":"acme","policy":"api","action":"limit","multiplier":10,"expires":"1h"}`)
	within(t, "the exemption on gateway 3", put, time.Second, func() bool {
		return gws[2].call(t, "GET", "/api/products", "k-big", "").Header.Get("Costgate-Override") != ""
	})
	for i := range 20 {
		if res := gws[2].call(t, "GET", "/api/products", "k-big", ""); res.StatusCode != http.StatusOK || res.Header.Get("X-RateLimit-Limit") != "" {
			t.Fatalf("exempt request %d of bigco: %d, X-RateLimit-Limit %q", i, res.StatusCode, res.Header.Get("X-RateLimit-Limit"))
		}
	}
	within(t, "acme's launch on gateway 1", put, time.Second, func() bool {
		return gws[0].call(t, "GET", "/api/products", "k-acme", "").Header.Get("X-RateLimit-Limit") == "50"
	})

	// Expiry: a block of k-big for 2 s (the key's own override beats its
	// tenant's exemption) ends on time on another gateway.
	out := gws[0].mustAdmin(t, "PUT", "/v1/admin/overrides/pause", `{"api_key":"k-big","action":"deny","expires":"2s"}`)
	expires, err := time.Parse(time.RFC3339Nano, out["override"].(map[string]any)["expires"].(string))
	if err != nil {
		t.Fatal(err)
	}
	for {
		sent := time.Now()
		code := gws[1].call(t, "GET", "/api/products", "k-big", "").StatusCode
		if sent.After(expires) {
			if code != http.StatusOK {
				t.Errorf("%s after the block's expiry: %d, want 200 (exempt again)", sent.Sub(expires).Round(time.Millisecond), code)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A gateway that restarts applies the overrides from its first request.
	gws[1].Kill(t)
	again := startAdminGateway(t, config)
	if code := again.call(t, "GET", "/api/products", "k-bad", "").StatusCode; code != http.StatusForbidden {
		t.Errorf("the first request after a restart: %d, want 403 (the override survives)", code)
	}
	list := again.mustAdmin(t, "GET", "/v1/admin/overrides", "")["overrides"].([]any)
	if len(list) != 3 {
		t.Errorf("after the restart %d overrides listed, want abuse, launch and vip: %v", len(list), list)
	}
	del := time.Now()
	again.mustAdmin(t, "DELETE", "/v1/admin/overrides/abuse", "")
	within(t, "the block lifted on gateway 1", del, time.Second, func() bool {
		return gws[0].call(t, "GET", "/api/products", "k-bad", "").StatusCode == http.StatusOK
	})
}

// demoConfigFile is the demo's policies and keys with the admin listener
// on a free port, in memory: one process.
const demoConfigFile = `
listen: 127.0.0.1:0
identity:
  api_keys:
    demo-free: {tenant: acme, plan: free}
    demo-enterprise: {tenant: bigco, plan: enterprise}
plans: {anonymous: 1, free: 1, enterprise: 10}
policies:
  api:        {algorithm: token_bucket, limit: 1000, period: 1m, burst: 150, key: [tenant, api_key], on_store_error: allow}
  login_ip:   {algorithm: sliding_log,  limit: 10,   period: 5m, key: [ip],       on_store_error: deny}
  login_user: {algorithm: sliding_log,  limit: 10,   period: 5m, key: [username], on_store_error: deny}
  graphql:    {algorithm: token_bucket, limit: 50,   period: 1s, burst: 1000, key: [tenant, api_key], on_store_error: allow}
routes:
  - {match: "POST /login", policies: [login_ip, login_user]}
  - {match: "/api/*",      policies: [api]}
admin: {listen: "127.0.0.1:0", tokens: {oncall: "${ADMIN_TOKEN}"}}
`

// throttle drives key into 429s on the demo's api policy (burst 150).
func throttle(t *testing.T, g *adminGateway, key string) {
	t.Helper()
	for range 400 {
		if g.call(t, "GET", "/api/products", key, "").StatusCode == http.StatusTooManyRequests {
			return
		}
	}
	t.Fatalf("%s never throttled", key)
}

// top names the tenant (and key) of a key driven into 429s.
func TestAdminTopNamesTheThrottled(t *testing.T) {
	g := startAdminGateway(t, writeConfig(t, demoConfigFile))
	throttle(t, g, "demo-free")
	for range 5 {
		g.call(t, "GET", "/api/products", "demo-free", "")
	}
	top := g.mustAdmin(t, "GET", "/v1/admin/top?policy=api", "")
	entries := top["entries"].([]any)
	if len(entries) == 0 {
		t.Fatalf("top of api: %v", top)
	}
	e := entries[0].(map[string]any)
	if e["tenant"] != "acme" || e["api_key"] != "demo-free" || e["denied"].(float64) < 6 {
		t.Errorf("top of api names %v, want tenant acme, key demo-free, denied at least 6 times", e)
	}
}

// runCLI runs `costgate admin args...` with the token and the admin URL
// in its environment, and returns its output and exit status.
func runCLI(t *testing.T, adminURL, token string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"admin"}, args...)...)
	cmd.Env = append(cmd.Environ(), "COSTGATE_ADMIN_URL="+adminURL, "COSTGATE_ADMIN_TOKEN="+token)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("costgate admin %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// The command line against a running server: each verb's output and exit
// status; a wrong token exits 1 with the server's message.
func TestAdminCLI(t *testing.T) {
	g := startAdminGateway(t, writeConfig(t, demoConfigFile))
	throttle(t, g, "demo-free")
	cli := func(args ...string) (string, string, int) { return runCLI(t, g.Admin, e2eAdminToken, args...) }
	for _, tc := range []struct {
		args []string
		want []string // in stdout, in order
	}{
		{[]string{"top", "-policy", "api"}, []string{"api: denied most in the last 60s", "DENIED", "TENANT", "acme", "demo-free"}},
		{[]string{"state", "-api-key", "demo-free"}, []string{"tenant acme, plan free", "POLICY", "api", "token_bucket", "1000", "150", "graphql"}},
		{[]string{"reset", "-api-key", "demo-free", "-policy", "api"}, []string{"reset api on this process"}},
		{[]string{"state", "-api-key", "demo-free", "-policy", "api"}, []string{"api", "150", "admitting"}},
		{[]string{"override", "launch", "-tenant", "acme", "-policy", "api", "-action", "limit", "-multiplier", "10", "-expires", "2h"},
			[]string{"override launch: limit ×10 on api, tenant=acme, until", "(in 2h0m0s)"}},
		{[]string{"override", "block", "-api-key", "demo-enterprise", "-action", "deny", "-expires", "30m"},
			[]string{"override block: deny on every policy, api_key=…rise"}},
		{[]string{"overrides"}, []string{"NAME", "block", "every policy", "deny", "oncall", "launch", "api", "tenant=acme", "limit ×10"}},
		{[]string{"unoverride", "block"}, []string{"deleted override block"}},
		{[]string{"overrides", "-json"}, []string{`{"overrides":[{"name":"launch"`}},
	} {
		out, errOut, code := cli(tc.args...)
		if code != 0 {
			t.Errorf("costgate admin %s: exit %d: %s", strings.Join(tc.args, " "), code, errOut)
			continue
		}
		rest := out
		for _, w := range tc.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("costgate admin %s: no %q (in order) in:\n%s", strings.Join(tc.args, " "), w, out)
				break
			}
			rest = rest[i+len(w):]
		}
	}
	if res := g.call(t, "GET", "/api/products", "demo-free", ""); res.Header.Get("X-RateLimit-Limit") != "1500" {
		t.Errorf("after the CLI's launch: X-RateLimit-Limit %q, want 1500", res.Header.Get("X-RateLimit-Limit"))
	}
	for _, tc := range []struct {
		token string
		args  []string
		want  string
		code  int
	}{
		{"wrong-token-0123456789", []string{"top"}, "costgate admin: a valid admin token is required: Authorization: Bearer TOKEN (401 unauthorized)", 1},
		{"", []string{"top"}, "COSTGATE_ADMIN_TOKEN is not set", 1},
		{e2eAdminToken, []string{"unoverride", "nope"}, `costgate admin: no override named "nope" (404 not_found)`, 1},
		{e2eAdminToken, []string{"override", "x", "-tenant", "acme", "-action", "deny", "-expires", "40d"}, "expires: at most 30 days ahead", 1},
		{e2eAdminToken, []string{"state", "-policy", "login_user", "-api-key", "demo-free"}, "username: required", 1},
		{e2eAdminToken, []string{"frobnicate"}, `unknown verb "frobnicate"`, 2},
		{e2eAdminToken, []string{"override", "-action", "deny"}, "NAME is required", 2},
	} {
		out, errOut, code := runCLI(t, g.Admin, tc.token, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("costgate admin %s: exit %d, stderr %q, stdout %q; want exit %d and %q", strings.Join(tc.args, " "), code, errOut, out, tc.code, tc.want)
		}
	}
}

// The console's page is served without a token, its calls are not.
func TestAdminConsoleNeedsTheToken(t *testing.T) {
	g := startAdminGateway(t, writeConfig(t, demoConfigFile))
	res, err := http.Get(g.Admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "costgate admin") || res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("the console: %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	res, err = http.Get(g.Admin + "/v1/admin/top")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("top without a token: %d", res.StatusCode)
	}
	if code := g.call(t, "GET", "/v1/admin/top", "", "").StatusCode; code != http.StatusNotFound {
		t.Errorf("the admin API on the main listener: %d, want 404", code)
	}
}

// The console in chromium: sign in with the token, see the throttled key
// among the denied, reset it from there, see it admitted; the page asks
// nothing of the network but its own origin, breaks no CSP, and shows a
// username a client chose as text, never as markup.
func TestAdminConsoleInChromium(t *testing.T) {
	g := startAdminGateway(t, writeConfig(t, strings.Replace(demoConfigFile, "login_user: {algorithm: sliding_log,  limit: 10", "login_user: {algorithm: sliding_log,  limit: 3", 1)))
	throttle(t, g, "demo-free")
	hostile := `<img src=x onerror="window.pwned=1">`
	for range 4 {
		g.call(t, "POST", "/login", "", `{"username":`+strconvQuote(hostile)+`,"password":"x"}`)
	}
	s, err := browsertest.OpenPage(t.Context(), g.Admin+"/", browsertest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer s.Check(t)
	if err := s.Eval(`(() => { document.getElementById('token').value = `+strconvQuote(e2eAdminToken)+`; return true; })()`, new(bool)); err != nil {
		t.Fatal(err)
	}
	if err := s.Click("#signin"); err != nil {
		t.Fatal(err)
	}
	row := `#top tr.top-row[data-policy="api"]`
	if _, err := s.WaitText(row, func(text string) bool { return strings.Contains(text, "demo-free") && strings.Contains(text, "acme") }); err != nil {
		t.Fatalf("the throttled key among the denied: %v", err)
	}
	if _, err := s.WaitText(`#top tr.top-row[data-policy="login_user"]`, func(text string) bool { return strings.Contains(text, hostile) }); err != nil {
		t.Fatalf("the hostile username, as text, among login_user's denied: %v", err)
	}
	var pwned bool
	if err := s.Eval(`window.pwned === 1 || document.querySelector('#top img') !== null`, &pwned); err != nil || pwned {
		t.Errorf("a username became markup in the console: %v %v", pwned, err)
	}
	if err := s.Click(row + " button.act-reset"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitText("#status", func(text string) bool { return strings.Contains(text, "reset api on this process") }); err != nil {
		t.Fatalf("the reset's status: %v", err)
	}
	if _, err := s.WaitText(`#state tr.state-row[data-policy="api"]`, func(text string) bool {
		return strings.Contains(text, "admitting") && strings.Contains(text, "150")
	}); err != nil {
		t.Fatalf("the key's state after the reset: %v", err)
	}
	if res := g.call(t, "GET", "/api/products", "demo-free", ""); res.StatusCode != http.StatusOK {
		t.Errorf("the key after the console's reset: %d, want admitted", res.StatusCode)
	}
	if !strings.Contains(g.Log.String(), `"action":"reset","result":"ok","status":200,"token":"oncall"`) {
		t.Errorf("the console's reset is not in the audit log:\n%s", g.Log.String())
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }
