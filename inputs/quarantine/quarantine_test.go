package quarantine

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/allocs"
)

var servicesRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services"}

func svc(name, text string) snapshot.Input {
	ref := servicesRef
	ref.Key = name
	return snapshot.Input{Kind: snapshot.KindService, Name: name, Ref: ref, Text: text, Hash: "h-" + text}
}

func badSvc(name, text string) snapshot.Input {
	in := svc(name, text)
	in.Err = &snapshot.InputError{Stage: snapshot.StageDecode, Ref: in.Ref, Err: errors.New("invalid JSON")}
	return in
}

func tmpl(text string) snapshot.Input {
	return snapshot.Input{Kind: snapshot.KindTemplates, Ref: snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"},
		Data: map[string]string{"template": text}, Hash: "h-" + text}
}

func inputs(ins ...snapshot.Input) snapshot.Inputs {
	out := snapshot.Inputs{ServicesPresent: true}
	for _, in := range ins {
		if in.Kind == snapshot.KindTemplates {
			out.TemplatesPresent = true
		}
	}
	out.List = ins
	slices.SortFunc(out.List, func(a, b snapshot.Input) int { return strings.Compare(a.ID(), b.ID()) })
	return out
}

func goodState(ins ...snapshot.Input) *State {
	st := &State{}
	st.Accept(ins, inputs(ins...))
	return st
}

// chosen renders the selection as "id=text" for comparison.
func chosen(ins []snapshot.Input) string {
	var out []string
	for _, in := range ins {
		v := in.Text
		if in.Kind == snapshot.KindTemplates {
			v = in.Data["template"]
		}
		out = append(out, in.ID()+"="+v)
	}
	return strings.Join(out, " ")
}

