package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/costgate/costgate/internal/mdblock"
)

// The snippets of docs/trusted-documents.md run here, as a user runs them.

const trustedDocs = "docs/trusted-documents.md"

// clientRepo lays out the client repository of the docs' costgate price
// section: the server's schema, and each graphql block under the path
// its first line names ("# src/card.graphql"). It returns the directory
// and the files by path.
func clientRepo(t *testing.T) (string, map[string]string) {
	t.Helper()
	files := map[string]string{}
	for _, b := range mdblock.Fenced(t, mdblock.Section(t, trustedDocs, "## `costgate price`, in the client's build"), "graphql") {
		first, text, _ := strings.Cut(b, "\n")
		path, ok := strings.CutPrefix(first, "# ")
		if !ok {
			t.Fatalf("a graphql block that does not name its file:\n%s", b)
		}
		files[path] = text // the file, after the line that names it
	}
	if len(files) != 3 {
		t.Fatalf("found %d documents, want 3 (card, shop, catalog)", len(files))
	}
	schema, err := os.ReadFile(repoFile("graph/schema.graphqls"))
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"schema.graphqls": string(schema)}
	for k, v := range files {
		all[k] = v
	}
	return priceFiles(t, all), files
}

// The configuration shown starts the binary and serves the list.
func TestTrustedDocsConfigure(t *testing.T) {
	blocks := mdblock.Fenced(t, mdblock.Section(t, trustedDocs, "## Configure"), "yaml")
	if len(blocks) != 1 {
		t.Fatalf("found %d yaml blocks, want 1", len(blocks))
	}
	config := writeConfig(t, "listen: \"127.0.0.1:0\"\nidentity: {api_keys: {demo-free: {tenant: acme, plan: free}}}\n"+blocks[0])
	replaceFile(t, filepath.Join(filepath.Dir(config), "persisted-documents.json"), apolloManifest(docShop, docCheap))
	base := start(t, nil, "-config", config).Base
	if a := ask(t, base, byDocumentID(docShop, map[string]any{"n": 2})); a.Status != 200 || len(a.Errors) > 0 {
		t.Errorf("a listed document: %+v", a)
	}
	if a := ask(t, base, byText(unlisted, nil)); a.code() != "PERSISTED_QUERY_NOT_IN_LIST" {
		t.Errorf("an unlisted document: %+v", a)
	}
}

// The load error shown is what the binary says of the docs' Catalog, listed
// (the id and the path aside).
func TestTrustedDocsLoadError(t *testing.T) {
	blocks := mdblock.Fenced(t, mdblock.Section(t, trustedDocs, "## When the list loads"), "")
	if len(blocks) != 1 {
		t.Fatalf("found %d plain blocks, want the error", len(blocks))
	}
	shown := strings.TrimSpace(blocks[0])
	pattern := regexp.QuoteMeta(shown)
	pattern = strings.Replace(pattern, "trusted documents persisted-documents\\.json", "trusted documents \\S*persisted-documents\\.json", 1)
	pattern = strings.Replace(pattern, "…", "[0-9a-f]{60}", 1)
	_, files := clientRepo(t)
	catalog := files["src/catalog.graphql"] + files["src/card.graphql"]
	config, _ := trustedConfig(t, "enforce", "", apolloManifest(catalog))
	status, out := runToExit(t, nil, "-config", config)
	if status != 1 || !regexp.MustCompile(pattern).MatchString(out) {
		t.Errorf("exit status %d and\n%s\nwant 1 and what the docs show:\n%s", status, out, shown)
	}
}

// The costgate price session shown is what the binary answers, word for
// word, exit status included.
func TestTrustedDocsPriceSession(t *testing.T) {
	dir, _ := clientRepo(t)
	var session string
	for _, b := range mdblock.Fenced(t, mdblock.Section(t, trustedDocs, "## `costgate price`, in the client's build"), "") {
		if strings.HasPrefix(b, "$ costgate price") {
			session = b
		}
	}
	if session == "" {
		t.Fatal("no costgate price session in the docs")
	}
	lines := strings.Split(strings.TrimSuffix(session, "\n"), "\n")
	command := strings.Fields(strings.TrimPrefix(lines[0], "$ costgate "))
	if lines[len(lines)-2] != "$ echo $?" {
		t.Fatalf("the session does not end with its exit status:\n%s", session)
	}
	var out strings.Builder // one writer for both: written in order
	status := runIn(t, dir, &out, &out, command...)
	if got, want := out.String(), strings.Join(lines[1:len(lines)-2], "\n")+"\n"; got != want {
		t.Errorf("costgate %s answers\n%s\nthe docs show\n%s", strings.Join(command, " "), got, want)
	}
	if got, want := status, lines[len(lines)-1]; want != "1" || got != 1 {
		t.Errorf("exit status %d, the docs show %s", got, want)
	}
}

