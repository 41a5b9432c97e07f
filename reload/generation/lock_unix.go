//go:build unix

package generation

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockName is the lock file in the state directory.
const lockName = "lock"

// Lock takes the state directory for this process: a second sidecar on the same directory
// would overwrite this one's generations and runtime changes. The lock is released by unlock,
// or when the process ends however it ends (flock). The error names the holder's pid.
func Lock(stateDir string) (unlock func(), err error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("lock the state directory: %w", err)
	}
	path := filepath.Join(stateDir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the state directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(holder))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("the state directory %s is in use by another haproxy-sidecar (pid %s): two on one directory would overwrite each other's generations; give each its own --state-dir", stateDir, pid)
		}
		return nil, fmt.Errorf("lock the state directory %s: %w", stateDir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
