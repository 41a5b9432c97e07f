package cputime

import (
	"syscall"
	"time"
)

const rusageThread = 1 // RUSAGE_THREAD

func thread() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
