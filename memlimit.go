package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// containerMemoryLimit is the memory limit of the cgroup the process runs in (cgroup v2
// memory.max, else v1 memory.limit_in_bytes, under root), or 0 when there is none.
func containerMemoryLimit(root string) int64 {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 { // "max", or v1's "unlimited" (a huge number)
			return 0
		}
		return n
	}
	return 0
}

// defaultMemoryLimit gives the Go runtime a soft memory limit of 90% of the container's
// memory limit when GOMEMLIMIT is not set: near the limit the garbage collector then works
// harder instead of letting the heap grow to twice what is live (the default, GOGC=100)
// until the container is killed. It returns the limit set, 0 if none.
func defaultMemoryLimit(getenv func(string) string, cgroupRoot string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := containerMemoryLimit(cgroupRoot) / 10 * 9
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return limit
}

// memLimitText is the soft memory limit for the start-up log line.
func memLimitText() string {
	switch {
	case memLimit > 0:
		return strconv.FormatInt(memLimit>>20, 10) + "MiB (90% of the container's limit; GOMEMLIMIT overrides)"
	case os.Getenv("GOMEMLIMIT") != "":
		return os.Getenv("GOMEMLIMIT")
	}
	return "none"
}
