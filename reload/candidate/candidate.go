// Package candidate makes what a sync may make live: the operator inputs read out of the
// objects, the bad ones held back one by one (package quarantine), the rest rendered, staged as
// a generation and validated with haproxy -c. `run` goes on to decide and act on the
// candidate; `render`, `validate` and `diff` go through the very same steps and stop there.
package candidate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/tracing"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
)

// Inputs reads the operator inputs out of what a source has seen and assembles a snapshot from
// chosen versions of them (see snapshot.Builder).
type Inputs interface {
	Decode(objs *snapshot.Objects) snapshot.Inputs
	Assemble(objs *snapshot.Objects, chosen []snapshot.Input) (*snapshot.Snapshot, error)
}

// Renderer turns a snapshot into files.
type Renderer interface {
	Render(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error)
}

// Checker validates a configuration file (haproxy -c).
type Checker interface {
	Check(ctx context.Context, cfgPath string) error
}

// Config are what a Builder needs.
type Config struct {
	Inputs   Inputs
	Renderer Renderer
	Checker  Checker // nil: no validation
	Store    *generation.Store
	// Exclusive, held while a candidate is staged, keeps anything else from staging,
	// activating or pruning generations (the background writer's lock); nil: none.
	Exclusive sync.Locker
	// Trials bounds the renderings one search for bad inputs may try; 0:
	// quarantine.DefaultTrials.
	Trials int
	// RenderDuration and ValidateDuration receive how long each rendering and each
	// haproxy -c took, in seconds (nil: nothing).
	RenderDuration, ValidateDuration prometheus.Observer
	// Manifests reads the objects of a test of the templates (watcher.DecodeManifests); nil:
	// tests that give objects fail.
	Manifests func(name string, data []byte) (*snapshot.Objects, error)
	// Tried, when set, has a changed template set rendered first apart from the syncs (see
	// trial.go), and is called when that rendering ends (hash of the set, time taken, error):
	// the caller syncs again. nil: changed template sets are rendered in the sync.
	Tried func(hash string, took time.Duration, err error)
	// CheckAfter leaves an operator's change that renders (a services key, a certificate;
	// not the template set) unvalidated, as pod changes are: when the runtime API can make it,
	// it goes live at once and haproxy -c checks it right after (the background writer), and
	// a rejection is searched for and held at the next sync. false: it is validated before
	// anything goes live.
	CheckAfter bool
}

// Builder makes candidates. It remembers the cluster objects it left out, and the objects of
// the last candidate that went live (Accept), to tell which objects changed since.
type Builder struct {
	cfg Config
	// validateNext is set when a rendering that skipped validation in Make was rejected
	// later (before a reload, or by the background writer): the next Make validates, and
	// searches for the data at fault.
	validateNext atomic.Bool

	// Only the goroutine that runs Make and Accept touches these.
	good   *snapshot.Objects     // the objects the last accepted candidate was rendered from
	held   map[string]heldObject // cluster objects left out (or at their last good version)
	tested string                // the version (hash) of the template set whose tests passed last
	trial  *trial                // the template set being tried apart (trial.go)
}

// heldObject is a cluster object held back, as long as it stays the version that failed.
type heldObject struct {
	obj  snapshot.ClusterObject
	hold quarantine.Hold
}

// New returns a Builder.
func New(cfg Config) *Builder {
	if cfg.Trials <= 0 {
		cfg.Trials = quarantine.DefaultTrials
	}
	if cfg.Exclusive == nil {
		cfg.Exclusive = noLock{}
	}
	if cfg.RenderDuration == nil {
		cfg.RenderDuration = discard{}
	}
	if cfg.ValidateDuration == nil {
		cfg.ValidateDuration = discard{}
	}
	return &Builder{cfg: cfg, held: map[string]heldObject{}}
}

// noLock is the Exclusive lock when nothing else writes generations.
type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}

// discard is an Observer that keeps nothing.
type discard struct{}

func (discard) Observe(float64) {}

