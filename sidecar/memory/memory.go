// Package memory holds the Go runtime's memory settings, and gives memory back after a sync.
// The sidecar is idle most of the time and runs beside HAProxy: memory matters more to it than
// the CPU time of the garbage collector, which only works while a sync runs.
package memory

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// defaultGCPercent is GOGC when the environment does not set it: the heap may grow to 1.4
// times what is live instead of twice (Go's default, 100). With the Tidier this keeps the
// sidecar under 250 MB RSS at 10,000 services x 10 pods, for about a quarter more CPU time on
// a cold start and no measurable change on a sync (docs/performance.md).
const defaultGCPercent = 40

// Settings are the runtime settings in effect, for the start-up log.
type Settings struct {
	limit     int64 // the soft memory limit set from the container's (0: not set by us)
	gcPercent int   // the GOGC set by us (0: not set by us)
	getenv    func(string) string
}

// ApplyDefaults sets GOGC (see defaultGCPercent) and the soft memory limit (see
// defaultMemoryLimit) unless the environment sets them.
func ApplyDefaults(getenv func(string) string, cgroupRoot string) Settings {
	m := Settings{getenv: getenv, limit: defaultMemoryLimit(getenv, cgroupRoot)}
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
		m.gcPercent = defaultGCPercent
	}
	return m
}

// attrs describe the settings for the start-up log line.
func (m Settings) Attrs() []any {
	limit := "none"
	switch {
	case m.getenv != nil && m.getenv("GOMEMLIMIT") != "":
		limit = m.getenv("GOMEMLIMIT")
	case m.gcPercent > 0 && m.limit > 0:
		limit = "the heap's goal and an eighth, at most " + strconv.FormatInt(m.limit>>20, 10) + "MiB (90% of the container's limit; GOMEMLIMIT overrides)"
	case m.gcPercent > 0:
		limit = "the heap's goal and an eighth (GOMEMLIMIT overrides)"
	case m.limit > 0:
		limit = strconv.FormatInt(m.limit>>20, 10) + "MiB (90% of the container's limit; GOMEMLIMIT overrides)"
	}
	gc := "100 (Go's default)"
	switch {
	case m.gcPercent > 0:
		gc = fmt.Sprintf("%d (the sidecar's default; GOGC overrides)", m.gcPercent)
	case m.getenv != nil && m.getenv("GOGC") != "":
		gc = m.getenv("GOGC")
	}
	return []any{"go_memory_limit", limit, "go_gc_percent", gc}
}

// trimThreshold is how much free heap the runtime may keep mapped after a sync before
// the heap is handed back at once, unless the next sync's room is more (TidyFor): what a
// sync of its size allocates again would otherwise be handed back and faulted in again at
// each sync (10,000 Ingresses: 30-40 MB, about 8 ms more a sync).
const trimThreshold = 32 << 20

// Heap is what the runtime says of the heap after a sync (runtime/metrics), and what the
// sync allocated.
type Heap struct {
	Free    uint64 // free heap still mapped
	Objects uint64 // live and dead objects
	Live    uint64 // live at the last collection
	Goal    uint64 // the heap size at which the next collection starts
	// Allocated is what was allocated since the previous sync ended (the Tidier: the most
	// of the last recentBursts): about what the next sync will allocate.
	Allocated uint64
}

// Tidy is what to do with the heap once a sync is over.
type Tidy int

const (
	Leave   Tidy = iota // nothing: the next sync has room
	Collect             // collect the garbage now, while nothing waits on it
	Release             // collect and hand the free heap back to the OS
)

// TidyPlan is what to do after a sync: with the heap, and GOGC for the next sync (0: as it is).
type TidyPlan struct {
	Tidy      Tidy
	GCPercent int
}

