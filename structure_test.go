package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The layout the README's package map describes: gqllimit knows nothing of httplimit (identity is
// its own part), and the root package holds only the command (its tests,
// which run the built binary, are in e2e/).
func TestLayout(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./limiter/gqllimit").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if slices.Contains(deps, "github.com/costgate/costgate/limiter/httplimit") {
		t.Error("limiter/gqllimit depends on limiter/httplimit")
	}
	if !slices.Contains(deps, "github.com/costgate/costgate/limiter/identity") {
		t.Error("limiter/gqllimit does not use limiter/identity")
	}
	// The gateway check reaches the route limiter through internal/, so that
	// httplimit exports what an application needs and no more.
	out, err = exec.Command("go", "list", "-f", "{{join .Imports \" \"}}", "./internal/check").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if slices.Contains(strings.Fields(string(out)), "github.com/costgate/costgate/limiter/httplimit") {
		t.Error("internal/check imports limiter/httplimit; want internal/routelimit")
	}
	out, err = exec.Command("go", "list", "-f", "{{join .GoFiles \" \"}}|{{join .TestGoFiles \" \"}}|{{join .XTestGoFiles \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	files := strings.Split(strings.TrimSpace(string(out)), "|")
	if files[0] != "server.go" {
		t.Errorf("the root package holds %s; want only server.go (the wiring lives in internal/)", files[0])
	}
	if tests := strings.TrimSpace(files[1] + " " + files[2]); tests != "structure_test.go" {
		t.Errorf("the root package's tests are %s; want only structure_test.go (tests of the binary go in e2e/)", tests)
	}
}
