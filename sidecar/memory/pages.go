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
// clean pages of a file. Once the start is over they are handed back out of the page cache
// too (madvise MADV_PAGEOUT): most were the start's only, and the memory goes, not only the
// number. Once idle, the pages the syncs since used are unmapped but left in the page cache
// (MADV_DONTNEED): the next change maps them again in about a millisecond, where reading
// them back from the file took it 50-100 ms (250-300 major faults) after each idle period,
// which is when most changes in a cluster come; the kernel reclaims that cache under pressure.

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

// unwrittenRanges are binaryRanges of /proc/self/smaps whose pages the process never wrote
// (Anonymous 0 kB): a read-only mapping that was written before it was made read-only (the
// relocations of a position-independent binary) holds the only copy of those pages, which
// MADV_DONTNEED would drop for the file's.
func unwrittenRanges(smaps io.Reader, exe string) []binaryRange {
	var out []binaryRange
	for _, m := range binarySmaps(smaps, exe) {
		if m.anonymous == 0 {
			out = append(out, m.binaryRange)
		}
	}
	return out
}

// binarySmap is one of the executable's read-only mappings with its smaps fields (kB).
type binarySmap struct {
	binaryRange
	rss, anonymous uint64
}

// binarySmaps are the binaryRanges of /proc/self/smaps with their Rss and Anonymous; a field
// that does not parse counts as written (anonymous 1).
func binarySmaps(smaps io.Reader, exe string) []binarySmap {
	var out []binarySmap
	cur := -1 // index in out of the binary's mapping whose fields are being read; -1: none
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.Contains(k, " ") && !strings.Contains(k, "-") {
			if cur < 0 || (k != "Rss" && k != "Anonymous") {
				continue
			}
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			switch {
			case k == "Rss":
				out[cur].rss = kb
			case err != nil:
				out[cur].anonymous = 1
			default:
				out[cur].anonymous = kb
			}
			continue
		}
		cur = -1 // a mapping's header: address perms offset dev inode path
		if r := binaryRanges(strings.NewReader(line), exe); len(r) == 1 {
			out, cur = append(out, binarySmap{binaryRange: r[0]}), len(out)
		}
	}
	return out
}
