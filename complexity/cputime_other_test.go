//go:build !linux

package complexity_test

import (
	"testing"
	"time"
)

// threadTimer falls back to the wall clock where the thread's CPU time is
// not at hand.
type threadTimer struct{ start time.Time }

func startThreadTimer(testing.TB) threadTimer { return threadTimer{time.Now()} }

func (tt threadTimer) elapsed(testing.TB) time.Duration { return time.Since(tt.start) }

func (threadTimer) release() {}
