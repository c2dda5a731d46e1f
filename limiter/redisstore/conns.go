package redisstore

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// connSet knows the store's connections by node address, to tell whether a
// reply is waiting unread in one of them: when a check's deadline passes
// while bytes from Redis sit in the socket, the gateway was short of CPU,
// not Redis slow, and the check is not failed for it.
type connSet struct {
	mu    sync.Mutex
	conns map[string]map[net.Conn]struct{}
	// onDial, when set, is told of every connection dialled: the store
	// then reads the node's eviction policy again (eviction.go).
	onDial atomic.Pointer[func()]
}

// dialed tells onDial of a new connection.
func (cs *connSet) dialed() {
	if f := cs.onDial.Load(); f != nil {
		(*f)()
	}
}

func newConnSet() *connSet { return &connSet{conns: make(map[string]map[net.Conn]struct{})} }

// hook registers every connection the client dials from now on.
func (cs *connSet) hook() redis.Hook { return dialHook{cs} }

type dialHook struct{ cs *connSet }

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err == nil {
			h.cs.add(addr, c)
			h.cs.dialed()
		}
		return c, err
	}
}

func (dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (cs *connSet) add(addr string, c net.Conn) {
	if _, ok := c.(syscall.Conn); !ok {
		return // TLS and other wrappers: bytes in the socket are not replies yet
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	m := cs.conns[addr]
	if m == nil {
		m = make(map[net.Conn]struct{})
		cs.conns[addr] = m
	}
	m[c] = struct{}{}
}

// replyWaiting reports whether any connection to addr has bytes from the
// server waiting to be read. Closed connections are forgotten on the way.
// With addr "", every connection counts (a client whose nodes have no
// address the store knows, such as a Sentinel client).
func (cs *connSet) replyWaiting(addr string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	waiting := false
	for a, m := range cs.conns {
		if addr != "" && a != addr {
			continue
		}
		for c := range m {
			ready, open := readable(c.(syscall.Conn))
			if !open {
				delete(m, c)
				continue
			}
			if ready {
				waiting = true
			}
		}
	}
	return waiting
}
