package redistest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindMissingNamesInstallCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		root bool
		want string
	}{
		{root: true, want: "install it with: apt-get install -y redis-server"},
		{root: false, want: "install it with: sudo apt-get install -y redis-server"},
	} {
		_, err := findIn("", tc.root)
		if err == nil {
			t.Fatal("findIn with empty PATH succeeded")
		}
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("error %v does not wrap ErrNotFound", err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("root=%v: error %q does not contain %q", tc.root, err, tc.want)
		}
	}
}

func TestFindWithEmptyPATH(t *testing.T) {
	t.Setenv("PATH", "") // not parallel: changes the process environment
	_, err := Find()
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y redis-server") {
		t.Fatalf("Find() with empty PATH: error %v, want one containing the install command", err)
	}
}

func TestFindInSearchesPathList(t *testing.T) {
	t.Parallel()
	empty, dir := t.TempDir(), t.TempDir()
	bin := filepath.Join(dir, "redis-server")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := findIn(empty+string(filepath.ListSeparator)+dir, false)
	if err != nil || got != bin {
		t.Fatalf("findIn = %q, %v; want %q", got, err, bin)
	}
	// A non-executable file does not count.
	if err := os.Chmod(bin, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findIn(dir, false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("findIn with non-executable file: %v, want ErrNotFound", err)
	}
}