func TestSelect(t *testing.T) {
	tests := []struct {
		name        string
		good        *State
		cur         snapshot.Inputs
		wantChosen  string
		wantChanged string
		wantHeld    string // id:kept
		blocked     bool
	}{
		{
			name: "nothing good yet: everything is a change", good: &State{},
			cur:        inputs(svc("web", "w1"), tmpl("t1")),
			wantChosen: "service/web=w1 templates=t1", wantChanged: "service/web templates",
		},
		{
			name: "unchanged inputs are no change", good: goodState(svc("web", "w1"), tmpl("t1")),
			cur:        inputs(svc("web", "w1"), tmpl("t1")),
			wantChosen: "service/web=w1 templates=t1",
		},
		{
			name: "a service that does not decode is held at its last good version", good: goodState(svc("web", "w1"), svc("api", "a1")),
			cur:        inputs(badSvc("web", "w2{"), svc("api", "a2")),
			wantChosen: "service/api=a2 service/web=w1", wantChanged: "service/api", wantHeld: "service/web:true",
		},
		{
			name: "a new service that does not decode is left out", good: goodState(svc("api", "a1")),
			cur:        inputs(badSvc("web", "{"), svc("api", "a1")),
			wantChosen: "service/api=a1", wantHeld: "service/web:false",
		},
		{
			name: "a deleted key is a change", good: goodState(svc("web", "w1"), svc("api", "a1")),
			cur:        inputs(svc("api", "a1")),
			wantChosen: "service/api=a1", wantChanged: "service/web",
		},
		{
			name: "a deleted services ConfigMap holds every service", good: goodState(svc("web", "w1"), svc("api", "a1"), tmpl("t1")),
			cur:        snapshot.Inputs{List: []snapshot.Input{tmpl("t1")}, TemplatesPresent: true},
			wantChosen: "service/api=a1 service/web=w1 templates=t1", wantHeld: "service/api:true service/web:true",
		},
		{
			name: "a deleted config ConfigMap holds the templates", good: goodState(svc("web", "w1"), tmpl("t1")),
			cur:        inputs(svc("web", "w1")),
			wantChosen: "service/web=w1 templates=t1", wantHeld: "templates:true",
		},
		{
			name: "no config ConfigMap ever: the built-in template", good: goodState(svc("web", "w1")),
			cur:        inputs(svc("web", "w1")),
			wantChosen: "service/web=w1",
		},
		{
			name: "a template set tried apart: the last good one is chosen meanwhile, the service change goes on",
			good: func() *State {
				st := goodState(svc("web", "w1"), tmpl("t1"))
				st.Trying = map[string]string{"templates": "h-t2"}
				return st
			}(),
			cur:        inputs(svc("web", "w2"), tmpl("t2")),
			wantChosen: "service/web=w2 templates=t1", wantChanged: "service/web",
		},
		{
			name: "another version than the one tried apart is a change",
			good: func() *State {
				st := goodState(svc("web", "w1"), tmpl("t1"))
				st.Trying = map[string]string{"templates": "h-t2"}
				return st
			}(),
			cur:        inputs(svc("web", "w1"), tmpl("t3")),
			wantChosen: "service/web=w1 templates=t3", wantChanged: "templates",
		},
		{
			name:       "never good: nothing to choose meanwhile, tried in the sync",
			good:       &State{Trying: map[string]string{"templates": "h-t2"}},
			cur:        inputs(svc("web", "w1"), tmpl("t2")),
			wantChosen: "service/web=w1 templates=t2", wantChanged: "service/web templates",
		},
		{
			name: "templates bad and never good: nothing can render", good: &State{},
			cur: func() snapshot.Inputs {
				bad := tmpl("")
				bad.Err = &snapshot.InputError{Stage: snapshot.StageDecode, Ref: bad.Ref, Err: errors.New("no key")}
				return inputs(svc("web", "w1"), bad)
			}(),
			wantChosen: "service/web=w1", wantChanged: "service/web", wantHeld: "templates:false", blocked: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := Select(tt.cur, tt.good)
			if got := chosen(sel.Chosen); got != tt.wantChosen {
				t.Errorf("chosen %q, want %q", got, tt.wantChosen)
			}
			if got := strings.Join(sel.Changed, " "); got != tt.wantChanged {
				t.Errorf("changed %q, want %q", got, tt.wantChanged)
			}
			var held []string
			for _, id := range slices.Sorted(maps.Keys(sel.Held)) {
				held = append(held, fmt.Sprintf("%s:%v", id, sel.Held[id].Kept))
				if sel.Held[id].Err == nil {
					t.Errorf("%s held without a reason", id)
				}
			}
			if got := strings.Join(held, " "); got != tt.wantHeld {
				t.Errorf("held %q, want %q", got, tt.wantHeld)
			}
			if (sel.Blocked != nil) != tt.blocked {
				t.Errorf("blocked %v, want %v", sel.Blocked, tt.blocked)
			}
		})
	}
}

// TestHeldUntilSomethingChanges: a version found bad is not tried again while neither it nor
// any other input changes (pods do not count), and is tried again when another input changes.
func TestHeldUntilSomethingChanges(t *testing.T) {
	st := goodState(svc("web", "w1"), tmpl("t1"))
	cur := inputs(svc("web", "w2"), tmpl("t1"))
	sel := Select(cur, st)
	if got := strings.Join(sel.Changed, " "); got != "service/web" {
		t.Fatalf("changed %q", got)
	}
	st.Held = sel.Blame(map[string]error{"service/web": errors.New("haproxy -c: bad")}, snapshot.StageValidate, cur)

	again := Select(cur, st)
	if len(again.Changed) != 0 || !again.Held["service/web"].Kept || chosen(again.Chosen) != "service/web=w1 templates=t1" {
		t.Fatalf("same inputs: changed %q, held %v, chosen %q", again.Changed, again.Held, chosen(again.Chosen))
	}
	st.Held = again.Held

	fixedTemplate := inputs(svc("web", "w2"), tmpl("t2"))
	retry := Select(fixedTemplate, st)
	if got := strings.Join(retry.Changed, " "); got != "service/web templates" {
		t.Fatalf("after another input changed: changed %q, want both tried", got)
	}
}

