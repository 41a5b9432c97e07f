package memory

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestDefaultMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	cases := []struct {
		name    string
		files   map[string]string
		env     string
		want    int64
		wantSet int64 // the runtime's limit afterwards
	}{
		{"cgroup v2 limit", map[string]string{"memory.max": "268435456\n"}, "", 241591905, 241591905},
		{"cgroup v2 without limit", map[string]string{"memory.max": "max\n"}, "", 0, math.MaxInt64},
		{"cgroup v1 limit", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, "", 483183819, 483183819},
		{"cgroup v1 without limit", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, "", 0, math.MaxInt64},
		{"no cgroup files", nil, "", 0, math.MaxInt64},
		{"GOMEMLIMIT set", map[string]string{"memory.max": "268435456\n"}, "300MiB", 0, math.MaxInt64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			root := t.TempDir()
			for name, content := range c.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			getenv := func(k string) string {
				if k == "GOMEMLIMIT" {
					return c.env
				}
				return ""
			}
			if got := defaultMemoryLimit(getenv, root); got != c.want {
				t.Errorf("limit %d, want %d", got, c.want)
			}
			if got := debug.SetMemoryLimit(-1); got != c.wantSet {
				t.Errorf("the runtime's limit is %d, want %d", got, c.wantSet)
			}
		})
	}
}

func TestApplyMemoryDefaults(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	t.Run("GOGC unset: the sidecar's default", func(t *testing.T) {
		debug.SetGCPercent(100)
		m := ApplyDefaults(env(nil), t.TempDir())
		if got := debug.SetGCPercent(100); got != defaultGCPercent {
			t.Errorf("GOGC is %d, want %d", got, defaultGCPercent)
		}
		if attrs := fmt.Sprint(m.Attrs()); !strings.Contains(attrs, "go_gc_percent 40 (the sidecar's default; GOGC overrides)") || !strings.Contains(attrs, "go_memory_limit the heap's goal and an eighth (GOMEMLIMIT overrides)") {
			t.Errorf("start-up log attributes %s", attrs)
		}
	})
	t.Run("GOGC set: left alone", func(t *testing.T) {
		debug.SetGCPercent(77) // as the runtime would have set it from GOGC=77
		m := ApplyDefaults(env(map[string]string{"GOGC": "77", "GOMEMLIMIT": "300MiB"}), t.TempDir())
		if got := debug.SetGCPercent(100); got != 77 {
			t.Errorf("GOGC is %d, want 77", got)
		}
		if attrs := fmt.Sprint(m.Attrs()); !strings.Contains(attrs, "go_gc_percent 77") || !strings.Contains(attrs, "go_memory_limit 300MiB") {
			t.Errorf("start-up log attributes %s", attrs)
		}
	})
}

