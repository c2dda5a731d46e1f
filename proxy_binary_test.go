package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/config"
)

// buildBinary builds costgate once for the test.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "costgate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// proxyConfig is a proxy-mode config in front of upstream, with extra
// lines under graphql.
func proxyConfig(t *testing.T, upstream, extra string) string {
	t.Helper()
	schema, err := filepath.Abs("graph/schema.graphqls")
	if err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, fmt.Sprintf(`listen: "127.0.0.1:0"
policies:
  graphql: {algorithm: token_bucket, limit: 50, period: 1s, burst: 1000, key: [tenant, api_key], on_store_error: allow}
graphql:
  policy: graphql
  schema: %q
  upstream: %q
%s`, schema, upstream+"/graphql", extra))
}

// hugeUpstream answers products(first: 100) { nodes { id title } } with 100
// titles of size bytes each, written as it goes (the test holds none of it).
func hugeUpstream(t *testing.T, size int) *httptest.Server {
	t.Helper()
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		bw := bufio.NewWriterSize(w, 64<<10)
		bw.WriteString(`{"data":{"products":{"nodes":[`)
		for i := 0; i < 100; i++ {
			if i > 0 {
				bw.WriteByte(',')
			}
			fmt.Fprintf(bw, `{"id":"%d","title":"`, i)
			for left := size; left > 0; left -= len(chunk) {
				bw.Write(chunk[:min(left, len(chunk))])
			}
			bw.WriteString(`"}`)
		}
		bw.WriteString(`]}}}`)
		bw.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// peakRSS is VmHWM of process pid, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
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

// The binary in proxy mode, where a user meets it: eight 60 MiB replies at
// once pass through in bounded memory (the peak RSS of the process stays
// under 256 MiB; reading each reply whole took it to 1.5 GiB), each priced
// by what it returned; an upstream that never answers is a 504
// UPSTREAM_TIMEOUT within graphql.upstream_timeout, well before the
// client's write deadline.
func TestProxyBinary(t *testing.T) {
	bin := buildBinary(t)

	t.Run("eight 60 MiB replies at once", func(t *testing.T) {
		const titleSize = 60 << 20 / 100
		up := hugeUpstream(t, titleSize)
		cmd := exec.Command(bin, "-config", proxyConfig(t, up.URL, ""))
		base := startBinary(t, cmd)
		idle := peakRSS(t, cmd.Process.Pid)

		var wg sync.WaitGroup
		type result struct {
			status int
			n      int64
			tail   string
			err    error
		}
		results := make([]result, 8)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := http.Post(base+"/graphql", "application/json", strings.NewReader(`{"query":"{ products(first: 100) { nodes { id title } } }"}`))
				if err != nil {
					results[i].err = err
					return
				}
				defer res.Body.Close()
				var tail tailWriter
				n, err := io.Copy(&tail, res.Body)
				results[i] = result{status: res.StatusCode, n: n, tail: string(tail.last), err: err}
			}()
		}
		wg.Wait()
		peak := peakRSS(t, cmd.Process.Pid)
		t.Logf("peak RSS %.1f MiB (idle %.1f MiB) for 8 concurrent replies of %.1f MiB", float64(peak)/(1<<20), float64(idle)/(1<<20), float64(results[0].n)/(1<<20))
		for i, r := range results {
			if r.err != nil || r.status != 200 || r.n < 60<<20 {
				t.Fatalf("reply %d: %d, %d bytes, %v", i, r.status, r.n, r.err)
			}
			var ext struct {
				Extensions struct {
					Cost struct{ RequestedQueryCost, ActualQueryCost int64 }
				}
			}
			tail := r.tail[strings.LastIndex(r.tail, `,"extensions":`)+1:]
			if err := json.Unmarshal([]byte("{"+tail), &ext); err != nil || ext.Extensions.Cost.ActualQueryCost != 101 {
				t.Errorf("reply %d ends %q: actualQueryCost %d, want 101 (%v)", i, r.tail, ext.Extensions.Cost.ActualQueryCost, err)
			}
		}
		if peak >= 256<<20 {
			t.Errorf("peak RSS %d MiB, want under 256 MiB: replies are held in memory", peak>>20)
		}
	})

	t.Run("upstream that never answers", func(t *testing.T) {
		stop := make(chan struct{})
		hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}))
		t.Cleanup(func() { close(stop); hang.Close() })
		cmd := exec.Command(bin, "-config", proxyConfig(t, hang.URL, "  upstream_timeout: 1s\n"))
		base := startBinary(t, cmd)
		start := time.Now()
		res, body := post(t, base+"/graphql", `{"query":"{ products(first: 1) { nodes { id } } }"}`)
		took := time.Since(start)
		if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, `"code":"UPSTREAM_TIMEOUT"`) || !strings.Contains(body, `"actualQueryCost":1`) {
			t.Errorf("after %v: %d %s, want 504 UPSTREAM_TIMEOUT with actualQueryCost 1", took, res.StatusCode, body)
		}
		if took >= config.WriteTimeout {
			t.Errorf("answered after %v, at or past the write deadline (%v)", took, config.WriteTimeout)
		}
	})
}

// tailWriter keeps the last 4 KiB written to it.
type tailWriter struct{ last []byte }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.last = append(w.last, p...)
	if len(w.last) > 4<<10 {
		w.last = append(w.last[:0], w.last[len(w.last)-4<<10:]...)
	}
	return len(p), nil
}
