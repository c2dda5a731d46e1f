package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"syscall"
	"time"
)

// The store's own dialer (NewClient, Open): every connection is registered
// in the store's connSet and wrapped so that a late read is told from a
// late reply (lateReadConn), and a dial that fails never closes go-redis's
// dial gate.
//
// go-redis v9 counts the dials a pool failed and, once they reach the
// pool's size, dials no more: it probes once a second in the background
// (internal/pool: dialErrorsNum, tryDial) and lets the next dial through
// only after a probe succeeded. A pool warmed ahead (MinIdleConns) refills
// all its idle connections at once when Redis goes away, so the first
// moments of an outage close the gate, and the checks then fail for up to
// a second after Redis accepts connections again. No setting opens it:
// the count is reset by the probe alone.
//
// So the dialer never reports a failure to the pool. A dial that fails
// hands the pool a failedConn, which carries the dial's error: a check that
// uses it fails with that error at once, as it would have, and the pool's
// health check throws away an idle one unused. The next dial is a real one,
// whenever it comes: the first check (or breaker probe) after Redis is back
// reaches it. The store's breaker, not go-redis's gate, bounds how often a
// failing node is dialled (a probe every ProbeInterval).

// dialer dials the connections of one client.
type dialer struct {
	timeout time.Duration // bounds the TCP dial (and the TLS handshake)
	grace   time.Duration // lateReadConn's: the store timeout
	conns   *connSet
	tls     *tls.Config // nil: plain TCP (or a unix socket)
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := net.Dialer{Timeout: d.timeout, KeepAlive: 5 * time.Minute}
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return &failedConn{addr: failedAddr{network, addr}, err: err}, nil
	}
	if d.tls != nil {
		// TLS bytes in the socket are not replies: such a connection is
		// neither registered nor wrapped.
		cfg := d.tls
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(c, cfg)
		hctx, cancel := context.WithTimeout(ctx, d.timeout)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			c.Close()
			return &failedConn{addr: failedAddr{network, addr}, err: err}, nil
		}
		d.conns.dialed()
		return tc, nil
	}
	d.conns.add(addr, c)
	d.conns.dialed()
	if sc, ok := c.(syscall.Conn); ok {
		return &lateReadConn{Conn: c, raw: sc, grace: d.grace}, nil
	}
	return c, nil
}

// failedConn is a dial that failed, handed to go-redis as a connection so
// that its dial gate stays open (see above): every use returns the dial's
// error, and go-redis's health check, which asks for the socket, drops it
// from the idle list unused.
type failedConn struct {
	addr failedAddr
	err  error
}

// Read and Write fail with the dial's error, wrapped once: go-redis
// unwraps the error of a connection's first command once, and the dial's
// own error names the address ("dial tcp 10.0.0.1:6379: connect: ...").
func (c *failedConn) Read([]byte) (int, error)         { return 0, dialFailed{c.err} }
func (c *failedConn) Write([]byte) (int, error)        { return 0, dialFailed{c.err} }
func (c *failedConn) Close() error                     { return nil }
func (c *failedConn) LocalAddr() net.Addr              { return c.addr }
func (c *failedConn) RemoteAddr() net.Addr             { return c.addr }
func (c *failedConn) SetDeadline(time.Time) error      { return nil }
func (c *failedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *failedConn) SetWriteDeadline(time.Time) error { return nil }

// SyscallConn fails: go-redis's health check then finds the connection
// unusable before it is used.
func (c *failedConn) SyscallConn() (syscall.RawConn, error) { return nil, errFailedDial }

var errFailedDial = errors.New("redisstore: the dial of this connection failed")

// dialFailed is a failed dial's error as a failedConn returns it.
type dialFailed struct{ err error }

func (e dialFailed) Error() string { return e.err.Error() }
func (e dialFailed) Unwrap() error { return e.err }

// failedAddr is the address a failed dial was aimed at.
type failedAddr struct{ network, addr string }

func (a failedAddr) Network() string { return a.network }
func (a failedAddr) String() string  { return a.addr }

// lateReadConn is a connection of the store's own dialer. A read whose
// deadline passed while the reply already sat in the socket is no timeout:
// this process, short of CPU, was late to read, and Redis was not late to
// answer; the read gets grace (the store timeout once more) to take it.
type lateReadConn struct {
	net.Conn
	raw   syscall.Conn
	grace time.Duration
}

func (c *lateReadConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	var ne net.Error
	if n == 0 && errors.As(err, &ne) && ne.Timeout() {
		if ready, _ := readable(c.raw); ready {
			if c.Conn.SetReadDeadline(time.Now().Add(c.grace)) == nil {
				return c.Conn.Read(p)
			}
		}
	}
	return n, err
}

// SyscallConn lets go-redis check the connection's health before use, as it
// does for a plain TCP connection.
func (c *lateReadConn) SyscallConn() (syscall.RawConn, error) { return c.raw.SyscallConn() }