// Candidate is a rendering a sync may make live.
type Candidate struct {
	Bundle *render.Bundle
	// Gen is the rendering staged and validated; nil when it was not validated yet (a change
	// of pods only, which the runtime API makes live before the writer validates it).
	Gen  *generation.Generation
	Info snapshot.Summary
	// Chosen are the input versions it was rendered from (read-only: it may be the list of
	// the inputs Decode read).
	Chosen []snapshot.Input
	// Dropped are the pods and watched objects left out because the template could not
	// print their data.
	Dropped []quarantine.Hold
	// Tests are the outcomes of the template set's tests, when they ran (they run when the
	// template set is one they did not pass with yet).
	Tests []TestResult
	// Warnings are what haproxy -c warned about in the staged rendering (it accepted it).
	Warnings []string
	// Unchecked is set when operator inputs changed and were not validated (Config.CheckAfter):
	// they become the last good ones only once HAProxy runs the rendering validated.
	Unchecked bool
	// objs are the objects it was rendered from.
	objs *snapshot.Objects
	// origin says where the templates wrote a line of its configuration (Builder.originOf);
	// nil when that cannot be told.
	origin func(ctx context.Context, line int) string
}

// Origins are where the objects it was rendered from are written, when read from files (nil
// otherwise): for errors found after it was made (a reload HAProxy refused).
func (c *Candidate) Origins() snapshot.Origins {
	if c.objs == nil {
		return nil
	}
	return c.objs.Origins
}

// Made is what Make made of the objects.
type Made struct {
	// Candidate is the rendering; nil when none could be made (Err says why).
	Candidate *Candidate
	// Current are the inputs read; Selection which version of each was chosen.
	Current   snapshot.Inputs
	Selection quarantine.Selection
	// Held are the inputs held back: by the quarantine, found at fault now, or left out
	// because the template cannot print their data.
	Held map[string]quarantine.Hold
	// Err is why no candidate could be made: a *snapshot.InputError (bad input that no single
	// input is held for) or a *failure.Error (operational).
	Err error
}

// maxDropped bounds the pods and watched objects one rendering leaves out before it gives up.
const maxDropped = 16

// Decode reads the operator inputs out of objs.
func (b *Builder) Decode(objs *snapshot.Objects) snapshot.Inputs { return b.cfg.Inputs.Decode(objs) }

// Make renders what the quarantine state q chooses of the operator inputs cur (Decode) read
// out of objs. When something an operator edits changed (or validate is set, or ValidateNext
// was called), the rendering is staged and validated, and the changed inputs at
// fault are found and held; otherwise (pods only) validation comes later (Validated). When the
// rendering fails and no operator input is at fault, the cluster objects at fault (pods,
// EndpointSlices, watched objects) are found among those changed since the last accepted
// candidate and left out (Objects.Revert): one pod nobody edits never freezes the rest. unread
// are the objects the source could not read and kept at their last good version (SourceHolds).
// Errors about objects read from files start with where they are written (FILE:LINE:COL).
func (b *Builder) Make(ctx context.Context, objs *snapshot.Objects, cur snapshot.Inputs, q *quarantine.State, unread map[string]quarantine.Hold, validate bool) Made {
	m := b.make(ctx, objs, cur, q, unread, validate)
	for id, h := range m.Held {
		h.Err = objs.Origins.LocateAt(h.Ref, h.Err)
		m.Held[id] = h
	}
	m.Err = objs.Origins.Locate(m.Err)
	return m
}

func (b *Builder) make(ctx context.Context, objs *snapshot.Objects, cur snapshot.Inputs, q *quarantine.State, unread map[string]quarantine.Hold, validate bool) Made {
	sel := b.tryApart(objs, cur, q)
	m := Made{Current: cur, Selection: sel, Held: maps.Clone(sel.Held)}
	maps.Copy(m.Held, unread)
	if sel.Blocked != nil {
		m.Err = sel.Blocked.Err
		return m
	}
	objs = b.withoutHeld(objs, m.Held)
	way := b.wayOf(sel, b.validateNext.Swap(false) || validate)
	if way == checkedAfter {
		// An operator's change, checked after the runtime API made it live (CheckAfter);
		// one that does not render is searched for now, as below.
		if c, err := b.try(ctx, objs, sel.Chosen, false); err == nil {
			c.Unchecked = true
			m.Candidate = c
			return b.withDropped(m)
		}
	}
	if way != renderOnly {
		// Something an operator edits changed: render and validate, and find what is at
		// fault if that fails.
		var culprits map[string]error
		m.Candidate, culprits, m.Err = quarantine.Search(sel.Suspects(), func(revert map[string]bool) (*Candidate, error) {
			return b.try(ctx, objs, sel.Revert(revert), true)
		}, blame(cur), b.cfg.Trials)
		if m.Err == nil {
			maps.Copy(m.Held, sel.Blame(culprits, snapshot.StageValidate, cur))
		}
	} else {
		// Pods only (or nothing): render; validation comes before a reload, or after a
		// runtime API change (the writer).
		m.Candidate, m.Err = b.try(ctx, objs, sel.Chosen, false)
	}
	if IsRejected(m.Err) {
		if c, holds, ok := b.searchCluster(ctx, objs, sel.Chosen); ok {
			m.Candidate, m.Err = c, nil
			maps.Copy(m.Held, holds)
		}
	}
	if h, ok := newTemplatesAtFault(sel, cur, m.Err); ok {
		m.Held[h.ID] = h
	}
	return b.withDropped(m)
}

