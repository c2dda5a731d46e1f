package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter/redistest"
)

// concurrencyConfig runs gateways on one Redis with GET /api/ticks (the
// example's stream of server-sent events) limited to 5 streams of one API
// key at once, a lease of %s.
const concurrencyConfig = `listen: "127.0.0.1:0"
store: {redis: {url: "redis://%s/0"}}
identity:
  hash_key: "a-test-secret-of-32-bytes-length"
  api_keys: {k-conc: {tenant: t, plan: free}}
policies:
  api:     {algorithm: token_bucket, limit: 100000, period: 1m, key: [tenant, api_key]}
  streams: {algorithm: concurrency, limit: 5, lease: %s, key: [tenant, api_key]}
routes:
  - {match: "GET /api/ticks", policies: [api, streams]}
graphql: {path: ""}
`

// stream is one GET /api/ticks: its answer, and for a 200 the open body,
// closed by Close (the client going away).
type stream struct {
	status     int
	retryAfter string
	errorCode  string
	sent       time.Time
	body       io.ReadCloser
	cancel     context.CancelFunc
}

func (s *stream) Close() {
	if s.body != nil {
		s.cancel()
		s.body.Close()
	}
}

// openStream asks base for a stream of count ticks (0: until closed) and,
// when it is admitted, reads its first event so that it is known to be in
// flight; a refusal is read whole.
func openStream(t *testing.T, base string, count int) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/ticks?count=%d&interval_ms=200", base, count), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", "k-conc")
	req.Header.Set("Accept", "text/event-stream")
	s := &stream{sent: time.Now(), cancel: cancel}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Errorf("GET /api/ticks: %v", err)
		return s
	}
	s.status, s.retryAfter = res.StatusCode, res.Header.Get("Retry-After")
	if res.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.NewDecoder(res.Body).Decode(&e)
		s.errorCode = e.Error
		res.Body.Close()
		cancel()
		return s
	}
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || line != "event: tick\n" {
		t.Errorf("first line of an admitted stream: %q %v", line, err)
	}
	s.body = res.Body
	return s
}

// startConcurrencyGateways starts n gateways on one redis-server with a
// concurrency lease of lease.
func startConcurrencyGateways(t *testing.T, n int, lease string) (*redistest.Server, []*Gateway) {
	t.Helper()
	srv := redistest.StartServer(t)
	cfg := writeConfig(t, fmt.Sprintf(concurrencyConfig, srv.Addr(), lease))
	gws := make([]*Gateway, n)
	for i := range gws {
		gws[i] = start(t, nil, "-config", cfg)
	}
	return srv, gws
}

// holdScores are the lease ends (µs) of every hold in Redis.
func holdScores(t *testing.T, rdb *redis.Client) []float64 {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "rl:{*}c").Result()
	if err != nil {
		t.Fatal(err)
	}
	var scores []float64
	for _, k := range keys {
		zs, err := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zs {
			scores = append(scores, z.Score)
		}
	}
	return scores
}

