package live

import (
	"sync"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
)

// Owner holds the current State for the sync, the background writer, the probe and status.
// Every change goes through Record, one event at a time, so that the record on disk and what
// everyone reads never disagree (a write finishing late never records, or reports live, a
// rendering HAProxy no longer runs).
type Owner struct {
	mu sync.Mutex
	s  State
	// record writes the record of what HAProxy runs for a restarted sidecar (nil: none is
	// kept).
	record func(generation.Loaded) error
	// recordErr reports a record that could not be written.
	recordErr func(error)
}

// NewOwner starts from s. record writes State.Record whenever an event changes it, in the
// order of the events; a failure goes to recordErr (both may be nil).
func NewOwner(s State, record func(generation.Loaded) error, recordErr func(error)) *Owner {
	return &Owner{s: s, record: record, recordErr: recordErr}
}

// State is the current state.
func (o *Owner) State() State {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.s
}

// Record applies events, in order and at once, and returns the state before and after them.
func (o *Owner) Record(events ...Event) (before, after State) {
	o.mu.Lock()
	defer o.mu.Unlock()
	before = o.s
	for _, e := range events {
		o.s = e.After(o.s)
	}
	if o.s.Record != before.Record && o.record != nil {
		if err := o.record(o.s.Record); err != nil && o.recordErr != nil {
			o.recordErr(err)
		}
	}
	return before, o.s
}
