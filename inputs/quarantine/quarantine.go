// Package quarantine holds bad operator inputs back one by one, so that one bad input never
// freezes the load balancer: each services key, the template set and each certificate is held
// at its last good version (or left out if it never was good) while every other change, pods
// above all, keeps going live.
//
// It is plain data and pure functions. Select chooses the version of each input to render from
// what the source has now and what was last good; Search finds, by bisection over the inputs
// that changed, which of them make the rendering or its validation fail; State.Accept records
// what went live. Rendering, validating and reporting are the caller's.
package quarantine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// Hold is one input held back.
type Hold struct {
	ID  string
	Ref snapshot.Ref // the object (and key) to report on
	// Hash is the version held back ("" when the input was deleted).
	Hash string
	// Stage is where it failed: decode, render, validate, reload.
	Stage string
	Err   error
	// Kept is true when the input's last good version is used in its place; false when it is
	// left out (it never was good).
	Kept bool
	// Basis identifies the other inputs a render, validate or reload failure was found with:
	// when they change, the held version is tried again (the operator may have fixed the
	// template rather than the service).
	Basis string
}

// Reason is the hold's reason, for reports.
func (h Hold) Reason() string {
	if h.Err == nil {
		return ""
	}
	return h.Err.Error()
}

// State is what the quarantine remembers between syncs. The zero value is a start with nothing
// good yet.
type State struct {
	// Good is the last good version of each input, by ID.
	Good map[string]snapshot.Input `json:"good"`
	// ServicesPresent and TemplatesPresent say whether the services ConfigMap and the
	// templates' object existed when inputs were last accepted: their disappearance is held.
	ServicesPresent  bool `json:"servicesPresent"`
	TemplatesPresent bool `json:"templatesPresent"`
	// Held are the inputs held back after the last sync, by ID.
	Held map[string]Hold `json:"-"`
	// Trying are versions (ID -> hash) being tried apart from the syncs (a changed template
	// set, whose first rendering may run for its whole budget): meanwhile Select chooses the
	// last good version in their place, neither changed nor held.
	Trying map[string]string `json:"-"`
}

// Selection is what to render this sync.
type Selection struct {
	// Chosen is the version of each input to render, sorted by ID. Read-only: it is the
	// current inputs' list itself when each is chosen at its current version.
	Chosen []snapshot.Input
	// Changed are the IDs whose chosen version is not the last good one (a new, changed or
	// deleted input): the only inputs a failure can be blamed on.
	Changed []string
	// Held are the inputs held before anything is rendered: those that do not decode, required
	// objects that disappeared, and versions already found bad with the same other inputs.
	Held map[string]Hold
	// Trying are the IDs whose current version is being tried apart (State.Trying): their last
	// good version is chosen meanwhile.
	Trying []string
	// Blocked, when set, is why nothing can be rendered: the template set has no usable
	// version (never good, and bad or missing now).
	Blocked *Hold

	good  map[string]snapshot.Input
	cur   []snapshot.Input
	basis map[string]string // ID -> Basis, for the inputs present now (computed when needed)
}

// Basis is the Basis a hold of input id would have now: the other inputs' versions.
func (s *Selection) Basis(id string) string { return s.basisOf(id) }

// basisOf is the Basis of input id ("": of a deleted input). The bases are computed once, and
// only when a hold needs them: with no hold, a sync does not hash every input.
func (s *Selection) basisOf(id string) string {
	if s.basis == nil {
		s.basis = bases(s.cur)
	}
	return s.basis[id]
}