// syncRoom bounds the room the collector is given beyond GOGC's for one sync's allocations:
// twice what a pod edit's sync allocates at 10,000 services x 10 pods (about 27 MB), so that
// it runs without a collection (one inside it took it from 20-35 ms to 60-120 ms of read,
// build and render). The heap grows by what the sync allocates, not by the room: the garbage
// is collected after each sync.
const syncRoom = 64 << 20

// heapRoom bounds how far a large heap grows beyond what is live when no sync asks for more:
// the syncs that allocate little (a pod added at 3,000 HTTPRoutes: with 12 MB, a collection
// inside most of them, their build 26 ms instead of 13).
const heapRoom = 32 << 20

// startRoom is heapRoom before the first sync has ended: the start, whose first build and
// render are the process's peak at 10,000 services x 10 pods (132-141 MB with 12 MB, 155-160
// with 32; 8 MB: 134-144 MB, a third more time to the first configuration, each collection
// marking 80-90 MB; docs/performance.md).
const startRoom = 12 << 20

// roomStep is the step of the room given to a sync.
const roomStep = 4 << 20

// maxGCPercent bounds the GOGC syncRoom may give a small heap.
const maxGCPercent = 1000

// minGCPercent bounds how far GCPercentFor lowers GOGC for a large heap: below it the
// collector would run almost without pause (at 1 GB live, 10% is 100 MB of room).
const minGCPercent = 10

// GCPercentFor is the GOGC that gives room for a sync's allocations (room: roomFor what the
// largest of the recent syncs allocated; 0 before the first sync) on live bytes of live heap,
// with base the sidecar's GOGC (0: the environment set GOGC, left as it is: 0).
//
// Beside a sync's room, a large heap grows by at most spare beyond what is live (heapRoom;
// startRoom before the first sync has ended), not base percent of it: at 10,000 services x
// 10 pods the start's heap, 120 MB live at its last collection before this, reached 168 MB at
// 40%, the process's peak, where 10% collects at about 132 MB. A sync's room comes on top (see TidyFor): the heap grows by what a sync
// allocates, and the garbage is collected after it.
func GCPercentFor(live, room, spare uint64, base int) int {
	if base <= 0 || live == 0 {
		return 0
	}
	pct := min(base, max(minGCPercent, int(spare*100/live)))
	return min(max(pct, int(room*100/live)), maxGCPercent)
}

// TidyFor decides what to do after a sync, with base the GOGC the sidecar runs at (0: the
// environment set GOGC, which is left as it is).
//
// Release when much of the heap is free already, or garbage the collector has not marked yet:
// a sync that read a big manifest leaves it dead but, with nothing allocating afterwards,
// uncollected for minutes, and the next big read would come on top of it. Go's scavenger
// would return free heap too, but over minutes; meanwhile the pages count in the container's
// memory (and RSS) as if they were used.
//
// A sync's allocations should not run into a collection: the sync then waits on it (its
// allocations slowed by the collector's assists and write barriers, the marking sharing the
// CPU with the render): three collections in each sync of 1,000 Ingresses (9 MB live, 14 MB
// allocated) cost about 9 ms of its 60 (docs/performance.md). So GOGC is raised above base
// until the heap's goal leaves room for twice what a sync allocated (h.Allocated), up to
// syncRoom (the collector starts marking before the goal, from about half way up; large
// deployments, whose syncs allocate far more, keep base), and the garbage is collected now,
// between syncs, when the next sync would pass that half way point. The heap grows by what a
// sync allocates, not to its goal: the garbage is collected after each sync.
func TidyFor(h Heap, base int) TidyPlan {
	garbage := uint64(0)
	if h.Objects > h.Live {
		garbage = h.Objects - h.Live
	}
	plan := TidyPlan{}
	goal := h.Goal
	room := roomFor(h.Allocated)
	if base > 0 && h.Live > 0 {
		plan.GCPercent = GCPercentFor(h.Live, room, heapRoom, base)
		goal = h.Live + h.Live*uint64(plan.GCPercent)/100
	}
	start := h.Live + (max(goal, h.Live)-h.Live)/2
	keep := max(trimThreshold, room)
	switch {
	case h.Free > keep || garbage > keep:
		plan.Tidy = Release
	case garbage > 0 && (h.Allocated == 0 || h.Objects+h.Allocated > start):
		// Allocated 0: what a sync allocates is not known yet (the first sync), and the last
		// collection may have come in the middle of the start, its goal 1.4 times what the
		// start held then: the next sync would grow the heap from the start's garbage up to
		// that goal (10,000 services x 10 pods: a pod edit's heap at 187 MB instead of 171).
		// Collected once, the next sync starts from the live heap and its goal.
		plan.Tidy = Collect
	}
	return plan
}

