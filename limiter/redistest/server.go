package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// startAttempts bounds how often a start is retried after losing a port race.
const startAttempts = 5

// ErrClosed is returned by methods of a [Server] that has been closed.
var ErrClosed = errors.New("redistest: server closed")

// Server is a standalone (or cluster-node) redis-server child process.
// Its methods are safe for concurrent use, and so are many test binaries
// starting servers at once (go test ./... runs packages in parallel): ports
// are picked by the kernel, a start that loses the race for a port is
// retried on another, and readiness is reported only once the answering
// server is verified to be the child started (by its process id). On Linux
// a child gets SIGKILL if the test binary dies without closing it.
//
// Failure tests stop and restart it on the same port ([Server.Stop],
// [Server.Start], [Server.Restart]), kill it as kill -9 does
// ([Server.Kill]) or hang it with SIGSTOP and SIGCONT ([Server.Freeze],
// [Server.Thaw]).
type Server struct {
	bin     string
	cfg     *config
	dir     string
	port    int
	busPort int // cluster bus port; 0 for standalone servers
	cluster bool

	mu     sync.Mutex // guards proc and closed; held across start and stop
	proc   *process   // nil while stopped
	closed bool

	clientsMu   sync.Mutex
	clients     []*redis.Client
	clientsDone bool // set by Close; later clients are not tracked
}

// NewServer starts a standalone redis-server on a free port of 127.0.0.1 with
// no persistence (save "", appendonly no) and its own temporary directory, and
// returns once it answers. The caller must call [Server.Close], which stops
// the process and removes the directory. Tests should prefer [StartServer].
func NewServer(opts ...Option) (*Server, error) {
	bin, err := Find()
	if err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s, err := newServer(bin, newConfig(opts), false)
	if err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	return s, nil
}

