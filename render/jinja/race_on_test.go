//go:build race

package jinja

// raceDetector: the tests run under -race (make test), about ten times slower: the long
// random runs take fewer templates there.
const raceDetector = true