// TestTrimMemory: after a sync that freed much of the heap, the free pages go back to the OS
// at once; a little free heap is left to the runtime.
func TestTrimMemory(t *testing.T) {
	free := func() uint64 { return readHeap().Free }
	garbage := make([][]byte, 0, 64)
	for range 64 {
		garbage = append(garbage, make([]byte, 1<<20))
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	runtime.GC()
	if f := free(); f <= trimThreshold {
		t.Skipf("only %d bytes of free heap after dropping 64 MiB: the runtime already returned them", f)
	}
	(Settings{}).Tidier().AfterSync()
	if f := free(); f > trimThreshold {
		t.Errorf("%d bytes of free heap kept after a sync was tidied, want at most %d", f, trimThreshold)
	}
}

// TestTidyFor: after a sync, GOGC gives the next sync room for twice what the last one
// allocated (within syncRoom, never below the sidecar's GOGC, untouched when the environment
// set it); the garbage is collected between syncs when the next sync would pass half of that
// room; much free heap or garbage is handed back to the OS.
func TestTidyFor(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		name string
		heap Heap
		base int
		want TidyPlan
	}{
		{"1,000 Ingresses: room for 28 MB on 9 MB live, garbage collected now",
			Heap{Live: 9 * mb, Objects: 12 * mb, Goal: 13 * mb, Allocated: 14 * mb}, 40,
			TidyPlan{Tidy: Collect, GCPercent: 311}},
		{"a sync that allocated a little less: the same GOGC (room in steps of 4 MB)",
			Heap{Live: 9 * mb, Objects: 12 * mb, Goal: 37 * mb, Allocated: 13 * mb}, 40,
			TidyPlan{Tidy: Collect, GCPercent: 311}},
		{"a heap with no garbage is not collected",
			Heap{Live: 9 * mb, Objects: 9 * mb, Goal: 12 * mb, Allocated: 14 * mb}, 40,
			TidyPlan{Tidy: Leave, GCPercent: 311}},
		{"a sync that allocates little keeps the sidecar's GOGC; its garbage waits",
			Heap{Live: 50 * mb, Objects: 55 * mb, Goal: 70 * mb, Allocated: 2 * mb}, 40,
			TidyPlan{Tidy: Leave, GCPercent: 40}},
		{"... on a larger heap, heapRoom's 32 MB (not startRoom's: a sync has ended)",
			Heap{Live: 100 * mb, Objects: 102 * mb, Goal: 140 * mb, Allocated: 2 * mb}, 40,
			TidyPlan{Tidy: Leave, GCPercent: 32}},
		{"a sync that allocates far more than syncRoom: room for syncRoom",
			Heap{Live: 150 * mb, Objects: 170 * mb, Goal: 210 * mb, Allocated: 600 * mb}, 40,
			TidyPlan{Tidy: Collect, GCPercent: 42}},
		{"10,000 services x 10 pods, a pod edit: room for twice its 27 MB on 83 MB live",
			Heap{Live: 83 * mb, Objects: 90 * mb, Goal: 115 * mb, Allocated: 27 * mb}, 40,
			TidyPlan{Tidy: Collect, GCPercent: 67}},
		{"a tiny heap gets at most maxGCPercent",
			Heap{Live: 1 * mb, Objects: 2 * mb, Goal: 2 * mb, Allocated: 30 * mb}, 40,
			TidyPlan{Tidy: Collect, GCPercent: maxGCPercent}},
		{"GOGC set in the environment: left alone, garbage still collected between syncs",
			Heap{Live: 9 * mb, Objects: 12 * mb, Goal: 18 * mb, Allocated: 14 * mb}, 0,
			TidyPlan{Tidy: Collect}},
		{"GOGC set in the environment, a sync that fits: nothing",
			Heap{Live: 9 * mb, Objects: 10 * mb, Goal: 60 * mb, Allocated: 5 * mb}, 0,
			TidyPlan{Tidy: Leave}},
		{"much free heap: released",
			Heap{Free: 40 * mb, Live: 9 * mb, Objects: 9 * mb, Goal: 26 * mb}, 40,
			TidyPlan{Tidy: Release, GCPercent: 40}},
		{"much garbage (a big manifest read): released",
			Heap{Live: 9 * mb, Objects: 120 * mb, Goal: 130 * mb, Allocated: 120 * mb}, 40,
			TidyPlan{Tidy: Release, GCPercent: 711}},
		{"10,000 Ingresses: a sync's 40 MB of garbage, within the next sync's room, is kept for it",
			Heap{Free: 10 * mb, Live: 75 * mb, Objects: 115 * mb, Goal: 180 * mb, Allocated: 40 * mb}, 40,
			TidyPlan{Tidy: Collect, GCPercent: 85}},
		{"... but not more than the room",
			Heap{Free: 70 * mb, Live: 75 * mb, Objects: 115 * mb, Goal: 180 * mb, Allocated: 40 * mb}, 40,
			TidyPlan{Tidy: Release, GCPercent: 85}},
		{"the first sync: what a sync allocates not known yet, its garbage collected",
			Heap{Live: 132 * mb, Objects: 140 * mb, Goal: 185 * mb}, 40,
			TidyPlan{Tidy: Collect, GCPercent: 24}},
		{"nothing known of the heap yet",
			Heap{}, 40, TidyPlan{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := TidyFor(c.heap, c.base); got != c.want {
				t.Errorf("TidyFor(%+v, %d) = %+v, want %+v", c.heap, c.base, got, c.want)
			}
		})
	}
}

