//go:build unix

package haproxytest

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// reservePort takes an exclusive lock that names port, shared by every test process on the
// machine (go test runs packages, and hack/test.sh HAProxy versions, side by side): a port free
// when chosen is only released with a listen, so two tests choosing at once, in one process or
// two, could otherwise both get it. flock locks belong to the open file, so a second reservation
// in the same process is refused as well. The lock is held until release.
func reservePort(port int) (release func(), ok bool) {
	dir := filepath.Join(os.TempDir(), "haproxy-sidecar-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return func() {}, true // no lock directory: the listen check alone, as before
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return func() {}, true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}
