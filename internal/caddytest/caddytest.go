// Package caddytest starts a real Caddy (Debian's package) for tests: one
// process on a free loopback port, its admin endpoint off, every listener
// bound to loopback, and HOME and the XDG directories in the test's
// temporary directory, so that it writes nothing outside it. Its log goes
// to a buffer the failure messages quote. When caddy is missing the test
// fails with the install command; it never skips.
package caddytest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/costgate/costgate/internal/proctest"
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
func Find() (string, error) { return proctest.Find("caddy", "/usr/bin/caddy", InstallCommand) }

// Start runs Caddy with the Caddyfile site(port) returns, port being the
// free port its site must listen on (":PORT"), with global options of its
// own (so site must have none), and stops it at cleanup (SIGINT, Caddy's
// graceful stop).
func Start(tb testing.TB, site func(port string) string) *Server {
	tb.Helper()
	bin, err := Find()
	if err != nil {
		tb.Fatal(err)
	}
	p := proctest.Start(tb, "caddy", func(addr, dir string) (*exec.Cmd, string, error) {
		_, port, _ := net.SplitHostPort(addr)
		config := globalOptions + site(port)
		path := filepath.Join(dir, "Caddyfile")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			return nil, "", err
		}
		cmd := exec.Command(bin, "run", "--adapter", "caddyfile", "--config", path)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
			"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CACHE_HOME=" + filepath.Join(dir, "cache"), "PATH=" + os.Getenv("PATH")}
		return cmd, config, nil
	}, syscall.SIGINT)
	return &Server{Addr: p.Addr, log: p.Log}
}

// Log is what Caddy wrote so far.
func (s *Server) Log() string { return s.log.String() }
