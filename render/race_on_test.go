//go:build race

package render

// raceDetector: the tests run under -race (make test), about ten times slower: the long
// random sequences take fewer steps there.
const raceDetector = true
