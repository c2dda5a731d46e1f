// Package e2e tests the built costgate binary from outside, as a user runs
// it: real processes, real redis-server, nginx and caddy, over the network.
// The binary is built once for the whole package (TestMain).
package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/syncbuf"
)

// binary is the costgate binary TestMain built.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "costgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "costgate")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is the module's root, the parent of this package's directory.
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}

// repoFile is the absolute path of a file of the repository (graph/schema.graphqls).
func repoFile(path string) string { return filepath.Join(repoRoot(), path) }

// Gateway is one running costgate process.
type Gateway struct {
	Cmd *exec.Cmd
	// Base is the main listener's URL (http://127.0.0.1:PORT).
	Base string
	// Addrs holds every listener the process reported, by log message
	// ("costgate listening", "costgate gRPC rate-limit service listening", ...).
	Addrs map[string]string
	// Log is everything the process wrote to stderr.
	Log *syncbuf.Buffer
}

// start runs the binary with args (and extra environment entries "K=V")
// until it reports its main listener, and kills it when the test ends.
// A config should listen on 127.0.0.1:0 (or pass "-addr", "127.0.0.1:0").
func start(t testing.TB, env []string, args ...string) *Gateway {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Cmd: cmd, Log: &syncbuf.Buffer{}, Addrs: map[string]string{}}
	var mu sync.Mutex
	listening := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		once := sync.Once{}
		for sc.Scan() { // read to the end: a full pipe would block the server's log
			g.Log.Write(append(sc.Bytes(), '\n'))
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Addr == "" {
				continue
			}
			mu.Lock()
			g.Addrs[line.Msg] = line.Addr
			mu.Unlock()
			if line.Msg == "costgate listening" {
				once.Do(func() { close(listening) })
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		<-done
		if t.Failed() {
			t.Logf("costgate log:\n%s", g.Log.String())
		}
	})
	select {
	case <-listening:
	case <-done:
		cmd.Wait()
		t.Fatalf("costgate exited before listening:\n%s", g.Log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("costgate did not report listening within 30s:\n%s", g.Log.String())
	}
	mu.Lock()
	g.Base = "http://" + g.Addrs["costgate listening"]
	mu.Unlock()
	return g
}

// Addr is the address the process reported with log message msg, waiting up
// to 10 s for it (listeners after the main one report later).
func (g *Gateway) Addr(t testing.TB, msg string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range g.Log.Lines() {
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg && l.Addr != "" {
				return l.Addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("costgate did not log %q with an address", msg)
		}
		time.Sleep(20 * time.Millisecond) // polling a child's log: no clock to inject
	}
}

// PeakRSS is the process's peak resident memory (VmHWM), in bytes.
func (g *Gateway) PeakRSS(t testing.TB) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/pid/status")
	return 0
}

// writeConfig writes a config file into the test's temporary directory.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "costgate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// do sends req and returns the response with its whole body.
func do(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// postGraphQL posts a GraphQL-over-HTTP body (JSON text) to base/graphql
// with the given headers ("X-API-Key", "demo-free", ...).
func postGraphQL(t testing.TB, base, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/graphql", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return do(t, req)
}
