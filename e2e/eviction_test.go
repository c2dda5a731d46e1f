package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/internal/metricstest"
	"github.com/costgate/costgate/limiter/redistest"
)

// evictionConfig serves /v1/check on Redis: a login limit keyed by the
// client's address, which a trusted gateway (the test, on loopback) names
// in X-Forwarded-For, so that every request can be a new identity.
const evictionConfig = `listen: "127.0.0.1:0"
store:
  redis: {url: "redis://%s/0"%s}
identity:
  trusted_proxies: ["127.0.0.1/32"]
  hash_key: "a-test-secret-of-32-bytes-length"
policies:
  login_ip: {algorithm: sliding_log, limit: 10, period: 5m, key: [ip], on_store_error: deny}
routes:
  - {match: "POST /login", policies: [login_ip]}
graphql: {path: ""}
`

// An evicting Redis stops the binary at start: allkeys-lru, and
// volatile-lru, a managed Redis's usual default, which evicts costgate's
// keys as readily (every one carries a TTL). The message names the node,
// the policy, what eviction does to limits and both ways out.
func TestBinaryRefusesAnEvictingRedis(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-lru"} {
		t.Run(policy, func(t *testing.T) {
			rds := redistest.StartServer(t, redistest.WithConfig("maxmemory-policy", policy))
			cfg := writeConfig(t, fmt.Sprintf(evictionConfig, rds.Addr(), ""))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, binary, "-config", cfg).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("costgate over maxmemory-policy %s: %v, want exit status 1\n%s", policy, err, out)
			}
			for _, want := range []string{rds.Addr(), "maxmemory-policy " + policy, "limit reset", "maxmemory-policy noeviction", "store.redis.allow_eviction: true"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the refusal lacks %q:\n%s", want, out)
				}
			}
			// docs/redis.md quotes it.
			if policy == "volatile-lru" {
				page, err := os.ReadFile(repoFile("docs/redis.md"))
				if err != nil {
					t.Fatal(err)
				}
				quoted := ""
				for line := range strings.Lines(string(page)) {
					if l := strings.TrimSpace(line); strings.HasPrefix(l, "costgate: store.redis: Redis 10.0.0.5:6379") {
						quoted = strings.ReplaceAll(l, "10.0.0.5:6379", rds.Addr())
					}
				}
				if got := strings.TrimSpace(string(out)); quoted != got {
					t.Errorf("docs/redis.md quotes the refusal as\n%s\nthe binary says\n%s", quoted, got)
				}
			}
		})
	}
}

// A Redis that refuses INFO and CONFIG GET to costgate's user (an ACL
// here, as a managed Redis may) stops the start too: whether it evicts is
// unknown, and the message says what to do.
func TestBinaryRefusesAnUnreadablePolicy(t *testing.T) {
	rds := redistest.StartServer(t)
	if err := rds.Client().Do(context.Background(), "ACL", "SETUSER", "costgate", "on", ">secret", "~*", "+@all", "-info", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(evictionConfig, "costgate:secret@"+rds.Addr(), ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "-config", cfg).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("costgate over a Redis that hides its policy: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{"does not say its maxmemory-policy", "NOPERM", "run INFO", "store.redis.allow_eviction: true"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "secret") {
		t.Errorf("the refusal shows the password:\n%s", out)
	}
}

// Through Sentinel the refusal names the master as the config does.
func TestBinaryRefusesAnEvictingSentinelMaster(t *testing.T) {
	rds := redistest.StartServer(t, redistest.WithConfig("maxmemory-policy", "allkeys-lru"))
	sen := redistest.StartSentinel(t, rds, "costgate")
	cfg := writeConfig(t, strings.Replace(fmt.Sprintf(evictionConfig, "x", ""), `url: "redis://x/0"`,
		`sentinel: {master: costgate, addrs: ["`+sen.Addr()+`"]}`, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "-config", cfg).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("costgate over a Sentinel master with allkeys-lru: %v, want exit status 1\n%s", err, out)
	}
	if want := "Redis sentinel master costgate via " + sen.Addr() + " has maxmemory-policy allkeys-lru"; !strings.Contains(string(out), want) {
		t.Errorf("the refusal lacks %q:\n%s", want, out)
	}
}

// evictedKeys is Redis's own count (INFO stats evicted_keys).
func evictedKeys(t *testing.T, c *redis.Client) float64 {
	t.Helper()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "evicted_keys:"); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	t.Fatal("INFO stats has no evicted_keys")
	return 0
}

// With store.redis.allow_eviction: true the binary starts over a
// volatile-lru Redis and warns; a flood of new identities past maxmemory
// makes Redis evict, and costgate_store_evictions_total{node} counts what
// Redis counted, as does /readyz's store details (read from loopback).
func TestBinaryAllowEvictionCountsEvictions(t *testing.T) {
	rds := redistest.StartServer(t, redistest.WithConfig("maxmemory-policy", "volatile-lru"))
	g := start(t, nil, "-config", writeConfig(t, fmt.Sprintf(evictionConfig, rds.Addr(), ", allow_eviction: true")))
	var warned bool
	for _, line := range g.Log.Lines() {
		warned = warned || strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, `"maxmemory_policy":"volatile-lru"`)
	}
	if !warned {
		t.Errorf("no warning naming volatile-lru at start:\n%s", g.Log.String())
	}
	rc := rds.Client()
	ctx := context.Background()
	info, err := rc.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			used, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	// Room for a few thousand login states past what Redis holds now.
	if err := rc.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+512<<10, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	// The flood: one failed login from each of many addresses.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for w := range 8 {
		wg.Go(func() {
			for i := range 1500 {
				req, _ := http.NewRequest("GET", g.Base+"/v1/check", nil)
				req.Header.Set("X-Forwarded-Method", "POST")
				req.Header.Set("X-Forwarded-Uri", "/login")
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", w, i/250, i%250))
				res, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				if err != nil || res.StatusCode != http.StatusOK {
					mu.Lock()
					failures = append(failures, fmt.Sprint(err, res))
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d checks of the flood failed, the first: %s", len(failures), failures[0])
	}
	before := evictedKeys(t, rc)
	if before == 0 {
		t.Fatal("Redis evicted nothing: the flood did not reach maxmemory")
	}
	counted, ok := metricstest.Scrape(t, g.Base+"/metrics").Value("costgate_store_evictions_total", map[string]string{"store": "redis", "node": rds.Addr()})
	after := evictedKeys(t, rc)
	if !ok || counted < before || counted > after {
		t.Errorf("costgate_store_evictions_total{node=%q} = %v (present %v); Redis counted %v before the scrape, %v after", rds.Addr(), counted, ok, before, after)
	}
	res, body := do(t, mustRequest(t, "GET", g.Base+"/readyz"))
	var ready struct {
		Store struct {
			Nodes []struct {
				Addr            string
				MaxmemoryPolicy string `json:"maxmemory_policy"`
				Evictions       float64
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil || res.StatusCode != 200 || len(ready.Store.Nodes) != 1 {
		t.Fatalf("/readyz: %d %s", res.StatusCode, body)
	}
	if n := ready.Store.Nodes[0]; n.MaxmemoryPolicy != "volatile-lru" || n.Evictions < before {
		t.Errorf("/readyz's node: %s, want volatile-lru and at least %v evictions", body, before)
	}
	t.Logf("Redis evicted %v keys (maxmemory %d bytes past the start); the scrape counted %v", after, 512<<10, counted)
}
