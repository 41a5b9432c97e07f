package memory

import (
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// The heap's bound during a sync (issue 25, item 3). GOGC lets the heap grow to a share of
// what the last collection found live, and TidyFor raises that share so that a sync's own
// allocations fit (10,000 Ingresses: 51% of 62 MB, 32 MB). But a sync's live heap grows while
// it runs, the render's new state beside the old: at the status wave after the first
// configuration (every Ingress's status written, every block computed again) it reached 86 MB,
// and 1.51 times that let the heap reach 130 MB. The bound is a soft memory limit that gives a
// sync the room it was meant to have above the heap that was live after the last one, and, as
// the live heap grows past that, a smaller room above it (boundRoom): the heap's growth during
// a sync follows what is live, not a share of it. It adapts after every collection (the live
// heap is read again), so the collector always has at least boundFloor of room: it never runs
// continuously. GOGC or GOMEMLIMIT set in the environment turn it off.

// boundFloor is the least room the bound leaves above the live heap: the collector then runs
// at most once per 16 MB allocated.
const boundFloor = 16 << 20

// boundStep is the step of the limit: the runtime's limit (a stop of the world to set) is
// changed only when the bound moves by that much.
const boundStep = 1 << 20

// BoundIn is what BoundFor decides the heap's bound from.
type BoundIn struct {
	Live    uint64 // live at the collection that just ended
	Settled uint64 // live when the last sync ended (0: no sync yet)
	// SyncRoom is the room TidyFor gave the syncs above Settled (twice what the last one
	// allocated, up to syncRoom).
	SyncRoom uint64
	// Overhead is the runtime's memory the limit counts beside the heap: stacks, the
	// collector's metadata, the runtime's other structures.
	Overhead  uint64
	GCPercent int   // GOGC now (as TidyFor set it)
	Ceiling   int64 // the limit from the container's (0: none)
}

// boundRoom is the room above a live heap that grew past the sync's: a quarter of GOGC's
// share of it, at least boundFloor.
func boundRoom(live uint64, gcPercent int) uint64 {
	return max(boundFloor, live*uint64(gcPercent)/400)
}

// BoundFor returns the soft memory limit for the heap after a collection: the sync's room
// above the settled heap, or boundRoom above the live heap when that is higher, plus the
// runtime's overhead; never more than the container's (Ceiling), and no bound at all
// (Ceiling, or math.MaxInt64 without one) when GOGC's own goal is lower.
func BoundFor(in BoundIn) int64 {
	none := int64(math.MaxInt64)
	if in.Ceiling > 0 {
		none = in.Ceiling
	}
	if in.GCPercent <= 0 || in.Live == 0 {
		return none
	}
	heap := max(in.Settled+in.SyncRoom, in.Live+boundRoom(in.Live, in.GCPercent))
	if heap >= in.Live+in.Live*uint64(in.GCPercent)/100 {
		return none // GOGC bounds the heap first
	}
	limit := (heap + in.Overhead + boundStep - 1) / boundStep * boundStep
	if limit >= uint64(none) {
		return none
	}
	return int64(limit)
}

// heapBound keeps the runtime's memory limit at BoundFor after each collection.
type heapBound struct {
	ceiling  int64
	settled  atomic.Uint64
	syncRoom atomic.Uint64
	percent  atomic.Int64 // GOGC now

	mu      sync.Mutex // held while the limit is decided and set
	limit   int64      // the limit set last (0: none yet)
	stopped bool

	setLimit func(int64) int64 // debug.SetMemoryLimit; tests set another
	read     func() (live, overhead uint64)
}

// newHeapBound returns the bound of a process whose GOGC is gcPercent, under the container's
// limit ceiling (0: none).
func newHeapBound(gcPercent int, ceiling int64) *heapBound {
	b := &heapBound{ceiling: ceiling, setLimit: debug.SetMemoryLimit, read: readBound}
	b.percent.Store(int64(gcPercent))
	return b
}

// synced notes the heap as a sync left it, and the room TidyFor gave the next.
func (b *heapBound) synced(live, room uint64, gcPercent int) {
	b.settled.Store(live)
	b.syncRoom.Store(room)
	b.percent.Store(int64(gcPercent))
	b.update()
}

// update sets the limit from the heap live now.
func (b *heapBound) update() {
	live, overhead := b.read()
	in := BoundIn{Live: live, Settled: b.settled.Load(), SyncRoom: b.syncRoom.Load(),
		Overhead: overhead, GCPercent: int(b.percent.Load()), Ceiling: b.ceiling}
	limit := BoundFor(in)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || limit == b.limit {
		return
	}
	b.limit = limit
	b.setLimit(limit)
}

// isStopped reports whether stop was called.
func (b *heapBound) isStopped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped
}

// stop puts the limit back as it was before the bound (the container's, or none).
func (b *heapBound) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.stopped = true
	none := int64(math.MaxInt64)
	if b.ceiling > 0 {
		none = b.ceiling
	}
	if b.limit != 0 && b.limit != none {
		b.setLimit(none)
	}
}

// gcSentinel is an object whose cleanup tells that a collection ended; it holds a pointer so
// that it is never allocated with others (the tiny allocator), which would keep it alive.
type gcSentinel struct {
	_ *byte
	_ uint64
}

// afterEachGC calls f after each collection (on the runtime's cleanup goroutine), until
// stopped reports true.
func afterEachGC(f func(), stopped func() bool) {
	runtime.AddCleanup(new(gcSentinel), func(struct{}) {
		if stopped() {
			return
		}
		f()
		afterEachGC(f, stopped)
	}, struct{}{})
}

// readBound reads the heap live at the last collection and the runtime's memory beside the
// heap that the memory limit counts.
func readBound() (live, overhead uint64) {
	v := readMetrics("/gc/heap/live:bytes", "/memory/classes/total:bytes", "/memory/classes/heap/released:bytes",
		"/memory/classes/heap/objects:bytes", "/memory/classes/heap/free:bytes", "/memory/classes/heap/unused:bytes")
	used := v[1] - min(v[1], v[2]+v[3]+v[4]+v[5])
	return v[0], used
}

// start sets the limit now and after each collection until stop.
func (b *heapBound) start() {
	b.update()
	afterEachGC(b.update, b.isStopped)
}