// way is how Make makes its candidate.
type way int

const (
	renderOnly    way = iota // pods only (or nothing an operator edits): rendered, validated later
	checkedAfter             // an operator's change rendered, validated after it went live (CheckAfter)
	validateFirst            // rendered and validated, the inputs at fault searched for
)

// wayOf is the way of a selection; validate: a validation is asked for (ValidateNext, or
// Make's validate).
func (b *Builder) wayOf(sel quarantine.Selection, validate bool) way {
	switch {
	case validate:
		return validateFirst
	case len(sel.Changed) == 0:
		return renderOnly
	case b.checkAfter(sel):
		return checkedAfter
	default:
		return validateFirst
	}
}

// MakeAhead is Make for a rendering made ahead of its sync (during the quiet period of
// --wait), when that is Make's plain way: nothing to validate first (no operator input changed
// that must be checked before it goes live, no ValidateNext, validate false), no template set
// tried apart, no cluster object held back, and a rendering that succeeds. ok is false
// otherwise, having changed nothing: the sync then makes it with Make, as always. The caller
// gives a copy of the quarantine state and uses the result only when nothing changed since
// (see WillValidate).
func (b *Builder) MakeAhead(ctx context.Context, objs *snapshot.Objects, cur snapshot.Inputs, q *quarantine.State) (Made, bool) {
	if b.validateNext.Load() || len(b.held) > 0 || b.trial != nil {
		return Made{}, false
	}
	sel := quarantine.Select(cur, q)
	if sel.Blocked != nil || len(sel.Held) > 0 {
		return Made{}, false
	}
	if b.cfg.Tried != nil && triedApart(sel, q) != nil {
		return Made{}, false // a template set to try apart first
	}
	way := b.wayOf(sel, false)
	if way == validateFirst {
		return Made{}, false
	}
	c, err := b.try(ctx, objs, sel.Chosen, false)
	if err != nil || len(c.Dropped) > 0 {
		return Made{}, false
	}
	c.Unchecked = way == checkedAfter
	return Made{Candidate: c, Current: cur, Selection: sel, Held: map[string]quarantine.Hold{}}, true
}

// WillValidate says whether the next Make validates what it renders (ValidateNext was
// called): a rendering made ahead is not used then.
func (b *Builder) WillValidate() bool { return b.validateNext.Load() }

// newTemplatesAtFault is the hold of a template set that never was good and that the failure
// of the rendering names (its template, or one of its tests): with nothing to put in its place
// it is not one of the changes a search tries without, yet it is what is held.
func newTemplatesAtFault(sel quarantine.Selection, cur snapshot.Inputs, err error) (quarantine.Hold, bool) {
	var ie *snapshot.InputError
	if !errors.As(err, &ie) || !slices.Contains(sel.Changed, snapshot.KindTemplates) || slices.Contains(sel.Suspects(), snapshot.KindTemplates) {
		return quarantine.Hold{}, false
	}
	for _, in := range cur.List {
		if in.Kind != snapshot.KindTemplates {
			continue
		}
		r := ie.Ref
		r.Key = ""
		if r != in.Ref {
			return quarantine.Hold{}, false
		}
		return quarantine.Hold{ID: in.ID(), Ref: ie.Ref, Stage: stageOf(err), Err: err}, true
	}
	return quarantine.Hold{}, false
}

// checkAfter says whether the changes of sel may be validated after they go live: with
// CheckAfter, when the template set is not among them (its tests and its first rendering are
// checked before it goes live).
func (b *Builder) checkAfter(sel quarantine.Selection) bool {
	return b.cfg.CheckAfter && !slices.Contains(sel.Changed, snapshot.KindTemplates)
}

