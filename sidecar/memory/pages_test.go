package memory

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestBinaryRanges: the mappings handed back are the executable's without write permission
// (its code, read-only data and function tables), whatever else the process maps.
func TestBinaryRanges(t *testing.T) {
	const maps = `00400000-0226b000 r-xp 00000000 fe:00 11110156                           /usr/bin/haproxy-sidecar
0226b000-0471a000 r--p 01e6b000 fe:00 11110156                           /usr/bin/haproxy-sidecar
0471a000-047d1000 rw-p 0431a000 fe:00 11110156                           /usr/bin/haproxy-sidecar
047d1000-04800000 rw-p 00000000 00:00 0
c000000000-c004000000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--p 00000000 fe:00 42                         /usr/lib/other.so
7ffd1c5f0000-7ffd1c611000 rw-p 00000000 00:00 0                          [stack]
7ffd1c7e2000-7ffd1c7e4000 r-xp 00000000 00:00 0                          [vdso]
`
	got := binaryRanges(strings.NewReader(maps), "/usr/bin/haproxy-sidecar")
	want := []binaryRange{{0x400000, 0x226b000}, {0x226b000, 0x471a000}}
	if !slices.Equal(got, want) {
		t.Errorf("ranges %x, want %x", got, want)
	}
	// A binary replaced on disk while it runs: maps and /proc/self/exe both say "(deleted)".
	deleted := "00400000-0226b000 r-xp 00000000 fe:00 1 /opt/my dir/haproxy-sidecar (deleted)\n"
	if got := binaryRanges(strings.NewReader(deleted), "/opt/my dir/haproxy-sidecar (deleted)"); len(got) != 1 {
		t.Errorf("a path with spaces, deleted: ranges %x, want one", got)
	}
	if got := binaryRanges(strings.NewReader(deleted), "/opt/my dir/haproxy-sidecar"); len(got) != 0 {
		t.Errorf("another file's mapping: ranges %x, want none", got)
	}
}

// TestUnwrittenRanges: the mappings unmapped once idle are the executable's without write
// permission whose pages the process never wrote (a mapping relocated, then made read-only,
// holds the only copy of its pages).
func TestUnwrittenRanges(t *testing.T) {
	const smaps = `00400000-0226b000 r-xp 00000000 fe:00 11110156                           /usr/bin/haproxy-sidecar
Size:              31156 kB
Rss:                9000 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me dw sd
0226b000-0471a000 r--p 01e6b000 fe:00 11110156                           /usr/bin/haproxy-sidecar
Size:              37564 kB
Rss:                3000 kB
Anonymous:             0 kB
VmFlags: rd mr mw me dw sd
0471a000-04720000 r--p 0431a000 fe:00 11110156                           /usr/bin/haproxy-sidecar
Size:                 24 kB
Rss:                  24 kB
Anonymous:            24 kB
VmFlags: rd mr mw me dw sd
04720000-047d1000 rw-p 04320000 fe:00 11110156                           /usr/bin/haproxy-sidecar
Size:                708 kB
Anonymous:           100 kB
7f0000000000-7f0000001000 r--p 00000000 fe:00 42                         /usr/lib/other.so
Anonymous:             0 kB
`
	got := unwrittenRanges(strings.NewReader(smaps), "/usr/bin/haproxy-sidecar")
	want := []binaryRange{{0x400000, 0x226b000}, {0x226b000, 0x471a000}}
	if !slices.Equal(got, want) {
		t.Errorf("ranges %x, want %x", got, want)
	}
	// A kernel whose smaps has no Anonymous field: nothing known written.
	bare := "00400000-0226b000 r-xp 00000000 fe:00 1 /usr/bin/haproxy-sidecar\nRss: 9000 kB\n"
	if got := unwrittenRanges(strings.NewReader(bare), "/usr/bin/haproxy-sidecar"); len(got) != 1 {
		t.Errorf("no Anonymous field: ranges %x, want one", got)
	}
}

// pageCounter counts the calls of a stand-in for ReleaseBinaryPages or UnmapBinaryPages.
func pageCounter(calls *int, err error) func() (uintptr, error) {
	return func() (uintptr, error) {
		*calls++
		if err != nil {
			return 0, err
		}
		return 1 << 20, nil
	}
}

// TestIdleReleasesBinaryPages: the start-up's end and the first sync hand the binary's pages
// back, out of the page cache; each Idle unmaps them, leaving them in the page cache for the
// next change; where that fails it says why once and stops trying.
func TestIdleReleasesBinaryPages(t *testing.T) {
	quiet := func() Heap { return Heap{Live: 9 << 20, Objects: 9 << 20} }
	t.Run("asked", func(t *testing.T) {
		var out, unmapped int
		tidier := Settings{}.Tidier()
		tidier.read = quiet
		tidier.ReleaseBinaryPages(func(err error) { t.Errorf("failed: %v", err) })
		tidier.pageOut, tidier.unmap = pageCounter(&out, nil), pageCounter(&unmapped, nil)
		tidier.Idle()
		tidier.Idle()
		if unmapped != 2 || out != 0 {
			t.Errorf("in 2 idle periods unmapped %d times and handed out of the page cache %d times, want 2 and 0", unmapped, out)
		}
	})
	t.Run("after the first sync only", func(t *testing.T) {
		var out, unmapped int
		tidier := Settings{gcPercent: 40}.Tidier()
		tidier.read = quiet
		tidier.collect, tidier.release = func() {}, func() {}
		tidier.ReleaseBinaryPages(func(err error) { t.Errorf("failed: %v", err) })
		tidier.pageOut, tidier.unmap = pageCounter(&out, nil), pageCounter(&unmapped, nil)
		for range 3 {
			tidier.AfterSync()
		}
		if out != 1 || unmapped != 0 {
			t.Errorf("handed back after %d of 3 syncs (unmapped after %d), want after the first only", out, unmapped)
		}
	})
	t.Run("once started", func(t *testing.T) {
		var out, unmapped int
		tidier := Settings{}.Tidier()
		tidier.ReleaseBinaryPages(func(err error) { t.Errorf("failed: %v", err) })
		tidier.pageOut, tidier.unmap = pageCounter(&out, nil), pageCounter(&unmapped, nil)
		tidier.Started()
		if out != 1 || unmapped != 0 {
			t.Errorf("handed back %d times once started (unmapped %d), want 1 (0)", out, unmapped)
		}
	})
	t.Run("not asked", func(t *testing.T) {
		tidier := Settings{}.Tidier()
		tidier.read = quiet
		tidier.Idle()
		if tidier.pageOut != nil || tidier.unmap != nil {
			t.Error("pages handed back without ReleaseBinaryPages")
		}
	})
	t.Run("failing", func(t *testing.T) {
		var out, unmapped int
		var heard []error
		tidier := Settings{}.Tidier()
		tidier.read = quiet
		tidier.ReleaseBinaryPages(func(err error) { heard = append(heard, err) })
		tidier.pageOut, tidier.unmap = pageCounter(&out, nil), pageCounter(&unmapped, errors.New("invalid argument"))
		tidier.Idle()
		tidier.Idle()
		tidier.Started()
		if unmapped != 1 || out != 0 || len(heard) != 1 {
			t.Errorf("tried %d times (then handed back %d times), %d errors heard; want 1 (0) and 1", unmapped, out, len(heard))
		}
	})
}
