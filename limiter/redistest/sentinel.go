package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a redis-server in sentinel mode watching one master, so that
// clients can find the master through it (redis.NewFailoverClient).
type Sentinel struct {
	proc *process
	dir  string
	port int
	name string
}

// NewSentinel starts a sentinel on a free port that monitors master under
// name (quorum 1), and waits until it reports the master's address.
func NewSentinel(master *Server, name string) (*Sentinel, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-sentinel-")
	if err != nil {
		return nil, fmt.Errorf("start redis sentinel: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Sentinel{dir: dir, port: ports[0], name: name}
	conf := filepath.Join(dir, "sentinel.conf") // sentinel rewrites it: it must be its own
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 1000\n",
		s.port, dir, name, master.Port(), name)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis sentinel: %w", err)
	}
	logPath := filepath.Join(dir, "sentinel.log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin, conf, "--sentinel")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	logf.Close()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis sentinel: %w", err)
	}
	s.proc = &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		s.proc.err = cmd.Wait()
		close(s.proc.done)
	}()
	if err := s.waitReady(10 * time.Second); err != nil {
		s.Close()
		return nil, fmt.Errorf("start redis sentinel: %w\n%s", err, s.proc.logTail())
	}
	return s, nil
}

// StartSentinel is NewSentinel that fails tb (with the install command when
// redis-server is missing) and closes the sentinel when the test ends.
func StartSentinel(tb testing.TB, master *Server, name string) *Sentinel {
	tb.Helper()
	s, err := NewSentinel(master, name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

func (s *Sentinel) waitReady(timeout time.Duration) error {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), DialerRetries: 1, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addr, err := c.GetMasterAddrByName(ctx, s.name).Result()
		cancel()
		if err == nil && len(addr) == 2 {
			return nil
		}
		if s.proc.exited() {
			return fmt.Errorf("sentinel exited: %v", s.proc.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sentinel not ready after %s: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is the sentinel's address, "127.0.0.1:port".
func (s *Sentinel) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Close stops the sentinel and removes its directory.
func (s *Sentinel) Close() error {
	var err error
	if s.proc != nil {
		err = s.proc.stop()
	}
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}