// withDropped holds the pods and watched objects the candidate was rendered without.
func (b *Builder) withDropped(m Made) Made {
	if m.Candidate != nil {
		for _, h := range m.Candidate.Dropped {
			m.Held[h.ID] = h
		}
	}
	return m
}

// withoutHeld leaves out the cluster objects held back that are still the version that failed
// (a new version is tried again), adding their holds to held.
func (b *Builder) withoutHeld(objs *snapshot.Objects, held map[string]quarantine.Hold) *snapshot.Objects {
	if len(b.held) == 0 {
		return objs
	}
	now := map[string]snapshot.ClusterObject{}
	for _, c := range objs.ClusterObjects() {
		now[c.ID()] = c
	}
	drop := map[string]bool{}
	for id, h := range b.held {
		if c, ok := now[id]; ok && c == h.obj {
			drop[id] = true
			held[id] = h.hold
		} else {
			delete(b.held, id)
		}
	}
	out, _ := objs.Revert(drop, b.good)
	return out
}

// searchCluster finds the cluster objects that make the rendering fail among those changed
// since the last accepted candidate (all of them before one was), and holds them: the
// candidate without them, and their holds. ok is false when leaving them all out does not help
// either (the fault is not theirs).
func (b *Builder) searchCluster(ctx context.Context, objs *snapshot.Objects, chosen []snapshot.Input) (*Candidate, map[string]quarantine.Hold, bool) {
	suspects := objs.ChangedSince(b.good)
	if len(suspects) == 0 {
		return nil, nil, false
	}
	byID := make(map[string]snapshot.ClusterObject, len(suspects))
	ids := make([]string, len(suspects))
	for i, c := range suspects {
		ids[i] = c.ID()
		byID[ids[i]] = c
	}
	// Enough trials to isolate one culprit among them all, as the operator inputs' search
	// would among a few.
	trials := b.cfg.Trials + 2*bits.Len(uint(len(ids)))
	c, culprits, err := quarantine.Search(ids, func(revert map[string]bool) (*Candidate, error) {
		reverted, _ := objs.Revert(revert, b.good)
		return b.try(ctx, reverted, chosen, true)
	}, blameObject(byID), trials)
	if err != nil || c == nil {
		return nil, nil, false
	}
	drop := map[string]bool{}
	for id := range culprits {
		drop[id] = true
	}
	_, kept := objs.Revert(drop, b.good)
	holds := map[string]quarantine.Hold{}
	for id, cerr := range culprits {
		h := quarantine.Hold{ID: id, Ref: byID[id].Ref, Stage: stageOf(cerr), Kept: kept[id],
			Err: fmt.Errorf("%s is left out: with it the configuration fails: %w", byID[id].Ref, cerr)}
		if kept[id] {
			h.Err = fmt.Errorf("%s is held at its last good version: with this version the configuration fails: %w", byID[id].Ref, cerr)
		}
		holds[id] = h
		b.held[id] = heldObject{obj: byID[id], hold: h}
	}
	return c, holds, true
}

// blameObject names the cluster object a rendering failure points at without doubt (a value
// of it the template cannot print).
func blameObject(byID map[string]snapshot.ClusterObject) func(error) string {
	return func(err error) string {
		var ie *snapshot.InputError
		if errors.As(err, &ie) {
			if id := snapshot.ObjectID(ie.Ref); byID[id].Ref == ie.Ref {
				return id
			}
		}
		return ""
	}
}

// stageOf is the stage an input error happened at (validate when it says none).
func stageOf(err error) string {
	var ie *snapshot.InputError
	if errors.As(err, &ie) && ie.Stage != "" {
		return ie.Stage
	}
	return snapshot.StageValidate
}

// AssumeTested says the template set with this hash passed its tests (the running sidecar's
// good one): they run again only for another.
func (b *Builder) AssumeTested(hash string) { b.tested = hash }

// ValidateNext makes the next Make validate what it renders: a rendering that skipped
// validation was rejected since (the data at fault is searched for then).
func (b *Builder) ValidateNext() { b.validateNext.Store(true) }

// Accept records that c went live (or is what HAProxy runs): the cluster objects it was
// rendered from are the ones later changes are compared with.
func (b *Builder) Accept(c *Candidate) {
	if c == nil {
		return
	}
	if c.objs != nil {
		b.good = c.objs
	}
	if tmpl := templatesOf(c.Chosen); tmpl != nil {
		b.tested = tmpl.Hash
	}
}

