//go:build !linux

package browsertest

import "os/exec"

func setProcAttrs(cmd *exec.Cmd) {}

func killTree(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