// Select chooses the version of every input: the current one, unless it is bad, or deleted
// along with a required object, or already held with the same other inputs; then the last good
// one, or none.
func Select(cur snapshot.Inputs, st *State) Selection {
	// Chosen is cur's list itself, shared, while every input is chosen at its current version
	// in its place (a sync of pods alone): at 10,000 services, 184 bytes an input, a copy was
	// 1.8 MB per Select, twice per sync. The first input chosen otherwise makes it a list of
	// its own, made at its size once rather than grown by appends.
	sel := Selection{Held: map[string]Hold{}, good: st.Good, cur: cur.List}
	ch := chooser{cur: cur.List}
	keep := func(id string, h Hold) {
		ch.diverge()
		if g, ok := st.Good[id]; ok {
			h.Kept = true
			ch.add(g)
		}
		sel.Held[id] = h
	}
	// The IDs are looked up as bytes and made strings only for what Select keeps: 10,000 of
	// them, and a map of those seen, were 0.5 MB per Select, twice per sync.
	var buf, lastBuf [128]byte
	key, last := buf[:0], lastBuf[:0]
	sorted, goodSeen := true, 0
	for i, in := range cur.List {
		key = appendID(key[:0], in)
		sorted = sorted && (len(last) == 0 || string(last) < string(key))
		last = append(last[:0], key...)
		good, wasGood := st.Good[string(key)]
		if wasGood {
			goodSeen++
		}
		prev, wasHeld := st.Held[string(key)]
		switch {
		case in.Err != nil:
			keep(in.ID(), Hold{ID: in.ID(), Ref: in.Err.Ref, Hash: in.Hash, Stage: in.Err.Stage, Err: in.Err})
		case wasHeld && prev.Hash == in.Hash && prev.Basis != "" && prev.Basis == sel.basisOf(in.ID()):
			keep(in.ID(), prev)
		case wasGood && st.Trying[string(key)] == in.Hash && good.Hash != in.Hash:
			ch.diverge()
			ch.add(good)
			sel.Trying = append(sel.Trying, in.ID())
		default:
			ch.current(i)
			if !wasGood || good.Hash != in.Hash {
				sel.Changed = append(sel.Changed, in.ID())
			}
		}
	}
	// Every good input seen, each once (the IDs sorted, none twice): none was deleted.
	var seen map[string]bool
	if !sorted || goodSeen != len(st.Good) {
		seen = make(map[string]bool, len(cur.List))
		for _, in := range cur.List {
			seen[in.ID()] = true
		}
	}
	for _, id := range deleted(st.Good, seen) {
		g := st.Good[id]
		switch {
		case g.Kind == snapshot.KindTemplates && st.TemplatesPresent && !cur.TemplatesPresent:
			keep(id, Hold{ID: id, Ref: g.Ref, Stage: snapshot.StageDecode,
				Err: &snapshot.InputError{Stage: snapshot.StageDecode, Ref: g.Ref,
					Err: errors.New("deleted: the templates are held at their last good version (the built-in template is used only when the object never existed)")}})
		case g.Kind == snapshot.KindService && st.ServicesPresent && !cur.ServicesPresent:
			obj := g.Ref
			obj.Key = ""
			keep(id, Hold{ID: id, Ref: g.Ref, Stage: snapshot.StageDecode,
				Err: &snapshot.InputError{Stage: snapshot.StageDecode, Ref: obj,
					Err: errors.New("deleted: every service is held at its last good version; to remove a service, delete its key, not the ConfigMap")}})
		case st.Held[id].Hash == "" && st.Held[id].Basis != "" && st.Held[id].Basis == sel.basisOf(""):
			keep(id, st.Held[id]) // its deletion was found bad with the same other inputs
		default:
			sel.Changed = append(sel.Changed, id) // deleted: a change like any other
		}
	}
	if !sorted {
		ch.diverge()
	}
	sel.Chosen = ch.list()
	if ch.own != nil {
		slices.SortFunc(sel.Chosen, func(a, b snapshot.Input) int { return cmpString(a.ID(), b.ID()) })
	}
	slices.Sort(sel.Changed)
	if h, held := sel.Held[snapshot.KindTemplates]; held && !h.Kept {
		sel.Blocked = &h
	}
	return sel
}

// chooser makes Selection.Chosen: a prefix of cur shared as it is, until an input is chosen
// at another version (or left out, or added): then a list of its own.
type chooser struct {
	cur []snapshot.Input
	n   int              // cur[:n] are chosen as they are (while own is nil)
	own []snapshot.Input // nil until diverge
}

// current chooses cur[i] at its current version.
func (c *chooser) current(i int) {
	if c.own == nil && i == c.n {
		c.n++
		return
	}
	c.add(c.cur[i])
}

// diverge makes the choice a list of its own: what comes next is not cur's next input.
func (c *chooser) diverge() {
	if c.own == nil {
		c.own = append(make([]snapshot.Input, 0, len(c.cur)), c.cur[:c.n]...)
	}
}

// add chooses in, after diverge.
func (c *chooser) add(in snapshot.Input) {
	c.diverge()
	c.own = append(c.own, in)
}

// list is what was chosen: cur's prefix itself, its capacity cut so that nothing appended to
// it can write into cur, or the list of its own.
func (c *chooser) list() []snapshot.Input {
	if c.own == nil {
		return c.cur[:c.n:c.n]
	}
	return c.own
}

