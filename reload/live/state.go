// Package live is the one answer to "what does HAProxy run, and what is written": the
// rendering HAProxy runs, the HAProxy load that runs it, the last good rendering and its
// generation on disk, what the runtime API sees, renderings HAProxy refused (at a reload, or
// at the check behind a runtime change), what was written
// while HAProxy did not run, a reload in flight, what the probe saw last.
//
// State is plain data. It changes only through events (Reloaded, ReloadRefused, CheckRefused,
// RuntimeApplied, FilesWritten, RestartedOnGood, ...): plain values whose After method is a
// pure function of the state and the event, tested from tables. An Owner holds the current
// State for everyone: the sync decides from it and records what it did as events, the
// background writer and the probe record theirs, status reads it. Nobody keeps a copy.
package live

import (
	"slices"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
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
	// Refused are the renderings HAProxy refused, newest last: at a reload (reloading them
	// again would only fail again), or at the check behind a runtime change (HAProxy runs
	// them, or ran them: they are taken back).
	Refused []Refusal
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

// Refusal is a rendering HAProxy refused.
type Refusal struct {
	Hash string
	// Check is set when haproxy -c rejected the rendering after the runtime API had made it
	// live (the background writer checks it then), Err saying why; else HAProxy refused it at
	// a reload.
	Check bool
	Err   error
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
	// Process is the pid of a HAProxy that runs on the sidecar's configuration while it does
	// not answer (a wrong --master-socket); 0: none seen.
	Process int
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

// The paths by which a change goes live (haproxy_sidecar_change_to_live_seconds's path label).
const (
	PathRuntime   = "runtime"   // HAProxy's runtime API answered, no reload
	PathReload    = "reload"    // a reload confirmed (master socket, command)
	PathDataplane = "dataplane" // a Data Plane API host confirmed it has the configuration, per host
)

// refusedKept bounds the renderings remembered as refused, of each kind.
const refusedKept = 16

// Start is what is known before the first sync: the generation live on disk (nil: none),
// taken as the last good one, and the record a previous run left.
func Start(gen *generation.Generation, record generation.Loaded) State {
	return State{Good: Good{Gen: gen}, Record: record}
}

// Refuses reports whether HAProxy refused the rendering hash at a reload.
func (s State) Refuses(hash string) bool {
	return slices.ContainsFunc(s.Refused, func(r Refusal) bool { return r.Hash == hash && !r.Check })
}

// Rejected is why haproxy -c rejected the rendering hash after the runtime API had made it
// live; nil if it did not.
func (s State) Rejected(hash string) error {
	for _, r := range s.Refused {
		if r.Hash == hash && r.Check {
			return r.Err
		}
	}
	return nil
}

// refused is s with r the newest refusal: an older one of the same rendering and kind is
// dropped, and the oldest of its kind beyond refusedKept.
func (s State) refused(r Refusal) State {
	same := func(o Refusal) bool { return o.Check == r.Check && o.Hash == r.Hash }
	list := append(slices.DeleteFunc(slices.Clone(s.Refused), same), r)
	n := 0
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Check != r.Check {
			continue
		}
		if n++; n > refusedKept {
			list = slices.Delete(list, i, i+1)
		}
	}
	s.Refused = list
	return s
}

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
