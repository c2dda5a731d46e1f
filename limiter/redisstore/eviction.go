package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// What Redis's own limits do to the limiter's keys. Every key the store
// writes carries a TTL, so a Redis at maxmemory with any policy but
// noeviction (volatile-* as much as allkeys-*) evicts them, and each
// eviction resets a limit: a locked login unlocks. The store reads each
// node's maxmemory-policy, and the evictions Redis counts (INFO stats
// evicted_keys), when it opens, when a node answers again after failing
// or appears in a Cluster, every InfoInterval, and whenever Health asks.

// InfoInterval is how often the store reads each node's INFO: its
// maxmemory-policy and the keys it evicted.
const InfoInterval = 5 * time.Second

// NoEviction is the one maxmemory-policy under which Redis evicts nothing.
const NoEviction = "noeviction"

// EvictionError is why a store refused to open over a Redis node: its
// maxmemory-policy evicts keys, or could not be read. Options.AllowEviction
// opens the store anyway, with a warning.
type EvictionError struct {
	// Addr is the node's address, as its client names it (go-redis names
	// a Sentinel client's master "FailoverClient").
	Addr string
	// Policy is the node's maxmemory-policy; "" when it could not be read.
	Policy string
	// Err is why the policy could not be read (INFO and CONFIG GET refused).
	Err error
}

func (e *EvictionError) Error() string {
	if e.Policy == "" {
		return fmt.Sprintf("redisstore: Redis %s: maxmemory-policy cannot be read (%v), so whether Redis evicts the limiter's keys is unknown", e.Addr, e.Err)
	}
	return fmt.Sprintf("redisstore: Redis %s has maxmemory-policy %s: at maxmemory it evicts the limiter's keys (every one carries a TTL, which volatile-* policies evict as readily as allkeys-*), and each eviction resets a limit", e.Addr, e.Policy)
}

func (e *EvictionError) Unwrap() error { return e.Err }

// nodeMemory is what the store last read of one node's INFO.
type nodeMemory struct {
	mu       sync.Mutex
	policy   string // maxmemory-policy; "" until read
	readErr  string // why it could not be read, if so
	runID    string // the server process the counts are from
	seen     int64  // its evicted_keys at the last read
	evicted  uint64 // evictions counted since the store opened
	reported string // the policy and process last logged about
}

// memInfo is one read of a node's INFO.
type memInfo struct {
	policy, runID            string
	evicted, used, maxmemory int64
	hasPolicy, hasEvicted    bool
}

func (s *Store) memoryOf(addr string) *nodeMemory {
	s.memMu.Lock()
	defer s.memMu.Unlock()
	m := s.mem[addr]
	if m == nil {
		m = &nodeMemory{}
		s.mem[addr] = m
	}
	return m
}

// forEachNode calls f, concurrently, for the client of each node: a
// Cluster's masters, a Ring's shards, the one server.
func (s *Store) forEachNode(ctx context.Context, f func(addr string, c *redis.Client)) error {
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error { f(m.Options().Addr, m); return nil })
	case *redis.Ring:
		return c.ForEachShard(ctx, func(_ context.Context, m *redis.Client) error { f(m.Options().Addr, m); return nil })
	case *redis.Client:
		f(c.Options().Addr, c)
	}
	return nil
}

