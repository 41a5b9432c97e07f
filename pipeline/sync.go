package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/decide"
	"github.com/haproxy-sidecar/haproxy-sidecar/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/redact"
	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/status"
)

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
		unread = candidate.SourceHolds(err)
	}
	cur := p.build.Decode(objs)
	p.learnKeys(cur)
	// When what HAProxy runs is not known (at start, after a reload of unknown outcome), the
	// rendering is validated here rather than just before the reload that follows: what is at
	// fault, pods included, is found and left out in this very sync.
	made := p.build.Make(ctx, objs, cur, &p.q, unread, p.HAProxy().Runs == "")
	objs = nil // the snapshot is rendered: let it be collected while the sync goes on
	cand, held, sel := made.Candidate, made.Held, made.Selection
	p.noteTrying(sel.Trying)
	if made.Err != nil {
		p.report(held)
		var f *candidate.Failure
		if errors.As(made.Err, &f) {
			return p.fail(f.Stage, f.Err)
		}
		if runs := p.HAProxy().Runs; runs != "" && p.writer.Rejected(runs) != nil {
			p.apply.Apply(ctx, apply.Job{Decision: decide.Decide(decide.Facts{RunsRejected: true}), Reason: reason})
		}
		return p.cannotRender(made.Err, held)
	}
	if !p.adoptTried && !p.standby() {
		p.adoptTried = true
		p.adopt(ctx, cand.Bundle)
	}
	plan, why := p.apply.Plan(cand.Bundle)
	d := decide.Decide(decide.Facts{
		Rendered:          cand.Bundle.Hash,
		Rejected:          p.writer.Rejected(cand.Bundle.Hash) != nil,
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
	res := p.apply.Apply(ctx, apply.Job{Decision: d, Candidate: cand, Plan: plan, Reason: reason})
	if res.Refused {
		held = p.blameRefused(cand, res.Err, held, sel, cur)
	}
	switch res.Outcome {
	case Applied, Unchanged, StandingBy, Written:
		p.accept(cand.Chosen, cur)
		p.build.Accept(cand)
	}
	res.Action, res.Held = d.Action, len(held)
	return res
}

// blameRefused holds the inputs of c that changed since the last good rendering, which HAProxy
// refused at a reload (err), and syncs again at once: without them, the rest may go live.
// When none changed, the refusal is reported as is.
func (p *Pipeline) blameRefused(c *candidate.Candidate, err error, held map[string]quarantine.Hold, sel quarantine.Selection, cur snapshot.Inputs) map[string]quarantine.Hold {
	blamed := map[string]error{}
	inC := map[string]bool{}
	for _, in := range c.Chosen {
		inC[in.ID()] = true
		if g, ok := p.q.Good[in.ID()]; !ok || g.Hash != in.Hash {
			blamed[in.ID()] = err
		}
	}
	for id := range p.q.Good {
		if !inC[id] {
			blamed[id] = err // deleted
		}
	}
	if len(blamed) == 0 {
		p.reportError(snapshot.StageReload, err)
		return held
	}
	held = maps.Clone(held) // the reported map stays as it was reported
	for id, h := range sel.Blame(blamed, snapshot.StageReload, cur) {
		h.Err = c.Origins().LocateAt(h.Ref, h.Err)
		held[id] = h
	}
	p.report(held)
	p.Changed()
	return held
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
