package redistest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestMain fails the run when any redis-server child of this test binary is
// still alive after all tests and their cleanups have finished.
func TestMain(m *testing.M) {
	code := m.Run()
	if left := redisChildren(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "redis-server processes left behind: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// alive reports whether a process with the given pid exists.
func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// redisChildren returns the pids of redis-server processes whose parent is
// this process (Linux only; nil elsewhere).
func redisChildren() []int {
	if runtime.GOOS != "linux" {
		return nil
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		// Format: pid (comm) state ppid ...; comm may contain spaces.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if s[open+1:end] != "redis-server" || len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == os.Getpid() {
			pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
			pids = append(pids, pid)
		}
	}
	return pids
}
