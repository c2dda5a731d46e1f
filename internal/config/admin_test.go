package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The demo serves the admin listener on loopback with the token from
// COSTGATE_ADMIN_TOKEN, or one the server makes up when it is unset.
func TestDemoAdmin(t *testing.T) {
	c := Demo()
	if c.Admin.Listen != "127.0.0.1:9091" || c.Admin.Tokens["oncall"] != "${COSTGATE_ADMIN_TOKEN}" {
		t.Fatalf("demo admin = %+v", c.Admin)
	}
	env := map[string]string{"COSTGATE_ADMIN_TOKEN": "a-token-of-24-characters"}
	if err := c.ResolveAdmin(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if got := c.AdminTokens(); !reflect.DeepEqual(got, map[string]string{"oncall": "a-token-of-24-characters"}) || len(c.AdminRandom()) != 0 {
		t.Errorf("tokens %v, random %v", got, c.AdminRandom())
	}
	if err := c.ResolveAdmin(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if got := c.AdminRandom(); !reflect.DeepEqual(got, []string{"oncall"}) || len(c.AdminTokens()) != 0 {
		t.Errorf("unset in the demo: random %v, tokens %v; want oncall made up", got, c.AdminTokens())
	}
}

// A file's admin tokens come from the file, the environment or a tokens
// file; one that ends up empty or short stops the start with its line,
// and no message repeats a token.
func TestAdminTokens(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte("# on call\nalice  alice-token-0123456789\n\nbob bob-token-0123456789ab\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "costgate.yaml")
	yaml := noGraphQL + "admin:\n  listen: 127.0.0.1:0\n  tokens:\n    ci: \"${CI_TOKEN}\"\n  tokens_file: tokens\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ResolveAdmin(func(k string) string { return map[string]string{"CI_TOKEN": "ci-token-0123456789"}[k] }); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ci": "ci-token-0123456789", "alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab"}
	if got := c.AdminTokens(); !reflect.DeepEqual(got, want) {
		t.Errorf("tokens %v, want %v", got, want)
	}
	err = c.ResolveAdmin(func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "costgate.yaml:5: admin.tokens.ci: CI_TOKEN is not set in the environment") {
		t.Errorf("CI_TOKEN unset: %v", err)
	}
	if err := c.ResolveAdmin(func(string) string { return "short" }); err == nil || strings.Contains(err.Error(), "short") && !strings.Contains(err.Error(), "shorter") {
		t.Errorf("a short token from the environment: %v", err)
	}

	for _, tc := range []struct{ name, yaml, want, secret string }{
		{"tokens without a listener", "admin: {tokens: {a: \"${X}\"}}\n", "bad.yaml:2: admin.listen: required with admin.tokens", ""},
		{"a listener without tokens", "admin: {listen: \"127.0.0.1:9091\"}\n", "admin.tokens: required with admin.listen", ""},
		{"the main listener's address", "listen: \":9091\"\nadmin: {listen: \"127.0.0.1:9091\", tokens: {a: \"${X}\"}}\n", "admin.listen: \"127.0.0.1:9091\" is listen's address", ""},
		{"a short literal token", "admin:\n  listen: 127.0.0.1:9091\n  tokens: {a: hunter2}\n", "bad.yaml:4: admin.tokens.a: a token is at least 16 characters", "hunter2"},
		{"a bad name", "admin: {listen: \"127.0.0.1:9091\", tokens: {\"a b\": \"${X}\"}}\n", "a token's name is letters", ""},
		{"no port", "admin: {listen: \"localhost\", tokens: {a: \"${X}\"}}\n", "admin.listen: want host:port", ""},
	} {
		_, err := Parse("bad.yaml", []byte(noGraphQL+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) || tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
