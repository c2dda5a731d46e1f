package redisstore

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// State is a store's (or one node's) health as readiness reports it.
type State string

const (
	StateUp          State = "up"
	StateDown        State = "down"
	StateBreakerOpen State = "breaker open"
	// StateOutOfMemory is a node that answers but refuses writes (Redis at
	// maxmemory with noeviction): PING works, every check fails.
	StateOutOfMemory State = "out of memory"
)

// Health is the store's health as readiness reports it: one state for the
// whole store, the worst of its nodes', and each node's.
type Health struct {
	State State        `json:"state"`
	Nodes []NodeHealth `json:"nodes,omitempty"`
}

// NodeHealth is one node's health: a Cluster master, or the one server.
type NodeHealth struct {
	Addr  string `json:"addr"`
	State State  `json:"state"`
	Err   string `json:"error,omitempty"`
	// MaxmemoryPolicy is the node's maxmemory-policy as last read
	// ("unknown: ..." when Redis refused to tell); anything but noeviction
	// evicts the limiter's keys at maxmemory.
	MaxmemoryPolicy string `json:"maxmemory_policy,omitempty"`
	// Evictions counts the keys the node evicted (INFO evicted_keys) since
	// the store opened, any key, not only the limiter's.
	Evictions uint64 `json:"evictions"`
}

// severity orders states from the worst: down, breaker open, out of memory, up.
var severity = map[State]int{
	StateUp: 0, StateOutOfMemory: 1, StateBreakerOpen: 2, StateDown: 3,
}

// Health asks every node (a Cluster's masters, as the slot map has them)
// whether it answers and has room, and reports what the checks saw: a
// breaker open, a node out of memory. ctx bounds the questions; readiness
// gives it the store timeout or so.
func (s *Store) Health(ctx context.Context) Health {
	var h Health
	if s.single != nil {
		addr := ""
		if c, ok := s.client.(interface{ Options() *redis.Options }); ok {
			addr = c.Options().Addr
		}
		h.Nodes = []NodeHealth{s.nodeHealth(ctx, addr, s.single, s.client)}
	} else {
		var mu sync.Mutex
		err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			addr := c.Options().Addr
			s.mu.Lock()
			n := s.nodes[addr]
			s.mu.Unlock()
			nh := s.nodeHealth(ctx, addr, n, c)
			mu.Lock()
			h.Nodes = append(h.Nodes, nh)
			mu.Unlock()
			return nil
		})
		if err != nil && len(h.Nodes) == 0 {
			h.Nodes = []NodeHealth{{State: StateDown, Err: err.Error()}}
		}
	}
	h.State = StateUp
	for _, n := range h.Nodes {
		if severity[n.State] > severity[h.State] {
			h.State = n.State
		}
	}
	return h
}

type healthClient interface {
	Ping(ctx context.Context) *redis.StatusCmd
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

func (s *Store) nodeHealth(ctx context.Context, addr string, n *node, c healthClient) (nh NodeHealth) {
	nh = NodeHealth{Addr: addr, State: StateUp}
	defer s.memoryHealth(&nh)
	if n != nil && n.br.isOpen() {
		nh.State = StateBreakerOpen
		if e := n.lastErr.Load(); e != nil {
			nh.Err = *e
		}
		return nh
	}
	if err := c.Ping(ctx).Err(); err != nil {
		nh.State, nh.Err = StateDown, err.Error()
		return nh
	}
	isFull := false
	if rc, ok := c.(*redis.Client); ok {
		// The same read as the eviction watch's: the counts are current
		// whenever readiness or a scrape asks.
		if mi, err := readMemory(ctx, rc); err == nil {
			s.note(addr, mi)
			isFull = mi.maxmemory > 0 && mi.used >= mi.maxmemory && mi.policy == NoEviction
		}
	} else if info, err := c.Info(ctx, "memory").Result(); err == nil {
		isFull = full(info)
	}
	if isFull || n != nil && n.oom.Load() {
		nh.State, nh.Err = StateOutOfMemory, "used_memory at maxmemory with maxmemory-policy noeviction: writes refused"
	}
	return nh
}

// full reads INFO memory: at maxmemory with a policy that evicts nothing.
func full(info string) bool {
	var used, limit int64
	policy := ""
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			used, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory":
			limit, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory_policy":
			policy = v
		}
	}
	return limit > 0 && used >= limit && policy == "noeviction"
}