// minMemoryLimit is the least soft memory limit MemoryLimitFor sets: below it the runtime's
// own memory (its minimum heap, stacks, metadata) would be most of it.
const minMemoryLimit = 32 << 20

// MemoryLimitFor is the soft memory limit (the runtime's, debug.SetMemoryLimit) for a heap of
// live bytes at GOGC pct, with overhead the runtime's memory beyond the heap (stacks,
// metadata), at most ceiling (the container's; 0: none): the heap's goal, an eighth more for
// the spans that are only partly used, and overhead.
//
// The limit is not what collects (GOGC's goal comes first): it makes the runtime hand back
// the free heap beyond it as it allocates, where Go's own scavenger lets the pages freed by a
// large read stay mapped (10,000 services x 10 pods: 22 MB of free heap mapped at the start's
// peak, on top of 159 MB in use).
func MemoryLimitFor(live uint64, pct int, overhead uint64, ceiling int64) int64 {
	goal := live + live*uint64(max(pct, 0))/100
	limit := int64(max(goal+goal/8+overhead, minMemoryLimit))
	if ceiling > 0 {
		limit = min(limit, ceiling)
	}
	return limit
}

// recentBursts is how many syncs' allocations the Tidier remembers: the room it gives is for
// the largest of them. From the last one alone, a burst a little larger than the one before
// (one more rendering ahead cut short, a status write in between) ran into a collection
// inside the sync: 3,000 HTTPRoutes, about 1.5% of syncs, each 60-150 ms longer.
const recentBursts = 8

// roomFor is the room a sync that allocated allocated bytes is given: twice that, in steps of
// roomStep (GOGC then changes only when the syncs do), at most syncRoom.
func roomFor(allocated uint64) uint64 {
	return min((2*allocated+roomStep-1)/roomStep*roomStep, syncRoom)
}

// Tidier tidies the heap after each sync (TidyFor). Make it with Settings.Tidier.
type Tidier struct {
	base int // GOGC set by the sidecar; 0: the environment's, left alone
	// mu guards gcPercent, room and spare: AfterSync and the collections' hook (FollowCollections)
	// both set GOGC and the limit (tune).
	mu        sync.Mutex
	gcPercent int    // GOGC now
	room      uint64 // roomFor the largest of the recent syncs' allocations
	spare     uint64 // startRoom until the first sync has ended, then heapRoom
	allocs    uint64 // total allocated when the last sync ended
	// bursts are what the last recentBursts syncs allocated (a ring; next is the oldest).
	bursts [recentBursts]uint64
	next   int
	// collecting: a collection started after a sync has not ended yet.
	collecting atomic.Bool
	collect    func()         // runtime.GC; tests set another
	release    func()         // debug.FreeOSMemory; tests set another
	read       func() Heap    // readHeap; tests set another
	readGC     func() gcState // the heap after a collection (readGCState); tests set another
	// setLimit is debug.SetMemoryLimit (tests set another); nil: the environment set
	// GOMEMLIMIT, which is left as it is. ceiling is the limit set from the container's
	// (0: none), which MemoryLimitFor never passes.
	setLimit func(int64) int64
	ceiling  int64
	// pageOut, when set, hands back the binary's pages once started (ReleaseBinaryPages),
	// unmap at Idle (UnmapBinaryPages); tests set others. onPageOutError hears why one
	// failed, after which neither is tried again.
	pageOut, unmap func() (uintptr, error)
	onPageOutError func(error)
	synced         bool // AfterSync ran once
}

