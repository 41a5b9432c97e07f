package watcher

import (
	"io/fs"
	"syscall"
)

// identity is what tells two versions of a file apart beyond size and modification time: the
// device and inode (a rename over it) and the change time (a rewrite that kept both).
func identity(fi fs.FileInfo) (dev, ino uint64, ctime int64) {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0
	}
	return uint64(sys.Dev), uint64(sys.Ino), int64(sys.Ctimespec.Sec)*1e9 + int64(sys.Ctimespec.Nsec)
}
