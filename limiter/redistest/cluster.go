package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSize is the number of masters started by NewCluster.
const clusterSize = 3

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// Cluster is a Redis Cluster of three masters, each a redis-server child
// process, and with [WithReplicas] as many replicas of each. Its methods are
// safe for concurrent use.
type Cluster struct {
	nodes    []*Server // the masters, in slot order
	replicas []*Server // replicas[i*r+j] replicates nodes[i]

	mu          sync.Mutex
	clients     []*redis.ClusterClient
	clientsDone bool // set by Close; later clients are not tracked
}

// NewCluster starts three masters with cluster-enabled yes on free ports of
// 127.0.0.1 (client and cluster-bus ports both picked free), assigns the
// 16384 slots evenly in contiguous ranges, joins the nodes with CLUSTER MEET
// and returns once every node reports cluster_state:ok and all nodes agree on
// the slot map. Everything is done through go-redis; redis-cli is not needed.
// Startup takes a little over 2s: a master refuses to leave the fail state
// until 2s after it started (CLUSTER_WRITABLE_DELAY in the Redis source).
// The caller must call [Cluster.Close]; tests should prefer [StartCluster].
func NewCluster(opts ...Option) (*Cluster, error) {
	bin, err := Find()
	if err != nil {
		return nil, fmt.Errorf("start redis cluster: %w", err)
	}
	cfg := newConfig(opts)
	c := &Cluster{nodes: make([]*Server, clusterSize), replicas: make([]*Server, clusterSize*cfg.replicas)}
	all := append(slices.Clone(c.nodes), c.replicas...)
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i := range all {
		wg.Go(func() { all[i], errs[i] = newServer(bin, cfg, true) })
	}
	wg.Wait()
	copy(c.nodes, all[:clusterSize])
	copy(c.replicas, all[clusterSize:])
	if err := errors.Join(errs...); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("start redis cluster: %w", err)
	}
	if err := c.form(cfg.startTimeout); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("start redis cluster: %w", err)
	}
	return c, nil
}

// all returns the masters, then the replicas.
func (c *Cluster) all() []*Server { return append(slices.Clone(c.nodes), c.replicas...) }

// form assigns slots, meets the nodes, attaches the replicas and waits for
// convergence.
func (c *Cluster) form(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	nodes := c.all()
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialerRetries: 1})
		defer clients[i].Close()
	}
	masters := clients[:len(c.nodes)]
	for i, rdb := range masters {
		// Distinct config epochs spare the nodes the epoch collision
		// resolution that would otherwise delay convergence.
		if err := rdb.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("set config epoch on %s: %w", c.nodes[i].Addr(), err)
		}
		lo, hi := i*slotCount/len(masters), (i+1)*slotCount/len(masters)-1
		if err := rdb.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return fmt.Errorf("add slots %d-%d on %s: %w", lo, hi, c.nodes[i].Addr(), err)
		}
	}
	// Meet every pair directly: learning about a third node through gossip
	// alone takes seconds, as pings carrying gossip go out about once a second.
	for i, rdb := range clients {
		for _, n := range nodes[i+1:] {
			// The bus port is not port+10000, so it must be given explicitly.
			err := rdb.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.port, n.busPort).Err()
			if err != nil {
				return fmt.Errorf("cluster meet %s from %s: %w", n.Addr(), nodes[i].Addr(), err)
			}
		}
	}
	if err := c.attachReplicas(ctx, masters, clients[len(c.nodes):]); err != nil {
		return err
	}
	if err := waitConverged(ctx, clients); err != nil {
		return fmt.Errorf("cluster not ready within %v: %w", timeout, err)
	}
	return nil
}

// attachReplicas makes each replica replicate its master (CLUSTER
// REPLICATE, once the replica has heard of the master) and waits until every
// replica's link to its master is up, so that a failover can promote it.
func (c *Cluster) attachReplicas(ctx context.Context, masters, replicas []*redis.Client) error {
	if len(replicas) == 0 {
		return nil
	}
	per := len(replicas) / len(masters)
	for i, rdb := range replicas {
		master := masters[i/per]
		id, err := master.ClusterMyID(ctx).Result()
		if err != nil {
			return fmt.Errorf("cluster myid on %s: %w", master.Options().Addr, err)
		}
		for {
			err := rdb.Do(ctx, "CLUSTER", "REPLICATE", id).Err()
			if err == nil {
				break
			}
			if !strings.Contains(err.Error(), "Unknown node") {
				return fmt.Errorf("cluster replicate %s on %s: %w", id, rdb.Options().Addr, err)
			}
			if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
				return fmt.Errorf("replica %s never heard of master %s: %w", rdb.Options().Addr, master.Options().Addr, err)
			}
		}
	}
	for _, rdb := range replicas {
		for {
			info, err := rdb.Info(ctx, "replication").Result()
			if err == nil && parseInfo(info)["master_link_status"] == "up" {
				break
			}
			if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
				return fmt.Errorf("replica %s never linked to its master: %w", rdb.Options().Addr, err)
			}
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// WaitReady polls until every node reports cluster_state:ok, knows all
// nodes, sees all slots assigned and all nodes agree on the slot map, or ctx
// is done. NewCluster already does this; use it after disturbing a node, for
// example after [Server.Restart] of a node from [Cluster.Nodes]: a restarted
// master answers at once but serves its slots (and reports cluster_state:ok)
// only about 2s after it started.
func (c *Cluster) WaitReady(ctx context.Context) error {
	nodes := c.all()
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialerRetries: 1})
		defer clients[i].Close()
	}
	if err := waitConverged(ctx, clients); err != nil {
		return fmt.Errorf("wait for redis cluster: %w", err)
	}
	return nil
}

