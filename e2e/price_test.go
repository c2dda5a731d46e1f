package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// priceFiles writes files (name → text) into a directory of their own and
// returns it.
func priceFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runPrice runs costgate price in dir and returns its exit status, its
// standard output and its standard error.
func runPrice(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	status := runIn(t, dir, &stdout, &stderr, append([]string{"price"}, args...)...)
	return status, stdout.String(), stderr.String()
}

// runIn runs the binary in dir with args, writing to stdout and stderr,
// and returns its exit status; it must exit within 30 s.
func runIn(t *testing.T, dir string, stdout, stderr io.Writer, args ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, stdout, stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("costgate %v did not exit within 30s", args)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// pricedJSON is costgate price -json's answer.
type pricedJSON struct {
	Operations []struct {
		File           string   `json:"file"`
		Line           int      `json:"line"`
		ID             string   `json:"id"`
		Name           string   `json:"name"`
		Type           string   `json:"type"`
		Cost           *int64   `json:"cost"`
		Depth          int      `json:"depth"`
		Aliases        int      `json:"aliases"`
		Fields         int      `json:"fields"`
		CostVariables  []string `json:"costVariables"`
		CostliestPaths []struct {
			Path string `json:"path"`
			Cost int64  `json:"cost"`
		} `json:"costliestPaths"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"operations"`
	Failed int `json:"failed"`
}

// costgate price -json on a manifest prices each document as the server
// charges it: the same requestedQueryCost the binary answers for it by
// id, with its depth, fields and costliest paths; one that does not
// validate fails the run, named, with its code.
func TestPriceManifestJSON(t *testing.T) {
	aliased := "query Aliased { a: products(first: 2) { nodes { id } } b: products(first: 3) { nodes { id inventory } } }"
	invalid := "query Invalid { products { nodes { nosuchfield } } }"
	dir := priceFiles(t, map[string]string{
		"good.json": string(apolloManifest(docFixed, aliased, docShop)),
		"bad.json":  string(apolloManifest(docFixed, invalid)),
	})
	schema := repoFile("graph/schema.graphqls")

	status, out, errOut := runPrice(t, dir, "-schema", schema, "-json", "good.json")
	if status != 0 {
		t.Fatalf("exit status %d, want 0:\n%s%s", status, out, errOut)
	}
	var res pricedJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("-json is not JSON: %v\n%s", err, out)
	}
	if len(res.Operations) != 3 || res.Failed != 0 {
		t.Fatalf("got %+v, want 3 operations, none failed", res)
	}
	config, _ := trustedConfig(t, "enforce", "", apolloManifest(docFixed, aliased, docShop))
	base := start(t, nil, "-config", config).Base
	for _, op := range res.Operations {
		if op.File != "good.json" || op.Cost == nil || op.Type != "query" || op.ID == "" {
			t.Errorf("%+v", op)
			continue
		}
		a := ask(t, base, `{"documentId":"`+op.ID+`"}`)
		if a.Extensions.Cost.RequestedQueryCost != *op.Cost {
			t.Errorf("%s: costgate price says %d, the server charges %d", op.Name, *op.Cost, a.Extensions.Cost.RequestedQueryCost)
		}
	}
	a := res.Operations[1]
	if a.Name != "Aliased" || a.Depth != 3 || a.Aliases != 2 || a.Fields != 7 || len(a.CostliestPaths) != 3 ||
		a.CostliestPaths[0].Path != "b.nodes.inventory" || a.CostliestPaths[0].Cost != 15 {
		t.Errorf("Aliased: %+v, want depth 3, 2 aliases, 7 fields, b.nodes.inventory costliest at 15", a)
	}
	if s := res.Operations[2]; len(s.CostVariables) != 1 || s.CostVariables[0] != "n" {
		t.Errorf("Shop: costVariables %v, want [n]", s.CostVariables)
	}

	status, out, errOut = runPrice(t, dir, "-schema", schema, "-json", "bad.json")
	if status != 1 {
		t.Fatalf("a manifest with a document that does not validate: exit status %d, want 1:\n%s%s", status, out, errOut)
	}
	res = pricedJSON{}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Failed != 1 || res.Operations[1].Error == nil ||
		res.Operations[1].Error.Code != "GRAPHQL_VALIDATION_FAILED" || res.Operations[1].Cost != nil {
		t.Fatalf("got %+v (%v), want Invalid failed with GRAPHQL_VALIDATION_FAILED", res, err)
	}
	if !strings.Contains(errOut, "Invalid (bad.json ") || !strings.Contains(errOut, "nosuchfield") {
		t.Errorf("standard error does not name the operation and why:\n%s", errOut)
	}
}

// The exit status: 0 when every operation can run, 1 naming each one that
// cannot (parse, validation, a limit), 2 when the check cannot run.
func TestPriceExitStatus(t *testing.T) {
	schema := repoFile("graph/schema.graphqls")
	dir := priceFiles(t, map[string]string{
		"ok.graphql":      "query Ok { products(first: 2) { nodes { id } } }\n",
		"deep.graphql":    "query Deep { products { nodes { reviews { author { name } } } } }\n",
		"broken.graphql":  "query Broken { products {\n",
		"aliases.graphql": "query Many { a: __typename b: __typename c: __typename }\n",
		"nofrag.graphql":  "query NoFragment { products { nodes { ...Missing } } }\n",
		"bad.yaml":        "\"Query.nosuch\": {cost: 1}\n",
		"broken.json":     `{"format":"apollo-persisted-query-manifest"`,
	})
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   string // in standard error
	}{
		{"operations that can run", []string{"-schema", schema, "ok.graphql"}, 0, ""},
		{"deeper than -max-depth", []string{"-schema", schema, "-max-depth", "4", "ok.graphql", "deep.graphql"}, 1, "Deep (deep.graphql:1): MAX_DEPTH_EXCEEDED"},
		{"more aliases than -max-aliases", []string{"-schema", schema, "-max-aliases", "2", "aliases.graphql"}, 1, "Many (aliases.graphql:1): MAX_ALIASES_EXCEEDED"},
		{"a document that does not parse", []string{"-schema", schema, "broken.graphql"}, 1, "broken.graphql:2: GRAPHQL_PARSE_FAILED"},
		{"a fragment no file defines", []string{"-schema", schema, "nofrag.graphql"}, 1, `NoFragment (nofrag.graphql:1): GRAPHQL_VALIDATION_FAILED: nofrag.graphql:1:42: Unknown fragment "Missing"`},
		{"a manifest that is not one", []string{"-schema", schema, "broken.json"}, 1, "broken.json: BAD_MANIFEST: not a JSON object"},
		{"no -schema", []string{"ok.graphql"}, 2, "-schema is required"},
		{"no FILE", []string{"-schema", schema}, 2, "no FILE"},
		{"a FILE that cannot be read", []string{"-schema", schema, "missing.graphql"}, 2, "missing.graphql: no such file"},
		{"a schema that cannot be read", []string{"-schema", "missing.graphqls", "ok.graphql"}, 2, "missing.graphqls: no such file"},
		{"a costs entry the schema lacks", []string{"-schema", schema, "-costs", "bad.yaml", "ok.graphql"}, 2, `bad.yaml:1: graphql.costs["Query.nosuch"]: names nothing`},
		{"a limit turned off", []string{"-schema", schema, "-max-cost", "0", "ok.graphql"}, 2, "-max-cost must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out, errOut := runPrice(t, dir, tc.args...)
			if status != tc.status || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit status %d, want %d, and standard error saying %q:\n%s%s", status, tc.status, tc.want, out, errOut)
			}
		})
	}
}
