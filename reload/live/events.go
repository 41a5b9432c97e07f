package live

import (
	"slices"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// An Event is something that happened to HAProxy or to its files. After is what the sidecar
// knows after it: a pure function of the state before and the event's values.
type Event interface {
	After(State) State
}

// Adopted: at start, HAProxy runs the live generation (Bundle's rendering, Gen) under the load
// the record names: nothing to reload.
type Adopted struct {
	Bundle *render.Bundle
	Gen    *generation.Generation
	Load   string
	Model  *runtimeapi.Model
	At     time.Time
}

func (e Adopted) After(s State) State {
	s.Runs, s.Load, s.Model = e.Bundle.Hash, e.Load, e.Model
	s.Good = Good{Bundle: e.Bundle, Gen: e.Gen}
	s.Probe.Load = e.Load
	return s.live(e.Bundle.Hash, e.At)
}

// ReloadStarted: the sidecar asks HAProxy to reload; the outcome's event ends it.
type ReloadStarted struct{}

func (ReloadStarted) After(s State) State {
	s.Reloading = true
	return s
}

// reloadEnded: a reload the sidecar asked for ended at now (HAProxy answered, or not); no
// deferred one waits any more.
func (s State) reloadEnded(now time.Time) State {
	s.Reloading, s.ReloadAt, s.LastReload = false, time.Time{}, now
	return s
}

// Reloaded: HAProxy confirmed it loaded the rendering Bundle (generation Gen), under Load ("":
// the reloader cannot tell), as Model. It runs exactly that: what it refused before may load
// now once its inputs change again.
type Reloaded struct {
	Bundle *render.Bundle
	Gen    *generation.Generation
	Load   string
	Model  *runtimeapi.Model
	At     time.Time
}

func (e Reloaded) After(s State) State {
	s = s.reloadEnded(e.At)
	s.Runs, s.Load, s.Model = e.Bundle.Hash, e.Load, e.Model
	s.Good = Good{Bundle: e.Bundle, Gen: e.Gen}
	s.Record = s.record(e.Bundle.Hash)
	// What HAProxy refused at a reload may load now once its inputs change again; what
	// haproxy -c rejected stays rejected.
	s.Refused = slices.DeleteFunc(slices.Clone(s.Refused), func(r Refusal) bool { return !r.Check })
	s.LoadsAtStart = ""
	if e.Load != "" {
		s.Probe.Load = e.Load
	}
	return s.live(e.Bundle.Hash, e.At)
}

// WrittenWhileDown: the rendering Bundle is live on disk (generation Gen) but HAProxy does not
// run: it loads it when it starts, as Model. Unreachable, when HAProxy should run, is why it
// cannot be reached (it counts as down); Process is the pid of a HAProxy that runs on the
// configuration all the same (a wrong master socket; 0: none seen).
type WrittenWhileDown struct {
	Bundle      *render.Bundle
	Gen         *generation.Generation
	Model       *runtimeapi.Model
	Unreachable string
	Process     int
}

func (e WrittenWhileDown) After(s State) State {
	s.Reloading, s.ReloadAt = false, time.Time{}
	s.Runs, s.Load, s.Model, s.Record = "", "", e.Model, generation.Loaded{}
	s.Good = Good{Bundle: e.Bundle, Gen: e.Gen}
	s.LoadsAtStart, s.Live = e.Bundle.Hash, ""
	if e.Unreachable != "" {
		s.Probe.Seen, s.Probe.Why, s.Probe.Process = Down, e.Unreachable, e.Process
	}
	return s
}

// ReloadRefused: HAProxy refused the rendering Hash at a reload that ended At; its previous
// workers keep running what they ran.
type ReloadRefused struct {
	Hash string
	At   time.Time
}

func (e ReloadRefused) After(s State) State {
	return s.reloadEnded(e.At).refused(Refusal{Hash: e.Hash})
}

// CheckRefused: haproxy -c rejected the rendering Hash (Err says why) after the runtime API
// had made it live: HAProxy is to be taken back to the last good rendering, and the rendering
// is held.
type CheckRefused struct {
	Hash string
	Err  error
}

func (e CheckRefused) After(s State) State {
	return s.refused(Refusal{Hash: e.Hash, Check: true, Err: e.Err})
}

// RenderAgain: the reloader asks for a new rendering before anything goes live (the Data Plane
// API's certificate directory was learned): what the runtime API sees is not known.
type RenderAgain struct{ At time.Time }

func (e RenderAgain) After(s State) State {
	s = s.reloadEnded(e.At)
	s.Model = nil
	return s
}

// ReloadUnknown: the outcome of a reload that ended At is not known (HAProxy did not answer in
// time, the connection broke): nothing of what HAProxy runs is.
type ReloadUnknown struct{ At time.Time }

func (e ReloadUnknown) After(s State) State {
	s = s.reloadEnded(e.At)
	s.Runs, s.Load, s.Model, s.Record = "", "", nil, generation.Loaded{}
	return s
}

// ReloadDeferred: a reload waits until At (--min-reload-interval).
type ReloadDeferred struct{ At time.Time }

func (e ReloadDeferred) After(s State) State {
	s.ReloadAt = e.At
	return s
}

// RuntimeChanging: the runtime API is about to change what HAProxy runs: until it is done, no
// rendering is what HAProxy runs for sure, and the record says nothing.
type RuntimeChanging struct{}

func (RuntimeChanging) After(s State) State {
	s.Runs, s.Record = "", generation.Loaded{}
	return s
}

// RuntimeFailed: a runtime API change failed: what HAProxy runs is not known until the next
// reload.
type RuntimeFailed struct{}

func (RuntimeFailed) After(s State) State {
	s.Runs, s.Model = "", nil
	return s
}

// RuntimeApplied: the runtime API made the rendering Hash live with no reload; HAProxy runs it
// now, as Model (the files follow: FilesWritten). Load is HAProxy's load when it was learned
// now (HAProxy answered after starting on files written while it was down), "" to keep it.
type RuntimeApplied struct {
	Hash  string
	Model *runtimeapi.Model
	Load  string
	At    time.Time
}

func (e RuntimeApplied) After(s State) State {
	s.Runs, s.Model, s.ReloadAt, s.LoadsAtStart = e.Hash, e.Model, time.Time{}, ""
	if e.Load != "" {
		s.Load, s.Probe.Load = e.Load, e.Load
	}
	return s.live(e.Hash, e.At)
}

// RuntimeWhileWaiting: while a reload waits, the runtime API made what it could of a change:
// HAProxy runs no rendering until the reload, as Model.
type RuntimeWhileWaiting struct{ Model *runtimeapi.Model }

func (e RuntimeWhileWaiting) After(s State) State {
	s.Runs, s.Model = "", e.Model
	return s
}

// RuntimeTidied: servers removed but still busy were deleted again; HAProxy runs Model.
type RuntimeTidied struct{ Model *runtimeapi.Model }

func (e RuntimeTidied) After(s State) State {
	s.Model = e.Model
	return s
}

// FilesWritten: the rendering Bundle, which HAProxy got through the runtime API, is live on
// disk (generation Gen) and valid: the last good one. If HAProxy still runs it (no newer change
// since), the record names it and it is confirmed live.
type FilesWritten struct {
	Bundle *render.Bundle
	Gen    *generation.Generation
	At     time.Time
}

func (e FilesWritten) After(s State) State {
	s.Good = Good{Bundle: e.Bundle, Gen: e.Gen}
	if s.Runs != e.Bundle.Hash {
		return s
	}
	s.Record, s.LoadsAtStart = s.record(e.Bundle.Hash), ""
	return s.live(e.Bundle.Hash, e.At)
}

// RevertedAtRuntime: the runtime API took HAProxy back to the last good rendering (a rendering
// it had made live failed validation), as Model; the live files are the good generation's.
type RevertedAtRuntime struct {
	Model *runtimeapi.Model
	At    time.Time
}

func (e RevertedAtRuntime) After(s State) State {
	h := s.Good.Hash()
	s.Runs, s.Model = h, e.Model
	s.Record = s.record(h)
	return s.live(h, e.At)
}

// RestartNoticed: the sync looked at a restart the probe saw (Restarted).
type RestartNoticed struct{}

func (RestartNoticed) After(s State) State {
	s.Restarted = false
	return s
}

// RestartedOnGood: HAProxy runs a load the sidecar did not make (it started, or someone
// reloaded it), and the files it loaded are the last good rendering: it runs that, as Model.
type RestartedOnGood struct {
	Load  string
	Model *runtimeapi.Model
	At    time.Time
}

func (e RestartedOnGood) After(s State) State {
	h := s.Good.Hash()
	s.Runs, s.Load, s.Model, s.Restarted = h, e.Load, e.Model, false
	s.Record = s.record(h)
	s.LoadsAtStart = ""
	return s.live(h, e.At)
}

// RestartedUnknown: HAProxy runs a load the sidecar did not make, on files that are not the
// last good rendering's: what it runs is not known (the next sync reloads).
type RestartedUnknown struct{}

func (RestartedUnknown) After(s State) State {
	s.Runs, s.Load, s.Model, s.Record, s.Restarted = "", "", nil, generation.Loaded{}, false
	return s
}

// ProbedUp: HAProxy answered the probe with Load ("": an answer that names no load). A load
// the sidecar did not make, while it knows which one HAProxy should run, sets Restarted.
type ProbedUp struct{ Load string }

func (e ProbedUp) After(s State) State {
	prev := s.Probe.Load
	s.Probe = Probe{Seen: Up, Load: prev}
	if e.Load == "" {
		return s
	}
	s.Probe.Load = e.Load
	if prev != e.Load && e.Load != s.Load && (s.Load != "" || s.LoadsAtStart != "") {
		s.Restarted = true
	}
	return s
}

// ProbedDown: HAProxy does not answer (Why); Process is the pid of a HAProxy that runs on the
// sidecar's configuration all the same (0: none seen).
type ProbedDown struct {
	Why     string
	Process int
}

func (e ProbedDown) After(s State) State {
	s.Probe.Seen, s.Probe.Why, s.Probe.Process = Down, e.Why, e.Process
	return s
}
