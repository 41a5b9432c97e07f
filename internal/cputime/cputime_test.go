package cputime

import (
	"runtime"
	"testing"
	"time"
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

func TestThreadGrowsWithWorkOfItsThread(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("not measured here")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := Thread()
	x := 0
	for i := range 2_000_000_000 {
		x ^= i
		if i%1_000_000 == 0 && Thread()-before >= 20*time.Millisecond {
			break
		}
	}
	if got := Thread() - before; got < 20*time.Millisecond {
		t.Fatalf("the thread's CPU time grew by %v only (%d)", got, x)
	}
	if Process() < Thread() {
		t.Fatalf("the process used %v, less than one of its threads (%v)", Process(), Thread())
	}
}
