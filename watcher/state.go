package watcher

import (
	"log/slog"
	"sync"
)

// StateFunc is told whether a source follows its objects (up) or not, and why not (a message
// naming the source), on every change of state. It must not block. Meanwhile the source keeps
// its last objects (kube, etcd) or cannot be read (file: its directory is gone), and HAProxy
// keeps serving what it runs; the source follows again by itself once it can.
type StateFunc func(up bool, why error)

// stateReport reports a source's changes of state, once each, to a StateFunc and the log.
type stateReport struct {
	fn  StateFunc // nil: the log only
	log *slog.Logger

	mu    sync.Mutex
	known bool // something was reported
	up    bool
	why   string
}

// set reports up, or down with why: a change of state is a log line (down and back are
// theirs) and a call of fn; a new why while down only a call of fn, so that /readyz says the
// latest reason without a log line for each.
func (r *stateReport) set(up bool, why error, down, back string, attrs ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := ""
	if why != nil {
		msg = why.Error()
	}
	if r.known && r.up == up && r.why == msg {
		return
	}
	changed := !r.known || r.up != up
	wasDown := r.known && !r.up
	r.known, r.up, r.why = true, up, msg
	switch {
	case changed && !up:
		r.log.Warn(down, append(attrs, "error", why)...)
	case changed && wasDown:
		r.log.Info(back, attrs...)
	}
	if r.fn != nil {
		r.fn(up, why)
	}
}

// isDown: the last report said down.
func (r *stateReport) isDown() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.known && !r.up
}
