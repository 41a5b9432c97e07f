package memory

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// (In a file of its own, after the others: it leaves the runtime with much heap to return,
// which the tests of the free heap would see.)

// TestBoundHeapBoundsTheRuntime: with the bound, the runtime's limit follows the live heap
// through real collections: 16 MB above 160 MB live (where GOGC=40 would let the heap reach
// 224 MB), read from the runtime's own metrics, put back when stopped. The peaks are logged:
// on a loaded machine an allocation loop this fast overshoots either way.
func TestBoundHeapBoundsTheRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MB")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	const mb = 1 << 20
	run := func(bound bool) (peak, cycles uint64, limit int64, in BoundIn) {
		debug.SetGCPercent(40)
		debug.SetMemoryLimit(math.MaxInt64)
		runtime.GC()
		tidier := (Settings{gcPercent: 40, getenv: func(string) string { return "" }}).Tidier()
		if bound {
			defer tidier.BoundHeap()()
		}
		before := Collections()
		var kept [][]byte
		var sink []byte
		for i := range 160 { // 160 MB live in the end, 1 MB of garbage per MB kept
			kept = append(kept, make([]byte, mb))
			for range 64 {
				sink = make([]byte, 16<<10)
				sink[0] = byte(i)
			}
			v := readMetrics("/memory/classes/total:bytes", "/memory/classes/heap/released:bytes")
			peak = max(peak, v[0]-v[1]) // what the runtime holds of the OS: the process's RSS of it
		}
		cycles = Collections() - before
		runtime.GC()
		time.Sleep(20 * time.Millisecond) // the limit is set after the collection, on another goroutine
		limit = debug.SetMemoryLimit(-1)
		live, overhead := readBound()
		in = BoundIn{Live: live, Overhead: overhead, GCPercent: 40}
		runtime.KeepAlive(kept)
		runtime.KeepAlive(sink)
		return peak, cycles, limit, in
	}
	defer debug.FreeOSMemory() // the next tests read the free heap
	gogc, gogcCycles, _, _ := run(false)
	bounded, boundedCycles, limit, in := run(true)
	t.Logf("peak memory held: GOGC=40 %d MB (%d collections), bounded %d MB (%d collections)", gogc/mb, gogcCycles, bounded/mb, boundedCycles)
	want := BoundFor(in)
	if want == math.MaxInt64 || limit < want-8*mb || limit > want+8*mb {
		t.Errorf("limit with %d MB live is %d MB, want %d MB", in.Live/mb, limit/mb, want/mb)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit after stop %d", got)
	}
}
