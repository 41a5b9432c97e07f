//go:build unix

package main

import (
	"os"
	"syscall"
)

// stopSignals ask the sidecar to stop. SIGUSR1 is among them because the image is built FROM
// HAProxy's, whose STOPSIGNAL is SIGUSR1 (its soft stop): a runtime that honours the stop signal
// of an image built without the Dockerfile's STOPSIGNAL SIGTERM sends SIGUSR1 to the sidecar too,
// and a sidecar that ignored it would be killed at the end of every grace period.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1}
