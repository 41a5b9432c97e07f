//go:build !race

package render

// raceDetector: see race_on_test.go.
const raceDetector = false
