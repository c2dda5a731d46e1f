package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter/redistest"
)

// terminate sends g SIGTERM and returns how long it took to exit, and an
// error unless it exited with status 0.
func terminate(t *testing.T, g *Gateway) (time.Duration, error) {
	t.Helper()
	code, took := g.Stop(t)
	if code != 0 {
		return took, fmt.Errorf("exit status %d", code)
	}
	return took, nil
}

// A SIGTERM'd gateway with nothing in flight exits promptly, however many
// connections its clients hold open without a request: idle keep-alive
// ones, and ones that sent nothing yet (Go's HTTP client keeps such a
// connection whenever an idle one served the request it was dialled for).
// Before, Go's Shutdown waited for each of the latter until it was five
// seconds old. The peer is the same binary with no connection at all,
// stopped in the same run.
func TestBinaryStopsPromptly(t *testing.T) {
	alone, _ := terminate(t, start(t, nil, "-addr", "127.0.0.1:0"))

	g := start(t, nil, "-addr", "127.0.0.1:0")
	addr := strings.TrimPrefix(g.Base, "http://")
	client := &http.Client{}
	res, err := client.Get(g.Base + "/healthz") // leaves an idle keep-alive connection
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	var silent []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	// The accept is the server's: wait until it has the connections.
	if res, err := client.Get(g.Base + "/healthz"); err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	took, err := terminate(t, g)
	if err != nil {
		t.Errorf("exit: %v\n%s", err, g.Log.String())
	}
	t.Logf("exit after SIGTERM: %s with %d silent connections and an idle one, %s with none", took.Round(time.Millisecond), len(silent), alone.Round(time.Millisecond))
	if took > alone+time.Second {
		t.Errorf("the gateway took %s to exit with connections that sent nothing, %s with none; want within a second of it (Go's Shutdown alone waits up to 5s for them)", took.Round(time.Millisecond), alone.Round(time.Millisecond))
	}
}

// syncBurstConfig is two local-first gateways on one Redis: a token bucket
// of 120 refilled at 1 a second, synced every 100ms.
const syncBurstConfig = `listen: "127.0.0.1:0"
store: {redis: {url: "redis://%s/0"}}
identity:
  hash_key: "a-test-secret-of-32-bytes-length"
  api_keys:
    k-burst: {tenant: burst, plan: free}
policies:
  api: {algorithm: token_bucket, limit: 60, period: 1m, burst: 120, key: [tenant, api_key], sync: 100ms}
routes:
  - {match: "/api/*", policies: [api]}
graphql: {path: ""}
`

// docs/redis.md's bound holds when a local-first gateway stops: a burst on one
// gateway, SIGTERM a few milliseconds later (before its first sync), then the whole load
// on the other for two seconds admit at most B + r·W (plus one token per
// gateway for what a sync on the wire may grant twice). Before, what the
// stopped gateway granted from its lease was never charged, and its lease
// came back whole three intervals later: the other gateway granted it again.
func TestBinarySyncBurstThenSIGTERM(t *testing.T) {
	rds := redistest.StartServer(t)
	cfg := writeConfig(t, fmt.Sprintf(syncBurstConfig, rds.Addr()))
	stays, stops := start(t, nil, "-config", cfg), start(t, nil, "-config", cfg)
	const burst, rate = 120, 1.0 // tokens, tokens a second
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var admitted atomic.Int64
	check := func(base string) error {
		req, _ := http.NewRequest("GET", base+"/api/products", nil)
		req.Header.Set("X-API-Key", "k-burst")
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		switch res.StatusCode {
		case http.StatusOK:
			admitted.Add(1)
		case http.StatusTooManyRequests:
		default:
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	}
	// load checks base from 4 goroutines until stop is closed or a check
	// fails (the gateway stopped).
	load := func(base string, stop <-chan struct{}) *sync.WaitGroup {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if check(base) != nil {
						return
					}
				}
			})
		}
		return &wg
	}
	begin := time.Now()
	stopBurst := make(chan struct{})
	burstLoad := load(stops.Base, stopBurst)
	// SIGTERM once the burst has taken a third of the bucket, well before
	// the gateway's first sync (100ms after its first check) on an idle
	// machine: what it granted from its lease is then pushed by nothing but
	// its last sync.
	for deadline := time.Now().Add(2 * time.Second); admitted.Load() < burst/3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	took, err := terminate(t, stops)
	close(stopBurst)
	burstLoad.Wait()
	fromBurst := admitted.Load()
	if err != nil {
		t.Errorf("the stopped gateway's exit: %v", err)
	}
	stopRest := make(chan struct{})
	rest := load(stays.Base, stopRest)
	time.Sleep(2 * time.Second)
	close(stopRest)
	rest.Wait()
	w := time.Since(begin)
	bound := burst + rate*w.Seconds() + 2
	t.Logf("admitted %d on the gateway that stopped (exit %s after SIGTERM), %d in all in %s; the bound is %.1f",
		fromBurst, took.Round(time.Millisecond), admitted.Load(), w.Round(time.Millisecond), bound)
	if fromBurst < burst/3 {
		t.Errorf("the burst admitted %d before SIGTERM, want at least %d", fromBurst, burst/3)
	}
	if got := float64(admitted.Load()); got > bound {
		t.Errorf("admitted %d in %s on a bucket of %d at %.0f a second: over docs/redis.md's bound %.1f", admitted.Load(), w.Round(time.Millisecond), burst, rate, bound)
	}
	if got := admitted.Load(); got < burst*9/10 {
		t.Errorf("admitted %d, under 90%% of the burst %d: budget lost", got, burst)
	}
}
