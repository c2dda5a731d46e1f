// Package e2e tests the built costgate binary from outside, as a user runs
// it: real processes, real redis-server, nginx and caddy, over the network.
// The binary is built once for the whole package (TestMain), with -race
// when the tests run with it; start runs it and stops it when the test ends.
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/syncbuf"
)

var (
	// binary is the costgate binary start runs: built with -race when the
	// tests are, so that the race detector watches the server while it
	// serves them (a race fails the test that started it).
	binary string
	// release is the binary as `go build` makes it, for the tests that
	// measure the process itself (memory, descriptors, throughput). It is
	// binary when the tests run without -race.
	release string
)

// raceEnabled is set by race_test.go when the tests run with -race.
var raceEnabled bool

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "costgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	release, binary = filepath.Join(dir, "costgate"), filepath.Join(dir, "costgate")
	builds := [][]string{{"build", "-o", release, "."}}
	if raceEnabled {
		binary = filepath.Join(dir, "costgate-race")
		builds = append(builds, []string{"build", "-race", "-o", binary, "."})
	}
	for _, args := range builds {
		build := exec.Command("go", args...)
		build.Dir = repoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go %s: %v\n%s", strings.Join(args, " "), err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
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
	// Base is the main listener's URL (http://127.0.0.1:PORT), Host its
	// address (127.0.0.1:PORT); Addr and GRPC find the others.
	Base, Host string
	// Log is everything the process wrote to stderr.
	Log *syncbuf.Buffer

	exited  chan struct{} // closed once the process has exited
	waitErr error         // cmd.Wait's, set before exited closes
	stopped atomic.Bool   // SIGTERM was sent
}

// command runs bin with args, in this process's environment less its
// COSTGATE_ variables (a test says what it sets) plus env ("K=V"). The race
// detector waits 50 ms at exit for late reports, not its default second.
func command(bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COSTGATE_") && !strings.HasPrefix(kv, "GORACE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=50 "+os.Getenv("GORACE"))
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// underFileLimit is cmd run under an open-file limit of n (sh's ulimit -n,
// soft and hard), in the same process.
func underFileLimit(n int, cmd *exec.Cmd) *exec.Cmd {
	script := fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, n)
	limited := exec.Command("sh", append([]string{"-c", script, cmd.Path}, cmd.Args[1:]...)...)
	limited.Env = cmd.Env
	return limited
}

// start runs the binary with args (and extra environment entries "K=V")
// until it reports its main listener, and stops it when the test ends.
// A config should listen on 127.0.0.1:0 (or pass "-addr", "127.0.0.1:0").
func start(t testing.TB, env []string, args ...string) *Gateway {
	t.Helper()
	return startCmd(t, command(binary, env, args...))
}

// startCmd is start for a command of its own (command, underFileLimit).
// When the test ends the process gets SIGTERM and must exit 0 within 20 s,
// as a graceful shutdown does, without a data race reported.
func startCmd(t testing.TB, cmd *exec.Cmd) *Gateway {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Cmd: cmd, Log: &syncbuf.Buffer{}, exited: make(chan struct{})}
	var host string
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() { // read to the end: a full pipe would block the server's log
			g.Log.Write(append(sc.Bytes(), '\n'))
			var line struct{ Msg, Addr string }
			if host == "" && json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "costgate listening" && line.Addr != "" {
				host = line.Addr
				close(listening)
			}
		}
		io.Copy(io.Discard, stderr)
		g.waitErr = cmd.Wait() // after the pipe is read to its end
		close(g.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-g.exited:
			if !g.stopped.Load() && !t.Failed() {
				t.Errorf("costgate exited before the test stopped it: %v", g.waitErr)
			}
		default:
			if code, _, ok := g.stop(); !ok {
				t.Error("costgate did not exit within 20s of SIGTERM")
			} else if code != 0 {
				t.Errorf("costgate exited with %v after SIGTERM, want status 0", g.waitErr)
			}
		}
		if strings.Contains(g.Log.String(), "WARNING: DATA RACE") {
			t.Error("the race detector reported a data race in costgate")
		}
		if t.Failed() {
			t.Logf("costgate log:\n%s", g.Log.String())
		}
	})
	select {
	case <-listening:
	case <-g.exited:
		t.Fatalf("costgate exited before listening (%v):\n%s", g.waitErr, g.Log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("costgate did not report listening within 30s:\n%s", g.Log.String())
	}
	g.Host, g.Base = host, "http://"+host
	return g
}