func TestHeldDeletionIsSticky(t *testing.T) {
	st := goodState(svc("web", "w1"), tmpl("t1"))
	cur := inputs(tmpl("t1"))
	sel := Select(cur, st)
	st.Held = sel.Blame(map[string]error{"service/web": errors.New("the template needs it")}, snapshot.StageRender, cur)
	if h := st.Held["service/web"]; !h.Kept || h.Ref.Key != "web" {
		t.Fatalf("hold %+v", h)
	}
	again := Select(cur, st)
	if len(again.Changed) != 0 || chosen(again.Chosen) != "service/web=w1 templates=t1" {
		t.Fatalf("changed %q, chosen %q", again.Changed, chosen(again.Chosen))
	}
}

func TestRevert(t *testing.T) {
	st := goodState(svc("web", "w1"))
	sel := Select(inputs(svc("web", "w2"), svc("api", "a1")), st)
	got := chosen(sel.Revert(map[string]bool{"service/web": true, "service/api": true}))
	if got != "service/web=w1" {
		t.Errorf("reverted %q: want web at its good version and api (never good) left out", got)
	}
}

func TestAccept(t *testing.T) {
	st := &State{}
	st.Accept([]snapshot.Input{svc("web", "w1"), badSvc("x", "{")}, inputs(svc("web", "w1")))
	if len(st.Good) != 1 || !st.ServicesPresent || st.TemplatesPresent {
		t.Errorf("state %+v", st)
	}
}

// TestAcceptKeepsUnchangedGood: a sync that makes live the last good inputs themselves (a pod
// edit's) keeps Good, the very same map, allocating nothing; a new version, an input gone, or
// the same text in other memory (a ConfigMap made again) makes a new map, the old one left as
// it was.
func TestAcceptKeepsUnchangedGood(t *testing.T) {
	live := []snapshot.Input{svc("api", "a1"), svc("web", "w1"), tmpl("t1"), badSvc("x", "{")}
	st := &State{}
	st.Accept(live, inputs(live...))
	first := st.Good
	same := func(a, b map[string]snapshot.Input) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	again := inputs(slices.Clone(live)...) // the same inputs, as a sync's Decode gives them again
	if n := allocs.PerRun(10, func() { st.Accept(again.List, again) }); n != 0 || !same(st.Good, first) {
		t.Errorf("the same inputs again: %d allocations, a new map %v; want none, the same map", n, !same(st.Good, first))
	}
	copied := slices.Clone(live)
	copied[1].Text = strings.Clone(copied[1].Text)
	changed := slices.Clone(live)
	changed[1] = svc("web", "w2")
	for name, next := range map[string][]snapshot.Input{
		"a new version":          changed,
		"an input gone":          live[1:],
		"a text in other memory": copied,
	} {
		st := &State{Good: first}
		st.Accept(next, inputs(next...))
		if same(st.Good, first) {
			t.Errorf("%s: Good is the same map", name)
		}
		if len(first) != 3 || first["service/web"].Text != "w1" {
			t.Errorf("%s: the last good map changed: %v", name, first)
		}
	}
}

// TestNewTemplatesAreNotSuspects: a template set that was never good cannot be reverted (the
// built-in template is no stand-in for the operator's): a failure with it is not blamed on it
// by reverting it.
func TestNewTemplatesAreNotSuspects(t *testing.T) {
	sel := Select(inputs(svc("web", "w1"), tmpl("t1")), &State{})
	if got := strings.Join(sel.Suspects(), " "); got != "service/web" {
		t.Errorf("suspects %q, want only the service", got)
	}
	sel = Select(inputs(svc("web", "w1"), tmpl("t2")), goodState(svc("web", "w1"), tmpl("t1")))
	if got := strings.Join(sel.Suspects(), " "); got != "templates" {
		t.Errorf("suspects %q, want the changed templates", got)
	}
}