// readMemory reads a node's INFO memory, stats and server in one round
// trip; CONFIG GET stands in for a maxmemory-policy INFO does not show.
func readMemory(ctx context.Context, c *redis.Client) (memInfo, error) {
	var mem, stats, srv *redis.StringCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		mem, stats, srv = p.Info(ctx, "memory"), p.Info(ctx, "stats"), p.Info(ctx, "server")
		return nil
	})
	var mi memInfo
	for _, cmd := range []*redis.StringCmd{mem, stats, srv} {
		if cmd.Err() != nil {
			continue
		}
		for line := range strings.Lines(cmd.Val()) {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok {
				continue
			}
			switch k {
			case "maxmemory_policy":
				mi.policy, mi.hasPolicy = v, true
			case "evicted_keys":
				mi.evicted, _ = strconv.ParseInt(v, 10, 64)
				mi.hasEvicted = true
			case "run_id":
				mi.runID = v
			case "used_memory":
				mi.used, _ = strconv.ParseInt(v, 10, 64)
			case "maxmemory":
				mi.maxmemory, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	if !mi.hasPolicy {
		// Managed Redis may hide it from INFO, or refuse CONFIG: either
		// will do.
		kv, cerr := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if p, ok := kv["maxmemory-policy"]; cerr == nil && ok {
			mi.policy, mi.hasPolicy = p, true
		} else {
			if cerr == nil {
				cerr = errors.New("CONFIG GET maxmemory-policy returned nothing")
			}
			if err == nil {
				err = mem.Err()
			}
			return mi, fmt.Errorf("INFO memory: %v; CONFIG GET: %w", errOrMissing(err), cerr)
		}
	}
	return mi, nil
}

func errOrMissing(err error) error {
	if err != nil {
		return err
	}
	return errors.New("no maxmemory_policy field")
}

// evicting reports whether policy evicts keys.
func evicting(policy string) bool { return policy != NoEviction }

// note records a read of node addr: the evictions since the last one
// (Redis counts them per process: a new run_id or a count that went down,
// after CONFIG RESETSTAT, starts from zero; the first read sets where the
// store starts counting), and whether its policy needs saying.
func (s *Store) note(addr string, mi memInfo) {
	m := s.memoryOf(addr)
	m.mu.Lock()
	var delta int64
	if mi.hasEvicted {
		switch {
		case m.runID == "":
			m.seen = mi.evicted
		case mi.runID != m.runID || mi.evicted < m.seen:
			m.seen = 0
		}
		delta = mi.evicted - m.seen
		m.evicted += uint64(max(delta, 0))
		m.seen, m.runID = mi.evicted, mi.runID
	}
	m.policy, m.readErr = mi.policy, ""
	say := evicting(mi.policy) && m.reported != mi.policy+" "+mi.runID
	if say {
		m.reported = mi.policy + " " + mi.runID
	}
	m.mu.Unlock()
	if say {
		s.logPolicy(addr, mi.policy)
	}
	if delta > 0 {
		if n, ok := s.evictLog.Pass(time.Now()); ok {
			s.logger.Warn("redisstore: Redis evicted keys: each evicted limiter key is a limit reset",
				slog.String("addr", addr), slog.Int64("evicted", delta), slog.String("maxmemory_policy", mi.policy), slog.Int64("suppressed", n))
		}
	}
}

// logPolicy says that addr evicts: a warning when the store was told to
// run anyway, else an error (the store found it after it opened: on a
// reconnect, a new Cluster master, or a CONFIG SET).
func (s *Store) logPolicy(addr, policy string) {
	attrs := []any{slog.String("addr", addr), slog.String("maxmemory_policy", policy)}
	if !s.opened.Load() && !s.allowEviction {
		return // the store refuses to open: its error says it
	}
	if s.allowEviction {
		s.logger.Warn("redisstore: Redis evicts the limiter's keys at maxmemory (allowed): each eviction resets a limit; evictions are counted", attrs...)
		return
	}
	s.logger.Error("redisstore: Redis now evicts the limiter's keys at maxmemory: each eviction resets a limit. Set maxmemory-policy noeviction", attrs...)
}

// noteReadError records that addr's policy could not be read.
func (s *Store) noteReadError(addr string, err error) {
	m := s.memoryOf(addr)
	m.mu.Lock()
	m.readErr = err.Error()
	m.mu.Unlock()
}

// readAll reads every node it reaches within ctx, and returns the first
// EvictionError found, if any.
func (s *Store) readAll(ctx context.Context) error {
	var mu sync.Mutex
	var first error
	_ = s.forEachNode(ctx, func(addr string, c *redis.Client) {
		mi, err := readMemory(ctx, c)
		var found error
		switch {
		case err == nil:
			s.note(addr, mi)
			if evicting(mi.policy) {
				found = &EvictionError{Addr: addr, Policy: mi.policy}
			}
		case isServerError(err):
			// It answers, and refuses both: what it does is unknown.
			s.noteReadError(addr, err)
			found = &EvictionError{Addr: addr, Err: err}
		}
		// Otherwise it does not answer: read again when it does.
		if found != nil {
			mu.Lock()
			if first == nil {
				first = found
			}
			mu.Unlock()
		}
	})
	return first
}

// checkEviction is the store's first read, as it opens: an evicting (or
// unreadable) node refuses the store unless AllowEviction says otherwise.
func (s *Store) checkEviction() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.readAll(ctx)
	var ee *EvictionError
	if !errors.As(err, &ee) {
		return nil
	}
	if !s.allowEviction {
		return err
	}
	if ee.Policy == "" {
		s.logger.Warn("redisstore: maxmemory-policy cannot be read (allowed): whether Redis evicts the limiter's keys is unknown; evictions are counted where INFO shows them",
			slog.String("addr", ee.Addr), slog.String("err", ee.Err.Error()))
	}
	return nil
}

// readSoon asks the watch for a read of every node now: a connection was
// dialled (perhaps to a Redis that restarted, or to another behind the
// same address), a node answered again, or a new one appeared.
func (s *Store) readSoon() {
	select {
	case s.memNow <- struct{}{}:
	default:
	}
}

// watchMemory reads every node's INFO every InfoInterval, and when asked.
func (s *Store) watchMemory() {
	defer s.wg.Done()
	t := time.NewTicker(InfoInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.memNow:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.readAll(ctx)
		cancel()
	}
}

// memoryHealth fills nh with what the store knows of the node's memory.
func (s *Store) memoryHealth(nh *NodeHealth) {
	m := s.memoryOf(nh.Addr)
	m.mu.Lock()
	defer m.mu.Unlock()
	nh.MaxmemoryPolicy, nh.Evictions = m.policy, m.evicted
	if m.policy == "" && m.readErr != "" {
		nh.MaxmemoryPolicy = "unknown: " + m.readErr
	}
}
