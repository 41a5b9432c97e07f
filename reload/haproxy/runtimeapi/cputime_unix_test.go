//go:build unix

package runtimeapi

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process used so far (user and system, every thread: the
// garbage collector's too). On a shared machine it says what a plan costs better than the
// wall clock, which counts the time other processes had the CPU.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