// TestSaveLoad: the last good inputs survive a save and a load, content and presence.
func TestSaveLoad(t *testing.T) {
	st := goodState(svc("web", "w1"), svc("api", "a1"), tmpl("t1"))
	var b strings.Builder
	if err := st.Save(&b); err != nil {
		t.Fatal(err)
	}
	got, err := Load(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !got.ServicesPresent || !got.TemplatesPresent || len(got.Good) != 3 ||
		got.Good["service/web"].Text != "w1" || got.Good["templates"].Data["template"] != "t1" || got.Good["service/api"].Ref.Key != "api" {
		t.Errorf("loaded %+v", got)
	}
	if _, err := Load(strings.NewReader("not json")); err == nil {
		t.Error("garbage loaded")
	}
}

// TestBlameNamesWhatIsLeftOut: a culprit found while other inputs are held and left out says
// so: the configuration may fail for want of them (no wrong blame without a word).
func TestBlameNamesWhatIsLeftOut(t *testing.T) {
	st := &State{}
	cur := inputs(badSvc("web", "{"), svc("api", "a1"), tmpl("t1"))
	sel := Select(cur, st)
	h := sel.Blame(map[string]error{"service/api": errors.New("haproxy -c: unable to find required default_backend")}, snapshot.StageValidate, cur)["service/api"]
	for _, want := range []string{"default_backend", `left out meanwhile, held back themselves: ConfigMap lb/services key "web"`, "fix them first"} {
		if !strings.Contains(h.Reason(), want) {
			t.Errorf("%q does not say %q", h.Reason(), want)
		}
	}
	st = goodState(svc("web", "w1"), svc("api", "a1"), tmpl("t1"))
	cur = inputs(badSvc("web", "{"), svc("api", "a2"), tmpl("t1"))
	sel = Select(cur, st)
	if r := sel.Blame(map[string]error{"service/api": errors.New("bad")}, snapshot.StageValidate, cur)["service/api"].Reason(); strings.Contains(r, "left out") {
		t.Errorf("web is kept at its good version, not left out: %q", r)
	}
}

// TestSelectDeletedBesideAnInputTwice: an input given twice does not hide a deleted one (Select
// counts the good inputs it sees to find none deleted without a map of them).
func TestSelectDeletedBesideAnInputTwice(t *testing.T) {
	st := goodState(svc("api", "a1"), svc("web", "w1"))
	cur := snapshot.Inputs{ServicesPresent: true, List: []snapshot.Input{svc("api", "a1"), svc("api", "a1")}}
	if sel := Select(cur, st); !slices.Equal(sel.Changed, []string{"service/web"}) {
		t.Errorf("Changed %v, want the deleted service/web", sel.Changed)
	}
}

// TestSelectAllocatesLittle: when every input is chosen at its current version (a pod edit's
// sync), Chosen is the current inputs' list itself, not a copy (at 10,000 services 1.8 MB per
// Select, twice per sync); what Select allocates beside stays under a twentieth of a copy: no ID
// made a string, no map of the IDs seen, no sorted list of every good ID.
func TestSelectAllocatesLittle(t *testing.T) {
	const n = 2000
	ins := make([]snapshot.Input, n)
	for i := range ins {
		ins[i] = svc(fmt.Sprintf("svc-%05d", i), fmt.Sprintf(`{"n":%d}`, i))
	}
	cur := inputs(ins...)
	st := goodState(ins...)
	sel := Select(cur, st)
	if len(sel.Chosen) != n || unsafe.SliceData(sel.Chosen) != unsafe.SliceData(cur.List) {
		t.Fatalf("Chosen: %d inputs, the current list itself %v; want all %d, shared", len(sel.Chosen),
			unsafe.SliceData(sel.Chosen) == unsafe.SliceData(cur.List), n)
	}
	per := allocs.PerRun(5, func() { Select(cur, st) })
	list := uint64(n) * uint64(unsafe.Sizeof(snapshot.Input{}))
	if limit := list / 20; per > limit {
		t.Errorf("Select of %d inputs allocates %d bytes, want at most %d (a twentieth of a copy of them, %d)", n, per, limit, list)
	}
	t.Logf("Select of %d inputs: %d bytes (a copy of them: %d)", n, per, list)

	// Deleted inputs are changes, in ID order, whatever the order of the map.
	sel = Select(inputs(slices.Concat(ins[:5], ins[8:900], ins[901:1999])...), st)
	if want := []string{"service/svc-00005", "service/svc-00006", "service/svc-00007", "service/svc-00900", "service/svc-01999"}; !slices.Equal(sel.Changed, want) {
		t.Errorf("Changed %v, want %v", sel.Changed, want)
	}
}

// TestSelectSharesOnlyTheCurrentList: Chosen is the current list itself only when it holds
// every input at its current version, in its place; an input held (at its good version or
// left out), tried apart, or deleted and kept makes a list of its own. The current list and
// the good inputs are never written, and nothing appended to a shared Chosen lands in the
// current list's spare room (Decode leaves some).
func TestSelectSharesOnlyTheCurrentList(t *testing.T) {
	good := []snapshot.Input{svc("api", "a1"), svc("web", "w1"), tmpl("t1")}
	tests := []struct {
		name   string
		st     func() *State
		cur    []snapshot.Input
		want   string
		shared bool
	}{
		{"every input current", func() *State { return goodState(good...) },
			[]snapshot.Input{svc("api", "a1"), svc("web", "w2"), tmpl("t1")}, "service/api=a1 service/web=w2 templates=t1", true},
		{"a bad input kept at its good version", func() *State { return goodState(good...) },
			[]snapshot.Input{svc("api", "a1"), badSvc("web", "{"), tmpl("t1")}, "service/api=a1 service/web=w1 templates=t1", false},
		{"a bad input never good, left out", func() *State { return goodState(good...) },
			[]snapshot.Input{badSvc("aaa", "{"), svc("api", "a1"), svc("web", "w1"), tmpl("t1")}, "service/api=a1 service/web=w1 templates=t1", false},
		{"a template set tried apart", func() *State {
			st := goodState(good...)
			st.Trying = map[string]string{snapshot.KindTemplates: "h-t2"}
			return st
		}, []snapshot.Input{svc("api", "a1"), svc("web", "w1"), tmpl("t2")}, "service/api=a1 service/web=w1 templates=t1", false},
		{"the services ConfigMap deleted: kept", func() *State { return goodState(good...) },
			[]snapshot.Input{tmpl("t1")}, "service/api=a1 service/web=w1 templates=t1", false},
		{"a service deleted: a change, the rest shared", func() *State { return goodState(good...) },
			[]snapshot.Input{svc("api", "a1"), tmpl("t1")}, "service/api=a1 templates=t1", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st()
			cur := inputs(tc.cur...)
			cur.ServicesPresent = slices.ContainsFunc(tc.cur, func(in snapshot.Input) bool { return in.Kind == snapshot.KindService })
			cur.List = append(make([]snapshot.Input, 0, len(cur.List)+4), cur.List...) // spare room, as Decode's
			before, goodBefore := slices.Clone(cur.List), maps.Clone(st.Good)
			sel := Select(cur, st)
			if got := chosen(sel.Chosen); got != tc.want {
				t.Errorf("chosen %q, want %q", got, tc.want)
			}
			shared := unsafe.SliceData(sel.Chosen) == unsafe.SliceData(cur.List)
			if shared != tc.shared {
				t.Errorf("Chosen shares the current list: %v, want %v", shared, tc.shared)
			}
			_ = append(sel.Chosen, svc("zzz", "z"))
			if spare := cur.List[:cap(cur.List)]; slices.ContainsFunc(spare, func(in snapshot.Input) bool { return in.Name == "zzz" }) {
				t.Error("an append to Chosen wrote into the current list's spare room")
			}
			if !reflect.DeepEqual(cur.List, before) || !reflect.DeepEqual(st.Good, goodBefore) {
				t.Error("Select changed the current list or the good inputs")
			}
		})
	}
}
