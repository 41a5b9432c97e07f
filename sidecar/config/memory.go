package config

import "flag"

// Memory is what the sidecar gives back to the kernel once it is idle (GOGC and GOMEMLIMIT,
// the Go runtime's own variables, set the rest: docs/performance.md).
type Memory struct {
	// ReleaseBinaryPages: after the first sync and once idle, the pages of the sidecar's own binary are handed back
	// (sidecar/memory.ReleaseBinaryPages).
	ReleaseBinaryPages bool
}

func (*Memory) title() string { return "Memory" }

func (m *Memory) register(fs *flag.FlagSet) {
	fs.BoolVar(&m.ReleaseBinaryPages, "release-binary-pages", true, "after the first sync, and once idle (5 s after a sync), hand the pages of the sidecar's own binary back to the kernel (Linux: madvise MADV_PAGEOUT): 20-35 MB less RSS; the next sync reads those it needs again, from the page cache or the file")
}

func (m *Memory) validate() error { return nil }