// Three gateway processes on one redis-server, 40 streams of one key at
// once against a limit of 5: every stream that is admitted stays open, so
// all 40 are in flight together, and exactly 5 get through, whichever
// gateway they reach; the 35 others get 429 concurrency_limit with
// Retry-After: 1. Streams outliving a third of the lease keep their
// places (renewed); a client that leaves frees its own.
func TestBinaryConcurrencyAcrossGateways(t *testing.T) {
	srv, gws := startConcurrencyGateways(t, 3, "3s")
	rdb := srv.Client()
	streams := make([]*stream, 40)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() { streams[i] = openStream(t, gws[i%3].Base, 0) })
	}
	wg.Wait()
	defer func() {
		for _, s := range streams {
			s.Close()
		}
	}()
	var open []*stream
	perGateway := map[int]int{}
	for i, s := range streams {
		switch {
		case s.status == http.StatusOK:
			open = append(open, s)
			perGateway[i%3]++
		case s.status != http.StatusTooManyRequests || s.errorCode != "concurrency_limit" || s.retryAfter != "1":
			t.Errorf("stream %d: %d %q Retry-After %q, want 200 or 429 concurrency_limit with Retry-After 1", i, s.status, s.errorCode, s.retryAfter)
		}
	}
	if len(open) != 5 {
		t.Fatalf("%d of 40 streams in flight at once (by gateway %v), want exactly the limit, 5", len(open), perGateway)
	}
	first := holdScores(t, rdb)
	if len(first) != 5 {
		t.Fatalf("Redis holds %d places, want 5", len(first))
	}
	// A renewal moves a lease's end: wait for one (every 1s for a 3s lease).
	deadline := time.Now().Add(10 * time.Second)
	for renewed := false; !renewed; {
		if time.Now().After(deadline) {
			t.Fatal("no hold renewed within 10s: a stream longer than its lease would lose its place")
		}
		time.Sleep(50 * time.Millisecond)
		for _, s := range holdScores(t, rdb) {
			renewed = renewed || s > maxOf(first)
		}
	}
	if s := openStream(t, gws[1].Base, 0); s.status != http.StatusTooManyRequests {
		s.Close()
		t.Fatalf("a sixth stream: %d, want 429", s.status)
	}

	// Two clients leave; their places free, and two (no more) get in.
	open[0].Close()
	open[1].Close()
	var admitted []*stream
	deadline = time.Now().Add(10 * time.Second)
	for len(admitted) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams admitted within 10s after two clients left, want 2", len(admitted))
		}
		if s := openStream(t, gws[len(admitted)%3].Base, 0); s.status == http.StatusOK {
			admitted = append(admitted, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer func() {
		for _, s := range admitted {
			s.Close()
		}
	}()
	if s := openStream(t, gws[2].Base, 0); s.status != http.StatusTooManyRequests {
		s.Close()
		t.Errorf("with 5 in flight again: %d, want 429", s.status)
	}
	if n := len(holdScores(t, rdb)); n != 5 {
		t.Errorf("Redis holds %d places, want 5", n)
	}
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// A gateway killed with SIGKILL while it holds all 5 places cannot release
// them: the others deny while the holds' leases run, and admit again once
// they have. A request that reached Redis before the earliest a lease can
// end (the first hold was sent) is denied; one sent after the latest a
// lease can end (the dead gateway's last renewal, before it was reaped,
// plus the lease) is admitted. Both bounds hold however slow the machine.
func TestBinaryConcurrencyLeaseFreesAKilledGatewaysHolds(t *testing.T) {
	const lease = 3 * time.Second
	_, gws := startConcurrencyGateways(t, 3, lease.String())
	doomed := gws[0]
	var held []*stream
	for i := range 5 {
		s := openStream(t, doomed.Base, 0)
		if s.status != http.StatusOK {
			t.Fatalf("stream %d on the doomed gateway: %d", i, s.status)
		}
		held = append(held, s)
	}
	defer func() {
		for _, s := range held {
			s.Close()
		}
	}()
	earliestEnd := held[0].sent.Add(lease)
	doomed.Kill(t)
	latestEnd := time.Now().Add(lease)

	deadline := latestEnd.Add(10 * time.Second)
	denials := 0
	for i := 0; ; i++ {
		s := openStream(t, gws[1+i%2].Base, 1)
		s.Close()
		done := time.Now()
		switch {
		case s.status == http.StatusOK && done.Before(earliestEnd):
			t.Fatalf("admitted %s before the killed gateway's first lease could end", earliestEnd.Sub(done))
		case s.status == http.StatusOK:
			if denials == 0 {
				t.Log("no probe was answered before the leases could end (a slow machine): the denial went unseen")
			}
			t.Logf("%d probes denied, then admitted %s after the kill (lease %s)", denials, done.Sub(latestEnd.Add(-lease)).Round(time.Millisecond), lease)
			return
		case s.status != http.StatusTooManyRequests:
			t.Fatalf("probe %d: %d", i, s.status)
		case s.sent.After(latestEnd):
			t.Fatalf("denied %s after the latest a killed gateway's lease can end", s.sent.Sub(latestEnd))
		default:
			denials++
		}
		if time.Now().After(deadline) {
			t.Fatal("never admitted again")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
