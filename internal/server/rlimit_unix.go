//go:build unix

package server

import "syscall"

// openFileLimit is the process's open-file limit: the soft RLIMIT_NOFILE,
// which the Go runtime raises to the hard limit at start.
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fallbackOpenFiles
	}
	return uint64(lim.Cur)
}
