package memory

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fileBackedRSS is the process's resident memory that maps files (its binary's pages), from
// /proc/self/smaps_rollup: Rss less Anonymous.
func fileBackedRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		t.Skipf("no smaps_rollup: %v", err)
	}
	field := func(name string) int64 {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == name+":" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb << 10
			}
		}
		t.Fatalf("smaps_rollup has no %s", name)
		return 0
	}
	return field("Rss") - field("Anonymous")
}

// TestReleaseBinaryPagesShrinksRSS: the pages of the running binary are no longer resident
// after ReleaseBinaryPages (those the test itself runs come back, a few).
func TestReleaseBinaryPagesShrinksRSS(t *testing.T) {
	touchBinary(t, 16<<20) // resident whether or not something handed them back before
	before := fileBackedRSS(t)
	if before < 1<<20 {
		t.Skipf("only %d kB of the binary resident: too little to tell", before>>10)
	}
	advised, err := ReleaseBinaryPages()
	if errors.Is(err, unix.EINVAL) {
		t.Skipf("this kernel has no MADV_PAGEOUT: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	after := fileBackedRSS(t)
	t.Logf("file-backed RSS %d kB -> %d kB, %d kB of mappings advised", before>>10, after>>10, advised>>10)
	if advised == 0 {
		t.Fatal("no mapping of the executable found")
	}
	if after > before/2 {
		t.Errorf("file-backed RSS %d kB after handing the binary's pages back, want at most half of %d kB", after>>10, before>>10)
	}
}

// touchBinary makes up to limit bytes of the executable's read-only mappings resident, read
// through /proc/self/mem (which faults them into the process's own page tables), so that the
// test does not depend on what ran before it in the process (another run of it, with -count).
func touchBinary(t *testing.T, limit uintptr) {
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
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Skipf("no /proc/self/mem: %v", err)
	}
	defer mem.Close()
	buf := make([]byte, 1<<20)
	for _, r := range binaryRanges(maps, exe) {
		for at := r.start; at < r.end && limit > 0; at += uintptr(len(buf)) {
			n := min(uintptr(len(buf)), r.end-at, limit)
			if _, err := mem.ReadAt(buf[:n], int64(at)); err != nil {
				t.Skipf("reading the binary's pages through /proc/self/mem: %v", err)
			}
			limit -= n
		}
	}
}
