package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SIGHUP reloads the file: a changed limit takes effect without a restart,
// the buckets already spent stay spent, and a broken file keeps the config
// in effect and logs why.
func TestReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "costgate.yaml")
	write := func(limit string) {
		t.Helper()
		cfg := "policies:\n  api: {algorithm: fixed_window, limit: " + limit + ", period: 1h, key: [ip]}\n" +
			"routes:\n  - {match: \"/api/*\", policies: [api]}\ngraphql: {path: \"\"}\n"
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("3")
	g := start(t, nil, "-addr", "127.0.0.1:0", "-config", file)
	base := g.Base
	statuses := func(n int) (ok, denied int) {
		for range n {
			res, _ := get(t, base+"/api/products", nil)
			switch res.StatusCode {
			case 200:
				ok++
			case 429:
				denied++
			}
		}
		return ok, denied
	}
	if ok, _ := statuses(2); ok != 2 {
		t.Fatalf("before the reload: %d of 2 admitted", ok)
	}
	write("5")
	g.Reload(t)
	g.WaitLog(t, `"msg":"config reloaded"`, 1)
	// 2 spent under the old limit; the new one grants 5 in the window: 3 more.
	if ok, denied := statuses(4); ok != 3 || denied != 1 {
		t.Errorf("after raising the limit to 5: %d admitted, %d denied; want 3 and 1 (state kept, new limit)", ok, denied)
	}
	if res, _ := get(t, base+"/api/products", nil); res.Header.Get("X-RateLimit-Limit") != "5" {
		t.Errorf("X-RateLimit-Limit = %q after the reload, want 5", res.Header.Get("X-RateLimit-Limit"))
	}
	// A broken file: the reload fails, the log says where, limit 5 stays.
	if err := os.WriteFile(file, []byte("policies:\n  api: {algorithm: fixed_window, limit: 0, period: 1h, key: [ip]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.Reload(t)
	g.WaitLog(t, `"msg":"config reload failed; the config in effect stays"`, 1)
	if !strings.Contains(g.Log.String(), "policies.api.limit: must be at least 1") {
		t.Errorf("the failed reload does not say why:\n%s", g.Log)
	}
	if res, _ := get(t, base+"/api/products", nil); res.StatusCode != 429 || res.Header.Get("X-RateLimit-Limit") != "5" {
		t.Errorf("after a failed reload: %d, limit %q; want the old config (429, limit 5)", res.StatusCode, res.Header.Get("X-RateLimit-Limit"))
	}
}

// Through the config file, what would serve unlimited GraphQL stops the
// server at start with the reason.
func TestServerRefusesUnlimitedGraphQL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "costgate.yaml")
	cfg := "policies:\n  api: {algorithm: token_bucket, limit: 5, period: 1s, key: [ip]}\nroutes:\n  - {match: \"/api/*\", policies: [api]}\n"
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runToExit(t, nil, "-addr", "127.0.0.1:0", "-config", file)
	if code == 0 || !strings.Contains(out, `graphql.policy: unknown policy "graphql"`) || !strings.Contains(out, `graphql.path: ""`) {
		t.Errorf("exit status %d, %s; want a refusal naming graphql.policy and how to turn GraphQL off", code, out)
	}
}