// deleted are the IDs of good that were not seen, sorted: only those are sorted, not all of
// good (10,000 IDs at 10,000 services, 1.3 MB allocated twice per sync to find none). None
// when seen is nil.
func deleted(good map[string]snapshot.Input, seen map[string]bool) []string {
	if seen == nil {
		return nil
	}
	var ids []string
	for id := range good {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Suspects are the changed inputs a failure may be blamed on: all of Changed but the template
// set when it has no last good version (there is nothing to put in its place: the built-in
// template is for installations without a template object, not a stand-in for a broken one).
func (s Selection) Suspects() []string {
	out := make([]string, 0, len(s.Changed))
	for _, id := range s.Changed {
		if _, good := s.good[id]; id == snapshot.KindTemplates && !good {
			continue
		}
		out = append(out, id)
	}
	return out
}

// Revert returns the chosen versions with the inputs of ids at their last good version (or
// left out when they never were good).
func (s Selection) Revert(ids map[string]bool) []snapshot.Input {
	if len(ids) == 0 {
		return s.Chosen
	}
	out := make([]snapshot.Input, 0, len(s.Chosen))
	for _, in := range s.Chosen {
		if !ids[in.ID()] {
			out = append(out, in)
		}
	}
	for id := range ids {
		if g, ok := s.good[id]; ok {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b snapshot.Input) int { return cmpString(a.ID(), b.ID()) })
	return out
}

// Blame makes a hold of each culprit found by Search (or by a refused reload), at stage, with
// the basis it was found on.
func (s *Selection) Blame(culprits map[string]error, stage string, cur snapshot.Inputs) map[string]Hold {
	out := make(map[string]Hold, len(culprits))
	byID := make(map[string]snapshot.Input, len(culprits))
	for _, in := range cur.List {
		if _, ok := culprits[in.ID()]; ok {
			byID[in.ID()] = in
		}
	}
	for id, err := range culprits {
		in, present := byID[id]
		ref := in.Ref
		if !present {
			ref = s.good[id].Ref
		}
		var ie *snapshot.InputError
		st := stage
		if errors.As(err, &ie) && ie.Stage != "" {
			st = ie.Stage
		}
		_, kept := s.good[id]
		basis := s.basisOf(id)
		if !present {
			basis = s.basisOf("")
		}
		out[id] = Hold{ID: id, Ref: ref, Hash: in.Hash, Stage: st, Err: s.leftOutNote(blamed(ref, err)), Kept: kept, Basis: basis}
	}
	return out
}

// leftOutNote adds to a culprit's reason the inputs left out at the same time (held, never
// good): the configuration may fail for want of them (a default_backend of a service that
// does not decode), and the operator fixes those first. The culprit is tried again once they
// change (its Basis).
func (s *Selection) leftOutNote(err error) error {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(s.Held)) {
		if h := s.Held[id]; !h.Kept {
			out = append(out, h.Ref.String())
		}
	}
	if len(out) == 0 {
		return err
	}
	if len(out) > 3 {
		out = append(out[:3], fmt.Sprintf("%d more", len(out)-3))
	}
	return fmt.Errorf("%w (left out meanwhile, held back themselves: %s; the configuration may fail for want of them: fix them first)", err, strings.Join(out, ", "))
}

// blamed phrases a failure found by trying the input: the failure names where it showed
// (a template line, haproxy -c's complaint), this names the input it is held for.
func blamed(ref snapshot.Ref, err error) error {
	var ie *snapshot.InputError
	if errors.As(err, &ie) && ie.Ref == ref {
		return err
	}
	return fmt.Errorf("%s is held back: with it the configuration fails: %w", ref, err)
}

// Accept records the versions that went live as the last good ones, and whether the required
// objects were present. Good is a new map when they changed, never the old one changed; when
// they are the last good ones themselves (a sync of pods alone), it stays the very same map:
// 10,000 services made no copy of 2.3 MB at each sync (issue 25).
func (st *State) Accept(live []snapshot.Input, cur snapshot.Inputs) {
	if !sameGood(st.Good, live) {
		good := make(map[string]snapshot.Input, len(live))
		for _, in := range live {
			if in.Err == nil {
				good[in.ID()] = in
			}
		}
		st.Good = good
	}
	st.ServicesPresent = cur.ServicesPresent || (st.ServicesPresent && hasKind(live, snapshot.KindService))
	st.TemplatesPresent = cur.TemplatesPresent || (st.TemplatesPresent && hasKind(live, snapshot.KindTemplates))
}

// appendID appends in.ID() to b.
func appendID(b []byte, in snapshot.Input) []byte {
	b = append(b, in.Kind...)
	if in.Name != "" {
		b = append(append(b, '/'), in.Name...)
	}
	return b
}

// sameGood reports whether good holds the inputs of live without an Err, and only those, each
// the same version with its content in the same memory: kept, good holds no older copy of
// what the sync's inputs hold (a ConfigMap made again with the same texts).
func sameGood(good map[string]snapshot.Input, live []snapshot.Input) bool {
	if good == nil {
		return false
	}
	n := 0
	var buf [128]byte
	id := buf[:0] // in.ID() without making a string of each
	for _, in := range live {
		if in.Err != nil {
			continue
		}
		n++
		id = appendID(id[:0], in)
		g, ok := good[string(id)]
		if !ok || !sameInput(g, in) {
			return false
		}
	}
	return n == len(good)
}

// sameInput reports whether a and b are one version of one input, their content in the same
// memory.
func sameInput(a, b snapshot.Input) bool {
	if a.Kind != b.Kind || a.Name != b.Name || a.Ref != b.Ref || a.Hash != b.Hash || a.Err != b.Err ||
		!sameString(a.Text, b.Text) || len(a.PEM) != len(b.PEM) || len(a.Data) != len(b.Data) {
		return false
	}
	if len(a.PEM) > 0 && unsafe.SliceData(a.PEM) != unsafe.SliceData(b.PEM) {
		return false
	}
	for k, v := range a.Data {
		if w, ok := b.Data[k]; !ok || !sameString(v, w) {
			return false
		}
	}
	return true
}

// sameString reports whether a and b are the same bytes in memory.
func sameString(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b))
}

