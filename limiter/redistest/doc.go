// Package redistest starts real redis-server processes for tests, never an
// in-process fake: each [Server], and each node of a [Cluster], is a child
// process on a free port of 127.0.0.1, without persistence, in a temporary
// directory of its own (redis.conf, its log, nodes.conf); a start that fails
// says why with the tail of that log, and a missing redis-server fails the
// test with the install command (it never skips it).
//
//	srv := redistest.StartServer(t)      // closed by t.Cleanup
//	c := redistest.StartCluster(t)       // 3 masters, all 16384 slots assigned
//
// Fault tests stop, kill, freeze and restart a [Server], fail a [Cluster]
// over ([WithReplicas]), or slow a server's replies through a [Proxy].
package redistest