// TestGCPercentFor: GOGC gives a heap room for twice a sync's allocations (within syncRoom),
// and otherwise lets a large heap grow by heapRoom at most, never below minGCPercent.
func TestGCPercentFor(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		name              string
		live, room, spare uint64
		base, want        int
	}{
		{"1,000 Ingresses: room for 28 MB on 9 MB live", 9 * mb, 28 * mb, heapRoom, 40, 311},
		{"a small heap, little allocated: the sidecar's GOGC", 50 * mb, 4 * mb, heapRoom, 40, 40},
		{"80 MB live: 40% is syncRoom", 80 * mb, 32 * mb, heapRoom, 40, 40},
		{"10,000 services x 10 pods, 120 MB live: a sync's 32 MB of room, not 48", 120 * mb, 32 * mb, heapRoom, 40, 26},
		{"... and a pod edit that allocated 27 MB, on 83 MB live: room for it", 83 * mb, 56 * mb, heapRoom, 40, 67},
		{"a sync that allocated little on 100 MB live: heapRoom's 32 MB", 100 * mb, 8 * mb, heapRoom, 40, 32},
		{"the start, no sync ended yet, 100 MB live: startRoom's 12 MB", 100 * mb, 0, startRoom, 40, 12},
		{"the start on 30 MB live: startRoom is the sidecar's GOGC", 30 * mb, 0, startRoom, 40, 40},
		{"a huge heap: not below minGCPercent", 1000 * mb, 32 * mb, heapRoom, 40, minGCPercent},
		{"a tiny heap: at most maxGCPercent", 1 * mb, 32 * mb, heapRoom, 40, maxGCPercent},
		{"GOGC from the environment: left alone", 120 * mb, 32 * mb, heapRoom, 0, 0},
		{"nothing known of the heap yet", 0, 0, startRoom, 40, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := GCPercentFor(c.live, c.room, c.spare, c.base); got != c.want {
				t.Errorf("GCPercentFor(%d MB, %d MB, %d MB, %d) = %d, want %d", c.live/mb, c.room/mb, c.spare/mb, c.base, got, c.want)
			}
		})
	}
}

// TestMemoryLimitFor: the soft memory limit is the heap's goal, an eighth more, and the
// runtime's overhead; at least minMemoryLimit; never above the container's.
func TestMemoryLimitFor(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		name          string
		live          uint64
		pct           int
		overhead      uint64
		ceiling, want int64
	}{
		{"10,000 services x 10 pods: 120 MB live at 26%", 120 * mb, 26, 10 * mb, 0, (120 + 31 + 19 + 10) * mb},
		{"1,000 Ingresses: 9 MB live at 311%", 9 * mb, 311, 6 * mb, 0, 48 * mb},
		{"a small heap: at least minMemoryLimit", 2 * mb, 40, 4 * mb, 0, minMemoryLimit},
		{"never above the container's", 120 * mb, 26, 10 * mb, 150 * mb, 150 * mb},
		{"below the container's: the heap's own", 9 * mb, 311, 6 * mb, 1000 * mb, 48 * mb},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := MemoryLimitFor(c.live, c.pct, c.overhead, c.ceiling)
			if d := got - c.want; d < -mb || d > mb { // the eighth rounds
				t.Errorf("MemoryLimitFor(%d MB, %d, %d MB, %d MB) = %.1f MB, want %d MB", c.live/mb, c.pct, c.overhead/mb, c.ceiling/mb, float64(got)/mb, c.want/mb)
			}
		})
	}
}