func hasKind(ins []snapshot.Input, kind string) bool {
	for _, in := range ins {
		if in.Kind == kind {
			return true
		}
	}
	return false
}

// bases gives each input the fingerprint of all the other inputs (IDs and versions), and ""
// the fingerprint of them all (the basis of a deleted input): an XOR of per-input hashes, so
// that leaving one out costs nothing.
func bases(ins []snapshot.Input) map[string]string {
	sums := make([][32]byte, len(ins))
	var total [32]byte
	for i, in := range ins {
		h := sha256.New()
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(in.ID())))
		h.Write(n[:])
		h.Write([]byte(in.ID()))
		h.Write([]byte(in.Hash))
		copy(sums[i][:], h.Sum(nil))
		for j := range total {
			total[j] ^= sums[i][j]
		}
	}
	out := make(map[string]string, len(ins))
	for i, in := range ins {
		var b [32]byte
		for j := range b {
			b[j] = total[j] ^ sums[i][j]
		}
		out[in.ID()] = hex.EncodeToString(b[:8])
	}
	out[""] = hex.EncodeToString(total[:8])
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// stateHeader is the first line of a saved State.
type stateHeader struct {
	ServicesPresent  bool `json:"servicesPresent"`
	TemplatesPresent bool `json:"templatesPresent"`
	Inputs           int  `json:"inputs"`
}

// StateFile is the name of the file in the state directory that keeps the last good inputs
// (State.Save), for a restarted sidecar and for diff --live.
const StateFile = "inputs.json"

// Save writes the state's last good inputs as JSON lines (a header, then one input a
// line, in ID order), one small encoding at a time: 10,000 services are never one buffer.
func (st *State) Save(w io.Writer) error {
	enc := json.NewEncoder(w)
	if err := enc.Encode(stateHeader{st.ServicesPresent, st.TemplatesPresent, len(st.Good)}); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(st.Good)) {
		g := st.Good[id]
		if err := enc.Encode(&g); err != nil {
			return err
		}
	}
	return nil
}

// Load reads what Save wrote.
func Load(r io.Reader) (State, error) {
	dec := json.NewDecoder(r)
	var h stateHeader
	if err := dec.Decode(&h); err != nil {
		return State{}, fmt.Errorf("read the last good inputs: %w", err)
	}
	st := State{ServicesPresent: h.ServicesPresent, TemplatesPresent: h.TemplatesPresent, Good: make(map[string]snapshot.Input, h.Inputs)}
	for dec.More() {
		var in snapshot.Input
		if err := dec.Decode(&in); err != nil {
			return State{}, fmt.Errorf("read the last good inputs: %w", err)
		}
		st.Good[in.ID()] = in
	}
	return st, nil
}
