package config

import "flag"

// Memory is what the sidecar gives back to the kernel once it is idle (GOGC and GOMEMLIMIT,
// the Go runtime's own variables, set the rest: docs/performance.md).
type Memory struct {
	// ReleaseBinaryPages: after the first sync the pages of the sidecar's own binary are handed back, once idle
	// unmapped (sidecar/memory.Tidier.ReleaseBinaryPages).
	ReleaseBinaryPages bool
}

func (*Memory) title() string { return "Memory" }

func (m *Memory) register(fs *flag.FlagSet) {
	fs.BoolVar(&m.ReleaseBinaryPages, "release-binary-pages", true, "after the first sync, hand the pages of the sidecar's own binary back to the kernel (Linux: madvise MADV_PAGEOUT), and once idle (5 s after a sync) unmap those the syncs used, leaving them in the page cache (MADV_DONTNEED): 20-35 MB less RSS; the next change maps again those it needs")
}

func (m *Memory) validate() error { return nil }
