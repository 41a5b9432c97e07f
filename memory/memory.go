// Package memory holds the Go runtime's memory settings, and gives memory back after a sync.
// The sidecar is idle most of the time and runs beside HAProxy: memory matters more to it than
// the CPU time of the garbage collector, which only works while a sync runs.
package memory

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
)

// defaultGCPercent is GOGC when the environment does not set it: the heap may grow to 1.4
// times what is live instead of twice (Go's default, 100). With Trim this keeps the
// sidecar under 250 MB RSS at 10,000 services x 10 pods, for about a quarter more CPU time on
// a cold start and no measurable change on a sync (docs/performance.md).
const defaultGCPercent = 40

// Settings are the runtime settings in effect, for the start-up log.
type Settings struct {
	limit     int64 // the soft memory limit set from the container's (0: not set by us)
	gcPercent int   // the GOGC set by us (0: not set by us)
	getenv    func(string) string
}

// ApplyDefaults sets GOGC (see defaultGCPercent) and the soft memory limit (see
// defaultMemoryLimit) unless the environment sets them.
func ApplyDefaults(getenv func(string) string, cgroupRoot string) Settings {
	m := Settings{getenv: getenv, limit: defaultMemoryLimit(getenv, cgroupRoot)}
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
		m.gcPercent = defaultGCPercent
	}
	return m
}

// attrs describe the settings for the start-up log line.
func (m Settings) Attrs() []any {
	limit := "none"
	switch {
	case m.limit > 0:
		limit = strconv.FormatInt(m.limit>>20, 10) + "MiB (90% of the container's limit; GOMEMLIMIT overrides)"
	case m.getenv != nil && m.getenv("GOMEMLIMIT") != "":
		limit = m.getenv("GOMEMLIMIT")
	}
	gc := "100 (Go's default)"
	switch {
	case m.gcPercent > 0:
		gc = fmt.Sprintf("%d (the sidecar's default; GOGC overrides)", m.gcPercent)
	case m.getenv != nil && m.getenv("GOGC") != "":
		gc = m.getenv("GOGC")
	}
	return []any{"go_memory_limit", limit, "go_gc_percent", gc}
}

// trimThreshold is how much free heap the runtime may keep mapped after a sync before
// Trim hands it back at once.
const trimThreshold = 32 << 20

// Trim returns the heap a sync freed to the OS when there is much of it: free already, or
// garbage the collector has not marked yet (a sync that read a big manifest leaves it dead
// but, with nothing allocating afterwards, uncollected for minutes, and the next big read
// would come on top of it). Go's scavenger would return free heap too, but over minutes;
// meanwhile the pages count in the container's memory (and RSS) as if they were used. Small
// deployments never reach the threshold; large ones pay one extra collection per sync, after
// the configuration is live.
func Trim() {
	sample := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}, // live and dead objects
		{Name: "/gc/heap/live:bytes"},                // live at the last collection
	}
	metrics.Read(sample)
	value := func(i int) uint64 {
		if sample[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[i].Value.Uint64()
	}
	free, objects, live := value(0), value(1), value(2)
	if free > trimThreshold || (objects > live && objects-live > trimThreshold) {
		debug.FreeOSMemory()
	}
}

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