// client runs a program of a client's build in dir: costgate on the PATH
// (the binary under test), git with no configuration but the test's.
func client(t *testing.T, dir, program string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath(program)
	if err != nil {
		t.Fatalf("%s not found (%v): sudo apt-get install -y %s (make deps installs it)", program, err, program)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=client", "GIT_AUTHOR_EMAIL=client@example.com", "GIT_COMMITTER_NAME=client", "GIT_COMMITTER_EMAIL=client@example.com",
		"PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func git(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	return client(t, dir, "git", args...)
}

// gitRepo makes dir a git repository with its files added.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}} {
		if out, err := git(t, dir, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// The GitHub Actions workflow shown fails the build of a client whose
// operation costs more than production allows, and passes it once the
// operation is gone: its steps run as a runner runs them (bash -e), with
// the binary the install step would install.
func TestTrustedDocsGitHubActions(t *testing.T) {
	blocks := mdblock.Fenced(t, mdblock.Section(t, trustedDocs, "### GitHub Actions"), "yaml")
	if len(blocks) != 1 {
		t.Fatalf("found %d yaml blocks, want the workflow", len(blocks))
	}
	var workflow struct {
		Jobs map[string]struct {
			Steps []struct {
				Uses string `yaml:"uses"`
				Run  string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal([]byte(blocks[0]), &workflow); err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, job := range workflow.Jobs {
		for _, s := range job.Steps {
			switch {
			case s.Run == "":
			case strings.HasPrefix(s.Run, "go install "):
				if !strings.HasPrefix(s.Run, "go install github.com/costgate/costgate@") {
					t.Errorf("the install step does not install costgate's binary: %q", s.Run)
				}
			default:
				runs = append(runs, s.Run)
			}
		}
	}
	if len(runs) == 0 || !strings.Contains(strings.Join(runs, "\n"), "costgate price") {
		t.Fatalf("no step runs costgate price: %q", runs)
	}
	build := func(dir string) (string, error) {
		t.Helper()
		var all strings.Builder
		for _, run := range runs {
			out, err := client(t, dir, "bash", "-e", "-c", run) // a runner's default shell
			all.WriteString(out)
			if err != nil {
				return all.String(), err
			}
		}
		return all.String(), nil
	}
	dir, _ := clientRepo(t)
	gitRepo(t, dir)
	if out, err := build(dir); err == nil || !strings.Contains(out, "Catalog (src/catalog.graphql:1): MAX_COST_EXCEEDED") {
		t.Errorf("the build with a costly operation: %v\n%s\nwant it to fail naming Catalog", err, out)
	}
	if out, err := git(t, dir, "rm", "-q", "-f", "src/catalog.graphql"); err != nil {
		t.Fatal(err, out)
	}
	if out, err := build(dir); err != nil {
		t.Errorf("the build without it: %v\n%s", err, out)
	}
}

// The pre-commit hook shown lets a commit of operations that can run
// through, and stops one with an operation production would refuse.
func TestTrustedDocsPreCommitHook(t *testing.T) {
	blocks := mdblock.Fenced(t, mdblock.Section(t, trustedDocs, "### A pre-commit hook"), "sh")
	if len(blocks) != 1 {
		t.Fatalf("found %d sh blocks, want the hook", len(blocks))
	}
	dir, _ := clientRepo(t)
	catalog := filepath.Join(dir, "src", "catalog.graphql")
	costly, err := os.ReadFile(catalog)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(catalog)
	gitRepo(t, dir)
	hook := filepath.Join(dir, ".git", "hooks", "pre-commit")
	if err := os.WriteFile(hook, []byte(blocks[0]), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := git(t, dir, "commit", "-q", "-m", "shop"); err != nil {
		t.Fatalf("a commit of operations that can run: %v\n%s", err, out)
	}
	if err := os.WriteFile(catalog, costly, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := git(t, dir, "add", "src/catalog.graphql"); err != nil {
		t.Fatal(err, out)
	}
	out, err := git(t, dir, "commit", "-q", "-m", "catalog")
	if err == nil || !strings.Contains(out, "Catalog (src/catalog.graphql:1): MAX_COST_EXCEEDED") {
		t.Errorf("a commit of a costly operation: %v\n%s\nwant it stopped, naming Catalog", err, out)
	}
	if log, _ := git(t, dir, "log", "--oneline"); strings.Count(log, "\n") != 1 {
		t.Errorf("commits made:\n%s", log)
	}
	if out, err := git(t, dir, "reset", "-q", "src/catalog.graphql"); err != nil {
		t.Fatal(err, out)
	}
	if out, err := git(t, dir, "commit", "-q", "--allow-empty", "-m", "docs only"); err != nil {
		t.Errorf("a commit without GraphQL: %v\n%s", err, out)
	}
}

// The synopsis shown is the one costgate price -h gives.
func TestTrustedDocsPriceSynopsis(t *testing.T) {
	blocks := mdblock.Fenced(t, mdblock.Section(t, trustedDocs, "## `costgate price`, in the client's build"), "")
	if len(blocks) == 0 || !strings.HasPrefix(blocks[0], "costgate price ") {
		t.Fatalf("the section does not open with the synopsis: %q", blocks)
	}
	status, _, errOut := runPrice(t, "", "-h")
	first, _, _ := strings.Cut(errOut, "\n")
	if status != 0 || first != "usage: "+strings.TrimSpace(blocks[0]) {
		t.Errorf("costgate price -h: %d %q, the docs show %q", status, first, blocks[0])
	}
}
