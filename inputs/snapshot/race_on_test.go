//go:build race

package snapshot

// raceEnabled: the tests run under -race, where the heap is not what it is in production.
const raceEnabled = true
