//go:build !unix

package haproxytest

import (
	"os"
	"os/exec"
)

// ownGroup does nothing where there are no process groups: the tests and benchmarks that
// start processes run on Unix; this only lets the package build elsewhere.
func ownGroup(*exec.Cmd) {}

// terminate kills the process pid: there is no SIGTERM to ask with.
func terminate(pid int, _ bool) { killGroup(pid) }

// killGroup kills the process pid (its children are not known).
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
