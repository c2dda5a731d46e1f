package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/memstore"
	"github.com/costgate/costgate/limiter/redisstore"
)

// demoHashKey hashes identities when the built-in demo config runs on
// Redis: its API keys are public, so is this key (the server warns).
const demoHashKey = "costgate public demo hash key"

// state is what outlives a reload: the store and the limiter over it, and
// the hash key identities are hashed with. A reload that leaves the store
// section and the hash key alone keeps it, and with it every bucket.
type state struct {
	storeCfg config.StoreConfig
	hashCfg  string // identity.hash_key as configured

	name    string // "memory" or "redis"
	limiter *limiter.Limiter
	redis   *redisstore.Store // nil with the memory store
	hashKey []byte
	// overrides are the operators' overrides in effect (admin.go): the
	// store's, read by every check.
	overrides *limiter.Overrides
}

// sameStore reports whether cfg can keep st.
func (st *state) sameStore(cfg *config.Config) bool {
	return reflect.DeepEqual(st.storeCfg, cfg.Store) && st.hashCfg == cfg.Identity.HashKey
}

func newState(cfg *config.Config, m *metrics, logger *slog.Logger, extra ...limiter.Option) (*state, error) {
	st := &state{storeCfg: cfg.Store, hashCfg: cfg.Identity.HashKey, overrides: limiter.NewOverrides(nil)}
	timeout := limiter.DefaultTimeout
	var store limiter.Store
	opts := append([]limiter.Option{limiter.WithObserver(m.observe), limiter.WithLogger(logger)}, extra...)
	if rc := cfg.Store.Redis; rc == nil {
		st.name = "memory"
		store = memstore.New(&memstore.Options{MaxKeys: cfg.Store.Memory.MaxKeys, OnEvict: m.evictions.Inc, OnOverflow: m.overflow, Logger: logger})
	} else {
		// The store builds and owns its client: warm connections, no
		// retried scripts, per-node breakers, the slot map followed on a
		// node's first error.
		co := redisstore.ClientOptions{URL: rc.URL, Cluster: rc.Cluster, Timeout: rc.Timeout}
		if rc.Sentinel != nil {
			co.Sentinel = &redisstore.SentinelOptions{Master: rc.Sentinel.Master, Addrs: rc.Sentinel.Addrs}
		}
		rs, err := redisstore.Open(co, &redisstore.Options{KeyPrefix: cfg.Store.KeyPrefix, OnRoundTrip: m.roundTripHook("redis"),
			Logger: logger, AllowEviction: rc.AllowEviction})
		if err != nil {
			return nil, storeError(err, rc)
		}
		st.name, st.redis, store = "redis", rs, rs
		timeout = rc.Timeout
		warnUnreachable(rs, cfg, logger)
	}
	// Every store has a local fallback, so that on_store_error: local always
	// has one to fall back to (the limiter needs one to accept the mode).
	opts = append(opts, limiter.WithLocalFallback(memstore.New(&memstore.Options{OnEvict: m.evictions.Inc, OnOverflow: m.overflow, Logger: logger}), cfg.Store.Gateways))
	opts = append(opts, limiter.WithTimeout(timeout), limiter.WithStoreName(st.name))
	lim, err := limiter.New(store, opts...)
	if err != nil {
		st.close()
		return nil, err
	}
	st.limiter = lim
	st.watchAdmin(logger)

	st.hashKey = []byte(cfg.Identity.HashKey)
	switch {
	case len(st.hashKey) > 0:
	case cfg.Store.Redis != nil:
		// Only the built-in demo config gets here (a file must set hash_key).
		logger.Warn("the demo config shares Redis with a public hash key; set identity.hash_key in a config file for production")
		st.hashKey = []byte(demoHashKey)
	default:
		// Memory store only: one process, so a random key hashes identities
		// alike everywhere it matters.
		st.hashKey = make([]byte, 32)
		rand.Read(st.hashKey)
	}
	return st, nil
}

