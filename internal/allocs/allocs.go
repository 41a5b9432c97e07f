// Package allocs measures what a function allocates, for the tests that bound it.
package allocs

import (
	"math"
	"runtime"
)

// rounds is how many rounds of runs PerRun measures.
const rounds = 5

// PerRun is the least that one run of f allocated, in bytes, over rounds of runs each: the
// count is the whole process's, so another goroutine allocating meanwhile (the runtime's, a
// test's left running) can only add to a round, and the least round is f's own.
func PerRun(runs int, f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range rounds {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		least = min(least, (after.TotalAlloc-before.TotalAlloc)/uint64(runs))
	}
	return least
}