// ReleaseBinaryPages makes Started and the first AfterSync hand back the pages of the
// sidecar's binary (ReleaseBinaryPages: out of the page cache too), and each Idle unmap
// those the syncs used since (UnmapBinaryPages: left in the page cache, so that the next
// change does not read them from the file); where that fails (not Linux, a kernel before
// 5.4), failed hears why once and the pages are kept from then on.
func (t *Tidier) ReleaseBinaryPages(failed func(error)) {
	t.pageOut, t.unmap, t.onPageOutError = ReleaseBinaryPages, UnmapBinaryPages, failed
}

// Tidier returns the tidier of the heap after each sync.
func (m Settings) Tidier() *Tidier {
	t := &Tidier{base: m.gcPercent, gcPercent: m.gcPercent, spare: startRoom, collect: runtime.GC, release: debug.FreeOSMemory,
		read: readHeap, readGC: readGCState, ceiling: m.limit}
	if m.getenv == nil || m.getenv("GOMEMLIMIT") == "" {
		t.setLimit = debug.SetMemoryLimit
	}
	return t
}

// AfterSync tidies the heap (TidyFor, with the most the last recentBursts syncs allocated):
// a release at once (large deployments: one collection per sync, after the configuration is
// live); a collection in the background, so that a change coming meanwhile is not held up by
// it. It is called from one goroutine.
func (t *Tidier) AfterSync() {
	if !t.synced {
		// What only the start used (the dependencies' initialisation, the first lists, the
		// template's compilation) goes back at once: the syncs to come, with their peaks of
		// heap, need about a third of the binary's pages.
		t.synced = true
		t.advisePages(t.pageOut)
	}
	h := t.read()
	allocs := h.Allocated // the total so far, until made the difference below
	h.Allocated = 0
	if t.allocs != 0 && allocs > t.allocs {
		h.Allocated = allocs - t.allocs
	}
	t.allocs = allocs
	t.bursts[t.next] = h.Allocated
	t.next = (t.next + 1) % recentBursts
	h.Allocated = slices.Max(t.bursts[:]) // from here on, what the room is for (Heap.Allocated)
	plan := TidyFor(h, t.base)
	var overhead uint64
	if plan.GCPercent > 0 && t.setLimit != nil {
		overhead = t.readGC().overhead
	}
	t.mu.Lock()
	t.room = roomFor(h.Allocated)
	t.spare = heapRoom
	t.tune(plan.GCPercent, gcState{live: h.Live, overhead: overhead})
	t.mu.Unlock()
	switch plan.Tidy {
	case Release:
		t.release()
	case Collect:
		if !t.collecting.CompareAndSwap(false, true) {
			return // one is under way
		}
		go func() {
			defer t.collecting.Store(false)
			t.collect()
		}()
	}
}

// tune sets GOGC to pct (0: leave both alone) and the soft memory limit for it on the heap
// gc read (MemoryLimitFor), so that the two always agree: a limit left from before GOGC was
// raised for a sync's room would start a collection before GOGC's goal, inside the sync.
// AfterSync and the collections' hook both call it. t.mu is held.
func (t *Tidier) tune(pct int, gc gcState) {
	if pct <= 0 {
		return
	}
	if pct != t.gcPercent {
		debug.SetGCPercent(pct)
		t.gcPercent = pct
	}
	if t.setLimit != nil && gc.live > 0 {
		t.setLimit(MemoryLimitFor(gc.live, pct, gc.overhead, t.ceiling))
	}
}

