package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/memory"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/decide"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/tracing"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/redact"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Sync reads the inputs once and takes them as far as they go: the bad ones are held back (at
// their last good version, or left out), everything else goes live. What HAProxy runs keeps
// running whatever happens here.
//
// Each sync is a span (render, validate and apply below it) that starts when the first change
// not yet live was seen, so that a trace shows the whole way of a change; the same time
// starts change_to_live_seconds, observed where the change goes live.
func (p *Pipeline) Sync(ctx context.Context, reason string) apply.Result {
	return p.syncNow(ctx, reason, false)
}

// syncNow is Sync; mayReuse (a sync that notifications asked for) lets it render nothing when
// nothing but HAProxy's own state asked since the last rendering went live (see reuse).
func (p *Pipeline) syncNow(ctx context.Context, reason string, mayReuse bool) apply.Result {
	return p.syncWith(ctx, reason, mayReuse, nil)
}

// syncWith is syncNow with the rendering made ahead during the quiet period, if any: used when
// nothing changed since it was read (see ahead.go), else the sync reads and renders as always.
func (p *Pipeline) syncWith(ctx context.Context, reason string, mayReuse bool, a *ahead) apply.Result {
	if t := p.notified.Swap(nil); t != nil && p.seen.IsZero() {
		p.seen = *t
	}
	start := time.Now()
	opts := []trace.SpanStartOption{trace.WithAttributes(attribute.String("sync.reason", reason))}
	if !p.seen.IsZero() {
		opts = append(opts, trace.WithTimestamp(p.seen))
	}
	ctx, span := p.tracer.Start(ctx, "sync", opts...)
	if !p.seen.IsZero() {
		// From the change seen to this sync: the quiet period (--wait), a sync still running,
		// the syncs that failed to make it live.
		_, wait := p.tracer.Start(ctx, "wait", trace.WithTimestamp(p.seen))
		wait.End(trace.WithTimestamp(start))
	}
	res := p.sync(status.WithChangeSeen(ctx, p.seen), reason, mayReuse, a)
	span.SetAttributes(attribute.Stringer("sync.outcome", res.Outcome), attribute.Stringer("sync.action", res.Action),
		attribute.String("config.hash", short(res.Hash)), attribute.Int("inputs.held", res.Held))
	var err error
	if res.Outcome == apply.Failed || res.Outcome == apply.Rejected {
		err = res.Err
	}
	tracing.End(span, err) // secrets are masked as spans leave (sidecar/tracing.go)
	switch {
	case res.Outcome == apply.Failed || res.Outcome == apply.Deferred:
		// Not live yet: the next sync carries the change.
	case res.Outcome == apply.Rejected && len(p.trigger) > 0:
		// A sync asked for already (looking for the data at fault, or without the inputs
		// HAProxy refused) makes the rest of the change live.
	default:
		p.seen = time.Time{}
	}
	return res
}

func (p *Pipeline) sync(ctx context.Context, reason string, mayReuse bool, a *ahead) apply.Result {
	asked := p.asked.Load() // before the read: what is asked from now on is not in it
	p.noticeHAProxy(ctx)
	if a != nil {
		if res, ok := p.syncAhead(ctx, reason, a); ok {
			return res
		}
	}
	if mayReuse {
		if res, ok := p.reuse(ctx, asked, reason); ok {
			return res
		}
	}
	p.rendered = rendering{}
	t0, gc0 := time.Now(), memory.Collections()
	objs, err := p.cfg.Source.Objects(ctx)
	tRead := time.Now()
	var unread map[string]quarantine.Hold
	if err != nil {
		var ie *snapshot.InputError
		if !errors.As(err, &ie) || objs == nil {
			// Nothing to render from: at start, HAProxy may run what the sidecar made live
			// before all the same (the inputs are missing, not HAProxy).
			p.adoptLive(ctx)
		}
		switch {
		case !errors.As(err, &ie):
			return p.fail(ctx, failure.Read, fmt.Errorf("read inputs: %w", err))
		case objs == nil:
			// The source could not read some object at all and has nothing in its place:
			// nothing is known of what it holds, so nothing changes.
			return p.cannotRender(ctx, err, p.q.Held)
		}
		// The source kept the last good objects of what it could not read (a manifest that
		// does not parse): that is held, the rest goes on.
		unread = candidate.SourceHolds(err)
	}
	p.acceptChecked()
	cur := p.build.Decode(objs)
	p.learnKeys(cur)
	// When what HAProxy runs is not known (at start, after a reload of unknown outcome), the
	// rendering is validated here rather than just before the reload that follows: what is at
	// fault, pods included, is found and left out in this very sync.
	made := p.build.Make(ctx, objs, cur, &p.q, unread, p.HAProxy().Runs == "")
	objs = nil // the snapshot is rendered: let it be collected while the sync goes on
	return p.finish(ctx, reason, asked, cur, made, stages{start: t0, read: tRead, built: time.Now(), gc0: gc0})
}

// stages are when a sync's read began and ended and its build ended, and the collections
// before the read: the sync stages' log.
type stages struct {
	start, read, built time.Time
	gc0                uint64
	ahead              bool // made during the quiet period
}

// finish takes what Make made of the inputs cur (read once asked was counted) as far as it
// goes: holds reported, the rendering planned, decided on and made live.
func (p *Pipeline) finish(ctx context.Context, reason string, asked uint64, cur snapshot.Inputs, made candidate.Made, st stages) apply.Result {
	cand, held, sel := made.Candidate, made.Held, made.Selection
	var f *failure.Error
	failed := errors.As(made.Err, &f)
	if made.Err != nil && !failed {
		// No rendering, for bad input: all that can be done is taking HAProxy back to the last
		// good rendering when haproxy -c rejected the one it runs (decide.DoRevert).
		if d := decide.Decide(decide.Facts{HAProxy: p.HAProxy()}); d.Action == decide.DoRevert {
			p.apply.Apply(ctx, apply.Job{Decision: d, Reason: reason})
		}
	}
	p.noteTrying(ctx, sel.Trying)
	// What is held is reported before anything new goes live, so that nobody sees the new
	// configuration live beside holds it has ended.
	p.report(ctx, held)
	switch {
	case failed:
		return p.fail(ctx, f.Stage, f.Err)
	case made.Err != nil:
		return p.cannotRender(ctx, made.Err, held)
	}
	if !p.adoptTried && !p.standby() {
		p.adoptTried = true
		p.adopt(ctx, cand.Bundle)
	}
	tBuild := time.Now()
	build := tBuild.Sub(st.read)
	if st.ahead {
		build = st.built.Sub(st.read) // during the quiet period
	}
	plan, why := p.apply.Plan(cand.Bundle)
	tPlan := time.Now()
	d := decide.Decide(decide.Facts{
		Rendered:          cand.Bundle.Hash,
		HAProxy:           p.HAProxy(),
		ReloadWhy:         why,
		Standby:           p.standby(),
		ExpectRunning:     p.cfg.ExpectRunning,
		Now:               time.Now(),
		MinReloadInterval: p.cfg.MinReloadInterval,
	})
	actx, span := tracing.Start(ctx, "apply", attribute.Stringer("apply.action", d.Action))
	res := p.act(actx, d, cand, plan, reason)
	span.SetAttributes(attribute.Stringer("apply.outcome", res.Outcome))
	tracing.End(span, res.Err)
	// Where a sync's time goes (docs/performance.md reads it): the spans say the same to a
	// tracing backend.
	p.log.DebugContext(ctx, "sync stages", "action", d.Action.String(), "read", st.read.Sub(st.start).Round(time.Microsecond),
		"build", build.Round(time.Microsecond), "plan", tPlan.Sub(tBuild).Round(time.Microsecond),
		"apply", time.Since(tPlan).Round(time.Microsecond), "gc_cycles", memory.Collections()-st.gc0, "ahead", st.ahead)
	if res.Refused {
		held = p.blameRefused(ctx, cand, res.Err, held, sel, cur)
	}
	switch res.Outcome {
	case apply.Applied, apply.Unchanged, apply.StandingBy, apply.Written:
		p.unchecked = &wentLive{cand: cand, cur: cur}
		p.acceptChecked()
	}
	if res.Outcome == apply.Applied || res.Outcome == apply.Unchanged || res.Outcome == apply.Written {
		p.rendered = rendering{hash: cand.Bundle.Hash, asked: asked}
	}
	res.Action, res.Held = d.Action, len(held)
	return res
}

// act carries out the decision on the candidate: one that needs the rendering validated has
// it staged and validated first (package candidate), then apply acts on what it is given. A
// runtime change the runtime API could not make is made by a reload instead.
func (p *Pipeline) act(ctx context.Context, d decide.Decision, cand *candidate.Candidate, plan *runtimeapi.Plan, reason string) apply.Result {
	for {
		if d.Action == decide.DoReload {
			p.writer.Drop() // a rendering waiting to be written is older than this one
		}
		if d.Action.NeedsValid() {
			if res, ok := p.validated(ctx, cand); !ok {
				return res
			}
		}
		res := p.apply.Apply(ctx, apply.Job{Decision: d, Bundle: cand.Bundle, Gen: cand.Gen, Info: cand.Info, Plan: plan, Reason: reason})
		if !res.RuntimeFailed {
			return res
		}
		d = decide.Decision{Action: decide.DoReload, Why: "the runtime API update failed"}
	}
}

// validated has c staged and validated (haproxy -c) if it is not yet: ok false with the
// sync's result when it is not valid or cannot be staged.
func (p *Pipeline) validated(ctx context.Context, c *candidate.Candidate) (apply.Result, bool) {
	err := p.build.Validated(ctx, c)
	switch {
	case err == nil:
		return apply.Result{}, true
	case candidate.IsRejected(err):
		// Nothing an operator edits changed, yet the rendering does not validate: data from
		// the cluster (a pod, an annotation) makes the template produce a bad configuration.
		// The next sync, at once, validates what it renders and leaves out what is at fault;
		// it reports what it cannot leave out (nobody is blamed before it looked).
		p.build.ValidateNext()
		p.Changed()
		p.log.InfoContext(ctx, "the rendering does not validate: looking for the data at fault", "hash", short(c.Bundle.Hash), "error", err)
		return apply.Result{Outcome: apply.Rejected, Hash: c.Bundle.Hash, Err: err}, false
	}
	return p.fail(ctx, failure.Staging, err), false
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