// TestFollowCollections: after each collection GOGC and the soft memory limit are set for
// the live heap then, with the room of the last sync (the start's heap bounded before any
// sync ends); once stopped, they are left alone; with GOGC from the environment nothing is
// followed, with GOMEMLIMIT from it the limit is not set.
func TestFollowCollections(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const mb = 1 << 20
	var live, limit atomic.Uint64
	live.Store(100 * mb)
	tidier := Settings{gcPercent: 40}.Tidier()
	tidier.readGC = func() gcState { return gcState{live: live.Load(), overhead: 10 * mb} }
	tidier.setLimit = func(l int64) int64 { return int64(limit.Swap(uint64(l))) }
	stop := tidier.FollowCollections()
	gcPercentAfterGC := func() int {
		runtime.GC()
		var pct int
		waitFor(t, func() bool {
			tidier.mu.Lock()
			defer tidier.mu.Unlock()
			pct = tidier.gcPercent
			return pct != 40
		})
		return pct
	}
	if got := gcPercentAfterGC(); got != 12 {
		t.Errorf("GOGC %d after a collection found 100 MB live at the start, want 12 (startRoom)", got)
	}
	if got := debug.SetGCPercent(12); got != 12 {
		t.Errorf("the runtime's GOGC is %d, want 12", got)
	}
	if got, want := int64(limit.Load()), MemoryLimitFor(100*mb, 12, 10*mb, 0); got != want {
		t.Errorf("memory limit %d after a collection found 100 MB live, want %d", got, want)
	}
	tidier.mu.Lock()
	tidier.spare = heapRoom // as the first AfterSync sets it
	tidier.gcPercent = 40
	tidier.mu.Unlock()
	if got := gcPercentAfterGC(); got != 32 {
		t.Errorf("GOGC %d after a collection found 100 MB live once a sync has ended, want 32 (heapRoom)", got)
	}
	live.Store(9 * mb)
	tidier.mu.Lock()
	tidier.room = 28 * mb // the last sync allocated 14 MB
	tidier.gcPercent = 40
	tidier.mu.Unlock()
	if got := gcPercentAfterGC(); got != 311 {
		t.Errorf("GOGC %d after a collection found 9 MB live with a sync's room of 28 MB, want 311", got)
	}
	stop()
	tidier.mu.Lock()
	tidier.gcPercent = 40
	tidier.mu.Unlock()
	live.Store(120 * mb)
	for range 3 {
		runtime.GC()
	}
	// A finalizer that would run has had three cycles; there is no condition to wait on for
	// "never", so this checks what three cycles did.
	tidier.mu.Lock()
	got := tidier.gcPercent
	tidier.mu.Unlock()
	if got != 40 {
		t.Errorf("GOGC set to %d after FollowCollections was stopped", got)
	}

	env := Settings{}.Tidier() // GOGC from the environment
	env.readGC = func() gcState { t.Error("the heap read with GOGC from the environment"); return gcState{} }
	defer env.FollowCollections()()
	runtime.GC()
	runtime.GC()

	getenv := func(k string) string { return map[string]string{"GOMEMLIMIT": "1GiB"}[k] }
	if (Settings{gcPercent: 40, getenv: getenv}).Tidier().setLimit != nil {
		t.Error("GOMEMLIMIT from the environment, and the Tidier would set the limit")
	}
	if (Settings{gcPercent: 40, getenv: func(string) string { return "" }}).Tidier().setLimit == nil {
		t.Error("no GOMEMLIMIT in the environment, and the Tidier would not set the limit")
	}
}

// TestTidierCollectsInTheBackground: a sync's garbage is collected after AfterSync returns,
// one collection at a time; GOGC follows the plan.
func TestTidierCollectsInTheBackground(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const mb = 1 << 20
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	tidier := Settings{gcPercent: 40}.Tidier()
	tidier.setLimit = func(int64) int64 { return 0 } // not the test process's own
	tidier.collect = func() { started <- struct{}{}; <-release }
	total := uint64(100 * mb)
	tidier.read = func() Heap {
		total += 14 * mb // each sync allocates 14 MB
		return Heap{Live: 9 * mb, Objects: 12 * mb, Goal: 13 * mb, Allocated: total}
	}
	tidier.AfterSync() // returns while its collection waits
	<-started
	tidier.AfterSync()
	tidier.AfterSync()
	if n := len(started); n != 0 {
		t.Errorf("%d more collections started while one was under way", n)
	}
	if got := debug.SetGCPercent(311); got != 311 {
		t.Errorf("GOGC %d after a sync that allocated 14 MB on 9 MB live, want 311", got)
	}
	close(release)
	waitFor(t, func() bool { return !tidier.collecting.Load() })
	tidier.AfterSync()
	<-started // the next sync's garbage is collected in turn
}

