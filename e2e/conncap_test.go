package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// holdConn opens a connection to addr from the loopback address from, sends
// one request for /healthz and reads the answer, keeping the connection
// open (it counts against the cap) until the test ends. A connection the
// server closes without an answer is a test failure.
func holdConn(t *testing.T, from, addr string) *http.Response {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: costgate\r\n\r\n"); err != nil {
		t.Fatalf("write from %s: %v", from, err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("connection from %s closed without an answer: %v", from, err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("answer to %s: %v", from, err)
	}
	res.Body = io.NopCloser(strings.NewReader(string(body)))
	c.SetDeadline(time.Time{})
	return res
}

// holdConns holds n connections from one address and wants each served.
func holdConns(t *testing.T, n int, from, addr string) {
	t.Helper()
	for i := range n {
		if res := holdConn(t, from, addr); res.StatusCode != 200 {
			t.Fatalf("connection %d from %s: %d, want 200 (within the cap)", i+1, from, res.StatusCode)
		}
	}
}

// wantRefused wants the answer to an over-cap connection: 429, Retry-After
// 1, Connection: close and the JSON body.
func wantRefused(t *testing.T, res *http.Response, what string) {
	t.Helper()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "1" || !res.Close ||
		res.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(body), `{"error":"too_many_connections"`) {
		t.Errorf("%s: %d, Retry-After %q, Connection %q, Content-Type %q, %s; want 429, 1, close, JSON too_many_connections",
			what, res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("Connection"), res.Header.Get("Content-Type"), body)
	}
}

func refusedCount(t *testing.T, base string) string {
	t.Helper()
	_, metrics := get(t, base+"/metrics", nil)
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, "costgate_connections_refused_total "); ok {
			return v
		}
	}
	return "absent"
}

