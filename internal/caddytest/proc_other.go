//go:build !linux

package caddytest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
