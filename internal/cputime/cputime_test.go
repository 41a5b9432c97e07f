package cputime

import (
	"runtime"
	"testing"
)

func TestProcessGrowsWithWork(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("not measured here")
	}
	before := Process()
	x := 0
	for i := range 200_000_000 {
		x ^= i
		if Process()-before > 0 && i > 1000 {
			break
		}
	}
	if Process() <= before {
		t.Fatalf("the process's CPU time did not grow with work (%d)", x)
	}
}
