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

// TestIdleReleasesBinaryPages: the start-up's end, the first sync's and each Idle hand the binary's pages
// back, when asked to; where that fails it says why once and stops trying.
func TestIdleReleasesBinaryPages(t *testing.T) {
	quiet := func() Heap { return Heap{Live: 9 << 20, Objects: 9 << 20} }
	t.Run("asked", func(t *testing.T) {
		calls := 0
		tidier := Settings{}.Tidier()
		tidier.read = quiet
		tidier.ReleaseBinaryPages(func(err error) { t.Errorf("failed: %v", err) })
		tidier.pageOut = func() (uintptr, error) { calls++; return 1 << 20, nil }
		tidier.Idle()
		tidier.Idle()
		if calls != 2 {
			t.Errorf("handed back %d times in 2 idle periods, want 2", calls)
		}
	})
	t.Run("after the first sync only", func(t *testing.T) {
		calls := 0
		tidier := Settings{gcPercent: 40}.Tidier()
		tidier.read = quiet
		tidier.collect, tidier.release = func() {}, func() {}
		tidier.ReleaseBinaryPages(func(err error) { t.Errorf("failed: %v", err) })
		tidier.pageOut = func() (uintptr, error) { calls++; return 1 << 20, nil }
		for range 3 {
			tidier.AfterSync()
		}
		if calls != 1 {
			t.Errorf("handed back after %d of 3 syncs, want after the first only", calls)
		}
	})
	t.Run("once started", func(t *testing.T) {
		calls := 0
		tidier := Settings{}.Tidier()
		tidier.ReleaseBinaryPages(func(err error) { t.Errorf("failed: %v", err) })
		tidier.pageOut = func() (uintptr, error) { calls++; return 1 << 20, nil }
		tidier.Started()
		if calls != 1 {
			t.Errorf("handed back %d times once started, want 1", calls)
		}
	})
	t.Run("not asked", func(t *testing.T) {
		tidier := Settings{}.Tidier()
		tidier.read = quiet
		tidier.Idle()
		if tidier.pageOut != nil {
			t.Error("pages handed back without ReleaseBinaryPages")
		}
	})
	t.Run("failing", func(t *testing.T) {
		calls := 0
		var heard []error
		tidier := Settings{}.Tidier()
		tidier.read = quiet
		tidier.ReleaseBinaryPages(func(err error) { heard = append(heard, err) })
		tidier.pageOut = func() (uintptr, error) { calls++; return 0, errors.New("invalid argument") }
		tidier.Idle()
		tidier.Idle()
		if calls != 1 || len(heard) != 1 {
			t.Errorf("tried %d times, %d errors heard; want 1 and 1", calls, len(heard))
		}
	})
}
