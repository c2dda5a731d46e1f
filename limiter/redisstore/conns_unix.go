//go:build linux || darwin || freebsd || netbsd || openbsd

package redisstore

import "syscall"

// readable peeks at the socket: bytes waiting to be read, and whether the
// connection is still open.
func readable(c syscall.Conn) (ready, open bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return false, false
	}
	var buf [1]byte
	cerr := raw.Control(func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ready = err == nil && n > 0
	})
	return ready, cerr == nil
}
