// Package caddytest starts a real Caddy (Debian's package) for tests: one
// process on a free loopback port, its admin endpoint off, every listener
// bound to loopback, and HOME and the XDG directories in the test's
// temporary directory, so that it writes nothing outside it. Its log goes
// to a buffer the failure messages quote. When caddy is missing the test
// fails with the install command; it never skips.
package caddytest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/syncbuf"
)

// InstallCommand installs what Start needs.
const InstallCommand = "apt-get install -y caddy"

// globalOptions keep Caddy to loopback and to plain HTTP: no admin
// endpoint, no certificates.
const globalOptions = "{\n\tadmin off\n\tauto_https off\n\tdefault_bind 127.0.0.1\n}\n"

// Server is a running Caddy.
type Server struct {
	// Addr is the 127.0.0.1:PORT its site listens on.
	Addr string
	log  *syncbuf.Buffer
}

// Find returns the caddy binary: on PATH, else Debian's /usr/bin/caddy.
func Find() (string, error) {
	if p, err := exec.LookPath("caddy"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/caddy"); err == nil {
		return "/usr/bin/caddy", nil
	}
	return "", fmt.Errorf("caddy not found: install it with %q (as root)", InstallCommand)
}

// Start runs Caddy with the Caddyfile site(port) returns, port being the
// free port its site must listen on (":PORT"), with global options of its
// own (so site must have none), and stops it at cleanup.
func Start(tb testing.TB, site func(port string) string) *Server {
	tb.Helper()
	bin, err := Find()
	if err != nil {
		tb.Fatal(err)
	}
	var lastErr error
	for range 3 { // a free port can be taken between picking and binding it
		s, err := start(tb, bin, site)
		if err == nil {
			return s
		}
		lastErr = err
	}
	tb.Fatal(lastErr)
	return nil
}

func start(tb testing.TB, bin string, site func(string) string) (*Server, error) {
	dir := tb.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	conf := globalOptions + site(port)
	confPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	log := &syncbuf.Buffer{}
	cmd := exec.Command(bin, "run", "--adapter", "caddyfile", "--config", confPath)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CACHE_HOME=" + filepath.Join(dir, "cache"), "PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start caddy: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("caddy exited (%v):\n%s\nCaddyfile:\n%s", err, log.String(), conf)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return nil, errors.New("caddy did not listen within 15s:\n" + log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a child process for its port: no clock to inject
	}
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT) // Caddy's graceful stop
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if tb.Failed() {
			tb.Logf("caddy log:\n%s", log.String())
		}
	})
	return &Server{Addr: addr, log: log}, nil
}

// Log is what Caddy wrote so far.
func (s *Server) Log() string { return s.log.String() }
