// Package decide is the sync's one decision: what to do with a rendering, as a pure function of
// plain values (what was rendered, what HAProxy runs and what is written, what the runtime API
// cannot do, leadership, reload pacing), tested from a table. Carrying it out is package apply's.
package decide

import (
	"fmt"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
)

// Action is what one sync does with its rendering.
type Action int

const (
	// DoNothing: HAProxy runs this rendering already.
	DoNothing Action = iota
	// DoRuntime: the runtime API makes the whole change, with no reload.
	DoRuntime
	// DoReload: the rendering goes live through a validated, confirmed reload.
	DoReload
	// DoDefer: a reload is needed but the last one was too recent (--min-reload-interval); what
	// the runtime API can make goes live now, the reload when the interval is over.
	DoDefer
	// DoStandby: not the leader; the rendering is validated, not applied.
	DoStandby
	// DoHold: nothing can go live: no rendering could be made, or HAProxy refused this very
	// rendering before. What HAProxy runs keeps running.
	DoHold
	// DoRevert: haproxy -c rejected this very rendering after the runtime API had made it
	// live (the background writer checks it then): HAProxy is taken back to the last good
	// rendering, and the rendering is held.
	DoRevert
)

// NeedsValid says the action needs the rendering staged as a generation and validated
// (haproxy -c) before it is carried out: a reload loads it, a deferred reload will, a standby
// reports it valid. A runtime change goes live first and is validated behind it.
func (a Action) NeedsValid() bool {
	return a == DoReload || a == DoDefer || a == DoStandby
}

func (a Action) String() string {
	switch a {
	case DoNothing:
		return "nothing"
	case DoRuntime:
		return "runtime"
	case DoReload:
		return "reload"
	case DoDefer:
		return "defer"
	case DoStandby:
		return "standby"
	case DoHold:
		return "hold"
	case DoRevert:
		return "revert"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Facts are the plain values a sync decides from.
type Facts struct {
	// Rendered is the hash of this sync's rendering; "" when none could be made.
	Rendered string
	// HAProxy is what HAProxy runs and what is written: the rendering it runs for sure
	// (Runs), the one written for its start (LoadsAtStart), a deferred reload (ReloadAt), the
	// renderings it refused at a reload or at the check behind a runtime change (Refused),
	// the last reload (LastReload).
	HAProxy live.State
	// ReloadWhy is why the change needs a reload; "" when the runtime API can make all of it.
	ReloadWhy string
	// Standby is set when this instance must not apply (a follower under leader election).
	Standby bool
	// ExpectRunning is set when HAProxy is expected to run from the start: files written
	// while it does not run are not enough (not reaching it is a fault each sync reports).
	ExpectRunning bool
	// Now and MinReloadInterval pace reloads.
	Now               time.Time
	MinReloadInterval time.Duration
}

// Decision is what to do, and when a deferred reload is due.
type Decision struct {
	Action Action
	// Why explains a Reload, Defer, Hold or Revert.
	Why string
	// At is when a deferred reload is due.
	At time.Time
}

// Decide chooses the action for a sync. It is a pure function of f.
func Decide(f Facts) Decision {
	h := f.HAProxy
	reloadDue := !h.ReloadAt.IsZero()
	// haproxy -c rejected this rendering, or (none could be rendered to take its place) the
	// one HAProxy runs, after the runtime API had made it live.
	rejected := f.Rendered != "" && h.Rejected(f.Rendered) != nil
	runsRejected := f.Rendered == "" && h.Runs != "" && h.Rejected(h.Runs) != nil
	switch {
	case rejected || runsRejected:
		return Decision{Action: DoRevert, Why: "haproxy -c rejected this configuration after the runtime API had made it live"}
	case f.Rendered == "":
		return Decision{Action: DoHold, Why: "no configuration could be rendered"}
	case f.Standby:
		return Decision{Action: DoStandby}
	case f.Rendered == h.Runs && !reloadDue:
		return Decision{Action: DoNothing}
	case h.Runs == "" && f.Rendered == h.LoadsAtStart && !f.ExpectRunning && !reloadDue:
		// HAProxy is down and loads these very files when it starts: neither the runtime
		// API nor a reload could do more.
		return Decision{Action: DoNothing}
	case f.ReloadWhy == "":
		// Also takes back, with no reload, runtime changes made while a reload waited when
		// the rendering went back to what HAProxy loaded.
		return Decision{Action: DoRuntime}
	case h.Refuses(f.Rendered):
		return Decision{Action: DoHold, Why: "HAProxy (or, with --rollout=canary, the canary host's counters) refused this configuration at its last reload; it is not reloaded again until the inputs change"}
	}
	if f.MinReloadInterval > 0 && !h.LastReload.IsZero() {
		if at := h.LastReload.Add(f.MinReloadInterval); f.Now.Before(at) {
			return Decision{Action: DoDefer, Why: f.ReloadWhy, At: at}
		}
	}
	return Decision{Action: DoReload, Why: f.ReloadWhy}
}
