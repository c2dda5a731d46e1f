//go:build !linux

package cputime

import (
	"testing"
	"time"
)

// Timer falls back to the wall clock where the thread's CPU time is not at hand.
type Timer struct{ start time.Time }

// Start starts measuring.
func Start(testing.TB) Timer { return Timer{time.Now()} }

// Elapsed is the time since Start.
func (t Timer) Elapsed(testing.TB) time.Duration { return time.Since(t.start) }

// Release does nothing here.
func (Timer) Release() {}
