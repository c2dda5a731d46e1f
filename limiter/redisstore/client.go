package redisstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/costgate/costgate/limiter"
)

// ClientOptions names one Redis deployment, exactly one of URL, Cluster and
// Sentinel, and how to reach it.
type ClientOptions struct {
	// URL is a go-redis URL: redis://, rediss:// or unix://.
	URL string
	// Cluster lists seed addresses (host:port) of a Redis Cluster.
	Cluster []string
	// Sentinel finds the master through Redis Sentinel.
	Sentinel *SentinelOptions
	// Username and Password authenticate to Cluster and Sentinel masters (a
	// URL carries its own).
	Username, Password string
	// Timeout is the store timeout, what one check may wait (default
	// limiter.DefaultTimeout). The client itself waits longer, up to
	// ReplyWait: a reply that comes late is still read, so the connection
	// that carried it stays in the pool.
	Timeout time.Duration
	// ReplyWait bounds how long a connection waits for a reply before it is
	// given up (default 3s, the go-redis read timeout).
	ReplyWait time.Duration
	// PoolSize is the number of connections per node (default 20: one per
	// pipeline in flight, and a few for readiness and the slot map).
	PoolSize int
	// MinIdleConns is the number of connections per node kept open and
	// ready, so that no check pays a dial or a handshake (default PoolSize:
	// the store warms them all).
	MinIdleConns int
}

// SentinelOptions names a master watched by Sentinel.
type SentinelOptions struct {
	Master string
	Addrs  []string
}

// Defaults of ClientOptions.
const (
	DefaultReplyWait = 3 * time.Second
	DefaultPoolSize  = 20
)

// NewClient returns a go-redis client for the deployment o names, set up
// for the store: ContextTimeoutEnabled; no retries (a lost reply must never
// send a script twice); no CLIENT SETINFO, and connections dialled ahead of
// need (MinIdleConns) and kept, so that the handshake is never paid inside a
// check; pipelines on the same warm pool; reads bounded by ReplyWait rather
// than by the store timeout, since the Store enforces that itself.
func NewClient(o ClientOptions) (redis.UniversalClient, error) {
	return newClient(o, nil)
}

// newClient is NewClient; with conns, its dialer registers every connection.
func newClient(o ClientOptions, conns *connSet) (redis.UniversalClient, error) {
	set := 0
	for _, given := range []bool{o.URL != "", len(o.Cluster) > 0, o.Sentinel != nil} {
		if given {
			set++
		}
	}
	if set != 1 {
		return nil, &limiter.FieldError{Field: "ClientOptions", Reason: "exactly one of URL, Cluster and Sentinel is required"}
	}
	if o.Timeout < 0 || o.ReplyWait < 0 || o.PoolSize < 0 || o.MinIdleConns < 0 {
		return nil, &limiter.FieldError{Field: "ClientOptions", Reason: "Timeout, ReplyWait, PoolSize and MinIdleConns must not be negative"}
	}
	if o.Timeout == 0 {
		o.Timeout = limiter.DefaultTimeout
	}
	if o.ReplyWait == 0 {
		o.ReplyWait = DefaultReplyWait
	}
	if o.ReplyWait < o.Timeout {
		o.ReplyWait = o.Timeout
	}
	if o.PoolSize == 0 {
		o.PoolSize = DefaultPoolSize
	}
	if o.MinIdleConns == 0 {
		o.MinIdleConns = o.PoolSize
	}
	o.MinIdleConns = min(o.MinIdleConns, o.PoolSize)
	// A dial happens outside any check (the pool dials ahead), so it may take
	// longer than a check, but not so long that a dead node holds a worker.
	dialTimeout := min(max(10*o.Timeout, 200*time.Millisecond), time.Second)
	// Waiting for a free connection is bounded tighter: the Cluster client
	// reloads its slot map through the same pools, and a dead node's pool,
	// busy redialling, must not hold a reload for seconds.
	poolTimeout := min(max(4*o.Timeout, 100*time.Millisecond), o.ReplyWait)
	// The store's own dialer (dial.go) registers the connections and keeps
	// go-redis's dial gate open, so that the first check after an outage
	// reaches Redis.
	var dl *dialer
	if conns != nil {
		dl = &dialer{timeout: dialTimeout, grace: o.Timeout, conns: conns}
	}
	tune := func(c *redis.Options) {
		c.ContextTimeoutEnabled = true
		if dl != nil {
			d := *dl
			d.tls = c.TLSConfig // rediss://: the dialer does the handshake
			c.Dialer = d.dial
		}
		c.MaxRetries = -1
		c.DialerRetries = 1
		c.DisableIdentity = true
		// No CLIENT MAINT_NOTIFICATIONS at connect either: one round trip less.
		c.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		c.DialTimeout = dialTimeout
		c.ReadTimeout, c.WriteTimeout = o.ReplyWait, o.ReplyWait
		c.PoolSize, c.MinIdleConns = o.PoolSize, o.MinIdleConns
		c.PoolTimeout = poolTimeout
		c.PipelinePoolSize = -1 // pipelines share the warm main pool
		c.ConnMaxIdleTime = -1  // idle connections stay warm
	}
	switch {
	case o.URL != "":
		c, err := redis.ParseURL(o.URL)
		if err != nil {
			return nil, fmt.Errorf("redisstore: url: %w", err)
		}
		tune(c)
		return redis.NewClient(c), nil
	case len(o.Cluster) > 0:
		var base redis.Options
		tune(&base)
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                    o.Cluster,
			Dialer:                   base.Dialer,
			Username:                 o.Username,
			Password:                 o.Password,
			ContextTimeoutEnabled:    true,
			MaxRetries:               -1,
			DialerRetries:            base.DialerRetries,
			DisableIdentity:          true,
			DialTimeout:              base.DialTimeout,
			ReadTimeout:              base.ReadTimeout,
			WriteTimeout:             base.WriteTimeout,
			PoolSize:                 base.PoolSize,
			MinIdleConns:             base.MinIdleConns,
			PoolTimeout:              base.PoolTimeout,
			PipelinePoolSize:         base.PipelinePoolSize,
			ConnMaxIdleTime:          base.ConnMaxIdleTime,
			MaintNotificationsConfig: base.MaintNotificationsConfig,
		}), nil
	default:
		if o.Sentinel.Master == "" || len(o.Sentinel.Addrs) == 0 {
			return nil, errors.New("redisstore: sentinel: a master name and at least one address are required")
		}
		var base redis.Options
		tune(&base)
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            o.Sentinel.Master,
			SentinelAddrs:         o.Sentinel.Addrs,
			Dialer:                base.Dialer,
			Username:              o.Username,
			Password:              o.Password,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialerRetries:         base.DialerRetries,
			DisableIdentity:       true,
			DialTimeout:           base.DialTimeout,
			ReadTimeout:           base.ReadTimeout,
			WriteTimeout:          base.WriteTimeout,
			PoolSize:              base.PoolSize,
			MinIdleConns:          base.MinIdleConns,
			PoolTimeout:           base.PoolTimeout,
			PipelinePoolSize:      base.PipelinePoolSize,
			ConnMaxIdleTime:       base.ConnMaxIdleTime,
		}), nil
	}
}

// Open builds a client with NewClient and a Store over it that owns it:
// Store.Close closes the client. The store's ReplyWait follows the client's.
func Open(co ClientOptions, opts *Options) (*Store, error) {
	conns := newConnSet()
	client, err := newClient(co, conns)
	if err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ReplyWait == 0 {
		o.ReplyWait = co.ReplyWait
	}
	s, err := newStore(client, &o, conns)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.ownsClient = true
	return s, nil
}
