// Package cputime reads the CPU time the process used, for benchmarks: on a shared machine it
// says what an operation costs better than the wall clock, which counts the time other
// processes had the CPU.
package cputime

import "time"

// Process is the CPU time the process used so far (user and system, every thread: the
// garbage collector's too); 0 where it is not measured.
func Process() time.Duration { return process() }
