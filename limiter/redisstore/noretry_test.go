package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
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

// The same for a pipeline of checks: the dropper lets through a write that
// carries several EVALSHAs, then drops the connection. No check of that
// pipeline may be charged twice, and none may succeed by a resend: each key
// is charged at most once, exactly once when its check succeeded.
func TestLostPipelineIsNotRetried(t *testing.T) {
	proxy := newReplyDropper(t, standalone.Addr())
	proxy.minScripts = 2
	client := redis.NewClient(&redis.Options{Addr: proxy.addr(), ContextTimeoutEnabled: true}) // MaxRetries: the default 3
	t.Cleanup(func() { client.Close() })
	s, err := redisstore.New(client, &redisstore.Options{KeyPrefix: newPrefix(t), Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := mustValidate(t, &limiter.Policy{Name: "gql", Algorithm: limiter.TokenBucket, Limit: 1000, Period: time.Hour})
	ctx := context.Background()
	if _, err := s.Take(ctx, p, "warm", 1); err != nil {
		t.Fatal(err)
	}
	proxy.armed.Store(true)
	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, errs[i] = s.Take(ctx, p, fmt.Sprint("k", i), 1)
		})
	}
	wg.Wait()
	failed := 0
	for i := range n {
		d, err := s.Take(ctx, p, fmt.Sprint("k", i), 0)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case errs[i] == nil && d.Remaining != 999:
			t.Errorf("check %d succeeded, remaining %d, want 999 (charged once)", i, d.Remaining)
		case errs[i] != nil && d.Remaining < 999:
			t.Errorf("check %d failed, remaining %d: charged twice", i, d.Remaining)
		}
		if errs[i] != nil {
			failed++
		}
	}
	if proxy.armed.Load() {
		t.Fatal("no write carried two scripts: the checks were not pipelined")
	}
	if failed < 2 {
		t.Errorf("%d checks failed, want every check of the dropped pipeline (at least 2) to fail", failed)
	}
	t.Logf("%d of %d checks lost with their pipeline, none sent twice", failed, n)
}

// replyDropper forwards TCP connections to Redis; when armed, it forwards
// the next write carrying minScripts EVALSHAs (default 1), then closes the
// client's connection instead of forwarding the reply.
type replyDropper struct {
	ln         net.Listener
	armed      atomic.Bool
	minScripts int
	wg         sync.WaitGroup
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
			if bytes.Count(bytes.ToLower(buf[:n]), []byte("evalsha")) >= max(d.minScripts, 1) && d.armed.CompareAndSwap(true, false) {
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
