package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
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
	breaker *limiter.Breaker // nil with the memory store
	redis   redis.UniversalClient
	hashKey []byte
}

// sameStore reports whether cfg can keep st.
func (st *state) sameStore(cfg *config.Config) bool {
	return reflect.DeepEqual(st.storeCfg, cfg.Store) && st.hashCfg == cfg.Identity.HashKey
}

func newState(cfg *config.Config, m *metrics, logger *slog.Logger) (*state, error) {
	st := &state{storeCfg: cfg.Store, hashCfg: cfg.Identity.HashKey}
	timeout := limiter.DefaultTimeout
	var store limiter.Store
	opts := []limiter.Option{limiter.WithObserver(m.observe), limiter.WithLogger(logger)}
	if cfg.Store.Redis == nil {
		st.name = "memory"
		store = memstore.New(&memstore.Options{MaxKeys: cfg.Store.Memory.MaxKeys, OnEvict: m.evictions.Inc})
	} else {
		client, err := redisClient(cfg.Store.Redis)
		if err != nil {
			return nil, err
		}
		rs, err := redisstore.New(client, &redisstore.Options{KeyPrefix: cfg.Store.KeyPrefix})
		if err != nil {
			client.Close()
			return nil, err
		}
		st.name, st.redis = "redis", client
		st.breaker = limiter.NewBreaker(rs, 5, time.Second)
		store = st.breaker
		timeout = cfg.Store.Redis.Timeout
		opts = append(opts, limiter.WithLocalFallback(memstore.New(nil), cfg.Store.Gateways))
	}
	opts = append(opts, limiter.WithTimeout(timeout), limiter.WithStoreName(st.name))
	lim, err := limiter.New(store, opts...)
	if err != nil {
		st.close()
		return nil, err
	}
	st.limiter = lim

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

func (st *state) close() {
	if st.redis != nil {
		st.redis.Close()
	}
}

// redisClient builds the client for store.redis. ContextTimeoutEnabled makes
// go-redis honour the store timeout on a hung socket.
func redisClient(rc *config.RedisConfig) (redis.UniversalClient, error) {
	switch {
	case rc.URL != "":
		o, err := redis.ParseURL(rc.URL)
		if err != nil {
			return nil, fmt.Errorf("store.redis.url: %w", err)
		}
		o.ContextTimeoutEnabled = true
		return redis.NewClient(o), nil
	case len(rc.Cluster) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Cluster, ContextTimeoutEnabled: true}), nil
	case rc.Sentinel != nil:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            rc.Sentinel.Master,
			SentinelAddrs:         rc.Sentinel.Addrs,
			ContextTimeoutEnabled: true,
		}), nil
	}
	return nil, errors.New("store.redis: one of url, cluster, sentinel is required")
}