// FollowCollections sets GOGC (GCPercentFor, with the room of the last sync) and the soft
// memory limit (MemoryLimitFor) after each collection, until stop is called: a heap that
// grows between syncs (the start: the first lists read and the first configuration built,
// where the sidecar's peak of memory is at 10,000 services x 10 pods) is bounded as the
// syncs' heap is, not only from the sync after. It does nothing when the environment set
// GOGC; the limit is left alone when it set GOMEMLIMIT.
func (t *Tidier) FollowCollections() (stop func()) {
	if t.base <= 0 {
		return func() {}
	}
	return afterEachCollection(func() {
		gc := t.readGC()
		t.mu.Lock()
		defer t.mu.Unlock()
		t.tune(GCPercentFor(gc.live, t.room, t.spare, t.base), gc)
	})
}

// gcState is what FollowCollections reads of the heap after a collection.
type gcState struct {
	live     uint64 // the live heap
	overhead uint64 // the runtime's memory beyond the heap's spans: stacks, metadata, ...
}

// readGCState reads gcState from the runtime.
func readGCState() gcState {
	v := readMetrics("/gc/heap/live:bytes", "/memory/classes/total:bytes", "/memory/classes/heap/released:bytes",
		"/memory/classes/heap/objects:bytes", "/memory/classes/heap/free:bytes", "/memory/classes/heap/unused:bytes")
	heap := v[2] + v[3] + v[4] + v[5]
	return gcState{live: v[0], overhead: v[1] - min(heap, v[1])}
}

// afterEachCollection calls f after each garbage collection (on the runtime's finalizer
// goroutine: f must be quick), until stop is called; once stop returns, f is not running and
// is not called again. The runtime has no hook for it; a finalizer set again each time it
// runs is the usual way (its object becomes unreachable again with each cycle).
func afterEachCollection(f func()) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		again   func(*gcSentinel)
	)
	again = func(s *gcSentinel) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		f()
		runtime.SetFinalizer(s, again)
	}
	runtime.SetFinalizer(&gcSentinel{}, again)
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
	}
}

// gcSentinel is the object afterEachCollection's finalizer is set on. It holds a pointer so
// that it is not one of the tiny allocations the runtime packs together (whose finalizers
// may never run).
type gcSentinel struct{ _ *byte }

// idleThreshold is the free heap (or garbage) below which Idle does nothing: a collection
// is not worth less.
const idleThreshold = 1 << 20

// Idle hands back to the OS what was kept for the next sync, once the syncs have stopped
// coming (pipeline.Config.Idle): the free heap (the room TidyFor gives a burst of syncs keeps
// it mapped; Go's scavenger returns free heap only down to about the heap's goal, which that
// room raises) and the last sync's garbage. GOGC stays as TidyFor set it: the next sync has
// its room again, in pages the kernel gives back at first touch (about 1 ms per 4 MB).
// 1,000 services x 10 pods: 2-6 MB of RSS once idle (docs/performance.md). With
// ReleaseBinaryPages, the binary's pages are unmapped too: the next sync maps again those
// it needs from the page cache, as it takes the heap's pages again.
func (t *Tidier) Idle() {
	h := t.read()
	garbage := uint64(0)
	if h.Objects > h.Live {
		garbage = h.Objects - h.Live
	}
	if h.Free > idleThreshold || garbage > idleThreshold {
		t.release()
	}
	t.advisePages(t.unmap)
}

// Quiet collects, in the background, the garbage made since the last sync when the next
// sync would otherwise run into a collection (CollectBeforeSync). Between syncs the process
// still allocates: the informers convert the objects that changed, the status writer writes
// (3,000 HTTPRoutes' status after the start: the first change's build then ran a collection,
// 153 ms instead of 25-45). Called while no sync runs (pipeline.Config.Quiet), every few
// seconds; it does nothing before the first sync has ended.
func (t *Tidier) Quiet() {
	if !t.synced {
		return
	}
	t.mu.Lock()
	room := t.room
	t.mu.Unlock()
	if !CollectBeforeSync(t.read(), room) || !t.collecting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer t.collecting.Store(false)
		t.collect()
	}()
}

