// Package cputime reads the CPU time the process used, for benchmarks: on a shared machine it
// says what an operation costs better than the wall clock, which counts the time other
// processes had the CPU.
package cputime

import "time"

// Process is the CPU time the process used so far (user and system, every thread: the
// garbage collector's too); 0 where it is not measured.
func Process() time.Duration { return process() }

// Thread is the CPU time the calling thread used so far (Linux; 0 elsewhere). With the
// goroutine locked to its thread (runtime.LockOSThread), it is what the goroutine's own work
// cost, with the collector's work it was made to assist with as it allocated, but not the
// collector's background work, which runs on other threads and which the allocations of
// everything else in the process bring about as well.
func Thread() time.Duration { return thread() }
