package server

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/costgate/costgate/internal/loggate"

	"github.com/costgate/costgate/internal/peer"

	"github.com/redis/go-redis/v9"
	"golang.org/x/net/http2"

	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/limiter/redisstore"
)

// Connection deadlines (docs/configuration.md, "Connections"): a slow reader or writer
// cannot hold a connection, and with it a file descriptor, for long.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = config.WriteTimeout
	IdleTimeout       = 120 * time.Second
)

// HTTPServer returns the http.Server for h with the deadlines above.
// Its Shutdown waits for the requests in flight, not for connections that
// have sent none (shutdown.go).
func HTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	fresh := &freshConns{}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ConnState:         fresh.track,
	}
	hs.RegisterOnShutdown(fresh.expire)
	return hs
}

// ConnLimit is the connection cap of one config: one client address holds
// at most Max connections at once, the gateways in Exempt
// (identity.trusted_proxies) excepted, since every request behind a gateway
// arrives from its address.
type ConnLimit struct {
	Max    int
	Exempt []netip.Prefix
	// Answering bounds the refused connections being answered at once (a
	// quarter of the open-file limit, at most maxAnswering); past it a
	// refused connection is closed unanswered, so that refusals cannot cost
	// more descriptors than this. A client answered closes within a round
	// trip, so only stalled ones hold a slot for long.
	Answering int
}

// maxAnswering bounds ConnLimit.Answering whatever the open-file limit.
const maxAnswering = 4096

// fallbackOpenFiles stands for the open-file limit where the system has
// none to read.
const fallbackOpenFiles = 20000

// connLimitOf is cfg's connection cap for a process allowed openFiles
// descriptors.
func connLimitOf(cfg *config.Config, openFiles uint64) *ConnLimit {
	return &ConnLimit{
		Max:       cfg.ConnsPerIP(openFiles),
		Exempt:    cfg.TrustedPrefixes(),
		Answering: min(maxAnswering, config.DefaultConnsPerIP(openFiles)),
	}
}

// LimitConns wraps ln with the connection cap of the config in effect
// (server.max_conns_per_ip, identity.trusted_proxies exempt), which Reload
// swaps. A refused connection is answered in proto's terms, counted in
// costgate_connections_refused_total and logged at most once a second.
func (s *Server) LimitConns(ln net.Listener, proto Protocol) net.Listener {
	log := &refusalLog{logger: s.logger}
	return LimitPerIP(ln, s.conns.Load, proto, func(addr netip.Addr) {
		s.metrics.connsRefused.Inc()
		log.refused(addr)
	})
}

// ConnLimit is the connection cap of the config in effect.
func (s *Server) ConnLimit() *ConnLimit { return s.conns.Load() }

// Protocol is what a listener serves, and so how a refused connection is
// answered.
type Protocol int

const (
	// HTTP1 answers 429 with Retry-After: 1, Connection: close and a JSON body.
	HTTP1 Protocol = iota
	// H2C (gRPC) answers an HTTP/2 SETTINGS and a GOAWAY ENHANCE_YOUR_CALM.
	H2C
)

// Refusal texts: the JSON body of the 429, and the GOAWAY's debug data.
const (
	CodeTooManyConnections = "too_many_connections"
	tooManyConnsMessage    = "this client address holds server.max_conns_per_ip connections already; retry when one closes"
)

var (
	http1Refusal = []byte("HTTP/1.1 429 Too Many Requests\r\n" +
		"Content-Type: application/json\r\n" +
		"Retry-After: 1\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(refusalBody)) + "\r\n\r\n" + refusalBody)
	h2cRefusal = goAway()
)

const refusalBody = `{"error":"` + CodeTooManyConnections + `","message":"` + tooManyConnsMessage + `"}` + "\n"

func goAway() []byte {
	var b bytes.Buffer
	f := http2.NewFramer(&b, nil)
	f.WriteSettings() // a server's preface comes first
	f.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte(CodeTooManyConnections+": "+tooManyConnsMessage))
	return b.Bytes()
}

// answerWait bounds each half of answering a refused connection: the wait
// for its request before the answer, and for its close after the answer.
const answerWait = 500 * time.Millisecond

// drainLimit bounds what is read of a refused connection after the answer.
const drainLimit = 64 << 10

// LimitPerIP wraps ln so that one client address holds at most limit().Max
// connections at once, the addresses in limit().Exempt excepted. limit is
// read at each accept: a reload applies from the next connection on. A
// connection over the cap is counted (onRefuse), answered in proto's terms
// off the accept loop, and closed, before it costs a handler or a read of
// more than its first bytes.
func LimitPerIP(ln net.Listener, limit func() *ConnLimit, proto Protocol, onRefuse func(addr netip.Addr)) net.Listener {
	answer := http1Refusal
	if proto == H2C {
		answer = h2cRefusal
	}
	return &perIPListener{Listener: ln, limit: limit, answer: answer, answerWait: answerWait, onRefuse: onRefuse, open: map[netip.Addr]int{}}
}

type perIPListener struct {
	net.Listener
	limit      func() *ConnLimit
	answer     []byte
	answerWait time.Duration
	onRefuse   func(netip.Addr)
	answering  atomic.Int64

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
		limit := l.limit()
		if peer.AddrIn(addr, limit.Exempt) {
			return c, nil
		}
		l.mu.Lock()
		n := l.open[addr]
		ok := n < limit.Max
		if ok {
			l.open[addr] = n + 1
		}
		l.mu.Unlock()
		if ok {
			return &countedConn{Conn: c, l: l, addr: addr}, nil
		}
		if l.onRefuse != nil {
			l.onRefuse(addr) // counted before the client can see the answer
		}
		l.refuse(c, limit.Answering)
	}
}

// refuse answers c and closes it, or closes it at once when bound refused
// connections are being answered already.
func (l *perIPListener) refuse(c net.Conn, bound int) {
	if l.answering.Add(1) > int64(bound) {
		l.answering.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer l.answering.Add(-1)
		answerAndClose(c, l.answer, l.answerWait)
	}()
}

// answerAndClose waits briefly for the client's first bytes (an HTTP
// client then expects the answer it reads), writes answer, and reads what
// the client still sends until it closes, so that the close does not
// reset the connection and destroy the answer unread.
func answerAndClose(c net.Conn, answer []byte, wait time.Duration) {
	defer c.Close()
	buf := make([]byte, 4096)
	c.SetDeadline(time.Now().Add(wait))
	c.Read(buf) // a client that sends nothing is answered all the same
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write(answer); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.CopyBuffer(io.Discard, io.LimitReader(c, drainLimit), buf)
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

// refusalLog logs connections refused for max_conns_per_ip, at most once a
// second with the count in between.
type refusalLog struct {
	logger *slog.Logger
	gate   loggate.Gate
}

func (r *refusalLog) refused(addr netip.Addr) {
	if n, ok := r.gate.Pass(time.Now()); ok {
		r.logger.Warn("connection refused: max_conns_per_ip reached", "client", addr.String(), "refused", n+1)
	}
}

// RedisLogger sends go-redis's own log lines through logger, as JSON with
// the rest and at most one a second, instead of plain text on stderr.
// go-redis has one process-wide logger; the server sets it once at start.
func RedisLogger(logger *slog.Logger) {
	redis.SetLogger(redisstore.NewLogger(logger))
}
