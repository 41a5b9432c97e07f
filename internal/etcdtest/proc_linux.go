package etcdtest

import "syscall"

// dieWithTest makes etcd die with the test binary even if the test is killed before its
// cleanups run.
func dieWithTest() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
