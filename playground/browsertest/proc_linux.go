package browsertest

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts chromium in its own process group, so that killTree can
// end every process it forked, and has the kernel kill it should the test
// binary die first.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killTree kills chromium's process group (its pid is the group's id).
func killTree(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