// storeError is a store that could not be opened, said in the terms of
// the config: an evicting Redis names the policy and both ways out.
func storeError(err error, rc *config.RedisConfig) error {
	var ee *redisstore.EvictionError
	if !errors.As(err, &ee) {
		return fmt.Errorf("store.redis: %w", err)
	}
	if rc.Sentinel != nil {
		ee.Addr = redisAddr(rc) // go-redis names a Sentinel client's master "FailoverClient"
	}
	if ee.Policy == "" {
		return fmt.Errorf("store.redis: Redis %s does not say its maxmemory-policy (INFO and CONFIG GET refused: %v), so whether it evicts costgate's keys at maxmemory, resetting limits, is unknown. "+
			"Let costgate's user run INFO, or, knowing the policy is noeviction (or accepting evictions), set store.redis.allow_eviction: true", ee.Addr, ee.Err)
	}
	return fmt.Errorf("store.redis: Redis %s has maxmemory-policy %s: once it reaches maxmemory it evicts costgate's keys (every one carries a TTL, so volatile-* evicts them too), "+
		"and each evicted key is a limit reset: a locked login unlocks. Set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction and in redis.conf, "+
		"or the parameter group of a managed Redis), or set store.redis.allow_eviction: true to run anyway with evictions counted in costgate_store_evictions_total", ee.Addr, ee.Policy)
}

// startProbe bounds the question asked of Redis at start: longer than a
// store timeout, so that a busy machine is not reported as an outage.
const startProbe = time.Second

// warnUnreachable logs, when Redis does not answer at start, where it was
// looked for and what limiting does until it answers: the server starts
// anyway (Redis may come up later), and go-redis's own dial error names
// neither the config nor the consequences.
func warnUnreachable(rs *redisstore.Store, cfg *config.Config, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), startProbe)
	defer cancel()
	h := rs.Health(ctx)
	if h.State == redisstore.StateUp {
		return
	}
	attrs := []any{"store", "redis", "addr", redisAddr(cfg.Store.Redis), "state", h.State}
	for _, n := range h.Nodes {
		if n.Err != "" {
			attrs = append(attrs, "error", n.Err)
			break
		}
	}
	byMode := map[limiter.FailMode][]string{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Policies)) {
		mode := cfg.Policies[name].OnStoreError
		if mode == "" {
			mode = limiter.FailAllow
		}
		byMode[mode] = append(byMode[mode], name)
	}
	for _, mode := range []limiter.FailMode{limiter.FailAllow, limiter.FailDeny, limiter.FailLocal} {
		if names := byMode[mode]; len(names) > 0 {
			attrs = append(attrs, string(mode), strings.Join(names, ","))
		}
	}
	logger.Warn("store: Redis does not answer at start; costgate serves and keeps trying. "+
		"Until it answers, each policy's on_store_error decides: allow serves unlimited, deny answers 503, local limits in this process alone", attrs...)
}

// redisAddr names where the config looks for Redis, without a password.
func redisAddr(rc *config.RedisConfig) string {
	switch {
	case rc.URL != "":
		if o, err := redis.ParseURL(rc.URL); err == nil {
			return o.Addr
		}
		return "the url"
	case len(rc.Cluster) > 0:
		return "cluster " + strings.Join(rc.Cluster, ",")
	case rc.Sentinel != nil:
		return fmt.Sprintf("sentinel master %s via %s", rc.Sentinel.Master, strings.Join(rc.Sentinel.Addrs, ","))
	}
	return ""
}

// storeHealth is the store part of the readiness body.
type storeHealth struct {
	Kind  string                  `json:"kind"`
	State redisstore.State        `json:"state"` // up, down, breaker open, out of memory
	Nodes []redisstore.NodeHealth `json:"nodes,omitempty"`
}

// health is the store's state for readiness.
func (st *state) health(ctx context.Context) storeHealth {
	if st.redis == nil {
		return storeHealth{Kind: st.name, State: redisstore.StateUp}
	}
	h := st.redis.Health(ctx)
	return storeHealth{Kind: st.name, State: h.State, Nodes: h.Nodes}
}

// drainTimeout bounds how long closing waits for the releases and refunds
// of ended requests to reach the store (a hold not released by then ends
// with its lease).
const drainTimeout = 2 * time.Second

func (st *state) close() {
	if st.limiter != nil {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		_ = st.limiter.Drain(ctx)
		cancel()
	}
	if st.redis != nil {
		st.redis.Close() // its workers, then its client
	}
}
