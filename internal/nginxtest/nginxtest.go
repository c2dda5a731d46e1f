// Package nginxtest starts a real nginx (Debian's package) for tests: one
// process (master_process off, daemon off) on a free loopback port, with
// its own temporary prefix, config, pid file and temp paths, its error log
// on a buffer the failure messages quote. No root is needed. When nginx is
// missing the test fails with the install command; it never skips.
package nginxtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/syncbuf"
)

// InstallCommand installs what Start needs.
const InstallCommand = "apt-get install -y nginx"

// Server is a running nginx.
type Server struct {
	// Addr is host:port the config's server listens on.
	Addr string
	cmd  *exec.Cmd
	log  *syncbuf.Buffer
}

// Find returns the nginx binary: on PATH, else Debian's /usr/sbin/nginx.
func Find() (string, error) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", fmt.Errorf("nginx not found: install it with %q (as root)", InstallCommand)
}

// Start runs nginx with the http block http(listen) returns, listen being
// the 127.0.0.1:PORT its server must listen on, and stops it at cleanup.
func Start(tb testing.TB, http func(listen string) string) *Server {
	tb.Helper()
	return StartConfig(tb, func(listen, dir string) string {
		var conf strings.Builder
		fmt.Fprintf(&conf, "daemon off;\nmaster_process off;\nworker_processes 1;\npid %s;\nerror_log stderr notice;\n", filepath.Join(dir, "nginx.pid"))
		conf.WriteString("events { worker_connections 1024; }\nhttp {\n    access_log off;\n")
		for _, p := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
			fmt.Fprintf(&conf, "    %s_temp_path %s;\n", p, filepath.Join(dir, p))
		}
		conf.WriteString(http(listen))
		conf.WriteString("\n}\n")
		return conf.String()
	})
}

// StartConfig runs nginx with the whole config conf(listen, dir) returns,
// dir being its prefix (relative paths in the config are under it), and
// stops it at cleanup. The config must keep nginx in the foreground
// (daemon off) and log to stderr.
func StartConfig(tb testing.TB, conf func(listen, dir string) string) *Server {
	tb.Helper()
	bin, err := Find()
	if err != nil {
		tb.Fatal(err)
	}
	var lastErr error
	for range 3 { // a free port can be taken between picking and binding it
		s, err := start(tb, bin, conf)
		if err == nil {
			return s
		}
		lastErr = err
	}
	tb.Fatal(lastErr)
	return nil
}

func start(tb testing.TB, bin string, whole func(listen, dir string) string) (*Server, error) {
	dir := tb.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := whole(addr, dir)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	log := &syncbuf.Buffer{}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", "stderr")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s := &Server{Addr: addr, cmd: cmd, log: log}
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("nginx exited (%v):\n%s\nconfig:\n%s", err, log.String(), conf)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return nil, errors.New("nginx did not listen within 15s:\n" + log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a child process for its port: no clock to inject
	}
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if tb.Failed() {
			tb.Logf("nginx log:\n%s", log.String())
		}
	})
	return s, nil
}

// Log is what nginx wrote so far.
func (s *Server) Log() string { return s.log.String() }
