package live

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

var (
	t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

func bundle(hash string) *render.Bundle { return &render.Bundle{Hash: hash} }

func gen(hash string) *generation.Generation {
	return &generation.Generation{Dir: "/state/gen-" + hash, Hash: hash}
}

// model stands for what the runtime API sees (its contents do not matter here).
func model() *runtimeapi.Model { return &runtimeapi.Model{} }

// TestEvents: each event's effect on the state, from a table.
func TestEvents(t *testing.T) {
	a, b := bundle("a"), bundle("b")
	ga, gb := gen("a"), gen("b")
	ma, mb := model(), model()
	running := State{Runs: "a", Model: ma, Load: "L1", Record: generation.Loaded{Hash: "a", LoadID: "L1"},
		Good: Good{Bundle: a, Gen: ga}, Live: "a", LiveSince: t0, Probe: Probe{Seen: Up, Load: "L1"}}
	tests := []struct {
		name  string
		from  State
		event Event
		want  State
	}{
		{"the start knows the live generation and the record a previous run left",
			State{}, start{ga, generation.Loaded{Hash: "a", LoadID: "L1"}},
			State{Good: Good{Gen: ga}, Record: generation.Loaded{Hash: "a", LoadID: "L1"}}},
		{"adopted at start: HAProxy runs the live generation under the recorded load",
			Start(ga, generation.Loaded{Hash: "a", LoadID: "L1"}),
			Adopted{Bundle: a, Gen: ga, Load: "L1", Model: ma, At: t0},
			State{Runs: "a", Model: ma, Load: "L1", Record: generation.Loaded{Hash: "a", LoadID: "L1"},
				Good: Good{Bundle: a, Gen: ga}, Probe: Probe{Load: "L1"}, Live: "a", LiveSince: t0}},
		{"a reload starts: the probe leaves the master alone",
			running, ReloadStarted{},
			with(running, func(s *State) { s.Reloading = true })},
		{"reloaded: HAProxy runs b under a new load, recorded; what it refused may load again, what the check rejected stays so",
			with(running, func(s *State) { s.Reloading, s.Refused, s.ReloadAt = true, []Refusal{{Hash: "x"}, checkedY}, t0 }),
			Reloaded{Bundle: b, Gen: gb, Load: "L2", Model: mb, At: t1},
			State{Runs: "b", Model: mb, Load: "L2", Record: generation.Loaded{Hash: "b", LoadID: "L2"}, Refused: []Refusal{checkedY},
				Good: Good{Bundle: b, Gen: gb}, Live: "b", LiveSince: t1, LastReload: t1, Probe: Probe{Seen: Up, Load: "L2"}}},
		{"reloaded by a reloader that cannot name the load: nothing recorded",
			running, Reloaded{Bundle: b, Gen: gb, Model: mb, At: t1},
			with(running, func(s *State) {
				s.Runs, s.Model, s.Load, s.Record, s.Good, s.Live, s.LiveSince, s.LastReload = "b", mb, "", generation.Loaded{}, Good{Bundle: b, Gen: gb}, "b", t1, t1
			})},
		{"reloaded with the same rendering: live since the first time",
			running, Reloaded{Bundle: a, Gen: ga, Load: "L2", Model: ma, At: t1},
			with(running, func(s *State) {
				s.Load, s.Record, s.LastReload, s.Probe.Load = "L2", generation.Loaded{Hash: "a", LoadID: "L2"}, t1, "L2"
			})},
		{"written while HAProxy does not run: it loads b when it starts; nothing is live",
			with(running, func(s *State) { s.Reloading = true }),
			WrittenWhileDown{Bundle: b, Gen: gb, Model: mb},
			with(running, func(s *State) {
				s.Runs, s.Load, s.Record, s.Model, s.Good, s.LoadsAtStart, s.Live = "", "", generation.Loaded{}, mb, Good{Bundle: b, Gen: gb}, "b", ""
			})},
		{"written while HAProxy should run but cannot be reached: down, with the reason",
			running, WrittenWhileDown{Bundle: b, Gen: gb, Model: mb, Unreachable: "no socket"},
			with(running, func(s *State) {
				s.Runs, s.Load, s.Record, s.Model, s.Good, s.LoadsAtStart, s.Live = "", "", generation.Loaded{}, mb, Good{Bundle: b, Gen: gb}, "b", ""
				s.Probe.Seen, s.Probe.Why = Down, "no socket"
			})},
		{"written while a HAProxy runs on the files but cannot be reached: down, with the reason and its pid",
			running, WrittenWhileDown{Bundle: b, Gen: gb, Model: mb, Unreachable: "no socket", Process: 42},
			with(running, func(s *State) {
				s.Runs, s.Load, s.Record, s.Model, s.Good, s.LoadsAtStart, s.Live = "", "", generation.Loaded{}, mb, Good{Bundle: b, Gen: gb}, "b", ""
				s.Probe.Seen, s.Probe.Why, s.Probe.Process = Down, "no socket", 42
			})},
		{"refused at reload: remembered, the rest unchanged",
			with(running, func(s *State) { s.Reloading = true }),
			ReloadRefused{Hash: "b", At: t1},
			with(running, func(s *State) { s.Refused, s.LastReload = []Refusal{{Hash: "b"}}, t1 })},
		{"rejected by the check behind a runtime change: remembered with why, the rest unchanged",
			running, CheckRefused{Hash: "y", Err: checkedY.Err},
			with(running, func(s *State) { s.Refused = []Refusal{checkedY} })},
		{"a reload of unknown outcome: nothing of what HAProxy runs is known",
			running, ReloadUnknown{At: t1},
			with(running, func(s *State) {
				s.Runs, s.Load, s.Model, s.Record, s.LastReload = "", "", nil, generation.Loaded{}, t1
			})},
		{"render again: what the runtime API sees is not known",
			running, RenderAgain{At: t1},
			with(running, func(s *State) { s.Model, s.LastReload = nil, t1 })},
		{"a reload deferred", running, ReloadDeferred{At: t1},
			with(running, func(s *State) { s.ReloadAt = t1 })},
		{"a runtime change under way: no rendering runs for sure, the record says nothing",
			running, RuntimeChanging{},
			with(running, func(s *State) { s.Runs, s.Record = "", generation.Loaded{} })},
		{"a runtime change failed: not known",
			after(running, RuntimeChanging{}), RuntimeFailed{},
			with(running, func(s *State) { s.Runs, s.Record, s.Model = "", generation.Loaded{}, nil })},
		{"a runtime change applied: HAProxy runs b, the record waits for the files",
			with(after(running, RuntimeChanging{}), func(s *State) { s.ReloadAt = t0 }),
			RuntimeApplied{Hash: "b", Model: mb, At: t1},
			with(running, func(s *State) { s.Runs, s.Record, s.Model, s.Live, s.LiveSince = "b", generation.Loaded{}, mb, "b", t1 })},
		{"a runtime change to HAProxy started on files written while it was down: its load learned",
			State{LoadsAtStart: "a", Good: Good{Bundle: a, Gen: ga}},
			RuntimeApplied{Hash: "b", Model: mb, Load: "L3", At: t1},
			State{Runs: "b", Model: mb, Load: "L3", Good: Good{Bundle: a, Gen: ga}, Probe: Probe{Load: "L3"}, Live: "b", LiveSince: t1}},
		{"the files of the runtime change written: good, recorded",
			after(running, RuntimeChanging{}, RuntimeApplied{Hash: "b", Model: mb, At: t1}),
			FilesWritten{Bundle: b, Gen: gb, At: t1},
			with(running, func(s *State) {
				s.Runs, s.Model, s.Good, s.Record, s.Live, s.LiveSince = "b", mb, Good{Bundle: b, Gen: gb}, generation.Loaded{Hash: "b", LoadID: "L1"}, "b", t1
			})},
		{"files written late, a newer change under way: good, but neither recorded nor live",
			after(running, RuntimeChanging{}),
			FilesWritten{Bundle: b, Gen: gb, At: t1},
			with(running, func(s *State) { s.Runs, s.Record, s.Good = "", generation.Loaded{}, Good{Bundle: b, Gen: gb} })},
		{"a change made while a reload waits: no rendering runs",
			after(running, RuntimeChanging{}), RuntimeWhileWaiting{Model: mb},
			with(running, func(s *State) { s.Runs, s.Record, s.Model = "", generation.Loaded{}, mb })},
		{"busy servers tidied", running, RuntimeTidied{Model: mb},
			with(running, func(s *State) { s.Model = mb })},
		{"reverted at runtime to the last good rendering",
			after(running, RuntimeChanging{}, RuntimeApplied{Hash: "b", Model: mb, At: t0}),
			RevertedAtRuntime{Model: ma, At: t1},
			with(running, func(s *State) { s.LiveSince = t1 })},
		{"the probe sees a load the sidecar did not make: restarted",
			running, ProbedUp{Load: "L9"},
			with(running, func(s *State) { s.Probe.Load, s.Restarted = "L9", true })},
		{"the probe sees the same unknown load again: not again",
			with(running, func(s *State) { s.Probe.Load = "L9" }), ProbedUp{Load: "L9"},
			with(running, func(s *State) { s.Probe.Load = "L9" })},
		{"the probe sees the sidecar's own load", running, ProbedUp{Load: "L1"}, running},
		{"the probe sees an answer that names no load: up, the load kept",
			with(running, func(s *State) { s.Probe = Probe{Seen: Down, Load: "L1", Why: "gone"} }),
			ProbedUp{}, running},
		{"the probe sees HAProxy start on files written while it was down",
			State{LoadsAtStart: "b"}, ProbedUp{Load: "L5"},
			State{LoadsAtStart: "b", Probe: Probe{Seen: Up, Load: "L5"}, Restarted: true}},
		{"the probe sees HAProxy before the sidecar made anything: nothing to look at",
			State{}, ProbedUp{Load: "L5"},
			State{Probe: Probe{Seen: Up, Load: "L5"}}},
		{"the probe sees HAProxy down", running, ProbedDown{Why: "refused"},
			with(running, func(s *State) { s.Probe.Seen, s.Probe.Why = Down, "refused" })},
		{"the probe sees HAProxy run on the configuration but its socket not answer",
			running, ProbedDown{Why: "connect: no such file", Process: 42},
			with(running, func(s *State) { s.Probe.Seen, s.Probe.Why, s.Probe.Process = Down, "connect: no such file", 42 })},
		{"up again: the process seen is forgotten",
			with(running, func(s *State) { s.Probe = Probe{Seen: Down, Load: "L1", Why: "x", Process: 42} }),
			ProbedUp{Load: "L1"}, running},
		{"a restart noticed", with(running, func(s *State) { s.Restarted = true }), RestartNoticed{}, running},
		{"restarted on the last good files: HAProxy runs them under its new load",
			with(running, func(s *State) {
				s.Runs, s.Load, s.Model, s.Record, s.LoadsAtStart, s.Refused = "", "", nil, generation.Loaded{}, "a", []Refusal{{Hash: "x"}}
			}),
			RestartedOnGood{Load: "L4", Model: mb, At: t1},
			with(running, func(s *State) {
				s.Load, s.Record, s.Model, s.Refused = "L4", generation.Loaded{Hash: "a", LoadID: "L4"}, mb, []Refusal{{Hash: "x"}}
			})},
		{"restarted on other files: not known",
			running, RestartedUnknown{},
			with(running, func(s *State) { s.Runs, s.Load, s.Model, s.Record = "", "", nil, generation.Loaded{} })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.event.After(tt.from); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// start is the state Start gives, as an event for the table.
type start struct {
	gen    *generation.Generation
	record generation.Loaded
}

func (e start) After(State) State { return Start(e.gen, e.record) }

// after is s after the events.
func after(s State, events ...Event) State {
	for _, e := range events {
		s = e.After(s)
	}
	return s
}

// with is s changed by f.
func with(s State, f func(*State)) State {
	f(&s)
	return s
}

// checkedY is the rendering y, which haproxy -c rejected behind a runtime change.
var checkedY = Refusal{Hash: "y", Check: true, Err: errors.New("unknown keyword")}

// TestRefusedIsBounded: each kind of refusal keeps its newest refusedKept, whatever the other
// kind does.
func TestRefusedIsBounded(t *testing.T) {
	s := CheckRefused{Hash: "check-0", Err: checkedY.Err}.After(State{})
	for i := range refusedKept + 5 {
		s = ReloadRefused{Hash: string(rune('a' + i)), At: t0}.After(s)
	}
	if len(s.Refused) != refusedKept+1 || !s.Refuses(string(rune('a'+refusedKept+4))) || s.Refuses("a") || s.Rejected("check-0") == nil {
		t.Errorf("refused %v", s.Refused)
	}
	for i := range refusedKept + 5 {
		s = CheckRefused{Hash: fmt.Sprint("check-", i), Err: checkedY.Err}.After(s)
	}
	if len(s.Refused) != 2*refusedKept || s.Rejected("check-0") != nil || s.Rejected(fmt.Sprint("check-", refusedKept+4)) == nil || !s.Refuses(string(rune('a'+refusedKept+4))) {
		t.Errorf("refused %v", s.Refused)
	}
}

// TestRefusalsAreTold: a reload refusal is no check rejection and the other way round; the
// same rendering refused again counts once.
func TestRefusalsAreTold(t *testing.T) {
	s := ReloadRefused{Hash: "a", At: t0}.After(State{})
	s = ReloadRefused{Hash: "a", At: t1}.After(s)
	s = CheckRefused{Hash: "y", Err: checkedY.Err}.After(s)
	if !s.Refuses("a") || s.Rejected("a") != nil || s.Refuses("y") || s.Rejected("y") != checkedY.Err || s.Refuses("b") || s.Rejected("b") != nil {
		t.Errorf("refused %v", s.Refused)
	}
	if len(s.Refused) != 2 {
		t.Errorf("a rendering refused twice is listed twice: %v", s.Refused)
	}
}

// TestEventsDoNotShareState: a state read before an event does not change with it.
func TestEventsDoNotShareState(t *testing.T) {
	before := State{Refused: []Refusal{{Hash: "a"}}}
	_ = ReloadRefused{Hash: "b", At: t0}.After(before)
	_ = CheckRefused{Hash: "a", Err: checkedY.Err}.After(before)
	if !reflect.DeepEqual(before.Refused, []Refusal{{Hash: "a"}}) {
		t.Errorf("an event changed the state it was given: %v", before.Refused)
	}
}

// TestOwnerWritesTheRecordInOrder: the record is written when an event changes it, and only
// then; a failure is reported, the state still changes.
func TestOwnerWritesTheRecordInOrder(t *testing.T) {
	var written []generation.Loaded
	var failures []error
	fail := false
	o := NewOwner(State{}, func(l generation.Loaded) (func() error, error) {
		return func() error {
			if fail {
				return errors.New("disk full")
			}
			written = append(written, l)
			return nil
		}, nil
	}, func(err error) { failures = append(failures, err) })
	o.Record(Reloaded{Bundle: bundle("a"), Gen: gen("a"), Load: "L1", At: t0})
	o.Record(ProbedUp{Load: "L1"}) // the record is unchanged: not written
	o.Record(RuntimeChanging{}, RuntimeApplied{Hash: "b", At: t1})
	o.Record(FilesWritten{Bundle: bundle("b"), Gen: gen("b"), At: t1})
	want := []generation.Loaded{{Hash: "a", LoadID: "L1"}, {}, {Hash: "b", LoadID: "L1"}}
	if !reflect.DeepEqual(written, want) {
		t.Errorf("records written %+v, want %+v", written, want)
	}
	fail = true
	before, now := o.Record(RestartedUnknown{})
	if len(failures) != 1 || now.Runs != "" || before.Runs != "b" || o.State().Load != "" {
		t.Errorf("failures %v, before %+v, after %+v", failures, before, now)
	}
}

// TestOwnerHoldsNoOneWhileTheRecordSyncs: the record's synced write (up to a second on a busy
// disk) holds neither those who read the state nor the next change, whose record it never
// overwrites: HAProxy's commands follow the record's removal at once, and that removal stands.
func TestOwnerHoldsNoOneWhileTheRecordSyncs(t *testing.T) {
	dir := t.TempDir()
	store, err := generation.Open(filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "ssl"), "")
	if err != nil {
		t.Fatal(err)
	}
	syncing, release := make(chan struct{}), make(chan struct{})
	slow := func(l generation.Loaded) (func() error, error) {
		finish, err := store.BeginLoaded(l)
		if err != nil || l.Hash != "a" {
			return finish, err
		}
		return func() error {
			close(syncing)
			<-release // the disk is busy
			return finish()
		}, nil
	}
	o := NewOwner(State{}, slow, func(err error) { t.Errorf("record: %v", err) })
	written := make(chan struct{})
	go func() {
		defer close(written)
		o.Record(Reloaded{Bundle: bundle("a"), Gen: gen("a"), Load: "L1", At: t0})
	}()
	<-syncing

	// The write of a's record is under way: the state is read, and the next change begins.
	done := make(chan State)
	go func() {
		_, after := o.Record(RuntimeChanging{})
		done <- after
	}()
	select {
	case after := <-done:
		if after.Runs != "" || after.Record != (generation.Loaded{}) || o.State().Live != "a" {
			t.Errorf("after RuntimeChanging: %+v", after)
		}
	case <-time.After(time.Minute): // only bounds a failing run
		close(release)
		t.Fatal("the next change waited for the record's synced write")
	}
	if l, ok := store.Loaded(); ok {
		t.Errorf("the record says HAProxy runs %+v while the runtime API changes it", l)
	}

	close(release)
	<-written
	if l, ok := store.Loaded(); ok {
		t.Errorf("the write begun first landed over the removal begun after it: %+v", l)
	}
	o.Record(RuntimeApplied{Hash: "b", At: t1}, FilesWritten{Bundle: bundle("b"), Gen: gen("b"), At: t1})
	if l, ok := store.Loaded(); !ok || l != (generation.Loaded{Hash: "b", LoadID: "L1"}) {
		t.Errorf("record after b went live = %+v, %v", l, ok)
	}
}
