package live

import (
	"sync"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
)

// Owner holds the current State for the sync, the background writer, the probe and status.
// Every change goes through Record, one event at a time, so that the record on disk and what
// everyone reads never disagree (a write finishing late never records, or reports live, a
// rendering HAProxy no longer runs). The record's slow part, a synced write, runs outside the
// lock: on a busy disk it took up to a second, and the next change's commands, the probe and
// status waited behind it.
type Owner struct {
	mu sync.Mutex
	s  State
	// record begins writing the record of what HAProxy runs for a restarted sidecar, in
	// order, and returns what finishes it (see generation.Store.BeginLoaded; nil: none is
	// kept).
	record func(generation.Loaded) (finish func() error, err error)
	// recordErr reports a record that could not be written.
	recordErr func(error)
}

// NewOwner starts from s. record begins writing State.Record whenever an event changes it, in
// the order of the events, and its finish runs once the lock is let go; a failure goes to
// recordErr (both may be nil).
func NewOwner(s State, record func(generation.Loaded) (finish func() error, err error), recordErr func(error)) *Owner {
	return &Owner{s: s, record: record, recordErr: recordErr}
}

// State is the current state.
func (o *Owner) State() State {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.s
}

// Record applies events, in order and at once, and returns the state before and after them.
// The record they change is written when it returns (forgotten before the lock is let go).
func (o *Owner) Record(events ...Event) (before, after State) {
	before, after, finish, err := o.apply(events)
	if err == nil && finish != nil {
		err = finish()
	}
	if err != nil && o.recordErr != nil {
		o.recordErr(err)
	}
	return before, after
}

// apply is Record's part under the lock: the events, and the record begun when they change it.
func (o *Owner) apply(events []Event) (before, after State, finish func() error, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	before = o.s
	for _, e := range events {
		o.s = e.After(o.s)
	}
	if o.s.Record != before.Record && o.record != nil {
		finish, err = o.record(o.s.Record)
	}
	return before, o.s, finish, err
}
