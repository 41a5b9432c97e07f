package memory

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ReleaseBinaryPages hands back the pages of the executable's read-only mappings that the
// process has mapped, out of the page cache too (see pages.go); it returns the bytes of the
// mappings advised. Linux 5.4 and later (MADV_PAGEOUT); an error otherwise, the pages kept.
func ReleaseBinaryPages() (uintptr, error) {
	return adviseBinary("/proc/self/maps", binaryRanges, unix.MADV_PAGEOUT, "MADV_PAGEOUT")
}

// UnmapBinaryPages unmaps the pages of the executable's read-only mappings that the process
// never wrote, leaving them in the page cache (see pages.go); it returns the bytes of the
// mappings advised.
func UnmapBinaryPages() (uintptr, error) {
	return adviseBinary("/proc/self/smaps", unwrittenRanges, unix.MADV_DONTNEED, "MADV_DONTNEED")
}

// adviseBinary advises advice (named name) on the ranges of the executable that ranges finds
// in the process's mappings file (maps or smaps).
func adviseBinary(mappings string, ranges func(io.Reader, string) []binaryRange, advice int, name string) (uintptr, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("finding the executable: %w", err)
	}
	f, err := os.Open(mappings)
	if err != nil {
		return 0, fmt.Errorf("reading the mappings: %w", err)
	}
	defer f.Close()
	var total uintptr
	for _, r := range ranges(f, exe) {
		// The mappings are the runtime's, not Go memory: their addresses are passed as they
		// are, never made into a Go pointer.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, uintptr(advice)); errno != 0 {
			return total, fmt.Errorf("madvise(%s) of %#x-%#x: %w", name, r.start, r.end, errno)
		}
		total += r.end - r.start
	}
	return total, nil
}
