package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// docs/configuration.md's connection deadlines, on the server the command runs.
func TestHTTPServerDeadlines(t *testing.T) {
	hs := HTTPServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	for _, d := range []struct {
		name      string
		got, want time.Duration
	}{
		{"ReadHeaderTimeout", hs.ReadHeaderTimeout, 10 * time.Second},
		{"ReadTimeout", hs.ReadTimeout, 30 * time.Second},
		{"WriteTimeout", hs.WriteTimeout, 30 * time.Second},
		{"IdleTimeout", hs.IdleTimeout, 120 * time.Second},
	} {
		if d.got != d.want {
			t.Errorf("%s = %s, want %s", d.name, d.got, d.want)
		}
	}
}

// A client that asks for a large response and never reads it is cut off
// by the write deadline: the handler's write fails and the connection goes.
func TestSlowReaderIsCutOff(t *testing.T) {
	writeErr := make(chan error, 1)
	big := bytes.Repeat([]byte("x"), 64<<20) // far beyond any socket buffer
	hs := HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := w.Write(big)
		writeErr <- err
	}), slog.New(slog.DiscardHandler))
	hs.WriteTimeout = 300 * time.Millisecond // the test's own, shorter than the server's 30 s
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatal("64 MiB written to a client that reads nothing")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the write to a stalled reader did not time out")
	}
}

// One address holds at most Max connections; more are answered and closed
// as they are accepted; other addresses are served; a closed connection
// frees its slot; a new limit applies from the next accept.
func TestLimitPerIP(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var limit atomic.Pointer[ConnLimit]
	limit.Store(&ConnLimit{Max: 3, Answering: 8})
	var refused atomic.Int64
	ln := LimitPerIP(inner, limit.Load, HTTP1, func(netip.Addr) { refused.Add(1) })
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(local string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// refusedByServer reports whether the server answered c 429 and closed it.
	refusedByServer := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		b, err := io.ReadAll(c)
		return err == nil && bytes.HasPrefix(b, []byte("HTTP/1.1 429 "))
	}
	wantAccepted := func(what string) net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second):
			t.Fatalf("%s was not accepted", what)
		}
		return nil
	}
	var served []net.Conn // the server's ends
	for range 3 {
		dial("127.0.0.1")
		served = append(served, wantAccepted("a connection within the cap"))
	}
	if fourth := dial("127.0.0.1"); !refusedByServer(fourth) || refused.Load() != 1 {
		t.Fatalf("a 4th connection from one address was not refused at once (refused %d)", refused.Load())
	}
	dial("127.0.0.2")
	if a := remoteAddr(wantAccepted("another address while the first is at its cap")); a != netip.MustParseAddr("127.0.0.2") {
		t.Errorf("accepted %s, want the other address", a)
	}
	// The server closes one of the first address's connections: its slot is free.
	served[0].Close()
	dial("127.0.0.1")
	served = append(served, wantAccepted("a freed slot"))

	// A reload: the cap rises to 4 and 127.0.0.1 is exempt; then it is not, at cap 2.
	limit.Store(&ConnLimit{Max: 4, Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Answering: 8})
	for range 3 {
		dial("127.0.0.1")
		wantAccepted("an exempt address's connection")
	}
	dial("127.0.0.2")
	wantAccepted("a connection within the raised cap")
	limit.Store(&ConnLimit{Max: 2, Answering: 8})
	if !refusedByServer(dial("127.0.0.1")) || !refusedByServer(dial("127.0.0.2")) || refused.Load() != 3 {
		t.Errorf("after lowering the cap below what two addresses hold, new connections were not refused (refused %d)", refused.Load())
	}
}

// On grpc_listen an over-cap connection gets HTTP/2's answer: the server's
// SETTINGS, then GOAWAY ENHANCE_YOUR_CALM naming the reason.
func TestLimitPerIPAnswersHTTP2(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitPerIP(inner, (&ConnLimit{Max: 0, Answering: 1}).self, H2C, nil)
	t.Cleanup(func() { ln.Close() })
	go ln.Accept()
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	f, err := fr.ReadFrame()
	if _, ok := f.(*http2.SettingsFrame); !ok {
		t.Fatalf("first frame: %v %v, want SETTINGS", f, err)
	}
	f, err = fr.ReadFrame()
	ga, ok := f.(*http2.GoAwayFrame)
	if !ok || ga.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.HasPrefix(string(ga.DebugData()), "too_many_connections") {
		t.Fatalf("second frame: %v %v, want GOAWAY ENHANCE_YOUR_CALM too_many_connections", f, err)
	}
}

// Refused connections being answered are bounded: past Answering, a
// refused connection is closed at once, so that a flood of connections from
// one address that never close cannot hold descriptors while they wait.
func TestLimitPerIPBoundsAnswering(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitPerIP(inner, (&ConnLimit{Max: 0, Answering: 2}).self, HTTP1, nil)
	ln.(*perIPListener).answerWait = time.Minute // the held ones keep their slots until closed
	t.Cleanup(func() { ln.Close() })
	go ln.Accept()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	for i := range 2 { // answered, then held open: each keeps its answering slot
		c := dial()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || res.StatusCode != 429 {
			t.Fatalf("held connection %d: %v %v, want the 429 answer", i, res, err)
		}
	}
	third := dial()
	io.WriteString(third, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if b, err := io.ReadAll(third); len(b) != 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("the third refused connection: %q %v, want it closed unanswered", b, err)
	}
}

// self is a fixed limit as LimitPerIP reads one.
func (l *ConnLimit) self() *ConnLimit { return l }
