package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/validate"
	"github.com/haproxy-sidecar/haproxy-sidecar/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/redact"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/status"
)

// candidate is a rendering a sync may make live.
type candidate struct {
	bundle *render.Bundle
	// gen is the rendering staged and validated; nil when it was not validated yet (a change
	// of pods only, which the runtime API makes live before the writer validates it).
	gen    *generation.Generation
	info   snapInfo
	chosen []snapshot.Input // the input versions it was rendered from
	// dropped are the pods and watched objects left out because the template could not
	// print their data.
	dropped []quarantine.Hold
}

// maxDroppedPods bounds the pods and watched objects one rendering leaves out before it gives
// up.
const maxDroppedPods = 16

// snapInfo is what the stages after rendering need to know of a snapshot.
type snapInfo struct {
	templateRef, servicesRef snapshot.Ref
	services, certificates   int
	revision                 string
}

func infoOf(s *snapshot.Snapshot, revision string) snapInfo {
	return snapInfo{templateRef: s.TemplateRef, servicesRef: s.ServicesRef,
		services: len(s.Services), certificates: len(s.Certificates), revision: revision}
}

// failure is an operational failure at a stage (status.Fail*): retried, never blamed on input.
type failure struct {
	stage string
	err   error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// Sync reads the inputs once and takes them as far as they go: the bad ones are held back (at
// their last good version, or left out), everything else goes live. What HAProxy runs keeps
// running whatever happens here.
func (p *Pipeline) Sync(ctx context.Context, reason string) Result {
	p.noticeHAProxy(ctx)
	objs, err := p.cfg.Source.Objects(ctx)
	var unread map[string]quarantine.Hold
	if err != nil {
		var ie *snapshot.InputError
		switch {
		case !errors.As(err, &ie):
			return p.fail(status.FailRead, fmt.Errorf("read inputs: %w", err))
		case objs == nil:
			// The source could not read some object at all and has nothing in its place:
			// nothing is known of what it holds, so nothing changes.
			return p.cannotRender(err, p.q.Held)
		}
		// The source kept the last good objects of what it could not read (a manifest that
		// does not parse): that is held, the rest goes on.
		unread = sourceHolds(err)
	}
	cur := p.cfg.Inputs.Decode(objs)
	p.learnKeys(cur)
	sel := quarantine.Select(cur, &p.q)
	held := maps.Clone(sel.Held)
	maps.Copy(held, unread)
	if sel.Blocked != nil {
		p.report(held)
		return p.cannotRender(sel.Blocked.Err, held)
	}

	var cand *candidate
	if len(sel.Changed) > 0 {
		// Something an operator edits changed: render and validate, and find what is at
		// fault if that fails.
		var culprits map[string]error
		cand, culprits, err = quarantine.Search(sel.Suspects(), func(revert map[string]bool) (*candidate, error) {
			return p.try(ctx, objs, sel.Revert(revert), true)
		}, blame(cur), p.cfg.Trials)
		if err == nil {
			maps.Copy(held, sel.Blame(culprits, snapshot.StageValidate, cur))
		}
	} else {
		// Pods only (or nothing): render; validation comes before a reload, or after a
		// runtime API change (the writer).
		cand, err = p.try(ctx, objs, sel.Chosen, false)
	}
	objs = nil // the snapshot is rendered: let it be collected while the sync goes on
	if cand != nil {
		for _, h := range cand.dropped {
			held[h.ID] = h
		}
	}
	if err != nil {
		p.report(held)
		var f *failure
		if errors.As(err, &f) {
			return p.fail(f.stage, f.err)
		}
		return p.cannotRender(err, held)
	}
	if rejected := p.writer.Rejected(cand.bundle.Hash); rejected != nil {
		// haproxy -c rejected this rendering after the runtime API had made it live.
		p.writer.Drop()
		if runs := p.HAProxy().Runs; runs == cand.bundle.Hash || runs == "" {
			p.revertRuntime(ctx)
		}
		p.report(held)
		return p.cannotRender(rejected, held)
	}
	if !p.adoptTried && !p.standby() {
		p.adoptTried = true
		p.adopt(ctx, cand.bundle)
	}
	plan, why := p.planRuntime(cand.bundle)
	d := Decide(Facts{
		Rendered:          cand.bundle.Hash,
		HAProxy:           p.HAProxy(),
		ReloadWhy:         why,
		Standby:           p.standby(),
		ExpectRunning:     p.cfg.ExpectRunning,
		Now:               time.Now(),
		MinReloadInterval: p.cfg.MinReloadInterval,
	})
	// What is held is reported before anything goes live, so that nobody sees the new
	// configuration live beside holds it has ended.
	p.report(held)
	res, blamed := p.act(ctx, d, cand, plan, reason)
	if blamed != nil {
		held = maps.Clone(held) // the reported map stays as it was reported
		maps.Copy(held, sel.Blame(blamed, snapshot.StageReload, cur))
		p.report(held)
	}
	switch res.Outcome {
	case Applied, Unchanged, StandingBy, Written:
		p.accept(cand.chosen, cur)
	}
	res.Action, res.Held = d.Action, len(held)
	return res
}

// try assembles the snapshot from chosen and renders it; with validate, it also stages the
// rendering and runs haproxy -c on it. Bad input is a *snapshot.InputError; anything else is
// a *failure.
func (p *Pipeline) try(ctx context.Context, objs *snapshot.Objects, chosen []snapshot.Input, validate bool) (*candidate, error) {
	var (
		snap    *snapshot.Snapshot
		bundle  *render.Bundle
		dropped []quarantine.Hold
		err     error
	)
	for {
		start := time.Now()
		if snap, err = p.cfg.Inputs.Assemble(objs, chosen); err != nil {
			return nil, inputErr(snapshot.StageDecode, err)
		}
		bundle, err = p.cfg.Renderer.Render(ctx, snap)
		p.cfg.Metrics.RenderDuration.Observe(time.Since(start).Seconds())
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, &failure{stage: status.FailRead, err: fmt.Errorf("render: %w", ctx.Err())}
		}
		// A pod or watched object whose data the template cannot print (an annotation
		// holding a newline) is left out; they are not held back, the others go live.
		var ie *snapshot.InputError
		if !errors.As(err, &ie) || len(dropped) >= maxDroppedPods {
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
	info := infoOf(snap, objs.Revision)
	c := &candidate{bundle: bundle, info: info, chosen: chosen, dropped: dropped}
	if !validate {
		return c, nil
	}
	var rejected error
	p.writer.Exclusive(func() { c.gen, rejected, err = p.stageCheck(ctx, bundle, info) })
	switch {
	case err != nil:
		return nil, err
	case rejected != nil:
		return nil, rejected
	}
	return c, nil
}

// sourceHolds are the holds of what a source could not read and kept at its last good version
// (a file, in file mode), one per object named.
func sourceHolds(err error) map[string]quarantine.Hold {
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

// stageCheck writes the bundle as a new generation and validates it (haproxy -c): rejected is
// bad input (haproxy -c refused it), err an operational failure (*failure). Callers hold the
// writer's Exclusive.
func (p *Pipeline) stageCheck(ctx context.Context, bundle *render.Bundle, info snapInfo) (gen *generation.Generation, rejected, err error) {
	gen, err = p.cfg.Store.StageContent(contentOf(bundle), bundle.Hash)
	if err != nil {
		return nil, nil, &failure{stage: status.FailStage, err: fmt.Errorf("stage generation: %w", err)}
	}
	if err := p.checkGeneration(ctx, gen); err != nil {
		_ = p.cfg.Store.Prune(p.HAProxy().Good.Gen)
		if isRejected(err) {
			return nil, withRef(err, info.templateRef), nil
		}
		return nil, nil, err
	}
	return gen, nil, nil
}

// contentOf is what a generation of the rendering holds.
func contentOf(b *render.Bundle) generation.Content {
	return b.Content()
}

// checkGeneration runs haproxy -c on a staged generation: a *snapshot.InputError when it
// rejects it (stage validate), a *failure when it cannot run.
func (p *Pipeline) checkGeneration(ctx context.Context, gen *generation.Generation) error {
	if p.cfg.Checker == nil {
		return nil
	}
	checkPath, err := p.cfg.Store.CheckFile(gen)
	if err != nil {
		return &failure{stage: status.FailStage, err: fmt.Errorf("prepare validation: %w", err)}
	}
	vstart := time.Now()
	err = p.cfg.Checker.Check(ctx, checkPath)
	p.cfg.Metrics.ValidateDuration.Observe(time.Since(vstart).Seconds())
	if err == nil {
		return nil
	}
	var ce *validate.CheckError
	if !errors.As(err, &ce) {
		return &failure{stage: status.FailValidate, err: fmt.Errorf("validate: %w", err)}
	}
	return &snapshot.InputError{Stage: snapshot.StageValidate,
		Err: fmt.Errorf("haproxy -c rejected the rendered configuration%s: %w", renderedLine(gen, ce.Line), err)}
}

// withRef names ref on a validation rejection that names no object yet.
func withRef(err error, ref snapshot.Ref) error {
	var ie *snapshot.InputError
	if errors.As(err, &ie) && ie.Ref == (snapshot.Ref{}) {
		c := *ie
		c.Ref = ref
		return &c
	}
	return err
}

func isRejected(err error) bool {
	var ie *snapshot.InputError
	return errors.As(err, &ie)
}

// learnKeys tells the redactor the private keys of the certificates read now, so that no
// message can quote one (each certificate version once).
func (p *Pipeline) learnKeys(cur snapshot.Inputs) {
	if p.cfg.Redactor == nil {
		return
	}
	changed := false
	seen := make(map[string]bool, len(p.keysSeen))
	for _, in := range cur.List {
		if in.Kind == snapshot.KindCertificate && in.Err == nil {
			seen[in.Hash] = true
			changed = changed || !p.keysSeen[in.Hash]
		}
	}
	if !changed && len(seen) == len(p.keysSeen) {
		return
	}
	var lines []string
	for _, in := range cur.List {
		if in.Kind == snapshot.KindCertificate && in.Err == nil {
			lines = append(lines, redact.KeyLines(in.PEM)...)
		}
	}
	// Keys held at their last good version stay secret too.
	for _, g := range p.q.Good {
		if g.Kind == snapshot.KindCertificate {
			lines = append(lines, redact.KeyLines(g.PEM)...)
		}
	}
	p.cfg.Redactor.Set("certificate-keys", lines...)
	p.keysSeen = seen
}
