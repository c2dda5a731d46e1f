package redistest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func startClusterTimed(t *testing.T) *Cluster {
	t.Helper()
	start := time.Now()
	c := StartCluster(t)
	t.Logf("NewCluster took %v", time.Since(start))
	return c
}

func TestClusterRoutesAcrossMasters(t *testing.T) {
	t.Parallel()
	c := startClusterTimed(t)
	if got := len(c.Addrs()); got != 3 {
		t.Fatalf("len(Addrs()) = %d, want 3", got)
	}
	rdb := c.Client()
	ctx := t.Context()

	slots := make(map[int64]bool)
	ranges := make([]int, 3) // keys per third of the slot space
	for i := range 100 {
		key := fmt.Sprintf("key:%d", i)
		if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
		}
		slots[slot] = true
		ranges[min(int(slot)*3/slotCount, 2)]++
	}
	if len(slots) < 90 {
		t.Errorf("100 keys hashed to only %d slots", len(slots))
	}
	for i, n := range ranges {
		if n == 0 {
			t.Errorf("no key hashed into slot range %d of 3", i)
		}
	}

	// Every master holds some of the keys, and together they hold all of them.
	total := 0
	for _, n := range c.Nodes() {
		size, err := n.Client().DBSize(ctx).Result()
		if err != nil {
			t.Fatalf("DBSIZE on %s: %v", n.Addr(), err)
		}
		if size == 0 {
			t.Errorf("master %s owns no keys", n.Addr())
		}
		total += int(size)
	}
	if total != 100 {
		t.Errorf("masters hold %d keys in total, want 100", total)
	}

	// The cluster client sees the same three masters.
	var (
		mu      sync.Mutex
		masters []string
	)
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		mu.Lock() // fn runs concurrently
		defer mu.Unlock()
		masters = append(masters, m.Options().Addr)
		return nil
	})
	if err != nil {
		t.Fatalf("ForEachMaster: %v", err)
	}
	slices.Sort(masters)
	want := slices.Sorted(slices.Values(c.Addrs()))
	if !slices.Equal(masters, want) {
		t.Errorf("client masters = %v, want %v", masters, want)
	}
}

func TestClusterHashTagEval(t *testing.T) {
	t.Parallel()
	c := startClusterTimed(t)
	rdb := c.Client()
	ctx := t.Context()

	const script = `
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return redis.call('MGET', KEYS[1], KEYS[2])`
	got, err := rdb.Eval(ctx, script, []string{"{user:1}:a", "{user:1}:b"}, "x", "y").StringSlice()
	if err != nil {
		t.Fatalf("EVAL with hash-tagged keys: %v", err)
	}
	if !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("EVAL = %q, want [x y]", got)
	}

	// Keys in different slots are rejected by the server.
	err = rdb.Eval(ctx, script, []string{"a", "b"}, "x", "y").Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL with keys in different slots: %v, want CROSSSLOT", err)
	}
}

func TestClusterCloseLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	c, err := NewCluster()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, n := range c.Nodes() {
		pids = append(pids, n.pid())
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("cluster node process %d still alive after Close", pid)
		}
	}
}

func TestClusterNodeRestartRejoins(t *testing.T) {
	t.Parallel()
	c := startClusterTimed(t)
	rdb := c.Client()
	ctx := t.Context()
	node := c.Nodes()[1]
	addr := node.Addr()
	if err := node.Restart(); err != nil {
		t.Fatalf("Restart node: %v", err)
	}
	if node.Addr() != addr {
		t.Fatalf("node address changed from %s to %s", addr, node.Addr())
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster ready again %v after the node restarted", time.Since(start))
	for i := range 30 {
		key := fmt.Sprintf("after-restart:%d", i)
		if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s after restart: %v", key, err)
		}
	}
	if n, err := node.Client().DBSize(ctx).Result(); err != nil || n == 0 {
		t.Fatalf("restarted node DBSIZE = %d, %v; want > 0", n, err)
	}
}
