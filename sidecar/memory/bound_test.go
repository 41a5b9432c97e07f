package memory

import (
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// TestBoundFor: the heap's bound gives a sync the room TidyFor meant above the heap live
// after the last one, and boundRoom above a live heap that grew past that; no bound where
// GOGC's goal is lower; never less than boundFloor above what is live (the collector never
// runs continuously); never above the container's limit.
func TestBoundFor(t *testing.T) {
	const mb = 1 << 20
	none := int64(math.MaxInt64)
	for _, c := range []struct {
		name string
		in   BoundIn
		want int64
	}{
		{"10,000 Ingresses between syncs: GOGC's goal (TidyFor's room) binds first",
			BoundIn{Live: 62 * mb, Settled: 62 * mb, SyncRoom: 32 * mb, Overhead: 8 * mb, GCPercent: 51}, none},
		{"a change under way, live 75 MB: the sync's room above the settled heap",
			BoundIn{Live: 75 * mb, Settled: 62 * mb, SyncRoom: 32 * mb, Overhead: 8 * mb, GCPercent: 51}, 102 * mb},
		{"the status wave, live 86 MB: 16 MB above it, not 51%",
			BoundIn{Live: 86 * mb, Settled: 62 * mb, SyncRoom: 32 * mb, Overhead: 8 * mb, GCPercent: 51}, 110 * mb},
		{"start, no sync yet: 16 MB above the live heap",
			BoundIn{Live: 50 * mb, Overhead: 6 * mb, GCPercent: 40}, 72 * mb},
		{"a small heap: GOGC's goal is lower",
			BoundIn{Live: 20 * mb, Overhead: 6 * mb, GCPercent: 40}, none},
		{"1,000 Ingresses: TidyFor's room is GOGC's goal, no bound",
			BoundIn{Live: 9 * mb, Settled: 9 * mb, SyncRoom: 28 * mb, Overhead: 5 * mb, GCPercent: 311}, none},
		{"a large heap: a quarter of GOGC's share above it",
			BoundIn{Live: 400 * mb, Settled: 380 * mb, SyncRoom: 32 * mb, Overhead: 10 * mb, GCPercent: 40}, 450 * mb},
		{"rounded up to a whole MB",
			BoundIn{Live: 86*mb + 100, Settled: 62 * mb, SyncRoom: 32 * mb, Overhead: 8*mb + 7, GCPercent: 51}, 111 * mb},
		{"the container's limit is lower: it stays",
			BoundIn{Live: 86 * mb, Settled: 62 * mb, SyncRoom: 32 * mb, Overhead: 8 * mb, GCPercent: 51, Ceiling: 105 * mb}, 105 * mb},
		{"the container's limit is higher: the bound",
			BoundIn{Live: 86 * mb, Settled: 62 * mb, SyncRoom: 32 * mb, Overhead: 8 * mb, GCPercent: 51, Ceiling: 300 * mb}, 110 * mb},
		{"GOGC's goal lower, a container's limit: the container's",
			BoundIn{Live: 20 * mb, Overhead: 6 * mb, GCPercent: 40, Ceiling: 300 * mb}, 300 * mb},
		{"GOGC set in the environment: no bound",
			BoundIn{Live: 86 * mb, Settled: 62 * mb, SyncRoom: 32 * mb, Overhead: 8 * mb}, none},
		{"nothing live known yet: no bound",
			BoundIn{Overhead: 8 * mb, GCPercent: 40}, none},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := BoundFor(c.in)
			if got != c.want {
				t.Fatalf("BoundFor = %.2f MB, want %.2f MB", float64(got)/mb, float64(c.want)/mb)
			}
			if c.in.Ceiling == 0 && got != none && uint64(got) < c.in.Live+c.in.Overhead+boundFloor {
				t.Errorf("the bound leaves less than %d MB above the live heap: the collector would run continuously", boundFloor/mb)
			}
		})
	}
}

// TestHeapBoundFollowsCollections: after each collection the limit is set again from the heap
// live then; a sync's end moves it; stop puts back the limit there was.
func TestHeapBoundFollowsCollections(t *testing.T) {
	const mb = 1 << 20
	var (
		mu   sync.Mutex
		live uint64 = 50 * mb
		set  []int64
	)
	b := newHeapBound(40, 0)
	b.read = func() (uint64, uint64) { mu.Lock(); defer mu.Unlock(); return live, 0 }
	b.setLimit = func(l int64) int64 { mu.Lock(); defer mu.Unlock(); set = append(set, l); return 0 }
	last := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		if len(set) == 0 {
			return 0
		}
		return set[len(set)-1]
	}
	b.start()
	if got := last(); got != 66*mb {
		t.Fatalf("limit at start %d MB, want 66", got/mb)
	}
	mu.Lock()
	live = 80 * mb
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for last() != 96*mb && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := last(); got != 96*mb {
		t.Fatalf("limit after a collection with 80 MB live %d MB, want 96", got/mb)
	}
	b.synced(70*mb, 32*mb, 51) // a sync ended: 70 MB live, 32 MB of room for the next
	if got := last(); got != 102*mb {
		t.Fatalf("limit after a sync %d MB, want 102 (70 settled + 32)", got/mb)
	}
	b.stop()
	if got := last(); got != math.MaxInt64 {
		t.Fatalf("limit after stop %d, want none", got)
	}
	mu.Lock()
	n := len(set)
	live = 200 * mb
	mu.Unlock()
	runtime.GC()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(set) != n {
		t.Errorf("the limit was set %d times after stop", len(set)-n)
	}
}

// TestBoundHeapOffWhenTheEnvironmentSays: GOGC or GOMEMLIMIT in the environment leave the
// runtime's limit alone.
func TestBoundHeapOffWhenTheEnvironmentSays(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	for _, env := range []map[string]string{{"GOGC": "100"}, {"GOMEMLIMIT": "1GiB"}} {
		debug.SetMemoryLimit(math.MaxInt64)
		m := ApplyDefaults(func(k string) string { return env[k] }, t.TempDir())
		tidier := m.Tidier()
		stop := tidier.BoundHeap()
		if tidier.bound != nil {
			t.Errorf("%v: the heap is bounded", env)
		}
		stop()
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("%v: memory limit %d", env, got)
		}
	}
}