// waitConverged polls converged every 20ms until it holds or ctx is done.
func waitConverged(ctx context.Context, clients []*redis.Client) error {
	for {
		status, ok := converged(ctx, clients)
		if ok {
			return nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %s", ctx.Err(), status)
		case <-t.C:
		}
	}
}

// converged reports whether every node is in state ok, knows all nodes, sees
// all slots assigned, and reports the same slot map. Otherwise it describes
// what is missing.
func converged(ctx context.Context, clients []*redis.Client) (string, bool) {
	var want string
	for _, rdb := range clients {
		addr := rdb.Options().Addr
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Sprintf("%s: cluster info: %v", addr, err), false
		}
		fields := parseInfo(info)
		for k, v := range map[string]string{
			"cluster_state":          "ok",
			"cluster_known_nodes":    strconv.Itoa(len(clients)),
			"cluster_slots_assigned": strconv.Itoa(slotCount),
			"cluster_slots_ok":       strconv.Itoa(slotCount),
		} {
			if fields[k] != v {
				return fmt.Sprintf("%s: %s is %q, want %q", addr, k, fields[k], v), false
			}
		}
		slots, err := rdb.ClusterSlots(ctx).Result()
		if err != nil {
			return fmt.Sprintf("%s: cluster slots: %v", addr, err), false
		}
		got := slotMap(slots)
		if want == "" {
			want = got
		} else if got != want {
			return fmt.Sprintf("slot maps differ: %s has %s, %s has %s", clients[0].Options().Addr, want, addr, got), false
		}
	}
	return "", true
}

// parseInfo parses the "key:value" lines of an INFO-style reply.
func parseInfo(s string) map[string]string {
	m := make(map[string]string)
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// slotMap renders CLUSTER SLOTS canonically as "start-end=id@addr ...".
func slotMap(slots []redis.ClusterSlot) string {
	slots = slices.Clone(slots)
	slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
	parts := make([]string, 0, len(slots))
	for _, s := range slots {
		master := "none"
		if len(s.Nodes) > 0 {
			master = s.Nodes[0].ID + "@" + s.Nodes[0].Addr
		}
		parts = append(parts, fmt.Sprintf("%d-%d=%s", s.Start, s.End, master))
	}
	return strings.Join(parts, " ")
}

// Addrs returns the addresses ("127.0.0.1:port") of the masters, in slot
// order: the first node owns the lowest slots.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the masters, in the order of [Cluster.Addrs], for failure
// tests ([Server.Freeze], [Server.Restart], ...). They are closed by
// [Cluster.Close]; do not close them individually.
func (c *Cluster) Nodes() []*Server {
	return slices.Clone(c.nodes)
}

// Replicas returns the replicas started by [WithReplicas]: r per master,
// those of the first master first. They are closed by [Cluster.Close].
func (c *Cluster) Replicas() []*Server {
	return slices.Clone(c.replicas)
}

// Client returns a new cluster client seeded with [Cluster.Addrs] and go-redis
// defaults; opts are applied last. Each call returns a new client. Clients
// still open when the cluster is closed are closed by [Cluster.Close];
// closing one earlier is fine. Clients created after Close are not tracked.
func (c *Cluster) Client(opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: c.Addrs()}
	for _, f := range opts {
		f(o)
	}
	rdb := redis.NewClusterClient(o)
	c.mu.Lock()
	if !c.clientsDone {
		c.clients = append(c.clients, rdb)
	}
	c.mu.Unlock()
	return rdb
}

// Close closes the clients returned by [Cluster.Client], then stops all
// nodes concurrently and removes their directories. It is safe to call more
// than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	clients := c.clients
	c.clients, c.clientsDone = nil, true
	c.mu.Unlock()
	for _, rdb := range clients {
		_ = rdb.Close()
	}
	nodes := c.all()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n != nil {
			wg.Go(func() { errs[i] = n.Close() })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
