package redistest

import (
	"fmt"
	"os"
	"testing"
)

// StartServer starts a server with [NewServer] and registers its Close with
// tb.Cleanup. It calls tb.Fatal when the server cannot be started, including
// when redis-server is not installed: the message then contains the install
// command. It never skips the test.
func StartServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := NewServer(opts...)
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

// StartCluster starts a cluster with [NewCluster] and registers its Close
// with tb.Cleanup. It calls tb.Fatal when the cluster cannot be started,
// including when redis-server is not installed: the message then contains
// the install command. It never skips the test.
func StartCluster(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	c, err := NewCluster(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Error(err)
		}
	})
	return c
}

// Main is the whole TestMain of a package whose tests share one Redis: it
// starts a standalone server into *server, runs the tests, closes the
// server and exits with the tests' status. It exits 1 at once if the server
// cannot start (the message holds the install command when redis-server is
// missing), and after the tests if it cannot be closed. Each test keeps to
// key prefixes of its own.
//
//	var redisServer *redistest.Server
//
//	func TestMain(m *testing.M) { redistest.Main(m, &redisServer) }
func Main(m *testing.M, server **Server) { os.Exit(runShared(m.Run, server, nil)) }

// MainWithCluster is [Main] with a 3-master [Cluster] in *cluster as well.
func MainWithCluster(m *testing.M, server **Server, cluster **Cluster) {
	os.Exit(runShared(m.Run, server, cluster))
}

// runShared starts what Main shares, runs the tests and closes it: the exit status.
func runShared(run func() int, server **Server, cluster **Cluster) int {
	var err error
	if *server, err = NewServer(); err != nil {
		fmt.Fprintln(os.Stderr, "these tests need redis-server:", err)
		return 1
	}
	closers := []func() error{(*server).Close}
	if cluster != nil {
		if *cluster, err = NewCluster(); err != nil {
			(*server).Close()
			fmt.Fprintln(os.Stderr, "these tests need a Redis Cluster:", err)
			return 1
		}
		closers = append(closers, (*cluster).Close)
	}
	code := run()
	for _, closeIt := range closers {
		if err := closeIt(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = max(code, 1)
		}
	}
	return code
}
