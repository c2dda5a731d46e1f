package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The layout the README describes: gqllimit knows nothing of httplimit (identity is
// its own part), and the root package holds only the command.
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
	out, err = exec.Command("go", "list", "-f", "{{join .GoFiles \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "server.go" {
		t.Errorf("the root package holds %s; want only server.go (the wiring lives in internal/)", got)
	}
}

// logBuffer collects a server's JSON log lines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitLog waits until the log holds want, n times.
func (l *logBuffer) waitLog(t *testing.T, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(l.String(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q (%d times):\n%s", want, n, l.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

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
	logs := &logBuffer{}
	reload := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan listening, 1), make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-config", file}, func(string) string { return "" }, logs, reload, ready)
	}()
	var base string
	select {
	case at := <-ready:
		base = "http://" + at.HTTP
	case err := <-done:
		t.Fatalf("server did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server stopped with %v", err)
		}
	})
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
	reload <- syscall.SIGHUP
	logs.waitLog(t, `"msg":"config reloaded"`, 1)
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
	reload <- syscall.SIGHUP
	logs.waitLog(t, `"msg":"config reload failed; the config in effect stays"`, 1)
	if !strings.Contains(logs.String(), "policies.api.limit: must be at least 1") {
		t.Errorf("the failed reload does not say why:\n%s", logs)
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
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-config", file}, func(string) string { return "" }, io.Discard, nil, nil)
	if err == nil || !strings.Contains(err.Error(), `graphql.policy: unknown policy "graphql"`) || !strings.Contains(err.Error(), `graphql.path: ""`) {
		t.Errorf("run = %v, want a refusal naming graphql.policy and how to turn GraphQL off", err)
	}
}