// CollectBeforeSync says whether h's garbage should be collected before the next sync, which
// has room bytes of room (roomFor: twice what the largest recent sync allocated): when the
// sync's allocations would take the heap past the point where the collector starts marking
// (about half way from the live heap to the goal; see TidyFor).
func CollectBeforeSync(h Heap, room uint64) bool {
	if h.Objects <= h.Live+idleThreshold {
		return false // not a collection's worth of garbage
	}
	start := h.Live + (max(h.Goal, h.Live)-h.Live)/2
	return h.Objects+room/2 > start
}

// Started hands back the binary's pages (when asked: ReleaseBinaryPages) once the start-up
// is over, before the first sync (pipeline.Config.Started): the pages only the dependencies'
// initialisation and the first lists used are not there for the first sync's peak of heap.
func (t *Tidier) Started() { t.advisePages(t.pageOut) }

// advisePages hands back or unmaps the binary's pages with advise (pageOut or unmap), when
// asked (ReleaseBinaryPages).
func (t *Tidier) advisePages(advise func() (uintptr, error)) {
	if advise == nil {
		return
	}
	if _, err := advise(); err != nil {
		t.pageOut, t.unmap = nil, nil
		if t.onPageOutError != nil {
			t.onPageOutError(err)
		}
	}
}

// SampleHeap stops the sampling of allocations for the heap profile when nothing can read
// it (profiles off: --pprof not given), unless GODEBUG sets memprofilerate: each sampled
// allocation's call stack is kept for the life of the process, with the table that finds
// them; about 1.3 MB of RSS at 1,000 services (docs/performance.md). Call it once, early.
func SampleHeap(profiles bool, getenv func(string) string) {
	if profiles || strings.Contains(getenv("GODEBUG"), "memprofilerate=") {
		return
	}
	runtime.MemProfileRate = 0
}

// readHeap reads the heap from the runtime, with Allocated the total allocated so far.
func readHeap() Heap {
	v := readMetrics("/memory/classes/heap/free:bytes", "/memory/classes/heap/objects:bytes",
		"/gc/heap/live:bytes", "/gc/heap/goal:bytes", "/gc/heap/allocs:bytes")
	return Heap{Free: v[0], Objects: v[1], Live: v[2], Goal: v[3], Allocated: v[4]}
}

// Collections is how many collections the Go runtime has made: the sync stages' debug log
// says how many a sync ran into (each slows it down; see TidyFor).
func Collections() uint64 { return readMetrics("/gc/cycles/total:gc-cycles")[0] }

// readMetrics reads runtime metrics of kind uint64 (0 for one the runtime does not have).
func readMetrics(names ...string) []uint64 {
	sample := make([]metrics.Sample, len(names))
	for i, n := range names {
		sample[i].Name = n
	}
	metrics.Read(sample)
	out := make([]uint64, len(names))
	for i, s := range sample {
		if s.Value.Kind() == metrics.KindUint64 {
			out[i] = s.Value.Uint64()
		}
	}
	return out
}

// containerMemoryLimit is the memory limit of the cgroup the process runs in (cgroup v2
// memory.max, else v1 memory.limit_in_bytes, under root), or 0 when there is none.
func containerMemoryLimit(root string) int64 {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 { // "max", or v1's "unlimited" (a huge number)
			return 0
		}
		return n
	}
	return 0
}

// defaultMemoryLimit gives the Go runtime a soft memory limit of 90% of the container's
// memory limit when GOMEMLIMIT is not set: near the limit the garbage collector then works
// harder instead of letting the heap grow to twice what is live (the default, GOGC=100)
// until the container is killed. It returns the limit set, 0 if none.
func defaultMemoryLimit(getenv func(string) string, cgroupRoot string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := containerMemoryLimit(cgroupRoot) / 10 * 9
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return limit
}
