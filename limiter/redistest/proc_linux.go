package redistest

import "syscall"

// sysProcAttr makes the kernel SIGKILL the child when the test binary dies
// without closing it (for example on a test timeout panic). Pdeathsig is tied
// to the spawning OS thread, which the Go runtime does not retire unless a
// goroutine exits while locked to it; this package never locks threads.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
