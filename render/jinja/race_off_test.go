//go:build !race

package jinja

const raceDetector = false
