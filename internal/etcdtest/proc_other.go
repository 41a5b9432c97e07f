//go:build !linux

package etcdtest

import "syscall"

// dieWithTest: only Linux can tie a child's life to its parent's; elsewhere the cleanups stop
// etcd.
func dieWithTest() *syscall.SysProcAttr { return nil }
