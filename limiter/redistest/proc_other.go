//go:build !linux

package redistest

import "syscall"

// sysProcAttr returns nil: parent-death signals are Linux-only, so elsewhere
// a crashed test binary can leave its redis-server children running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
