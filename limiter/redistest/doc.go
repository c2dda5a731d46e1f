// Package redistest starts real redis-server processes for tests.
//
// It never uses an in-process fake: every [Server] and every node of a
// [Cluster] is a separate redis-server child process listening on a free TCP
// port on 127.0.0.1, with no persistence (save "", appendonly no) and its own
// temporary directory holding redis.conf, the server log (stdout and stderr)
// and, for cluster nodes, nodes.conf. Start errors include the tail of that
// log.
//
// Typical use from a test:
//
//	func TestLimiter(t *testing.T) {
//		srv := redistest.StartServer(t)
//		rdb := srv.Client()
//		// ... use rdb; srv and rdb are closed by t.Cleanup.
//	}
//
//	func TestLimiterCluster(t *testing.T) {
//		c := redistest.StartCluster(t) // 3 masters, all 16384 slots assigned
//		rdb := c.Client()
//		// ...
//	}
//
// Failure tests can stop and restart a server on the same port
// ([Server.Stop], [Server.Start], [Server.Restart]), kill it as kill -9 does
// ([Server.Kill]) or simulate a hung server with SIGSTOP/SIGCONT
// ([Server.Freeze], [Server.Thaw]). Cluster nodes are ordinary [Server]
// values reachable through [Cluster.Nodes] and, with [WithReplicas] (a
// cluster that fails over), [Cluster.Replicas]; [Cluster.WaitReady] waits
// for the cluster to become healthy again. A [Proxy] in front of a server
// adds latency to its replies and counts the connections it accepted.
//
// The binary is looked up in PATH by [Find]. When it is missing, [StartServer]
// and [StartCluster] fail the test (they never skip it) with a message that
// contains the install command "apt-get install -y redis-server".
//
// Everything is safe for concurrent use and for many test binaries running at
// once (go test ./... runs packages in parallel): ports are picked by the
// kernel, a start that loses the race for a port is retried on another one,
// and readiness is only reported once the answering server is verified to be
// the child that was started (by its process id). On Linux the children also
// get SIGKILL if the test binary dies without closing them.
package redistest
