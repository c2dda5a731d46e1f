package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/costgate/costgate/internal/mdblock"
)

// runFails runs the binary in dir with args, as a user at a shell does,
// and returns what it wrote once it exited non-zero; the test fails if it
// served instead.
func runFails(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := command(binary, nil, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("costgate %v: %v, want a non-zero exit\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// The bad config of docs/configuration.md stops the binary with exactly
// the lines the page shows.
func TestDocsBadConfigFile(t *testing.T) {
	blocks := mdblock.Fenced(t, mdblock.Section(t, "docs/configuration.md", "## The config file"), "")
	if len(blocks) == 0 {
		t.Fatal("no plain block in the page's config file section")
	}
	file, run, ok := strings.Cut(blocks[0], "$ go run . -config bad.yaml\n")
	file, found := strings.CutPrefix(file, "$ cat bad.yaml\n")
	if !ok || !found {
		t.Fatalf("the block is not `cat bad.yaml` then `go run . -config bad.yaml`:\n%s", blocks[0])
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := runFails(t, dir, "-config", "bad.yaml", "-addr", "127.0.0.1:0"), strings.TrimSpace(run); got != want {
		t.Errorf("costgate -config bad.yaml said\n%s\nthe page shows\n%s", got, want)
	}
}

// docs/proxy.md's costs entry that names nothing (examples/proxy/costs.yaml
// with a typo on its line 8) stops the load with the message the page
// shows, naming the file and the line.
func TestDocsCostsEntryNamingNothing(t *testing.T) {
	blocks := mdblock.Fenced(t, mdblock.Section(t, "docs/proxy.md", "## Pricing an upstream you cannot annotate"), "text")
	if len(blocks) != 1 {
		t.Fatalf("found %d text blocks, want 1", len(blocks))
	}
	want := strings.TrimSpace(blocks[0])
	costs, err := os.ReadFile(repoFile("examples/proxy/costs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(costs), "\n")
	if len(lines) < 8 || !strings.HasPrefix(lines[7], `"Product.inventory"`) {
		t.Fatalf("examples/proxy/costs.yaml's line 8 is %q, not the page's Product.inventory", lines[min(7, len(lines)-1)])
	}
	lines[7] = strings.Replace(lines[7], "inventory", "inventroy", 1)
	dir := t.TempDir()
	schema, err := os.ReadFile(repoFile("examples/proxy/schema.graphqls"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"costs.yaml":      strings.Join(lines, "\n"),
		"schema.graphqls": string(schema),
		"costgate.yaml": `policies:
  graphql: {algorithm: token_bucket, limit: 50, period: 1s, burst: 1000, key: [ip]}
graphql: {schema: schema.graphqls, upstream: "http://127.0.0.1:9/graphql", costs: costs.yaml}
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := runFails(t, dir, "-config", "costgate.yaml", "-addr", "127.0.0.1:0"); got != "costgate: "+want {
		t.Errorf("costgate said\n%s\nthe page shows\n%s", got, want)
	}
}

// docs/gateways.md's Traefik labels ask /v1/check and copy every
// rate-limit header costgate answers an allowed check with: the labels
// name exactly the headers a real check returns.
func TestDocsTraefikLabels(t *testing.T) {
	blocks := mdblock.Fenced(t, mdblock.Section(t, "docs/gateways.md", "## Traefik"), "yaml")
	if len(blocks) != 1 {
		t.Fatalf("found %d yaml blocks, want 1", len(blocks))
	}
	var doc struct{ Labels []string }
	if err := yaml.Unmarshal([]byte(blocks[0]), &doc); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, l := range doc.Labels {
		k, v, _ := strings.Cut(l, "=")
		labels[k] = v
	}
	const mw = "traefik.http.middlewares.costgate.forwardauth."
	if addr := labels[mw+"address"]; !strings.HasSuffix(addr, ":8080/v1/check") {
		t.Errorf("forwardauth.address = %q, want costgate's /v1/check", addr)
	}
	if !strings.Contains(labels["traefik.http.routers.shop.middlewares"], "costgate") {
		t.Error("the router does not use the costgate middleware")
	}
	copied := strings.Split(labels[mw+"authResponseHeaders"], ",")

	g := start(t, nil, "-addr", "127.0.0.1:0", "-config", repoFile("examples/gateway/costgate.yaml"))
	req, _ := http.NewRequest("GET", g.Base+"/v1/check", nil)
	req.Header.Set("X-Forwarded-Method", "GET")
	req.Header.Set("X-Forwarded-Uri", "/api/products")
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	res, body := do(t, req)
	if res.StatusCode != 200 {
		t.Fatalf("a check of GET /api/products: %d %s", res.StatusCode, body)
	}
	var answered []string
	for name := range res.Header {
		if n := strings.ToLower(name); strings.HasPrefix(n, "x-ratelimit-") || strings.HasPrefix(n, "ratelimit") {
			answered = append(answered, name)
		}
	}
	for i := range copied {
		copied[i] = http.CanonicalHeaderKey(strings.TrimSpace(copied[i]))
	}
	slices.Sort(copied)
	slices.Sort(answered)
	if !slices.Equal(copied, answered) {
		t.Errorf("authResponseHeaders copies %v; an allowed check answers %v", copied, answered)
	}
}
