package server

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/limiter/redisstore"
)

// Connection deadlines (SPEC §5): a slow reader or writer cannot hold a
// connection, and with it a file descriptor, for long.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = config.WriteTimeout
	IdleTimeout       = 120 * time.Second
)

// HTTPServer returns the http.Server for h with the deadlines above.
func HTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// LimitPerIP wraps ln so that one client address holds at most max
// connections at once: a connection past that is closed as soon as it is
// accepted, before it costs a goroutine or a read. Slow clients from one
// address cannot starve others of file descriptors.
func LimitPerIP(ln net.Listener, max int, onRefuse func(addr netip.Addr)) net.Listener {
	return LimitPerIPExcept(ln, max, nil, onRefuse)
}

// LimitPerIPExcept is LimitPerIP for every address outside exempt: the
// gateways in front of the server (identity.trusted_proxies), whose address
// every request behind them arrives from. Capping them would turn a busy
// nginx's auth_request sub-requests into refused connections.
func LimitPerIPExcept(ln net.Listener, max int, exempt []netip.Prefix, onRefuse func(addr netip.Addr)) net.Listener {
	return &perIPListener{Listener: ln, max: max, exempt: exempt, open: map[netip.Addr]int{}, onRefuse: onRefuse}
}

type perIPListener struct {
	net.Listener
	max      int
	exempt   []netip.Prefix
	onRefuse func(netip.Addr)

	mu   sync.Mutex
	open map[netip.Addr]int
}

func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := remoteAddr(c)
		if l.isExempt(addr) {
			return c, nil
		}
		l.mu.Lock()
		n := l.open[addr]
		ok := n < l.max
		if ok {
			l.open[addr] = n + 1
		}
		l.mu.Unlock()
		if ok {
			return &countedConn{Conn: c, l: l, addr: addr}, nil
		}
		if l.onRefuse != nil {
			l.onRefuse(addr) // counted before the client can see the close
		}
		c.Close()
	}
}

func (l *perIPListener) isExempt(addr netip.Addr) bool {
	for _, p := range l.exempt {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

func (l *perIPListener) release(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[addr] <= 1 {
		delete(l.open, addr)
	} else {
		l.open[addr]--
	}
}

func remoteAddr(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{} // a unix socket: all its clients count as one
}

type countedConn struct {
	net.Conn
	l    *perIPListener
	addr netip.Addr
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}

// RedisLogger sends go-redis's own log lines through logger, as JSON with
// the rest and at most one a second, instead of plain text on stderr.
// go-redis has one process-wide logger; the server sets it once at start.
func RedisLogger(logger *slog.Logger) {
	redis.SetLogger(redisstore.NewLogger(logger))
}
