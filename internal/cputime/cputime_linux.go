//go:build linux

package cputime

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// Timer measures the CPU time of the thread that started it.
type Timer struct{ start time.Duration }

// Start locks the calling goroutine to its thread and starts measuring.
func Start(tb testing.TB) Timer {
	runtime.LockOSThread()
	return Timer{threadCPU(tb)}
}

// Elapsed is the thread's CPU time since Start.
func (t Timer) Elapsed(tb testing.TB) time.Duration { return threadCPU(tb) - t.start }

// Release unlocks the goroutine from its thread.
func (Timer) Release() { runtime.UnlockOSThread() }

func threadCPU(tb testing.TB) time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD (Linux): the calling thread only
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