// TestAfterSyncSetsTheLimitWithGOGC: when a sync's room raises GOGC, the soft memory limit
// is raised with it at once, not at the next collection (a limit for the old GOGC would
// start a collection inside the next sync, before GOGC's goal); with GOGC from the
// environment neither is touched.
func TestAfterSyncSetsTheLimitWithGOGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const mb = 1 << 20
	var limits []int64
	tidier := Settings{gcPercent: 40}.Tidier()
	tidier.setLimit = func(l int64) int64 { limits = append(limits, l); return 0 }
	tidier.readGC = func() gcState { return gcState{live: 9 * mb, overhead: 10 * mb} }
	tidier.collect = func() {}
	total := uint64(100 * mb)
	tidier.read = func() Heap {
		total += 14 * mb // each sync allocates 14 MB
		return Heap{Live: 9 * mb, Objects: 9 * mb, Goal: 13 * mb, Allocated: total}
	}
	tidier.AfterSync()
	tidier.AfterSync()
	waitFor(t, func() bool { return !tidier.collecting.Load() })
	want := MemoryLimitFor(9*mb, 311, 10*mb, 0)
	if len(limits) != 2 || limits[1] != want {
		t.Errorf("limits set %v after a sync that allocated 14 MB on 9 MB live, want the last %d (GOGC 311's)", limits, want)
	}
	if tidier.spare != heapRoom {
		t.Errorf("spare %d MB after a sync, want heapRoom's %d (startRoom only bounds the start)", tidier.spare/mb, heapRoom/mb)
	}
	if fresh := (Settings{gcPercent: 40}).Tidier(); fresh.spare != startRoom {
		t.Errorf("spare %d MB before any sync, want startRoom's %d", fresh.spare/mb, startRoom/mb)
	}

	env := Settings{}.Tidier() // GOGC from the environment
	env.setLimit = func(l int64) int64 { t.Errorf("limit %d set with GOGC from the environment", l); return 0 }
	env.readGC = func() gcState { return gcState{live: 9 * mb, overhead: 10 * mb} }
	env.read = tidier.read
	env.collect = func() {}
	env.AfterSync()
	env.AfterSync()
	waitFor(t, func() bool { return !env.collecting.Load() })
}

// TestRoomForTheLargestRecentBurst: the room a sync is given is for the largest of the last
// recentBursts syncs' allocations, not the last one's: one burst larger than the others keeps
// GOGC up for the syncs after it (a burst a little larger than the last one would otherwise run
// into a collection inside the sync), and the room comes down once it is that old.
func TestRoomForTheLargestRecentBurst(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const mb = 1 << 20
	tidier := Settings{gcPercent: 40}.Tidier()
	tidier.setLimit = func(int64) int64 { return 0 }
	tidier.readGC = func() gcState { return gcState{live: 9 * mb} }
	tidier.collect = func() {}
	total, burst := uint64(100*mb), uint64(0)
	tidier.read = func() Heap {
		total += burst
		return Heap{Live: 9 * mb, Objects: 9 * mb, Goal: 13 * mb, Allocated: total}
	}
	syncOf := func(allocated uint64) int {
		burst = allocated
		tidier.AfterSync()
		waitFor(t, func() bool { return !tidier.collecting.Load() })
		return tidier.gcPercent
	}
	syncOf(0) // the first sync: what a sync allocates is not known yet
	if got := syncOf(14 * mb); got != 311 {
		t.Fatalf("GOGC %d after a 14 MB burst on 9 MB live, want 311 (28 MB of room)", got)
	}
	if got := syncOf(30 * mb); got != 666 {
		t.Fatalf("GOGC %d after a 30 MB burst, want 666 (60 MB of room)", got)
	}
	for i := 1; i < recentBursts; i++ {
		if got := syncOf(14 * mb); got != 666 {
			t.Fatalf("GOGC %d %d syncs of 14 MB after the 30 MB burst, want still 666: the room is for the largest of the last %d", got, i, recentBursts)
		}
	}
	if got := syncOf(14 * mb); got != 311 {
		t.Errorf("GOGC %d once the 30 MB burst is %d syncs old, want 311 again", got, recentBursts)
	}
	if tidier.room != 28*mb {
		t.Errorf("room %d MB, want 28 (twice the largest recent burst, 14 MB)", tidier.room/mb)
	}
}