// try assembles the snapshot from chosen and renders it; with validate, it also stages the
// rendering and runs haproxy -c on it. Bad input is a *snapshot.InputError; anything else is
// a *failure.Error.
func (b *Builder) try(ctx context.Context, objs *snapshot.Objects, chosen []snapshot.Input, validate bool) (*Candidate, error) {
	var (
		snap    *snapshot.Snapshot
		bundle  *render.Bundle
		dropped []quarantine.Hold
		err     error
	)
	for {
		start := time.Now()
		if snap, err = b.cfg.Inputs.Assemble(objs, chosen); err != nil {
			return nil, inputErr(snapshot.StageDecode, err)
		}
		rctx, span := tracing.Start(ctx, "render", attribute.Int("render.services", len(snap.Services)))
		bundle, err = b.cfg.Renderer.Render(rctx, snap)
		tracing.End(span, err)
		if ctx.Err() != nil {
			// Cut short (a rendering ahead made stale, the sidecar stopping): not a render's time.
			return nil, &failure.Error{Stage: failure.Read, Err: fmt.Errorf("render: %w", ctx.Err())}
		}
		b.cfg.RenderDuration.Observe(time.Since(start).Seconds())
		if err == nil {
			break
		}
		// A pod or watched object whose data the template cannot print (an annotation
		// holding a newline) is left out; they are not held back, the others go live.
		var ie *snapshot.InputError
		if !errors.As(err, &ie) || len(dropped) >= maxDropped {
			return nil, inputErr(snapshot.StageRender, err)
		}
		without, ok := objs.Without(ie.Ref)
		if !ok {
			return nil, inputErr(snapshot.StageRender, err)
		}
		objs = without
		dropped = append(dropped, quarantine.Hold{ID: strings.ToLower(ie.Ref.Kind) + "/" + ie.Ref.Namespace + "/" + ie.Ref.Name,
			Ref: ie.Ref, Stage: snapshot.StageRender, Err: err})
	}
	c := &Candidate{Bundle: bundle, Info: snap.Summary(objs.Revision), Chosen: chosen, Dropped: dropped, objs: objs,
		origin: b.originOf(objs, chosen)}
	if !validate {
		return c, nil
	}
	if err := b.Validated(ctx, c); err != nil {
		return nil, err
	}
	if tmpl := templatesOf(chosen); tmpl != nil && tmpl.Hash != b.tested {
		var err error
		if c.Tests, err = b.runTests(ctx, objs, chosen); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// SourceHolds are the holds of what a source could not read and kept at its last good version
// (a file, in file mode), one per object the source's error names.
func SourceHolds(err error) map[string]quarantine.Hold {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := map[string]quarantine.Hold{}
	for _, e := range errs {
		var ie *snapshot.InputError
		if !errors.As(e, &ie) {
			continue
		}
		id := "file/" + ie.Ref.Name
		if ie.Ref.Kind != "File" {
			id = strings.ToLower(ie.Ref.Kind) + "/" + ie.Ref.Namespace + "/" + ie.Ref.Name
		}
		if ie.Ref.Key != "" {
			id += "/" + ie.Ref.Key // one hold per key (a services key whose pods cannot be read)
		}
		h := quarantine.Hold{ID: id, Ref: ie.Ref, Stage: snapshot.StageDecode, Kept: true, Err: e}
		if ie.Ref.Kind == "File" {
			h.Err = fmt.Errorf("%w (its last good objects stand in for it, if it ever was good)", e)
		}
		out[id] = h
	}
	return out
}

// inputErr makes err an InputError at stage if it is not one already.
func inputErr(stage string, err error) error {
	var ie *snapshot.InputError
	if errors.As(err, &ie) {
		return err
	}
	return &snapshot.InputError{Stage: stage, Err: err}
}

// blame names the changed input a rendering failure points at without doubt: a value printed
// from a services key or a certificate (the template is not named this way: an error shown
// in the template may come from the data it reads).
func blame(cur snapshot.Inputs) func(error) string {
	byRef := map[snapshot.Ref]string{}
	for _, in := range cur.List {
		if in.Kind != snapshot.KindTemplates {
			byRef[in.Ref] = in.ID()
		}
	}
	return func(err error) string {
		var ie *snapshot.InputError
		if errors.As(err, &ie) {
			return byRef[ie.Ref]
		}
		return ""
	}
}

// IsRejected reports whether err is bad input (not an operational failure).
func IsRejected(err error) bool {
	var ie *snapshot.InputError
	return errors.As(err, &ie)
}
