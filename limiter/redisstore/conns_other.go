//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package redisstore

import "syscall"

// readable cannot peek here: a deadline always counts.
func readable(c syscall.Conn) (ready, open bool) {
	_, err := c.SyscallConn()
	return false, err == nil
}
