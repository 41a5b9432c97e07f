//go:build !unix

package main

import (
	"os"
	"syscall"
)

// stopSignals ask the sidecar to stop (there is no SIGUSR1 here: see signals_unix.go).
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}
