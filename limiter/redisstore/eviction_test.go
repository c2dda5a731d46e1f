package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/internal/syncbuf"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
)

// A Redis whose maxmemory-policy evicts keys refuses the store, naming the
// node and the policy: allkeys-lru, and volatile-lru too (every limiter key
// carries a TTL). On a Cluster, one master so configured is enough.
func TestRefusesAnEvictingRedis(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random"} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.StartServer(t, redistest.WithConfig("maxmemory-policy", policy))
			s, err := redisstore.Open(redisstore.ClientOptions{URL: "redis://" + srv.Addr()}, nil)
			var ee *redisstore.EvictionError
			if !errors.As(err, &ee) || ee.Policy != policy || ee.Addr != srv.Addr() {
				if s != nil {
					s.Close()
				}
				t.Fatalf("Open over maxmemory-policy %s: %v, want an *EvictionError naming %s and the policy", policy, err, srv.Addr())
			}
			if !strings.Contains(err.Error(), policy) || !strings.Contains(err.Error(), "resets a limit") {
				t.Errorf("error %q: want the policy and the consequence", err)
			}
		})
	}
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t)
		victim := c.Nodes()[1]
		vc := victim.Client()
		if err := vc.ConfigSet(context.Background(), "maxmemory-policy", "volatile-lfu").Err(); err != nil {
			t.Fatal(err)
		}
		s, err := redisstore.Open(redisstore.ClientOptions{Cluster: c.Addrs()}, nil)
		var ee *redisstore.EvictionError
		if !errors.As(err, &ee) || ee.Policy != "volatile-lfu" || ee.Addr != victim.Addr() {
			if s != nil {
				s.Close()
			}
			t.Fatalf("Open over a Cluster with one volatile-lfu master: %v, want an *EvictionError naming %s", err, victim.Addr())
		}
	})
	t.Run("noeviction opens", func(t *testing.T) {
		srv := redistest.StartServer(t, redistest.WithConfig("maxmemory-policy", "noeviction"))
		s := open(t, redisstore.ClientOptions{URL: "redis://" + srv.Addr()}, newPrefix(t))
		h := s.Health(context.Background())
		if len(h.Nodes) != 1 || h.Nodes[0].MaxmemoryPolicy != "noeviction" || h.Nodes[0].Evictions != 0 {
			t.Errorf("health %+v, want noeviction and no evictions", h)
		}
	})
}

// evictedKeys is Redis's own count (INFO stats evicted_keys).
func evictedKeys(t *testing.T, c *redis.Client) uint64 {
	t.Helper()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "evicted_keys:"); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	t.Fatal("INFO stats has no evicted_keys")
	return 0
}

