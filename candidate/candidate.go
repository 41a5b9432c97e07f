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
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/status"
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
	// Exclusive runs f while nothing else stages, activates or prunes generations (the
	// background writer); nil: f runs as is.
	Exclusive func(f func())
	// Keep is the generation a prune must keep (the last good one); nil: none.
	Keep func() *generation.Generation
	// Trials bounds the renderings one search for bad inputs may try; 0:
	// quarantine.DefaultTrials.
	Trials int
	// Metrics receives the render and validation durations (nil: none).
	Metrics *status.Metrics
}

// Builder makes candidates.
type Builder struct {
	cfg Config
}

// New returns a Builder.
func New(cfg Config) *Builder {
	if cfg.Trials <= 0 {
		cfg.Trials = quarantine.DefaultTrials
	}
	if cfg.Exclusive == nil {
		cfg.Exclusive = func(f func()) { f() }
	}
	if cfg.Keep == nil {
		cfg.Keep = func() *generation.Generation { return nil }
	}
	if cfg.Metrics == nil {
		cfg.Metrics = status.NewMetrics()
	}
	return &Builder{cfg: cfg}
}

// Candidate is a rendering a sync may make live.
type Candidate struct {
	Bundle *render.Bundle
	// Gen is the rendering staged and validated; nil when it was not validated yet (a change
	// of pods only, which the runtime API makes live before the writer validates it).
	Gen  *generation.Generation
	Info Info
	// Chosen are the input versions it was rendered from.
	Chosen []snapshot.Input
	// Dropped are the pods and watched objects left out because the template could not
	// print their data.
	Dropped []quarantine.Hold
}

// Info is what the stages after rendering need to know of a snapshot.
type Info struct {
	TemplateRef, ServicesRef snapshot.Ref
	Services, Certificates   int
	Revision                 string
}

func infoOf(s *snapshot.Snapshot, revision string) Info {
	return Info{TemplateRef: s.TemplateRef, ServicesRef: s.ServicesRef,
		Services: len(s.Services), Certificates: len(s.Certificates), Revision: revision}
}

// Failure is an operational failure at a stage (status.Fail*): retried, never blamed on input.
type Failure struct {
	Stage string
	Err   error
}

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// FailureStage is the stage of an operational failure (def when err is not a *Failure).
func FailureStage(err error, def string) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Stage
	}
	return def
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
	// input is held for) or a *Failure (operational).
	Err error
}

// maxDropped bounds the pods and watched objects one rendering leaves out before it gives up.
const maxDropped = 16

// Decode reads the operator inputs out of objs.
func (b *Builder) Decode(objs *snapshot.Objects) snapshot.Inputs { return b.cfg.Inputs.Decode(objs) }

// Make renders what the quarantine state q chooses of the operator inputs cur (Decode) read
// out of objs. When something an operator edits changed (or validate is set), the rendering is
// staged and validated, and the changed inputs at fault are found and held; otherwise (pods
// only) validation comes later (Validated). unread are the objects the source could not read
// and kept at their last good version (SourceHolds).
func (b *Builder) Make(ctx context.Context, objs *snapshot.Objects, cur snapshot.Inputs, q *quarantine.State, unread map[string]quarantine.Hold, validate bool) Made {
	sel := quarantine.Select(cur, q)
	m := Made{Current: cur, Selection: sel, Held: maps.Clone(sel.Held)}
	maps.Copy(m.Held, unread)
	if sel.Blocked != nil {
		m.Err = sel.Blocked.Err
		return m
	}
	if len(sel.Changed) > 0 || validate {
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
	if m.Candidate != nil {
		for _, h := range m.Candidate.Dropped {
			m.Held[h.ID] = h
		}
	}
	return m
}

// try assembles the snapshot from chosen and renders it; with validate, it also stages the
// rendering and runs haproxy -c on it. Bad input is a *snapshot.InputError; anything else is
// a *Failure.
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
		bundle, err = b.cfg.Renderer.Render(ctx, snap)
		b.cfg.Metrics.RenderDuration.Observe(time.Since(start).Seconds())
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, &Failure{Stage: status.FailRead, Err: fmt.Errorf("render: %w", ctx.Err())}
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
	c := &Candidate{Bundle: bundle, Info: infoOf(snap, objs.Revision), Chosen: chosen, Dropped: dropped}
	if !validate {
		return c, nil
	}
	if err := b.Validated(ctx, c); err != nil {
		return nil, err
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
		out[id] = quarantine.Hold{ID: id, Ref: ie.Ref, Stage: snapshot.StageDecode, Kept: true,
			Err: fmt.Errorf("%w (its last good objects stand in for it, if it ever was good)", e)}
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
