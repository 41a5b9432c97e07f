package memory

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// The pages of the sidecar's own binary (its code, read-only data and function tables) count
// in its RSS once touched, and most are touched only while it starts: every dependency's
// package initialisation (client-go's API scheme, protobuf registries, OpenTelemetry) and the
// first sync run code and read tables all over the 70 MB the binary maps, and the kernel maps
// 64 kB around each page fault. Idle, a sidecar at 1,000 services held 38-40 MB of them, of
// which a sync uses about 18 MB and an idle one about 3 (docs/performance.md). They are
// clean pages of a file: handed back (madvise MADV_PAGEOUT), the next use reads them again
// from the page cache, or from the file when the kernel has dropped them meanwhile.

// binaryRange is a read-only mapping of the executable.
type binaryRange struct {
	start, end uintptr
}

// binaryRanges are the mappings of /proc/self/maps (as maps lists them) that map the file
// exe without write permission: the writable one holds the binary's data, which the process
// changes and the garbage collector reads.
func binaryRanges(maps io.Reader, exe string) []binaryRange {
	var out []binaryRange
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// address perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || strings.Join(f[5:], " ") != exe || strings.Contains(f[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, binaryRange{uintptr(start), uintptr(end)})
	}
	return out
}