// Terminate sends SIGTERM, once, without waiting: a graceful shutdown begins.
func (g *Gateway) Terminate(t testing.TB) {
	t.Helper()
	if g.stopped.CompareAndSwap(false, true) {
		if err := g.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
}

// Stop sends SIGTERM (unless Terminate did) and waits for the exit: the
// exit status (-1 for a signal) and how long it took. The test fails if the
// process lives 20 s on (it is killed then).
func (g *Gateway) Stop(t testing.TB) (code int, took time.Duration) {
	t.Helper()
	code, took, ok := g.stop()
	if !ok {
		t.Fatalf("costgate did not exit within 20s of SIGTERM")
	}
	return code, took
}

// stop is Stop without the test: ok is false if the process had to be killed.
func (g *Gateway) stop() (code int, took time.Duration, ok bool) {
	begin := time.Now()
	if g.stopped.CompareAndSwap(false, true) {
		g.Cmd.Process.Signal(syscall.SIGTERM) // an error: it has exited already
	}
	select {
	case <-g.exited:
		ok = true
	case <-time.After(20 * time.Second):
		g.Cmd.Process.Kill()
		<-g.exited
	}
	return g.Cmd.ProcessState.ExitCode(), time.Since(begin), ok
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it:
// nothing of a graceful shutdown runs.
func (g *Gateway) Kill(t testing.TB) {
	t.Helper()
	g.stopped.Store(true)
	if err := g.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-g.exited
}

// Reload sends SIGHUP: the process rereads its config file.
func (g *Gateway) Reload(t testing.TB) {
	t.Helper()
	if err := g.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// WaitLog waits up to 10 s until the log holds want n times.
func (g *Gateway) WaitLog(t testing.TB, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(g.Log.String(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q (%d times):\n%s", want, n, g.Log.String())
		}
		time.Sleep(10 * time.Millisecond) // polling a child's log: no clock to inject
	}
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

// GRPC is the address of the gRPC rate-limit service (grpc_listen).
func (g *Gateway) GRPC(t testing.TB) string {
	t.Helper()
	return g.Addr(t, "costgate gRPC rate-limit service listening")
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

// runToExit runs the binary with args (and env, as start) to its exit,
// within 30 s: its exit status and what it wrote to stdout and stderr.
func runToExit(t testing.TB, env []string, args ...string) (code int, output string) {
	t.Helper()
	cmd := command(binary, env, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	cmd.Wait()
	if !timer.Stop() {
		t.Fatalf("costgate still ran after 30s:\n%s", out.String())
	}
	return cmd.ProcessState.ExitCode(), out.String()
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

// get sends GET url with the given headers.
func get(t testing.TB, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

// post sends POST url with a JSON body.
func post(t testing.TB, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

// mustRequest is http.NewRequest with no body, failing the test on a bad URL.
func mustRequest(t testing.TB, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
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

// answer is a GraphQL answer as the tests read it.
type answer struct {
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
	Data       json.RawMessage `json:"data"`
	Extensions struct {
		Cost *struct {
			RequestedQueryCost int64  `json:"requestedQueryCost"`
			ActualQueryCost    *int64 `json:"actualQueryCost"`
			ThrottleStatus     *struct {
				CurrentlyAvailable int64 `json:"currentlyAvailable"`
			} `json:"throttleStatus"`
		} `json:"cost"`
	} `json:"extensions"`
}

func (a answer) code() string {
	if len(a.Errors) == 0 {
		return ""
	}
	c, _ := a.Errors[0].Extensions["code"].(string)
	return c
}

func readAnswer(t testing.TB, body string) answer {
	t.Helper()
	var a answer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("not a GraphQL answer (%v): %.300s", err, body)
	}
	return a
}

// available is what the caller's bucket holds, read with a dry run (which
// charges nothing).
func available(t testing.TB, base string, headers ...string) int64 {
	t.Helper()
	_, body := postGraphQL(t, base, `{"query":"{ __typename }"}`, append([]string{"Costgate-Dry-Run", "1"}, headers...)...)
	a := readAnswer(t, body)
	if a.Extensions.Cost == nil || a.Extensions.Cost.ThrottleStatus == nil {
		t.Fatalf("no throttleStatus: %s", body)
	}
	return a.Extensions.Cost.ThrottleStatus.CurrentlyAvailable
}