// newServer creates the directory, picks ports and starts the process,
// retrying with fresh ports when one was taken in the meantime.
func newServer(bin string, cfg *config, cluster bool) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, cfg: cfg, dir: dir, cluster: cluster}
	nports := 1
	if cluster {
		nports = 2
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(nports)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.port = ports[0]
		if cluster {
			s.busPort = ports[1]
		}
		if err := os.WriteFile(s.confPath(), []byte(s.renderConf()), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.proc, err = s.startOnce()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errAddrInUse) || attempt == startAttempts {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

func (s *Server) confPath() string { return filepath.Join(s.dir, "redis.conf") }
func (s *Server) logPath() string  { return filepath.Join(s.dir, "redis.log") }

// renderConf returns the redis.conf for the current ports.
func (s *Server) renderConf() string {
	var b strings.Builder
	line := func(args ...string) {
		for i, a := range args {
			if i > 0 {
				b.WriteByte(' ')
				a = quoteArg(a)
			}
			b.WriteString(a)
		}
		b.WriteByte('\n')
	}
	line("bind", "127.0.0.1")
	line("port", strconv.Itoa(s.port))
	line("dir", s.dir)
	line("daemonize", "no")
	line("logfile", "") // stdout, which is the log file
	line("save", "")
	line("appendonly", "no")
	if s.cfg.unixSocket {
		line("unixsocket", s.SocketPath())
		line("unixsocketperm", "700")
	}
	if s.cluster {
		line("cluster-enabled", "yes")
		line("cluster-config-file", "nodes.conf")
		line("cluster-port", strconv.Itoa(s.busPort))
		line("cluster-announce-ip", "127.0.0.1")
	}
	for _, d := range s.cfg.directives {
		line(d...)
	}
	return b.String()
}

// quoteArg quotes a redis.conf argument.
func quoteArg(a string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`)
	return `"` + r.Replace(a) + `"`
}

// startOnce spawns the process and waits until it answers. On failure the
// process is gone.
func (s *Server) startOnce() (*process, error) {
	p, err := spawn(s.bin, s.dir, s.confPath(), s.logPath())
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(s.Addr(), s.cfg.startTimeout); err != nil {
		_ = p.stop()
		return nil, err
	}
	return p, nil
}

// Addr returns the TCP address of the server, "127.0.0.1:port". The port does
// not change over the lifetime of the Server, including restarts.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port returns the TCP port of the server.
func (s *Server) Port() int { return s.port }

// SocketPath returns the path of the unix socket the server listens on when
// started with [WithUnixSocket], or "" otherwise.
func (s *Server) SocketPath() string {
	if !s.cfg.unixSocket {
		return ""
	}
	return filepath.Join(s.dir, "redis.sock")
}

// Client returns a new client connected to [Server.Addr] over TCP with
// go-redis defaults; opts are applied last and may change anything (for
// example set Network to "unix" and Addr to [Server.SocketPath], or lower the
// timeouts). Each call returns a new client. Clients that are still open when
// the server is closed are closed by [Server.Close]; closing one earlier is
// fine. Clients created after Close are not tracked.
//
// Note for failure tests: go-redis dials up to 5 times, 100ms apart, before a
// command against a stopped server fails (set DialerRetries to 1 to fail
// fast), and retries failed commands up to 3 times (MaxRetries -1 disables).
func (s *Server) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.Addr()}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	s.clientsMu.Lock()
	if !s.clientsDone {
		s.clients = append(s.clients, c)
	}
	s.clientsMu.Unlock()
	return c
}

// Stop stops the process (SIGTERM, then SIGKILL after 5s) and waits for it
// to exit, keeping the port reserved for [Server.Start]. Stopping a stopped
// server is a no-op. All data is lost: there is no persistence (cluster
// nodes keep their nodes.conf, so they rejoin with the same identity).
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

func (s *Server) stopLocked() error {
	if s.proc == nil {
		return nil
	}
	err := s.proc.stop()
	s.proc = nil
	return err
}

// Start starts a stopped server again on the same port and waits until it
// answers. It is a no-op when the server is running; a server whose process
// died on its own is started again. If the port was taken in the meantime by
// another process, Start retries a few times and then fails.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.proc != nil {
		if !s.proc.exited() {
			return nil
		}
		s.proc = nil
	}
	return s.startLocked()
}

func (s *Server) startLocked() error {
	for attempt := 1; ; attempt++ {
		p, err := s.startOnce()
		if err == nil {
			s.proc = p
			return nil
		}
		if !errors.Is(err, errAddrInUse) || attempt == startAttempts {
			return fmt.Errorf("start redis-server: %w", err)
		}
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
}

// Restart stops the process and starts it again on the same port, as a
// server that went away and came back would. See [Server.Stop] and
// [Server.Start].
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.stopLocked(); err != nil {
		return err
	}
	return s.startLocked()
}

// Kill ends the process with SIGKILL, as kill -9 would: no shutdown, no
// goodbye to clients or to the cluster bus. It returns once the process has
// been reaped; [Server.Start] brings it back on the same port.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.proc == nil {
		return errors.New("server is stopped")
	}
	if err := s.proc.signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill redis-server: %w", err)
	}
	<-s.proc.done
	s.proc = nil
	return nil
}

// Freeze suspends the process with SIGSTOP to simulate a hung server: the
// kernel still accepts connections and buffers requests, but nothing is
// answered until [Server.Thaw]. Close and Stop also work on a frozen server.
func (s *Server) Freeze() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("freeze redis-server: %w", err)
	}
	return nil
}

// Thaw resumes a process suspended by [Server.Freeze] with SIGCONT.
func (s *Server) Thaw() error {
	if err := s.signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("thaw redis-server: %w", err)
	}
	return nil
}

func (s *Server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.proc == nil {
		return errors.New("server is stopped")
	}
	return s.proc.signal(sig)
}

// Pid returns the process id of the running redis-server, or 0 while it is
// stopped; tests read what the kernel says of it (how long it waited for a
// CPU, for example).
func (s *Server) Pid() int { return s.pid() }

// pid returns the process id of the running process, or 0.
func (s *Server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid()
}

// Close closes the clients returned by [Server.Client], stops the process
// (also when frozen), waits for it to exit and removes the temporary
// directory. It is safe to call more than once.
func (s *Server) Close() error {
	s.clientsMu.Lock()
	clients := s.clients
	s.clients, s.clientsDone = nil, true
	s.clientsMu.Unlock()
	for _, c := range clients {
		_ = c.Close() // may already be closed by the caller
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.stopLocked()
	if rmErr := os.RemoveAll(s.dir); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	if err != nil {
		return fmt.Errorf("close redis-server: %w", err)
	}
	return nil
}
