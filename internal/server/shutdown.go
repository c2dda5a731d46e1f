package server

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// freshConns knows the connections that have sent no request yet, so that
// a shutdown need not wait for them. http.Server.Shutdown closes idle
// keep-alive connections at once, but waits for a connection that sent
// nothing until it is five seconds old (Go issue 22682), and an HTTP
// client opens such connections all the time: Go's Transport, for one,
// keeps a connection it dialled for a request that an idle one served
// first. A gateway with nothing in flight then took up to 5 s to stop.
// At shutdown their reads time out at once, and they close: nothing is
// lost, since Go's server drops a request it reads once shutdown has begun.
type freshConns struct {
	conns    sync.Map // net.Conn → struct{}
	shutting atomic.Bool
}

// track is the http.Server's ConnState hook. A connection leaves StateNew
// once per life, so the map is written twice per connection, not per
// request; keep-alive requests only look it up.
func (f *freshConns) track(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		f.conns.Store(c, struct{}{})
		if f.shutting.Load() {
			_ = c.SetReadDeadline(time.Now())
		}
	case http.StateActive, http.StateClosed:
		f.conns.Delete(c)
	}
}

// expire runs when shutdown begins (http.Server.RegisterOnShutdown).
func (f *freshConns) expire() {
	f.shutting.Store(true)
	now := time.Now()
	f.conns.Range(func(c, _ any) bool {
		_ = c.(net.Conn).SetReadDeadline(now)
		return true
	})
}
