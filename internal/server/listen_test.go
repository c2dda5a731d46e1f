package server

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// SPEC §5's deadlines, on the server the command runs.
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
	hs.WriteTimeout = 300 * time.Millisecond // the test's own, shorter than SPEC's 30 s
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

// One address holds at most max connections; more are closed as they are
// accepted; other addresses are served; a closed connection frees its slot.
func TestLimitPerIP(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	ln := LimitPerIP(inner, 3, func(netip.Addr) { refused.Add(1) })
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
	// closedByServer reports whether the server closed c (a read sees EOF).
	closedByServer := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	var served []net.Conn // the server's ends
	for range 3 {
		dial("127.0.0.1")
		served = append(served, <-accepted)
	}
	fourth := dial("127.0.0.1")
	if !closedByServer(fourth) || refused.Load() != 1 {
		t.Fatalf("a 4th connection from one address was not closed at once (refused %d)", refused.Load())
	}
	dial("127.0.0.2")
	select {
	case c := <-accepted:
		if a := remoteAddr(c); a != netip.MustParseAddr("127.0.0.2") {
			t.Errorf("accepted %s, want the other address", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("another address was not served while the first is at its cap")
	}
	// The server closes one of the first address's connections: its slot is free.
	served[0].Close()
	dial("127.0.0.1")
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot was not reused")
	}
}
