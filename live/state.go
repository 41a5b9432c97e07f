// Package live is the one answer to "what does HAProxy run, and what is written": the
// rendering HAProxy runs, the HAProxy load that runs it, the last good rendering and its
// generation on disk, what the runtime API sees, renderings HAProxy refused, what was written
// while HAProxy did not run, a reload in flight, what the probe saw last.
//
// State is plain data. It changes only through its methods, each named for an event (Reloaded,
// ReloadRefused, RuntimeApplied, FilesWritten, Restarted, ...) and each a pure function of the
// state and the event's values, tested from tables. An Owner holds the current State for
// everyone: the sync decides from it and records what it did through it, the background writer
// and the probe record their events through it, status reads it. Nobody keeps a copy.
package live

import (
	"slices"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// State is what HAProxy runs and what is written, as far as the sidecar knows.
type State struct {
	// Runs is the hash of the rendering HAProxy runs for sure; "" when it is not known (a
	// reload of unknown outcome, HAProxy restarted on other files, runtime changes under way or
	// made while a reload waits).
	Runs string
	// Model is what HAProxy runs as the runtime API sees it (servers, certificates, map
	// files, servers removed but still busy); nil when not known: the next change reloads.
	Model *runtimeapi.Model
	// Load names the HAProxy load (master and reload count) the sidecar made or adopted; ""
	// when not known.
	Load string
	// Record is what the record on disk says HAProxy runs, for a restarted sidecar (see
	// generation.Store.SetLoaded); the Owner writes it when it changes. It names a rendering
	// only once its files are on disk and HAProxy runs it under a known load.
	Record generation.Loaded
	// Good is the last good rendering: what HAProxy loads at its next reload or start, and
	// what a rollback goes back to.
	Good Good
	// LoadsAtStart is the hash of the rendering written while HAProxy did not run: it loads
	// it when it starts. "" when none waits so.
	LoadsAtStart string
	// Refused are the renderings HAProxy refused at a reload, newest last: reloading them again
	// would only fail again.
	Refused []string
	// Reloading is set while a reload the sidecar asked for is under way: the master may not
	// answer meanwhile, which the probe must not take for HAProxy being down.
	Reloading bool
	// LastReload is when the last reload ended; ReloadAt when a deferred reload is due (zero:
	// none waits).
	LastReload, ReloadAt time.Time
	// Probe is what the HAProxy probe saw last.
	Probe Probe
	// Restarted is set when HAProxy came up with a load the sidecar did not make while it
	// knew which one HAProxy should run: the next sync looks.
	Restarted bool
	// Live is the rendering last confirmed live (HAProxy ran it when the sidecar last made or
	// saw a change) and LiveSince since when; it stays while what HAProxy runs is briefly not
	// known, and is "" before anything went live and once HAProxy waits to start.
	Live      string
	LiveSince time.Time
}

// Good is the last good rendering and its generation on disk.
type Good struct {
	// Bundle is the rendering (nil when not known: the generation was live when the sidecar
	// started).
	Bundle *render.Bundle
	// Gen is its generation (nil: none yet).
	Gen *generation.Generation
}

// Hash is the last good rendering's hash ("" when not known).
func (g Good) Hash() string {
	if g.Bundle == nil {
		return ""
	}
	return g.Bundle.Hash
}

// Probe is what the probe saw of HAProxy.
type Probe struct {
	Seen Seen
	// Load is the load HAProxy answered with last ("" none yet).
	Load string
	// Why HAProxy counts as down.
	Why string
}

// Seen is what the probe saw.
type Seen int

// What the probe saw.
const (
	NotSeen Seen = iota // not probed yet
	Up
	Down
)

func (s Seen) String() string {
	switch s {
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return ""
}

// refusedKept bounds the renderings remembered as refused at reload.
const refusedKept = 16

// Start is what is known before the first sync: the generation live on disk (nil: none),
// taken as the last good one, and the record a previous run left.
func Start(gen *generation.Generation, record generation.Loaded) State {
	return State{Good: Good{Gen: gen}, Record: record}
}

// Refuses reports whether HAProxy refused the rendering hash at a reload.
func (s State) Refuses(hash string) bool { return slices.Contains(s.Refused, hash) }

// live confirms hash live at now.
func (s State) live(hash string, now time.Time) State {
	if s.Live != hash {
		s.LiveSince = now
	}
	s.Live = hash
	return s
}

// record is what the record says once HAProxy runs hash under the known load.
func (s State) record(hash string) generation.Loaded {
	if hash == "" || s.Load == "" {
		return generation.Loaded{}
	}
	return generation.Loaded{Hash: hash, LoadID: s.Load}
}

// Adopted: at start, HAProxy runs the live generation (b's rendering, gen) under the load the
// record names: nothing to reload.
func (s State) Adopted(b *render.Bundle, gen *generation.Generation, load string, m *runtimeapi.Model, now time.Time) State {
	s.Runs, s.Load, s.Model = b.Hash, load, m
	s.Good = Good{Bundle: b, Gen: gen}
	s.Probe.Load = load
	return s.live(b.Hash, now)
}

// ReloadStarted: the sidecar asks HAProxy to reload.
func (s State) ReloadStarted() State {
	s.Reloading = true
	return s
}

// reloadEnded: a reload the sidecar asked for ended at now (HAProxy answered, or not); no
// deferred one waits any more.
func (s State) reloadEnded(now time.Time) State {
	s.Reloading, s.ReloadAt, s.LastReload = false, time.Time{}, now
	return s
}

// Reloaded: HAProxy confirmed it loaded the rendering b (generation gen), under load ("":
// the reloader cannot tell). It runs exactly that: what it refused before may load now once
// its inputs change again.
func (s State) Reloaded(b *render.Bundle, gen *generation.Generation, load string, m *runtimeapi.Model, now time.Time) State {
	s = s.reloadEnded(now)
	s.Runs, s.Load, s.Model = b.Hash, load, m
	s.Good = Good{Bundle: b, Gen: gen}
	s.Record = s.record(b.Hash)
	s.Refused, s.LoadsAtStart = nil, ""
	if load != "" {
		s.Probe.Load = load
	}
	return s.live(b.Hash, now)
}

// WrittenWhileDown: the rendering b is live on disk (generation gen) but HAProxy does not run:
// it loads b when it starts, as m.
func (s State) WrittenWhileDown(b *render.Bundle, gen *generation.Generation, m *runtimeapi.Model) State {
	s.Reloading, s.ReloadAt = false, time.Time{}
	s.Runs, s.Load, s.Model, s.Record = "", "", m, generation.Loaded{}
	s.Good = Good{Bundle: b, Gen: gen}
	s.LoadsAtStart, s.Live = b.Hash, ""
	return s
}

// ReloadRefused: HAProxy refused the rendering hash at a reload that ended at now; its
// previous workers keep running what they ran.
func (s State) ReloadRefused(hash string, now time.Time) State {
	s = s.reloadEnded(now)
	s.Refused = append(slices.Clone(s.Refused), hash)
	if len(s.Refused) > refusedKept {
		s.Refused = s.Refused[len(s.Refused)-refusedKept:]
	}
	return s
}

// RenderAgain: the reloader asks for a new rendering before anything goes live (the Data Plane
// API's certificate directory was learned): what the runtime API sees is not known.
func (s State) RenderAgain(now time.Time) State {
	s = s.reloadEnded(now)
	s.Model = nil
	return s
}

// ReloadUnknown: the outcome of a reload that ended at now is not known (HAProxy did not
// answer in time, the connection broke): nothing of what HAProxy runs is.
func (s State) ReloadUnknown(now time.Time) State {
	s = s.reloadEnded(now)
	s.Runs, s.Load, s.Model, s.Record = "", "", nil, generation.Loaded{}
	return s
}

// ReloadDeferred: a reload waits until at (--min-reload-interval).
func (s State) ReloadDeferred(at time.Time) State {
	s.ReloadAt = at
	return s
}

// RuntimeChanging: the runtime API is about to change what HAProxy runs: until it is done,
// no rendering is what HAProxy runs for sure, and the record says nothing.
func (s State) RuntimeChanging() State {
	s.Runs, s.Record = "", generation.Loaded{}
	return s
}

// RuntimeFailed: a runtime API change failed: what HAProxy runs is not known until the next
// reload.
func (s State) RuntimeFailed() State {
	s.Runs, s.Model = "", nil
	return s
}

// RuntimeApplied: the runtime API made the rendering hash live with no reload; HAProxy runs it
// now, as m (the files follow: FilesWritten). load is HAProxy's load when it was learned now
// (HAProxy answered after starting on files written while it was down), "" to keep it.
func (s State) RuntimeApplied(hash string, m *runtimeapi.Model, load string, now time.Time) State {
	s.Runs, s.Model, s.ReloadAt, s.LoadsAtStart = hash, m, time.Time{}, ""
	if load != "" {
		s.Load, s.Probe.Load = load, load
	}
	return s.live(hash, now)
}

// RuntimeWhileWaiting: while a reload waits, the runtime API made what it could of a change:
// HAProxy runs no rendering until the reload, as m.
func (s State) RuntimeWhileWaiting(m *runtimeapi.Model) State {
	s.Runs, s.Model = "", m
	return s
}

// RuntimeTidied: servers removed but still busy were deleted again; HAProxy runs m.
func (s State) RuntimeTidied(m *runtimeapi.Model) State {
	s.Model = m
	return s
}

// FilesWritten: the rendering b, which HAProxy got through the runtime API, is live on disk
// (generation gen) and valid: the last good one. If HAProxy still runs it (no newer change
// since), the record names it and it is confirmed live.
func (s State) FilesWritten(b *render.Bundle, gen *generation.Generation, now time.Time) State {
	s.Good = Good{Bundle: b, Gen: gen}
	if s.Runs != b.Hash {
		return s
	}
	s.Record, s.LoadsAtStart = s.record(b.Hash), ""
	return s.live(b.Hash, now)
}

// RevertedAtRuntime: the runtime API took HAProxy back to the last good rendering (a rendering
// it had made live failed validation); the live files are the good generation's.
func (s State) RevertedAtRuntime(m *runtimeapi.Model, now time.Time) State {
	h := s.Good.Hash()
	s.Runs, s.Model = h, m
	s.Record = s.record(h)
	return s.live(h, now)
}

// RestartNoticed: the sync looked at a restart the probe saw (Restarted).
func (s State) RestartNoticed() State {
	s.Restarted = false
	return s
}

// RestartedOnGood: HAProxy runs a load the sidecar did not make (it started, or someone
// reloaded it), and the files it loaded are the last good rendering: it runs that, as m.
func (s State) RestartedOnGood(load string, m *runtimeapi.Model, now time.Time) State {
	h := s.Good.Hash()
	s.Runs, s.Load, s.Model, s.Restarted = h, load, m, false
	s.Record = s.record(h)
	s.LoadsAtStart = ""
	return s.live(h, now)
}

// RestartedUnknown: HAProxy runs a load the sidecar did not make, on files that are not the
// last good rendering's: what it runs is not known (the next sync reloads).
func (s State) RestartedUnknown() State {
	s.Runs, s.Load, s.Model, s.Record, s.Restarted = "", "", nil, generation.Loaded{}, false
	return s
}

// ProbedUp: HAProxy answered the probe with load ("": an answer that names no load). A load
// the sidecar did not make, while it knows which one HAProxy should run, sets Restarted.
func (s State) ProbedUp(load string) State {
	prev := s.Probe.Load
	s.Probe = Probe{Seen: Up, Load: prev}
	if load == "" {
		return s
	}
	s.Probe.Load = load
	if prev != load && load != s.Load && (s.Load != "" || s.LoadsAtStart != "") {
		s.Restarted = true
	}
	return s
}

// ProbedDown: HAProxy does not answer (why).
func (s State) ProbedDown(why string) State {
	s.Probe.Seen, s.Probe.Why = Down, why
	return s
}
