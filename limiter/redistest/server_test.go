package redistest

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestServerSetGet(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %q, want 127.0.0.1:port", s.Addr())
	}
	rdb := s.Client()
	ctx := t.Context()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want \"v\"", got, err)
	}
	cfg, err := rdb.ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatalf("CONFIG GET: %v", err)
	}
	if cfg["save"] != "" || cfg["appendonly"] != "no" {
		t.Errorf("persistence: save=%q appendonly=%q, want \"\" and \"no\"", cfg["save"], cfg["appendonly"])
	}
}

func TestServerUnixSocket(t *testing.T) {
	t.Parallel()
	s := StartServer(t, WithUnixSocket(), WithConfig("maxmemory", "10mb"))
	if s.SocketPath() == "" {
		t.Fatal("SocketPath() is empty")
	}
	rdb := s.Client(func(o *redis.Options) { o.Network, o.Addr = "unix", s.SocketPath() })
	got, err := rdb.ConfigGet(t.Context(), "maxmemory").Result()
	if err != nil {
		t.Fatalf("CONFIG GET over unix socket: %v", err)
	}
	if got["maxmemory"] != "10485760" {
		t.Errorf("maxmemory = %q, want 10485760 (from WithConfig)", got["maxmemory"])
	}
}

func TestServerRestartKeepsPort(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	addr, pid := s.Addr(), s.pid()
	rdb := s.Client(func(o *redis.Options) {
		o.MaxRetries = -1
		o.DialerRetries = 1 // fail fast while stopped instead of 5 dials 100ms apart
	})
	ctx := t.Context()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded while the server was stopped")
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Addr() != addr {
		t.Fatalf("Addr() changed from %s to %s", addr, s.Addr())
	}
	if s.pid() == pid || s.pid() == 0 {
		t.Fatalf("pid after restart = %d, old %d: not a new process", s.pid(), pid)
	}
	// The same client reconnects to the same address; the data is gone (no persistence).
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		// The first command may fail on a connection to the old process.
		if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("GET after restart: %v, want redis.Nil", err)
		}
	}
	if err := rdb.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatalf("SET after restart: %v", err)
	}
}

func TestServerFreezeThaw(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	rdb := s.Client(func(o *redis.Options) {
		o.DialTimeout = 100 * time.Millisecond
		o.ReadTimeout = 100 * time.Millisecond
		o.WriteTimeout = 100 * time.Millisecond
		o.MaxRetries = -1
	})
	ctx := t.Context()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	if err := s.Freeze(); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	start := time.Now()
	err := rdb.Get(ctx, "k").Err()
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("GET on frozen server: %v (%T), want a timeout", err, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("timeout took %v, want about 100ms", d)
	}

	if err := s.Thaw(); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after Thaw = %q, %v; want \"v\"", got, err)
	}
}

func TestServerCloseLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	for _, frozen := range []bool{false, true} {
		s, err := NewServer()
		if err != nil {
			t.Fatal(err)
		}
		pid, addr, dir := s.pid(), s.Addr(), s.dir
		rdb := s.Client()
		if frozen {
			if err := s.Freeze(); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		if err := s.Close(); err != nil {
			t.Fatalf("Close (frozen=%v): %v", frozen, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Close (frozen=%v) took %v", frozen, d)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if alive(pid) {
			t.Errorf("process %d still alive after Close (frozen=%v)", pid, frozen)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("dir %s after Close: %v, want not exist", dir, err)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Close", addr)
		}
		if err := rdb.Ping(t.Context()).Err(); !errors.Is(err, redis.ErrClosed) {
			t.Errorf("client after Close: %v, want redis.ErrClosed", err)
		}
		if err := s.Restart(); !errors.Is(err, ErrClosed) {
			t.Errorf("Restart after Close: %v, want ErrClosed", err)
		}
	}
}

func TestStartErrorIncludesLogTail(t *testing.T) {
	t.Parallel()
	_, err := NewServer(WithConfig("no-such-directive", "x"))
	if err == nil {
		t.Fatal("NewServer with a bad directive succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("error does not include the log tail: %v", err)
	}
	t.Log(err)
}

func TestServersInParallel(t *testing.T) {
	t.Parallel()
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			s, err := NewServer()
			if err == nil {
				err = s.Client().Ping(t.Context()).Err()
				err = errors.Join(err, s.Close())
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
