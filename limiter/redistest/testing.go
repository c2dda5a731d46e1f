package redistest

import "testing"

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
