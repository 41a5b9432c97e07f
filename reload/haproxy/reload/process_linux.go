//go:build linux

package reload

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// FindProcess returns the pid of a running HAProxy started on configPath (its -f), 0 when none
// can be seen: the sidecar and HAProxy share no process namespace unless the pod says so.
// It tells "HAProxy runs but its socket does not answer" from "HAProxy does not run".
func FindProcess(configPath string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	found := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !startedOn(cmdline, configPath) {
			continue
		}
		if found == 0 || pid < found {
			found = pid // the master started first
		}
	}
	return found
}

// startedOn reports whether a command line (NUL-separated) is haproxy's with -f configPath.
func startedOn(cmdline []byte, configPath string) bool {
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	if len(args) == 0 || filepath.Base(string(args[0])) != "haproxy" {
		return false
	}
	for i := 1; i+1 < len(args); i++ {
		if string(args[i]) == "-f" && string(args[i+1]) == configPath {
			return true
		}
	}
	return false
}
