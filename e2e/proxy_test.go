package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/config"
)

// proxyConfig is a proxy-mode config in front of upstream, with extra
// lines under graphql.
func proxyConfig(t *testing.T, upstream, extra string) string {
	t.Helper()
	schema := repoFile("graph/schema.graphqls")
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

// The binary in proxy mode, where a user meets it: eight 60 MiB replies at
// once pass through in bounded memory (the peak RSS of the process stays
// under 256 MiB; reading each reply whole took it to 1.5 GiB), each priced
// by what it returned; an upstream that never answers is a 504
// UPSTREAM_TIMEOUT within graphql.upstream_timeout, well before the
// client's write deadline.
func TestProxyBinary(t *testing.T) {
	t.Run("eight 60 MiB replies at once", func(t *testing.T) {
		const titleSize = 60 << 20 / 100
		up := hugeUpstream(t, titleSize)
		g := startCmd(t, command(release, nil, "-config", proxyConfig(t, up.URL, "")))
		base := g.Base
		idle := g.PeakRSS(t)

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
		peak := g.PeakRSS(t)
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
		base := startCmd(t, command(release, nil, "-config", proxyConfig(t, hang.URL, "  upstream_timeout: 1s\n"))).Base
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