// fillPast sets maxmemory a megabyte above what c uses now and writes keys
// with a TTL until Redis has evicted some.
func fillPast(t *testing.T, c *redis.Client, tag string) {
	t.Helper()
	ctx := context.Background()
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var usedMemory int64
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			usedMemory, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(usedMemory+1<<20, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("x", 200)
	for batch := 0; evictedKeys(t, c) == 0; batch++ {
		if batch == 100 {
			t.Fatal("Redis evicted nothing after 100,000 keys past maxmemory")
		}
		p := c.Pipeline()
		for i := range 1000 {
			p.Set(ctx, fmt.Sprintf("{%s}:fill:%d:%d", tag, batch, i), value, time.Hour)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// evictionsAsRead checks that health counted what Redis had evicted when
// it read: between Redis's own count before and after (past maxmemory,
// every command Redis runs may evict, INFO too).
func evictionsAsRead(t *testing.T, c *redis.Client, health func() redisstore.NodeHealth) redisstore.NodeHealth {
	t.Helper()
	before := evictedKeys(t, c)
	n := health()
	after := evictedKeys(t, c)
	if n.Evictions < before || n.Evictions > after || n.Evictions == 0 {
		t.Errorf("%s: %d evictions counted, Redis counted %d before the read and %d after", n.Addr, n.Evictions, before, after)
	}
	return n
}

// With AllowEviction the store opens over an evicting Redis, warns once,
// and counts what Redis evicts: Health reports the policy and the
// evictions since the store opened, as Redis counts them.
func TestAllowEvictionCountsEvictions(t *testing.T) {
	srv := redistest.StartServer(t, redistest.WithConfig("maxmemory-policy", "volatile-lru"))
	var log syncbuf.Buffer
	s, err := redisstore.Open(redisstore.ClientOptions{URL: "redis://" + srv.Addr()},
		&redisstore.Options{AllowEviction: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out := log.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "maxmemory_policy=volatile-lru") {
		t.Errorf("log after opening over volatile-lru: %q, want a warning naming it", out)
	}
	c := srv.Client()
	fillPast(t, c, "a")
	n := evictionsAsRead(t, c, func() redisstore.NodeHealth { return s.Health(context.Background()).Nodes[0] })
	if n.MaxmemoryPolicy != "volatile-lru" {
		t.Errorf("health %+v, want volatile-lru", n)
	}
	if out := log.String(); !strings.Contains(out, "Redis evicted keys") {
		t.Errorf("log after evictions: %q, want them reported", out)
	}
	// A check still works over the evicting Redis.
	lim := newLimiterOver(t, s)
	p := mustValidate(t, &limiter.Policy{Name: "evict", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Minute})
	if d := lim.Allow(context.Background(), p, "k", 1); !d.Allowed || d.Err != nil {
		t.Errorf("a check over the evicting Redis: %+v", d)
	}
}

// A store that opened over noeviction reads the policy again when Redis
// comes back: a Redis restarted with an evicting policy is reported at
// once (an error: nobody allowed it), and its evictions counted from the
// new process's start, not the old one's.
func TestEvictionPolicyReadOnReconnect(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()
	var log syncbuf.Buffer
	s, err := redisstore.Open(redisstore.ClientOptions{URL: "redis://" + srv.Addr(), Timeout: storeTimeout},
		&redisstore.Options{KeyPrefix: newPrefix(t), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The next process starts with allkeys-lru: the file says so, this
	// one keeps noeviction.
	c := srv.Client()
	for _, args := range [][]string{{"maxmemory-policy", "allkeys-lru"}, {"rewrite"}, {"maxmemory-policy", "noeviction"}} {
		var err error
		if args[0] == "rewrite" {
			err = c.ConfigRewrite(ctx).Err()
		} else {
			err = c.ConfigSet(ctx, args[0], args[1]).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	lim := newLimiterOver(t, s)
	p := mustValidate(t, &limiter.Policy{Name: "reconnect", Algorithm: limiter.TokenBucket, Limit: 10, Period: time.Minute})
	// Less than InfoInterval: the reconnect, not the timer, reads it.
	deadline := time.Now().Add(redisstore.InfoInterval / 2)
	for !strings.Contains(log.String(), "allkeys-lru") && time.Now().Before(deadline) {
		lim.Allow(ctx, p, "k", 1)
		time.Sleep(10 * time.Millisecond)
	}
	if out := log.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "maxmemory_policy=allkeys-lru") {
		t.Fatalf("log after Redis came back with allkeys-lru: %q, want an error naming it", out)
	}
	fillPast(t, srv.Client(), "b")
	n := evictionsAsRead(t, srv.Client(), func() redisstore.NodeHealth { return s.Health(ctx).Nodes[0] })
	if n.MaxmemoryPolicy != "allkeys-lru" {
		t.Errorf("health %+v, want allkeys-lru", n)
	}
}

// On a Cluster the evictions are counted per master: only the master
// that evicted shows them.
func TestEvictionsPerNode(t *testing.T) {
	c := redistest.StartCluster(t)
	victim := c.Nodes()[2]
	vc := victim.Client()
	ctx := context.Background()
	if err := vc.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.Open(redisstore.ClientOptions{Cluster: c.Addrs()}, &redisstore.Options{AllowEviction: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Keys of the victim's slots: a hash tag it owns.
	var tag string
	for i := 0; ; i++ {
		tag = fmt.Sprintf("t%d", i)
		if redisSlot("{"+tag+"}") >= 2*16384/3+1 {
			break
		}
	}
	fillPast(t, vc, tag)
	var h redisstore.Health
	evictionsAsRead(t, vc, func() redisstore.NodeHealth {
		h = s.Health(ctx)
		for _, n := range h.Nodes {
			if n.Addr == victim.Addr() {
				return n
			}
		}
		t.Fatalf("health %+v: no %s", h, victim.Addr())
		return redisstore.NodeHealth{}
	})
	if len(h.Nodes) != 3 {
		t.Fatalf("health %+v, want three masters", h)
	}
	for _, n := range h.Nodes {
		switch {
		case n.Addr == victim.Addr() && n.MaxmemoryPolicy != "allkeys-lru":
			t.Errorf("the evicting master %s: %+v, want allkeys-lru", n.Addr, n)
		case n.Addr != victim.Addr() && (n.Evictions != 0 || n.MaxmemoryPolicy != "noeviction"):
			t.Errorf("master %s: %+v, want no evictions, noeviction", n.Addr, n)
		}
	}
}

// A Redis that answers but lets the store read neither INFO nor CONFIG GET
// (an ACL here; a managed Redis that renames commands) refuses the store:
// whether it evicts is unknown. The error says both refusals; with
// AllowEviction the store opens and warns.
func TestPolicyUnreadable(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()
	if err := srv.Client().Do(ctx, "ACL", "SETUSER", "limiter", "on", ">secret", "~*", "+@all", "-info", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	url := "redis://limiter:secret@" + srv.Addr()
	s, err := redisstore.Open(redisstore.ClientOptions{URL: url}, nil)
	var ee *redisstore.EvictionError
	if !errors.As(err, &ee) || ee.Policy != "" || ee.Err == nil || !strings.Contains(err.Error(), "INFO") || !strings.Contains(err.Error(), "CONFIG GET") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open with INFO and CONFIG refused: %v, want an *EvictionError saying both were refused", err)
	}
	var log syncbuf.Buffer
	s, err = redisstore.Open(redisstore.ClientOptions{URL: url}, &redisstore.Options{AllowEviction: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out := log.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "cannot be read") {
		t.Errorf("log: %q, want a warning that the policy cannot be read", out)
	}
	if h := s.Health(ctx); len(h.Nodes) != 1 || !strings.HasPrefix(h.Nodes[0].MaxmemoryPolicy, "unknown: ") {
		t.Errorf("health %+v, want the policy unknown", h)
	}
}
