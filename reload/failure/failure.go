// Package failure names the operational failures of a sync: trouble that is not the input's
// fault (a disk full, HAProxy not answering), retried with backoff and never blamed on an
// object. Each has the stage it happened at, the label of
// haproxy_sidecar_sync_failures_total.
package failure

import "errors"

// The stages of a sync an operational failure happens at.
const (
	Read     = "read"     // the source could not be read
	Staging  = "stage"    // a generation could not be written (disk full, read-only)
	Validate = "validate" // haproxy -c could not be run
	Activate = "activate" // the new generation could not be made live
	Reload   = "reload"   // HAProxy could not be reloaded, or did not answer
	Write    = "write"    // the background writer could not write a runtime API change
	State    = "state"    // the record of the last good inputs could not be written
)

// Stages are all of them, in the order a sync meets them.
var Stages = []string{Read, Staging, Validate, Activate, Reload, Write, State}

// Error is an operational failure at Stage.
type Error struct {
	Stage string
	Err   error
}

func (f *Error) Error() string { return f.Err.Error() }
func (f *Error) Unwrap() error { return f.Err }

// StageOf is the stage of an operational failure (def when err is not an *Error).
func StageOf(err error, def string) string {
	var f *Error
	if errors.As(err, &f) {
		return f.Stage
	}
	return def
}
