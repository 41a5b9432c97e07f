package memory

import (
	"bytes"
	"errors"
	"os"
	"runtime/debug"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// smapsOf returns the executable's path and a reader of /proc/self/smaps into a buffer made
// now: read after an advice, it maps back no more than its own few pages (each fault maps 64
// kB around it: fault-around), so that what the advice left resident is what it measures.
func smapsOf(t *testing.T) (exe string, read func() []byte) {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skipf("no /proc/self/exe: %v", err)
	}
	smaps, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	t.Cleanup(func() { smaps.Close() })
	buf := make([]byte, 4<<20)
	return exe, func() []byte {
		n := 0
		for n < len(buf) {
			m, err := unix.Pread(int(smaps.Fd()), buf[n:], int64(n))
			if err != nil {
				t.Fatalf("reading smaps: %v", err)
			}
			if m == 0 {
				break
			}
			n += m
		}
		return slices.Clone(buf[:n])
	}
}

// TestReleaseBinaryPagesShrinksRSS: the pages of the running binary are no longer resident
// after ReleaseBinaryPages (those the test itself runs come back, a few). The binary's own
// mappings are measured, not all the file-backed RSS: a -race binary's shared libraries,
// which nothing advises, made the share that came back look twice as large.
func TestReleaseBinaryPagesShrinksRSS(t *testing.T) {
	exe, read := smapsOf(t)
	// No collection between the advice and the read: its workers would map their code back.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	touchBinary(t, 16<<20) // resident whether or not something handed them back before
	before := binaryRSS(read(), exe)
	if before < 1<<20 {
		t.Skipf("only %d kB of the binary resident: too little to tell", before>>10)
	}
	advised, err := ReleaseBinaryPages()
	smapsAfter := read()
	if errors.Is(err, unix.EINVAL) {
		t.Skipf("this kernel has no MADV_PAGEOUT: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	after := binaryRSS(smapsAfter, exe)
	t.Logf("the binary's RSS %d kB -> %d kB, %d kB of mappings advised", before>>10, after>>10, advised>>10)
	if advised == 0 {
		t.Fatal("no mapping of the executable found")
	}
	if after > before/2 {
		t.Errorf("the binary's read-only mappings hold %d kB of RSS after handing their pages back, want at most half of %d kB", after>>10, before>>10)
	}
}

// TestUnmapBinaryPagesLeavesThemCached: UnmapBinaryPages takes the binary's pages out of the
// process's RSS as ReleaseBinaryPages does, but leaves them in the page cache, so that the
// next use maps them without reading the file.
func TestUnmapBinaryPagesLeavesThemCached(t *testing.T) {
	const size = 16 << 20
	exe, read := smapsOf(t)
	// No collection between the advice and the read: its workers would map their code back.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	touchBinary(t, size)
	before, cachedBefore := binaryRSS(read(), exe), cachedBinary(t, size)
	if before < 1<<20 {
		t.Skipf("only %d kB of the binary resident: too little to tell", before>>10)
	}
	advised, err := UnmapBinaryPages()
	smapsAfter := read()
	if err != nil {
		t.Fatal(err)
	}
	after, cachedAfter := binaryRSS(smapsAfter, exe), cachedBinary(t, size)
	t.Logf("the binary's RSS %d kB -> %d kB, in the page cache %d kB -> %d kB, %d kB of mappings advised",
		before>>10, after>>10, cachedBefore>>10, cachedAfter>>10, advised>>10)
	if advised == 0 {
		t.Fatal("no mapping of the executable found")
	}
	if after > before/2 {
		t.Errorf("the binary's read-only mappings hold %d kB of RSS after unmapping their pages, want at most half of %d kB", after>>10, before>>10)
	}
	// This guards against an advice that drops them; it does not tell MADV_PAGEOUT apart here:
	// a test binary's pages stayed in the page cache after MADV_PAGEOUT too on the machine
	// this was written on (the sidecar's binary's did not: docs/performance.md).
	if cachedAfter < cachedBefore*9/10 {
		t.Errorf("%d kB of the binary's first %d MB in the page cache after unmapping them, want most of the %d kB before",
			cachedAfter>>10, size>>20, cachedBefore>>10)
	}
}

// binaryRSS sums the Rss of smaps' read-only mappings of exe.
func binaryRSS(smaps []byte, exe string) int64 {
	var total int64
	for _, m := range binarySmaps(bytes.NewReader(smaps), exe) {
		total += int64(m.rss) << 10
	}
	return total
}

// cachedBinary is how many bytes of the first limit bytes of the executable's read-only
// mappings are in memory, mapped or not (mincore: for a file's mapping, the page cache).
func cachedBinary(t *testing.T, limit uintptr) uintptr {
	t.Helper()
	page := uintptr(os.Getpagesize())
	var in uintptr
	for _, r := range binaryMappings(t) {
		n := min(r.end-r.start, limit)
		vec := make([]byte, (n+page-1)/page)
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, r.start, n, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatalf("mincore of %#x-%#x: %v", r.start, r.start+n, errno)
		}
		for _, v := range vec {
			if v&1 != 0 {
				in += page
			}
		}
		if limit -= n; limit == 0 {
			break
		}
	}
	return in
}

// binaryMappings are the executable's read-only mappings (binaryRanges of /proc/self/maps).
func binaryMappings(t *testing.T) []binaryRange {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skipf("no /proc/self/exe: %v", err)
	}
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	defer maps.Close()
	return binaryRanges(maps, exe)
}

// touchBinary makes up to limit bytes of the executable's read-only mappings resident, read
// through /proc/self/mem (which faults them into the process's own page tables), so that the
// test does not depend on what ran before it in the process (another run of it, with -count).
func touchBinary(t *testing.T, limit uintptr) {
	t.Helper()
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Skipf("no /proc/self/mem: %v", err)
	}
	defer mem.Close()
	buf := make([]byte, 1<<20)
	for _, r := range binaryMappings(t) {
		for at := r.start; at < r.end && limit > 0; at += uintptr(len(buf)) {
			n := min(uintptr(len(buf)), r.end-at, limit)
			if _, err := mem.ReadAt(buf[:n], int64(at)); err != nil {
				t.Skipf("reading the binary's pages through /proc/self/mem: %v", err)
			}
			limit -= n
		}
	}
}
