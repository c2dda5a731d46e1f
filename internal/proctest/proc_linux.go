package proctest

import "syscall"

// sysProcAttr kills nginx with the test binary, should it die unclean.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
