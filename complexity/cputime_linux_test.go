//go:build linux

package complexity_test

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadTimer measures the CPU time of the calling goroutine's thread, which
// it locks until release. Unlike the wall clock, that time does not grow while a
// busy machine keeps the thread waiting, so a bound on it holds under load.
type threadTimer struct{ start time.Duration }

func startThreadTimer(t testing.TB) threadTimer {
	runtime.LockOSThread()
	return threadTimer{threadCPU(t)}
}

func (tt threadTimer) elapsed(t testing.TB) time.Duration { return threadCPU(t) - tt.start }

func (threadTimer) release() { runtime.UnlockOSThread() }

func threadCPU(t testing.TB) time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD (Linux): the calling thread only
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
