// Package nginxtest starts a real nginx (Debian's package) for tests: one
// process (master_process off, daemon off) on a free loopback port, with
// its own temporary prefix, config, pid file and temp paths, its error log
// on a buffer the failure messages quote. No root is needed. When nginx is
// missing the test fails with the install command; it never skips.
package nginxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/costgate/costgate/internal/proctest"
	"github.com/costgate/costgate/internal/syncbuf"
)

// InstallCommand installs what Start needs.
const InstallCommand = "apt-get install -y nginx"

// Server is a running nginx.
type Server struct {
	// Addr is host:port the config's server listens on.
	Addr string
	log  *syncbuf.Buffer
}

// Find returns the nginx binary: on PATH, else Debian's /usr/sbin/nginx.
func Find() (string, error) { return proctest.Find("nginx", "/usr/sbin/nginx", InstallCommand) }

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
// stops it at cleanup (SIGQUIT, its graceful stop). The config must keep
// nginx in the foreground (daemon off) and log to stderr.
func StartConfig(tb testing.TB, conf func(listen, dir string) string) *Server {
	tb.Helper()
	bin, err := Find()
	if err != nil {
		tb.Fatal(err)
	}
	p := proctest.Start(tb, "nginx", func(addr, dir string) (*exec.Cmd, string, error) {
		config := conf(addr, dir)
		path := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			return nil, "", err
		}
		return exec.Command(bin, "-p", dir, "-c", path, "-e", "stderr"), config, nil
	}, syscall.SIGQUIT)
	return &Server{Addr: p.Addr, log: p.Log}
}

// Log is what nginx wrote so far.
func (s *Server) Log() string { return s.log.String() }
