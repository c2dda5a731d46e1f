package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/mdblock"
)

// docBlocks returns the fenced blocks of a Markdown file in language lang,
// with the heading each comes under.
func docBlocks(t *testing.T, path, lang string) (blocks []string, headings []string) {
	t.Helper()
	for _, b := range mdblock.Blocks(t, mdblock.Page(t, path)) {
		if b.Lang == lang {
			blocks, headings = append(blocks, b.Text), append(headings, b.Heading)
		}
	}
	return blocks, headings
}

// The runbook of docs/operators.md, typed as it is written, against the
// built binary with the demo config: every command succeeds, in order.
func TestOperatorsRunbook(t *testing.T) {
	g := start(t, []string{"COSTGATE_ADMIN_TOKEN=" + e2eAdminToken}, "-addr", "127.0.0.1:0")
	ag := &adminGateway{Gateway: g, Admin: "http://" + g.Addr(t, "costgate admin listening")}
	throttle(t, ag, "demo-free") // someone to find among the denied
	blocks, headings := docBlocks(t, "docs/operators.md", "sh")
	ran := 0
	for i, block := range blocks {
		for _, line := range strings.Split(block, "\n") {
			cmd, _, _ := strings.Cut(line, "#")
			fields := strings.Fields(cmd)
			if len(fields) == 0 || fields[0] == "export" {
				continue
			}
			if len(fields) < 2 || fields[0] != "costgate" || fields[1] != "admin" {
				t.Errorf("%s: %q is not a costgate admin command", headings[i], line)
				continue
			}
			out, errOut, code := runCLI(t, ag.Admin, e2eAdminToken, fields[2:]...)
			if code != 0 {
				t.Errorf("%s: %s: exit %d: %s", headings[i], strings.TrimSpace(cmd), code, errOut)
				continue
			}
			t.Logf("$ %s\n%s", strings.TrimSpace(cmd), out)
			ran++
		}
	}
	if ran < 12 {
		t.Errorf("ran %d runbook commands; the page's runbook has more", ran)
	}
	// The four situations of the runbook are all there.
	for _, want := range []string{`"A customer says they are throttled"`, `"A credential-stuffing wave locked real users"`,
		`"A tenant needs more for a launch"`, `"An abusive key"`} {
		if !strings.Contains(strings.Join(headings, "\n"), want) {
			t.Errorf("no runbook section %s", want)
		}
	}
	// The abusive key is blocked at the end of the runbook's commands but
	// the last, which lifted it.
	if res := ag.call(t, "GET", "/api/products", "demo-free", ""); res.StatusCode == 403 {
		t.Error("demo-free still blocked after the runbook's unoverride")
	}
}

// The page's config block is a valid admin section, and its JSON examples
// are JSON.
func TestOperatorsPageSnippets(t *testing.T) {
	yamls, _ := docBlocks(t, "docs/operators.md", "yaml")
	if len(yamls) == 0 {
		t.Fatal("no yaml block")
	}
	for _, y := range yamls {
		cfg, err := config.Parse("docs/operators.md", []byte(y+"graphql: {path: \"\"}\n"))
		if err != nil {
			t.Errorf("%v\n%s", err, y)
			continue
		}
		env := map[string]string{"COSTGATE_ADMIN_TOKEN": e2eAdminToken, "CI_ADMIN_TOKEN": e2eAdminToken + "-ci"}
		if err := cfg.ResolveAdmin(func(k string) string { return env[k] }); err != nil || len(cfg.AdminTokens()) != 2 {
			t.Errorf("the page's admin tokens: %v %v", cfg.AdminTokens(), err)
		}
	}
	jsons, headings := docBlocks(t, "docs/operators.md", "json")
	for i, j := range jsons {
		var v any
		if err := json.Unmarshal([]byte(j), &v); err != nil {
			t.Errorf("%s: a JSON example that is not JSON: %v\n%s", headings[i], err, j)
		}
	}
}
