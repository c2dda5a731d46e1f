package redistest

import "time"

// defaultStartTimeout bounds how long a server (or a cluster) may take to
// become ready when no [WithStartTimeout] option is given.
const defaultStartTimeout = 10 * time.Second

// Option configures [NewServer], [NewCluster], [StartServer] and [StartCluster].
type Option func(*config)

type config struct {
	startTimeout time.Duration
	unixSocket   bool
	replicas     int
	directives   [][]string
}

func newConfig(opts []Option) *config {
	cfg := &config{startTimeout: defaultStartTimeout}
	for _, o := range opts {
		o(cfg)
	}
	return cfg
}

// WithConfig adds the redis.conf directive "name args..." after the defaults
// written by this package, so it overrides them (for example
// WithConfig("maxmemory", "1mb") or WithConfig("cluster-node-timeout", "1000")).
// Arguments are quoted; an empty argument is written as "". Overriding port,
// bind, dir, cluster-port or cluster-config-file breaks the package's
// bookkeeping and is not supported.
func WithConfig(name string, args ...string) Option {
	d := append([]string{name}, args...)
	return func(c *config) { c.directives = append(c.directives, d) }
}

// WithUnixSocket makes the server also listen on a unix socket inside its
// temporary directory (see [Server.SocketPath]); TCP stays enabled.
func WithUnixSocket() Option {
	return func(c *config) { c.unixSocket = true }
}

// WithStartTimeout sets how long to wait for a server to answer after it was
// spawned, and for a cluster to converge. The default is 10s.
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) { c.startTimeout = d }
}

// WithReplicas gives each master of a [Cluster] n replicas (default 0), so
// that the cluster fails over when a master dies. Servers ignore it.
func WithReplicas(n int) Option {
	return func(c *config) { c.replicas = max(n, 0) }
}
