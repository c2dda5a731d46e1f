// Package cputime measures the CPU time of a test's own work, for bounds
// that hold on a busy machine:
//
//	timer := cputime.Start(t)
//	defer timer.Release()
//	work()
//	if d := timer.Elapsed(t); d > limit { ... }
//
// On Linux it is the CPU time of the calling goroutine's thread, which Start
// locks until Release: unlike the wall clock, it does not grow while the
// machine keeps the thread waiting. Elsewhere it falls back to the wall clock.
package cputime
