package caddytest

import "syscall"

// sysProcAttr kills caddy with the test binary, should it die unclean.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
