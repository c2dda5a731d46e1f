package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/limiter/gqlproxy"
)

// proxyTestOperations are the GraphQL operations written in the proxy
// tests (limiter/gqlproxy and this package's server tests), every one of them.
func proxyTestOperations(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(repoFile("limiter/gqlproxy/*_test.go"))
	files = append(files, repoFile("e2e/server_test.go"), repoFile("internal/server/schema_test.go"))
	literal := regexp.MustCompile("`[^`]*`" + `|"(\{[^"\\]*(?:\\.[^"\\]*)*)"`)
	seen := map[string]bool{}
	var ops []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literal.FindAllStringSubmatch(string(src), -1) {
			q := strings.Trim(m[0], "`")
			if m[1] != "" {
				q = strings.ReplaceAll(m[1], `\"`, `"`)
			}
			q = strings.TrimSpace(q)
			if !strings.HasPrefix(q, "{") && !strings.HasPrefix(q, "query") && !strings.HasPrefix(q, "mutation") {
				continue
			}
			if _, err := parser.ParseQuery(&ast.Source{Input: q}); err == nil && !seen[q] {
				seen[q] = true
				ops = append(ops, q)
			}
		}
	}
	return ops
}

// The example upstream priced by introspection and examples/proxy/costs.yaml
// gives every operation of the proxy tests the price its annotated SDL
// gives it.
func TestProxyExampleIntrospectedPricesAsSDL(t *testing.T) {
	up := httptest.NewServer(upstreamHandler())
	t.Cleanup(up.Close)
	annotatedCfg, err := config.Load(repoFile("examples/proxy/costgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sdl, err := os.ReadFile(annotatedCfg.GraphQL.Schema)
	if err != nil {
		t.Fatal(err)
	}
	annotated, err := complexity.LoadSDL("schema.graphqls", string(sdl), annotatedCfg.ComplexityOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(repoFile("examples/proxy/costgate-introspect.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	introspectedAST, err := gqlproxy.Introspect(context.Background(), up.Client(), up.URL+"/graphql", cfg.IntrospectionHeader())
	if err != nil {
		t.Fatal(err)
	}
	introspected, err := complexity.NewSchema(introspectedAST, cfg.ComplexityOptions()...)
	if err != nil {
		t.Fatal(cfg.SchemaErrors(err, "introspected"))
	}
	compared := 0
	for _, q := range proxyTestOperations(t) {
		doc, _ := parser.ParseQuery(&ast.Source{Input: q})
		if errs := validator.Validate(annotated.AST(), doc); len(errs) > 0 {
			t.Logf("skipped (invalid): %.80s", q)
			continue // a test of validation; the schemas are compared below
		}
		for _, op := range doc.Operations {
			want, wantErr := annotated.Analyze(doc, op.Name, nil)
			got, gotErr := introspected.Analyze(doc, op.Name, nil)
			var wantOp, gotOp *complexity.OperationError
			if got.Cost != want.Cost || errors.As(wantErr, &wantOp) != errors.As(gotErr, &gotOp) || (wantErr == nil) != (gotErr == nil) {
				t.Errorf("%s\nintrospected: %d, %v; annotated SDL: %d, %v", q, got.Cost, gotErr, want.Cost, wantErr)
			}
			compared++
		}
	}
	t.Logf("%d operations compared", compared)
	if compared < 10 {
		t.Errorf("only %d operations compared", compared)
	}
	if got, want := introspected.CostSettings(), annotated.CostSettings(); len(got) != len(want) {
		t.Errorf("cost settings by introspection:\n%v\nby the SDL:\n%v", got, want)
	} else {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %q by introspection, %q by the SDL", k, got[k], v)
			}
		}
	}
}

// The example's introspecting config end to end: costgate starts unready,
// reads the upstream's schema, and prices, forwards and refunds as the
// annotated SDL does.
func TestProxyExampleIntrospected(t *testing.T) {
	up := httptest.NewServer(upstreamHandler())
	t.Cleanup(up.Close)
	data, err := os.ReadFile(repoFile("examples/proxy/costgate-introspect.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	costs := repoFile("examples/proxy/costs.yaml")
	patched := strings.Replace(string(data), "http://127.0.0.1:9000/graphql", up.URL+"/graphql", 1)
	patched = strings.Replace(patched, "costs: costs.yaml", "costs: "+costs, 1)
	file := filepath.Join(t.TempDir(), "costgate.yaml")
	if err := os.WriteFile(file, []byte(patched), 0o600); err != nil {
		t.Fatal(err)
	}
	base := start(t, nil, "-addr", "127.0.0.1:0", "-config", file).Base
	// The first read runs in the background: wait for readiness, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, body := get(t, base+"/readyz", nil)
		if res.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready in 10s: %d %s", res.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	req, _ := http.NewRequest("POST", base+"/graphql", strings.NewReader(`{"query":"{ products(first: 10) { nodes { id title variants(first: 5) { id } inventory } } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "partner-key-1")
	res, body := do(t, req)
	// 1 + 10 × (1 + 5 × 1 + 5) = 111: inventory weighs 5, from costs.yaml.
	if res.StatusCode != 200 || !strings.Contains(body, `"requestedQueryCost":111,`) || !strings.Contains(body, `"maximumAvailable":5000`) {
		t.Errorf("proxy: %d %s", res.StatusCode, body)
	}
}