// SIGHUP applies server.max_conns_per_ip and the trusted-proxy exemption
// from it to new connections, and logs that a changed listen waits for a
// restart (the old address keeps serving).
func TestReloadConnectionCap(t *testing.T) {
	file := filepath.Join(t.TempDir(), "costgate.yaml")
	write := func(listen string, maxConns int, trusted string) {
		t.Helper()
		cfg := fmt.Sprintf("listen: %q\nserver: {max_conns_per_ip: %d}\nidentity: {trusted_proxies: [%s]}\n", listen, maxConns, trusted) +
			"policies:\n  api: {algorithm: fixed_window, limit: 100, period: 1h, key: [ip]}\n" +
			"routes:\n  - {match: \"/api/*\", policies: [api]}\ngraphql: {path: \"\"}\n"
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("127.0.0.1:0", 2, "")
	at := start(t, nil, "-config", file)

	// The gateway at 127.0.0.2 is not trusted yet: capped at 2.
	holdConns(t, 2, "127.0.0.2", at.Host)
	wantRefused(t, holdConn(t, "127.0.0.2", at.Host), "3rd connection from an untrusted address, cap 2")

	// Reload: the gateway is trusted, the cap is 3, listen moves.
	write("127.0.0.1:1", 3, `"127.0.0.2"`)
	at.Reload(t)
	at.WaitLog(t, `"msg":"config reloaded"`, 1)
	if !strings.Contains(at.Log.String(), `listen changed; it takes effect at the next start`) {
		t.Errorf("a changed listen is not logged as waiting for a restart:\n%s", at.Log)
	}
	holdConns(t, 5, "127.0.0.2", at.Host) // 7 open: the exemption applies
	holdConns(t, 3, "127.0.0.3", at.Host)
	wantRefused(t, holdConn(t, "127.0.0.3", at.Host), "4th connection after raising the cap to 3")

	// Lower the cap to 1: new connections over it are refused, the gateway stays exempt.
	write("127.0.0.1:1", 1, `"127.0.0.2"`)
	at.Reload(t)
	at.WaitLog(t, `"msg":"config reloaded"`, 2)
	if n := strings.Count(at.Log.String(), `listen changed; it takes effect at the next start","listen":"127.0.0.1:0","new":"127.0.0.1:1"`); n != 2 {
		t.Errorf("listen, still not applied after a second reload, is logged %d times, want 2:\n%s", n, at.Log)
	}
	holdConns(t, 1, "127.0.0.4", at.Host)
	wantRefused(t, holdConn(t, "127.0.0.4", at.Host), "2nd connection after lowering the cap to 1")
	wantRefused(t, holdConn(t, "127.0.0.3", at.Host), "a connection from an address holding 3 after lowering the cap to 1")
	holdConns(t, 2, "127.0.0.2", at.Host)

	if got := refusedCount(t, "http://"+at.Host); got != "4" {
		t.Errorf("costgate_connections_refused_total = %s, want 4", got)
	}
}

// An over-cap connection is answered (429, Retry-After, Connection: close,
// a JSON body), whether the client sent a request, sends nothing, or is Go's
// own HTTP client; every refusal is counted in /metrics.
func TestConnectionCapAnswer(t *testing.T) {
	file := writeConfig(t, "server: {max_conns_per_ip: 1}\npolicies:\n  api: {algorithm: fixed_window, limit: 100, period: 1h, key: [ip]}\n"+
		"routes:\n  - {match: \"/api/*\", policies: [api]}\ngraphql: {path: \"\"}\n")
	at := start(t, nil, "-addr", "127.0.0.1:0", "-config", file)
	holdConns(t, 1, "127.0.0.2", at.Host)

	wantRefused(t, holdConn(t, "127.0.0.2", at.Host), "a request on an over-cap connection")

	// A client that sends nothing still gets the answer, then the close.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	silent, err := d.Dial("tcp", at.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(silent), nil)
	if err != nil {
		t.Fatalf("a silent over-cap connection got no answer: %v", err)
	}
	wantRefused(t, res, "a silent over-cap connection")

	res, err = clientFrom("127.0.0.2").Get("http://" + at.Host + "/api/products")
	if err != nil {
		t.Fatalf("Go's HTTP client on an over-cap connection: %v, want the 429 answer", err)
	}
	wantRefused(t, res, "Go's HTTP client on an over-cap connection")
	res.Body.Close()

	if got := refusedCount(t, "http://"+at.Host); got != "3" {
		t.Errorf("costgate_connections_refused_total = %s, want 3", got)
	}
}

// With no server.max_conns_per_ip the cap is a quarter of the process's
// open-file limit: 100 with 400 descriptors (not a fixed 64).
func TestDefaultConnectionCapFollowsOpenFileLimit(t *testing.T) {
	host := startCmd(t, underFileLimit(400, command(release, nil, "-addr", "127.0.0.1:0"))).Host
	holdConns(t, 100, "127.0.0.2", host)
	wantRefused(t, holdConn(t, "127.0.0.2", host), "the 101st connection under 400 descriptors")
}

// A burst of fresh connections from one address far over the cap: every
// request gets an answer (200 or 429), none a reset or an empty reply.
func TestConnectionCapBurstIsAnswered(t *testing.T) {
	file := writeConfig(t, "server: {max_conns_per_ip: 2}\npolicies:\n  api: {algorithm: fixed_window, limit: 100, period: 1h, key: [ip]}\n"+
		"routes:\n  - {match: \"/api/*\", policies: [api]}\ngraphql: {path: \"\"}\n")
	at := start(t, nil, "-addr", "127.0.0.1:0", "-config", file)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	const clients, each = 32, 20
	statuses := make(chan int, clients*each)
	errs := make(chan error, clients*each)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range each {
				res, err := client.Get("http://" + at.Host + "/healthz")
				if err != nil {
					errs <- err
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				statuses <- res.StatusCode
			}
		})
	}
	wg.Wait()
	close(statuses)
	close(errs)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if n := len(errs); n > 0 {
		t.Errorf("%d of %d requests failed (first: %v); want each answered", n, clients*each, <-errs)
	}
	if counts[200] == 0 || counts[429] == 0 || counts[200]+counts[429] != clients*each {
		t.Errorf("statuses %v; want only 200 and 429, both", counts)
	}
	if got, want := refusedCount(t, "http://"+at.Host), fmt.Sprint(counts[429]); got != want {
		t.Errorf("costgate_connections_refused_total = %s, want %s (the 429s)", got, want)
	}
}
