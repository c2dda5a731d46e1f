package redisstore_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
)

// A lost reply must not make go-redis send the script again: Redis ran it,
// so a retry would charge twice. A proxy between the client and Redis lets
// the first EVALSHA through, then drops the connection instead of passing
// the reply back. The check fails, and Redis shows exactly one charge.
func TestLostReplyIsNotRetried(t *testing.T) {
	proxy := newReplyDropper(t, standalone.Addr())
	client := redis.NewClient(&redis.Options{Addr: proxy.addr(), ContextTimeoutEnabled: true}) // MaxRetries: the default 3
	t.Cleanup(func() { client.Close() })
	s := newStore(t, client, newPrefix(t), nil)
	p := mustValidate(t, &limiter.Policy{Name: "gql", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Hour})
	ctx := context.Background()
	if _, err := s.Take(ctx, p, "warm", 1); err != nil { // loads the script, so EVALSHA runs it
		t.Fatal(err)
	}

	proxy.armed.Store(true)
	if _, err := s.Take(ctx, p, "k", 100); err == nil {
		t.Fatal("Take succeeded though its reply was dropped: the script was sent twice")
	}
	d, err := s.Take(ctx, p, "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 900 {
		t.Errorf("remaining %d after one charge of 100 whose reply was lost, want 900 (charged exactly once)", d.Remaining)
	}
}

// replyDropper forwards TCP connections to Redis; when armed, it forwards
// the next EVALSHA, then closes the client's connection instead of
// forwarding the reply.
type replyDropper struct {
	ln    net.Listener
	armed atomic.Bool
	wg    sync.WaitGroup
}

func newReplyDropper(t *testing.T, target string) *replyDropper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &replyDropper{ln: ln}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				d.serve(c, target)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		d.wg.Wait()
	})
	return d
}

func (d *replyDropper) addr() string { return d.ln.Addr().String() }

func (d *replyDropper) serve(client net.Conn, target string) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	var dropping atomic.Bool
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if err != nil {
				server.Close()
				return
			}
			if bytes.Contains(bytes.ToLower(buf[:n]), []byte("evalsha")) && d.armed.CompareAndSwap(true, false) {
				dropping.Store(true)
			}
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if err != nil {
			return
		}
		if dropping.Load() {
			return // the reply is lost with the connection
		}
		if _, err := client.Write(buf[:n]); err != nil {
			return
		}
	}
}