// TestTidierCollectsAfterTheFirstSync: the first sync's garbage is collected even when
// TidyFor would leave it (what a sync allocates is not known yet: the start's garbage would
// stay under a goal set in the middle of the start); later syncs follow TidyFor.
func TestTidierCollectsAfterTheFirstSync(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const mb = 1 << 20
	collected := 0
	tidier := Settings{gcPercent: 40}.Tidier()
	tidier.setLimit = func(int64) int64 { return 0 } // not the test process's own
	tidier.collect = func() { collected++ }
	tidier.release = func() { t.Error("released, want collected") }
	total := uint64(900 * mb)
	// 10,000 services x 10 pods: the last collection of the start found 132 MB live; 140 MB
	// of objects when the first sync ends, 4 MB allocated by each sync after.
	heap := Heap{Live: 132 * mb, Objects: 140 * mb, Goal: 185 * mb}
	tidier.read = func() Heap {
		h := heap
		h.Allocated = total
		total += 4 * mb
		return h
	}
	if known := (Heap{Live: heap.Live, Objects: heap.Objects, Goal: heap.Goal, Allocated: 4 * mb}); TidyFor(known, 40).Tidy != Leave {
		t.Fatalf("TidyFor %+v, want Leave once a sync's allocations are known: the test would not show the first sync's own rule", known)
	}
	tidier.AfterSync()
	waitFor(t, func() bool { return !tidier.collecting.Load() })
	if collected != 1 {
		t.Errorf("%d collections after the first sync, want 1", collected)
	}
	tidier.AfterSync() // allocated 4 MB: room left, nothing to do
	waitFor(t, func() bool { return !tidier.collecting.Load() })
	if collected != 1 {
		t.Errorf("%d collections after the second sync, want still 1", collected)
	}
	heap.Objects = heap.Live // no garbage: no collection, first sync or not
	collected = 0
	tidier = Settings{gcPercent: 40}.Tidier()
	tidier.setLimit = func(int64) int64 { return 0 }
	tidier.collect = func() { collected++ }
	tidier.read = func() Heap { return heap }
	tidier.AfterSync()
	waitFor(t, func() bool { return !tidier.collecting.Load() })
	if collected != 0 {
		t.Errorf("a first sync with no garbage collected")
	}
}

// TestCollectBeforeSync: between syncs, the garbage is collected when the next sync's
// allocations (half its room) would take the heap past the point where the collector starts,
// half way from the live heap to the goal; not for less than idleThreshold of garbage.
func TestCollectBeforeSync(t *testing.T) {
	const mb = 1 << 20
	// 3,000 HTTPRoutes: 100 MB live, the goal 40 MB above, a sync allocating about 6 MB.
	for _, c := range []struct {
		name    string
		objects uint64
		want    bool
	}{
		{"right after the sync's collection", 100 * mb, false},
		{"a few MB allocated since", 104 * mb, false},
		{"the sync would cross the start", 116 * mb, true},
		{"past the start already", 125 * mb, true},
	} {
		h := Heap{Live: 100 * mb, Objects: c.objects, Goal: 140 * mb}
		if got := CollectBeforeSync(h, 12*mb); got != c.want {
			t.Errorf("%s (%d MB of objects): CollectBeforeSync = %v, want %v", c.name, c.objects/mb, got, c.want)
		}
	}
	if CollectBeforeSync(Heap{Live: 4 * mb, Objects: 4*mb + idleThreshold, Goal: 5 * mb}, 12*mb) {
		t.Error("collected for less than idleThreshold of garbage")
	}
}

