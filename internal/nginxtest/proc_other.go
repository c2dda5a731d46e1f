//go:build !linux

package nginxtest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
