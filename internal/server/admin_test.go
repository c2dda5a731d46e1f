package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/metricstest"
	"github.com/costgate/costgate/internal/syncbuf"
)

const adminToken = "the-oncall-token-0123456789"

// adminYAML is a memory-store config with the admin listener on a free port.
const adminYAML = `
identity:
  api_keys:
    k-acme: {tenant: acme, plan: free}
    k-bad: {tenant: acme, plan: free}
    k-big: {tenant: bigco, plan: free}
policies:
  api:   {algorithm: token_bucket, limit: 5, period: 1h, key: [tenant, api_key]}
  login: {algorithm: sliding_log, limit: 3, period: 1h, key: [username], on_store_error: deny}
  graphql: {algorithm: token_bucket, limit: 1000, period: 1h, key: [tenant, api_key]}
routes:
  - {match: "POST /login", policies: [login]}
  - {match: "/api/*", policies: [api]}
admin:
  listen: 127.0.0.1:0
  tokens: {oncall: "${ADMIN_TOKEN}"}
`

// adminServer is a server with its main and admin listeners, and its log.
type adminServer struct {
	srv         *Server
	main, admin string
	log         *syncbuf.Buffer
}

func startAdmin(t *testing.T, yaml string, env map[string]string) *adminServer {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ResolveAdmin(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	log := &syncbuf.Buffer{}
	logger := slog.New(slog.NewJSONHandler(log, nil))
	s, err := New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	addr, stop, err := s.ServeAdmin(logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return &adminServer{srv: s, main: serveHandler(t, s), admin: "http://" + addr, log: log}
}

// call makes an admin call with token ("" for none) and decodes the JSON answer.
func (a *adminServer) call(t *testing.T, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, a.admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %s", method, path, res.StatusCode, raw)
	}
	return res.StatusCode, out
}

func (a *adminServer) ok(t *testing.T, method, path, body string) map[string]any {
	t.Helper()
	code, out := a.call(t, adminToken, method, path, body)
	if code != http.StatusOK {
		t.Fatalf("%s %s %s: %d %v", method, path, body, code, out)
	}
	return out
}

// request sends a request to the main listener and returns the response.
func (a *adminServer) request(t *testing.T, method, path, apiKey, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, a.main+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if apiKey != "" {
		req.Header.Set("X-API-Key", apiKey)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// The memory store: every verb of the admin API in one process, as an
// operator uses them in an incident.
func TestAdminEveryVerbMemoryStore(t *testing.T) {
	a := startAdmin(t, adminYAML, map[string]string{"ADMIN_TOKEN": adminToken})
	login := func() int {
		return a.request(t, "POST", "/login", "", `{"username":"Alice","password":"wrong"}`).StatusCode
	}

	// A locked login: top names the user, state says denying; a reset
	// (named as typed, another case) unlocks it.
	for range 3 {
		login()
	}
	if code := login(); code != http.StatusTooManyRequests {
		t.Fatalf("4th login: %d, want 429", code)
	}
	top := a.ok(t, "GET", "/v1/admin/top?policy=login", "")
	entries := top["entries"].([]any)
	if len(entries) != 1 || entries[0].(map[string]any)["username"] != "alice" || entries[0].(map[string]any)["denied"].(float64) != 1 {
		t.Errorf("top of login: %v, want alice denied once", top)
	}
	state := a.ok(t, "GET", "/v1/admin/state?policy=login&username=ALICE", "")
	p := state["policies"].([]any)[0].(map[string]any)
	if p["denying"] != true || p["remaining"].(float64) != 0 || p["limit"].(float64) != 3 {
		t.Errorf("state of alice: %v, want denying with 0 left of 3", p)
	}
	if out := a.ok(t, "POST", "/v1/admin/reset", `{"username":" alice"}`); fmt.Sprint(out["reset"]) != "[login]" || out["scope"] != "this process" {
		t.Errorf("reset: %v", out)
	}
	if code := login(); code != http.StatusUnauthorized { // admitted: the demo login's own answer to a wrong password
		t.Errorf("a login after the reset: %d, want it admitted (401 from the login itself)", code)
	}

	// A tenant's launch: ×10 by tenant, in the headers of its requests.
	a.ok(t, "PUT", "/v1/admin/overrides/launch", `{"tenant":"acme","policy":"api","action":"limit","multiplier":10,"expires":"2h"}`)
	res := a.request(t, "GET", "/api/products", "k-acme", "")
	if res.Header.Get("X-RateLimit-Limit") != "50" || !strings.HasPrefix(res.Header.Get("Costgate-Override"), `"api";action=limit;expires=`) {
		t.Errorf("acme under ×10: X-RateLimit-Limit %q, Costgate-Override %q", res.Header.Get("X-RateLimit-Limit"), res.Header.Get("Costgate-Override"))
	}
	if res := a.request(t, "GET", "/api/products", "k-big", ""); res.Header.Get("X-RateLimit-Limit") != "5" {
		t.Errorf("bigco, not overridden: X-RateLimit-Limit %q, want 5", res.Header.Get("X-RateLimit-Limit"))
	}
	// An abusive key: blocked on REST (403 blocked) and GraphQL (BLOCKED),
	// the rest of its tenant not.
	a.ok(t, "PUT", "/v1/admin/overrides/abuse", `{"api_key":"k-bad","action":"deny","expires":"30m"}`)
	if res := a.request(t, "GET", "/api/products", "k-bad", ""); res.StatusCode != http.StatusForbidden {
		t.Errorf("the blocked key on REST: %d, want 403", res.StatusCode)
	}
	gql := func(key string) (int, string) {
		req, _ := http.NewRequest("POST", a.main+"/graphql", strings.NewReader(`{"query":"{ __typename }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := gql("k-bad"); code != http.StatusForbidden || !strings.Contains(body, `"code":"BLOCKED"`) {
		t.Errorf("the blocked key on GraphQL: %d %s, want 403 BLOCKED", code, body)
	}
	dry, _ := http.NewRequest("POST", a.main+"/graphql", strings.NewReader(`{"query":"{ __typename }"}`))
	dry.Header.Set("Content-Type", "application/json")
	dry.Header.Set("X-API-Key", "k-bad")
	dry.Header.Set("Costgate-Dry-Run", "1")
	dres, err := http.DefaultClient.Do(dry)
	if err != nil {
		t.Fatal(err)
	}
	dres.Body.Close()
	if dres.StatusCode != http.StatusForbidden {
		t.Errorf("a dry run of the blocked key: %d, want 403", dres.StatusCode)
	}
	if code, _ := gql("k-acme"); code != http.StatusOK {
		t.Errorf("another key of the tenant on GraphQL: %d", code)
	}
	st := a.ok(t, "GET", "/v1/admin/state?api_key=k-bad", "")
	for _, x := range st["policies"].([]any) {
		x := x.(map[string]any)
		ovs := x["overrides"].([]any)
		if x["denying"] != true || len(ovs) == 0 || ovs[0].(map[string]any)["name"] != "abuse" || ovs[0].(map[string]any)["applies"] != true {
			t.Errorf("state of the blocked key under %s: %v", x["policy"], x)
		}
	}
	// An exemption: never limited.
	a.ok(t, "PUT", "/v1/admin/overrides/vip", `{"tenant":"bigco","action":"allow","expires":"1h"}`)
	for i := range 10 {
		if res := a.request(t, "GET", "/api/products", "k-big", ""); res.StatusCode != http.StatusOK || res.Header.Get("X-RateLimit-Limit") != "" {
			t.Fatalf("exempt request %d: %d %v", i, res.StatusCode, res.Header)
		}
	}
	list := a.ok(t, "GET", "/v1/admin/overrides", "")["overrides"].([]any)
	var names []string
	for _, o := range list {
		names = append(names, o.(map[string]any)["name"].(string))
		if by := o.(map[string]any)["by"]; by != "oncall" {
			t.Errorf("override %v: by %v, want the token's name", o, by)
		}
	}
	if strings.Join(names, ",") != "abuse,launch,vip" {
		t.Errorf("overrides %v", names)
	}
	if b, _ := json.Marshal(list); strings.Contains(string(b), "k-bad") {
		t.Errorf("the overrides show an API key in the clear: %s", b)
	}
	a.ok(t, "DELETE", "/v1/admin/overrides/abuse", "")
	if res := a.request(t, "GET", "/api/products", "k-bad", ""); res.StatusCode != http.StatusOK {
		t.Errorf("the key after its block was deleted: %d", res.StatusCode)
	}
	if code, out := a.call(t, adminToken, "DELETE", "/v1/admin/overrides/abuse", ""); code != http.StatusNotFound || out["error"] != "not_found" {
		t.Errorf("deleting it again: %d %v", code, out)
	}

	// An override expires on time: applied while the clock is before its
	// expiry, not once it is past (each request's send and answer times
	// bracket what the server saw).
	short := a.ok(t, "PUT", "/v1/admin/overrides/short", `{"api_key":"k-acme","policy":"api","action":"deny","expires":"1500ms"}`)
	expires, err := time.Parse(time.RFC3339Nano, short["override"].(map[string]any)["expires"].(string))
	if err != nil {
		t.Fatal(err)
	}
	sawBefore, sawAfter := false, false
	for !sawAfter {
		sent := time.Now()
		code := a.request(t, "GET", "/api/products", "k-acme", "").StatusCode
		answered := time.Now()
		switch {
		case answered.Before(expires):
			sawBefore = true
			if code != http.StatusForbidden {
				t.Fatalf("before the expiry: %d, want 403", code)
			}
		case sent.After(expires):
			sawAfter = true
			if code == http.StatusForbidden {
				t.Fatalf("%s after the expiry: still blocked", sent.Sub(expires))
			}
		}
		if sent.After(expires.Add(10 * time.Second)) {
			t.Fatal("no request sent after the expiry")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !sawBefore {
		t.Log("the machine was too slow to see the override before it expired")
	}

	// The admin API is never served on the main listener.
	if res := a.request(t, "GET", "/v1/admin/overrides", "", ""); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/admin/overrides on the main listener: %d, want 404", res.StatusCode)
	}

	// Every call is audited with the token's name, never the token.
	logText := a.log.String()
	if !strings.Contains(logText, `"msg":"admin call","action":"reset","result":"ok","status":200,"token":"oncall"`) {
		t.Errorf("no audit line of the reset:\n%s", logText)
	}
	if strings.Contains(logText, adminToken) {
		t.Error("the log holds the admin token")
	}
	samples := metricstest.Scrape(t, a.main+"/metrics")
	for _, want := range []map[string]string{{"action": "reset", "result": "ok"}, {"action": "override", "result": "ok"}, {"action": "unoverride", "result": "not_found"}} {
		if v, ok := samples.Value("costgate_admin_actions_total", want); !ok || v < 1 {
			t.Errorf("costgate_admin_actions_total%v = %v, %v", want, v, ok)
		}
	}
	if v, ok := samples.Value("costgate_overrides_active", nil); !ok || v != 2 {
		t.Errorf("costgate_overrides_active = %v (%v), want 2 (launch and vip)", v, ok)
	}
	if v, _ := samples.Value("costgate_decisions_total", map[string]string{"policy": "api", "decision": "exempt"}); v != 10 {
		t.Errorf("exempt decisions counted: %v, want 10", v)
	}
}

// Bad input is refused with 400 naming the field, changing nothing.
func TestAdminBadInput(t *testing.T) {
	a := startAdmin(t, adminYAML, map[string]string{"ADMIN_TOKEN": adminToken})
	for _, tc := range []struct {
		method, path, body, field string
	}{
		{"GET", "/v1/admin/state?policy=nope&api_key=k-acme", "", "policy"},
		{"GET", "/v1/admin/state?policy=login&api_key=k-acme", "", "username"},
		{"GET", "/v1/admin/state?api_key=guess", "", "api_key"},
		{"GET", "/v1/admin/state?ip=300.1.1.1&policy=login&username=x", "", "ip"},
		{"GET", "/v1/admin/state?color=red", "", "color"},
		{"GET", "/v1/admin/top?policy=nope", "", "policy"},
		{"POST", "/v1/admin/reset", `{"policy":"api"}`, "api_key"},
		{"POST", "/v1/admin/reset", `{"username":`, "body"},
		{"POST", "/v1/admin/reset", `{"username":"a"} {}`, "body"},
		{"POST", "/v1/admin/reset", `{"username":7}`, "username"},
		{"POST", "/v1/admin/reset", `{"usrname":"a"}`, "usrname"},
		{"PUT", "/v1/admin/overrides/x", `{"tenant":"acme","action":"deny","expires":"31d"}`, "expires"},
		{"PUT", "/v1/admin/overrides/x", `{"tenant":"acme","action":"deny","expires":"2020-01-01T00:00:00Z"}`, "expires"},
		{"PUT", "/v1/admin/overrides/x", `{"tenant":"acme","action":"deny","expires":"soon"}`, "expires"},
		{"PUT", "/v1/admin/overrides/x", `{"tenant":"acme","action":"deny"}`, "expires"},
		{"PUT", "/v1/admin/overrides/x", `{"tenant":"acme","action":"block","expires":"1h"}`, "action"},
		{"PUT", "/v1/admin/overrides/x", `{"tenant":"acme","action":"limit","expires":"1h"}`, "limit"},
		{"PUT", "/v1/admin/overrides/x", `{"tenant":"acme","action":"limit","limit":-3,"expires":"1h"}`, "limit"},
		{"PUT", "/v1/admin/overrides/x", `{"tenant":"acme","action":"limit","multiplier":1e300,"expires":"1h"}`, "multiplier"},
		{"PUT", "/v1/admin/overrides/x", `{"tenant":"acme","policy":"login","action":"limit","limit":5,"burst":9,"expires":"1h"}`, "burst"},
		{"PUT", "/v1/admin/overrides/a%20b", `{"tenant":"acme","action":"deny","expires":"1h"}`, "name"},
		{"PUT", "/v1/admin/overrides/x", `{"action":"deny","expires":"1h"}`, "api_key"},
	} {
		code, out := a.call(t, adminToken, tc.method, tc.path, tc.body)
		if code != http.StatusBadRequest || out["error"] != "bad_request" || out["field"] != tc.field {
			t.Errorf("%s %s %s: %d %v, want 400 naming %s", tc.method, tc.path, tc.body, code, out, tc.field)
		}
	}
	if list := a.ok(t, "GET", "/v1/admin/overrides", "")["overrides"].([]any); len(list) != 0 {
		t.Errorf("refused calls left overrides: %v", list)
	}
}

// A wrong token is 401, counted, never logged; a peer that keeps failing
// is slowed down (429) even when it then sends the right token; a reload
// rotates the tokens.
func TestAdminTokens(t *testing.T) {
	a := startAdmin(t, adminYAML, map[string]string{"ADMIN_TOKEN": adminToken})
	if code, out := a.call(t, "", "GET", "/v1/admin/overrides", ""); code != http.StatusUnauthorized || out["error"] != "unauthorized" {
		t.Fatalf("no token: %d %v", code, out)
	}
	wrong := "not-the-token-0123456789"
	failures := 1
	for ; failures < 20; failures++ {
		code, out := a.call(t, wrong, "POST", "/v1/admin/reset", `{"username":"a"}`)
		if code == http.StatusTooManyRequests {
			if out["error"] != "too_many_attempts" {
				t.Errorf("throttled: %v", out)
			}
			break
		}
		if code != http.StatusUnauthorized {
			t.Fatalf("wrong token: %d %v", code, out)
		}
	}
	if failures != 10 {
		t.Errorf("throttled after %d failed attempts, want after 10", failures)
	}
	if code, _ := a.call(t, adminToken, "GET", "/v1/admin/overrides", ""); code != http.StatusTooManyRequests {
		t.Errorf("the right token from a throttled peer: %d, want 429 (no guess is checked while throttled)", code)
	}
	if strings.Contains(a.log.String(), wrong) {
		t.Error("the log holds a wrong token")
	}
	v, _ := metricstest.Scrape(t, a.main+"/metrics").Value("costgate_admin_actions_total", map[string]string{"action": "reset", "result": "unauthorized"})
	if v != 9 {
		t.Errorf("unauthorized resets counted: %v, want 9", v)
	}

	b := startAdmin(t, adminYAML, map[string]string{"ADMIN_TOKEN": adminToken})
	cfg, err := config.Parse("test.yaml", []byte(adminYAML))
	if err != nil {
		t.Fatal(err)
	}
	rotated := "the-rotated-token-0123456789"
	if err := cfg.ResolveAdmin(func(string) string { return rotated }); err != nil {
		t.Fatal(err)
	}
	if err := b.srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if code, _ := b.call(t, rotated, "GET", "/v1/admin/overrides", ""); code != http.StatusOK {
		t.Errorf("the new token after a reload: %d", code)
	}
	if code, _ := b.call(t, adminToken, "GET", "/v1/admin/overrides", ""); code != http.StatusUnauthorized {
		t.Errorf("the old token after a reload: %d, want 401", code)
	}
}