// TestQuietCollectsWhatCameBetweenSyncs: while no sync runs, Quiet collects in the background
// the garbage the source and the status writer made since the last sync, once the next
// sync would run into a collection; never before the first sync has ended (the start's
// heap has its own bounds) and never two at once.
func TestQuietCollectsWhatCameBetweenSyncs(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const mb = 1 << 20
	var collected atomic.Int32
	tidier := Settings{gcPercent: 40}.Tidier()
	tidier.setLimit = func(int64) int64 { return 0 }
	tidier.readGC = func() gcState { return gcState{live: 100 * mb} }
	tidier.collect = func() { collected.Add(1) }
	tidier.release = func() {}
	heap := Heap{Live: 100 * mb, Objects: 125 * mb, Goal: 140 * mb}
	tidier.read = func() Heap { return heap }
	tidier.Quiet()
	waitFor(t, func() bool { return !tidier.collecting.Load() })
	if n := collected.Load(); n != 0 {
		t.Fatalf("%d collections before the first sync, want 0", n)
	}
	heap.Objects, heap.Allocated = 100*mb, 6*mb
	tidier.AfterSync() // no garbage: nothing collected
	waitFor(t, func() bool { return !tidier.collecting.Load() })
	tidier.Quiet()
	waitFor(t, func() bool { return !tidier.collecting.Load() })
	if n := collected.Load(); n != 0 {
		t.Fatalf("%d collections with no garbage, want 0", n)
	}
	heap.Objects = 125 * mb // the status writer's wave, the informers' conversions
	tidier.Quiet()
	waitFor(t, func() bool { return collected.Load() == 1 })
	waitFor(t, func() bool { return !tidier.collecting.Load() })

	hold := make(chan struct{})
	tidier.collect = func() { collected.Add(1); <-hold }
	tidier.Quiet()
	waitFor(t, func() bool { return collected.Load() == 2 })
	tidier.Quiet() // one under way
	close(hold)
	waitFor(t, func() bool { return !tidier.collecting.Load() })
	if n := collected.Load(); n != 2 {
		t.Errorf("%d collections, want 2: a second started while one was under way", n)
	}
}

// waitFor waits until ok, or fails the test after a minute.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIdleReleases: once the syncs stop, free heap or garbage over idleThreshold is handed
// back (with a real runtime: the free heap the room of TidyFor kept is gone after Idle); a
// heap with next to nothing to give back is left without a collection.
func TestIdleReleases(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		name string
		heap Heap
		want bool
	}{
		{"free heap kept for the next sync", Heap{Free: 14 * mb, Live: 9 * mb, Objects: 9 * mb}, true},
		{"the last sync's garbage", Heap{Free: 0, Live: 9 * mb, Objects: 20 * mb}, true},
		{"little of either", Heap{Free: mb / 2, Live: 9 * mb, Objects: 9*mb + mb/2}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			released := false
			tidier := Settings{gcPercent: 40}.Tidier()
			tidier.read = func() Heap { return c.heap }
			tidier.release = func() { released = true }
			tidier.Idle()
			if released != c.want {
				t.Errorf("released %v, want %v", released, c.want)
			}
		})
	}
	t.Run("the runtime's free heap", func(t *testing.T) {
		garbage := make([][]byte, 0, 16)
		for range 16 {
			garbage = append(garbage, make([]byte, 1<<20))
		}
		runtime.KeepAlive(garbage)
		garbage = nil
		runtime.GC()
		if f := readHeap().Free; f <= idleThreshold {
			t.Skipf("only %d bytes of free heap after dropping 16 MiB: the runtime already returned them", f)
		}
		// The runtime may free a little more right after (a dead goroutine's stack, under
		// -race its shadow's spans, the finalizer goroutine's work: 2-3 MB once in a few
		// dozen runs): Idle, called again, hands that back too, and a few MB are not what
		// is asked here. A Tidier that releases nothing keeps the 16 MiB through every call.
		const want = 4 << 20
		var f uint64
		for range 3 {
			(Settings{}).Tidier().Idle()
			if f = readHeap().Free; f <= idleThreshold {
				break
			}
		}
		if f > want {
			t.Errorf("%d bytes of free heap kept after Idle, want at most %d", f, want)
		}
	})
}

// TestSampleHeap: allocations are sampled for the heap profile only when profiles are
// served, or when GODEBUG asks for a rate.
func TestSampleHeap(t *testing.T) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	const rate = 512 * 1024
	for _, c := range []struct {
		name     string
		profiles bool
		godebug  string
		want     int
	}{
		{"profiles off: no sampling", false, "", 0},
		{"profiles served: sampled", true, "", rate},
		{"GODEBUG sets a rate: left alone", false, "gctrace=1,memprofilerate=1", rate},
	} {
		t.Run(c.name, func(t *testing.T) {
			runtime.MemProfileRate = rate
			SampleHeap(c.profiles, func(k string) string {
				if k == "GODEBUG" {
					return c.godebug
				}
				return ""
			})
			if runtime.MemProfileRate != c.want {
				t.Errorf("MemProfileRate %d, want %d", runtime.MemProfileRate, c.want)
			}
		})
	}
}
