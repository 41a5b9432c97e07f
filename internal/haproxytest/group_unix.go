//go:build unix

package haproxytest

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that its children (HAProxy's
// workers) can be signalled with it.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// terminate asks the process pid to stop (SIGTERM); with group, every process of its group.
func terminate(pid int, group bool) {
	if group {
		pid = -pid
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
}

// killGroup kills every process of the group pid leads (SIGKILL).
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
