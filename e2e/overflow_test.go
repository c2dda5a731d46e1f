package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/metricstest"
)

// overflowConfig is the in-memory store with room for 64 keys, and a login
// limit that fails open on a store error.
const overflowConfig = `listen: "127.0.0.1:0"
store: {memory: {max_keys: 64}}
identity:
  trusted_proxies: ["127.0.0.1/32"]
policies:
  login_ip: {algorithm: sliding_log, limit: 3, period: 5m, key: [ip], on_store_error: allow}
routes:
  - {match: "POST /login", policies: [login_ip]}
graphql: {path: ""}
`

// The memory store full of locked addresses: newcomers share the policy's
// overflow state (3 guesses between them all), even though login_ip fails
// open on a store error: before, each newcomer was a store error and was
// let through unlimited. The overflow decisions are counted in
// costgate_memstore_overflow_total{policy} and logged once, not per request.
func TestBinaryMemoryStoreFullOfLockedKeys(t *testing.T) {
	g := start(t, nil, "-config", writeConfig(t, overflowConfig))
	client := &http.Client{}
	login := func(ip string) int {
		t.Helper()
		req := mustRequest(t, "GET", g.Base+"/v1/check")
		req.Header.Set("X-Forwarded-Method", "POST")
		req.Header.Set("X-Forwarded-Uri", "/login")
		req.Header.Set("X-Forwarded-For", ip)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	began := time.Now()
	for i := range 64 {
		for range 4 {
			login(fmt.Sprintf("198.51.100.%d", i))
		}
	}
	admitted := 0
	for i := range 100 {
		switch status := login(fmt.Sprintf("203.0.113.%d", i)); status {
		case http.StatusOK:
			admitted++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("newcomer %d: status %d", i, status)
		}
	}
	if admitted > 3 {
		t.Errorf("100 newcomers with the store full of locked addresses: %d admitted, want at most the overflow state's 3", admitted)
	}
	if status := login("198.51.100.7"); status != http.StatusTooManyRequests {
		t.Errorf("a locked address after the newcomers: %d, want 429", status)
	}
	counted, ok := metricstest.Scrape(t, g.Base+"/metrics").Value("costgate_memstore_overflow_total", map[string]string{"policy": "login_ip"})
	if !ok || counted < 100 {
		t.Errorf("costgate_memstore_overflow_total{policy=login_ip} = %v (present %v), want at least the 100 newcomers", counted, ok)
	}
	// A line a second at most: the run's length bounds them.
	if lines, most := strings.Count(g.Log.String(), "overflow state"), int(time.Since(began)/time.Second)+1; lines < 1 || lines > most {
		t.Errorf("%d overflow lines in the log for %v decisions in %s, want 1 to %d:\n%s", lines, counted, time.Since(began), most, g.Log.String())
	}
}
