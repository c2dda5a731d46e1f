package redistest

import "testing"

// Main's body: the tests run with a server and a cluster that answer, their
// status is the exit status, and both are gone once it returns.
func TestMainSharesAndCloses(t *testing.T) {
	var srv *Server
	var cl *Cluster
	var pids []int
	code := runShared(func() int {
		if err := srv.Client().Ping(t.Context()).Err(); err != nil {
			t.Errorf("the shared server: %v", err)
		}
		if err := cl.Client().Ping(t.Context()).Err(); err != nil {
			t.Errorf("the shared cluster: %v", err)
		}
		pids = append(pids, srv.Pid())
		for _, n := range cl.Nodes() {
			pids = append(pids, n.Pid())
		}
		return 3
	}, &srv, &cl)
	if code != 3 {
		t.Errorf("exit status %d, want the tests' 3", code)
	}
	if len(pids) != 4 {
		t.Fatalf("the tests saw %d processes, want a server and 3 masters", len(pids))
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("redis-server %d still runs after Main", pid)
		}
	}
}

// Without redis-server the tests do not run and the status is 1.
func TestMainWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var srv *Server
	if code := runShared(func() int { t.Error("the tests ran without Redis"); return 0 }, &srv, nil); code != 1 {
		t.Errorf("exit status %d without redis-server, want 1", code)
	}
}
