package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/decide"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"
)

// report publishes the inputs held back after a sync. A new hold (or a new reason) is a log
// line, rejected_total{stage} and a Warning Event on the object; a hold that ended is an Info
// line and a Normal Event. The held_inputs gauge and /readyz list them all.
func (p *Pipeline) report(ctx context.Context, held map[string]quarantine.Hold) {
	m := p.cfg.Metrics
	prev := p.q.Held
	for _, id := range slices.Sorted(maps.Keys(held)) {
		h := held[id]
		if old, was := prev[id]; was && old.Hash == h.Hash && old.Stage == h.Stage && sameReason(old.Err, h.Err) {
			continue
		}
		m.Rejected.WithLabelValues(h.Stage).Inc()
		if h.Stage == snapshot.StageRender || h.Stage == snapshot.StageDecode {
			m.Renders.WithLabelValues("error").Inc()
		}
		what := heldWhat(h)
		p.log.ErrorContext(ctx, "input held back: "+what, "input", id, "object", h.Ref, "stage", h.Stage, "error", h.Err)
		p.event(h.Ref, true, "Rejected", fmt.Sprintf("%s (%s)", h.Reason(), what))
	}
	for _, id := range slices.Sorted(maps.Keys(prev)) {
		if _, still := held[id]; still {
			continue
		}
		h := prev[id]
		p.log.InfoContext(ctx, "input no longer held back: its current version is in use", "input", id, "object", h.Ref)
		p.event(h.Ref, false, "Accepted", fmt.Sprintf("%s is no longer held back: its current version is in use", h.Ref))
	}
	p.q.Held = held

	kinds := map[string]int{snapshot.KindService: 0, snapshot.KindTemplates: 0, snapshot.KindCertificate: 0, "pod": 0, "file": 0}
	for id := range prev {
		kind, _, _ := strings.Cut(id, "/")
		kinds[kind] += 0 // a kind held before (a watched object's: ingress, node, ...) goes back to 0
	}
	list := make([]status.HeldInput, 0, len(held))
	for id, h := range held {
		kind, _, _ := strings.Cut(id, "/")
		kinds[kind]++
		list = append(list, status.HeldInput{Input: id, Object: h.Ref.String(), Stage: h.Stage, Reason: h.Reason(), Kept: h.Kept})
	}
	for k, n := range kinds {
		m.HeldInputs.WithLabelValues(k).Set(float64(n))
	}
	p.cfg.Health.SetHeld(list)
	if len(held) > 0 {
		m.ConfigValid.Set(0)
	} else {
		m.ConfigValid.Set(1)
	}
}

// sameReason: a hold whose reason only moved in its file (an edit elsewhere in it) is not a
// new one to report.
func sameReason(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return snapshot.Unlocated(a).Error() == snapshot.Unlocated(b).Error()
}

func heldWhat(h quarantine.Hold) string {
	switch {
	case h.Kept:
		return "its last good version stays in use"
	case h.Ref.Kind == "Pod":
		return "left out, as if it were not ready" // whether or not it was good before
	case h.ID == snapshot.ObjectID(h.Ref):
		return "left out" // a cluster object: an EndpointSlice, a watched object
	}
	return "left out: it never was good"
}

// event records an Event on the object ref names (not for files: there is none).
func (p *Pipeline) event(ref snapshot.Ref, warning bool, reason, message string) {
	if p.cfg.Recorder != nil && ref.Kind != "" && ref.Kind != "File" {
		p.cfg.Recorder.Event(refObject(ref), warning, reason, message)
	}
}

// cannotRender reports a sync in which nothing new could go live for a reason no single input
// is held for (the pods make the template fail, a manifest does not parse): what HAProxy runs
// keeps running.
func (p *Pipeline) cannotRender(ctx context.Context, err error, held map[string]quarantine.Hold) apply.Result {
	stage := snapshot.StageRender
	var ie *snapshot.InputError
	if errors.As(err, &ie) && ie.Stage != "" {
		stage = ie.Stage
	}
	p.reportError(ctx, stage, err)
	return apply.Result{Outcome: apply.Rejected, Action: decide.DoHold, Err: err, Held: len(held)}
}

// reportError reports bad input that holds everything back: counted, logged and sent as an
// Event once per distinct message.
func (p *Pipeline) reportError(ctx context.Context, stage string, err error) {
	if p.cutShort(ctx, stage, err) {
		return // what a cut-short render found is no verdict on the input
	}
	m := p.cfg.Metrics
	m.ConfigValid.Set(0)
	p.cfg.Health.Failed(err)
	var ie *snapshot.InputError
	errors.As(err, &ie)
	attrs := []any{"stage", stage, "error", err}
	if ie != nil {
		attrs = append(attrs, "object", ie.Ref)
	}
	if msg := snapshot.Unlocated(err).Error(); msg == p.lastProblem {
		p.log.DebugContext(ctx, "input still rejected", attrs...)
		return
	} else {
		p.lastProblem = msg
	}
	m.Rejected.WithLabelValues(stage).Inc()
	if stage == snapshot.StageRender || stage == snapshot.StageDecode {
		m.Renders.WithLabelValues("error").Inc()
	}
	if p.cfg.Health.Ready() {
		p.log.ErrorContext(ctx, "input rejected; the last good configuration keeps serving", attrs...)
	} else {
		p.log.ErrorContext(ctx, "input rejected; no configuration is live yet", attrs...)
	}
	if ie != nil {
		p.event(ie.Ref, true, "Rejected", err.Error())
	}
}

// cutShort says whether the sync's context has ended (the sidecar is stopping), and logs it
// so: the sync was cut short and nothing failed (a stop that logged an error would page
// someone at every rollout); nothing is counted, held or retried.
func (p *Pipeline) cutShort(ctx context.Context, stage string, err error) bool {
	if ctx.Err() == nil {
		return false
	}
	p.log.InfoContext(ctx, "sync cut short: the sidecar is stopping", "stage", stage, "error", err)
	return true
}

// fail reports an operational failure at stage, or at the one err names (a *failure.Error),
// which is retried with backoff.
func (p *Pipeline) fail(ctx context.Context, stage string, err error) apply.Result {
	stage = failure.StageOf(err, stage) // the failure may name its own stage
	if p.cutShort(ctx, stage, err) {
		return apply.Result{Outcome: apply.Failed, Err: err}
	}
	p.cfg.Metrics.SyncFailures.WithLabelValues(stage).Inc()
	p.cfg.Health.Failed(err)
	p.log.ErrorContext(ctx, "sync failed; the last good configuration keeps serving", "stage", stage, "error", err)
	return apply.Result{Outcome: apply.Failed, Err: err, Retry: true}
}

// wentLive is a candidate that went live, and the inputs it was made from.
type wentLive struct {
	cand *candidate.Candidate
	cur  snapshot.Inputs
}

// acceptChecked records the inputs of the candidate that went live last as the last good ones,
// once they are checked: at once when haproxy -c validated it (or nothing an operator edits
// changed), else when the background writer has written it valid (live.State.Good). A
// candidate haproxy -c rejects is never accepted: the next sync validates and holds what is
// at fault (the inputs changed since the last good ones are the suspects).
func (p *Pipeline) acceptChecked() {
	m := p.unchecked
	if m == nil || m.cand.Unchecked && m.cand.Gen == nil && p.HAProxy().Good.Hash() != m.cand.Bundle.Hash {
		return
	}
	p.unchecked = nil
	p.accept(m.cand.Chosen, m.cur)
	p.build.Accept(m.cand)
}

// accept records the versions of the inputs that went live as the last good ones (and keeps
// them in the state directory).
func (p *Pipeline) accept(live []snapshot.Input, cur snapshot.Inputs) {
	before := p.q.Good // Accept makes a new map: this one stays as it is
	p.q.Accept(live, cur)
	p.accepted++
	p.lastProblem = ""
	p.publishGood()
	if !p.cfg.KeepInputs || sameVersions(before, p.q.Good) {
		return
	}
	if err := p.saveInputs(); err != nil {
		p.cfg.Metrics.SyncFailures.WithLabelValues(failure.State).Inc()
		p.log.Warn("keep the last good inputs", "file", inputsState, "error", err)
	}
}

// publishGood makes the inputs held good now what GoodInputs answers.
func (p *Pipeline) publishGood() {
	if !p.cfg.PublishGoodInputs {
		return
	}
	st := quarantine.State{Good: maps.Clone(p.q.Good), ServicesPresent: p.q.ServicesPresent, TemplatesPresent: p.q.TemplatesPresent}
	p.good.Store(&st)
}

// GoodInputs is the version of each input the sidecar holds good now (for the admission
// webhook, which evaluates a change as the sidecar would take it); safe from any goroutine.
// Empty unless Config.PublishGoodInputs.
func (p *Pipeline) GoodInputs() quarantine.State {
	if st := p.good.Load(); st != nil {
		return quarantine.State{Good: maps.Clone(st.Good), ServicesPresent: st.ServicesPresent, TemplatesPresent: st.TemplatesPresent}
	}
	return quarantine.State{}
}

// sameVersions reports whether a and b hold the same inputs at the same versions (hashes).
// It compares the maps in place: a fingerprint of each, built twice per sync, allocated 7.8 MB
// at 10,000 services, on the way to a pod edit's peak.
func sameVersions(a, b map[string]snapshot.Input) bool {
	if len(a) != len(b) {
		return false
	}
	for id, in := range a {
		if other, ok := b[id]; !ok || other.Hash != in.Hash {
			return false
		}
	}
	return true
}

// saveInputs keeps the last good inputs in the state directory (mode 0600: they hold private
// keys).
func (p *Pipeline) saveInputs() error {
	return p.cfg.Store.WriteStateFrom(inputsState, p.q.Save)
}

// inputsState is the state file of the last good inputs.
const inputsState = quarantine.StateFile

// loadInputs reads what saveInputs wrote in an earlier run, if anything.
func (p *Pipeline) loadInputs() {
	if !p.cfg.KeepInputs {
		return
	}
	b, err := p.cfg.Store.ReadState(inputsState)
	if err != nil {
		if !os.IsNotExist(err) {
			p.log.Warn("read the last good inputs", "file", inputsState, "error", err)
		}
		return
	}
	st, err := quarantine.Load(bytes.NewReader(b))
	if err != nil {
		p.log.Warn("the record of the last good inputs does not parse: starting without it", "file", inputsState, "error", err)
		return
	}
	p.q = st
	p.publishGood()
	p.log.Info("last good inputs restored", "inputs", len(st.Good), "file", inputsState)
}

// reporter is how acting reports what it found (apply.Reporter).
type reporter struct{ p *Pipeline }

func (r reporter) Failure(ctx context.Context, stage string, err error) apply.Result {
	return r.p.fail(ctx, stage, err)
}

func (r reporter) Rejection(ctx context.Context, err error) apply.Result {
	return r.p.cannotRender(ctx, err, r.p.q.Held)
}

// noteTrying logs when inputs start being tried apart (the syncs render their last good
// version meanwhile).
func (p *Pipeline) noteTrying(ctx context.Context, ids []string) {
	if len(ids) > 0 && !p.trying {
		p.log.InfoContext(ctx, "rendering the changed template set apart; other changes go live with the last good one meanwhile", "inputs", ids)
	}
	p.trying = len(ids) > 0
}

// templatesTried hears the end of a changed template set's first rendering, made apart from
// the syncs, and syncs again: the set now goes through a sync as any change.
func (p *Pipeline) templatesTried(hash string, took time.Duration, err error) {
	if err != nil {
		p.log.Info("the changed template set failed its first rendering, made apart", "templates", short(hash), "took", took.Round(time.Millisecond), "error", err)
	} else {
		p.log.Info("the changed template set rendered apart; it goes live through the next sync", "templates", short(hash), "took", took.Round(time.Millisecond))
	}
	p.Changed()
}

// blameRefused holds the inputs of c that changed since the last good rendering, which HAProxy
// refused at a reload, or a canary host's counters refused (err, with its stage), and syncs
// again at once: without them, the rest may go live.
// When none changed, the refusal is reported as is.
func (p *Pipeline) blameRefused(ctx context.Context, c *candidate.Candidate, err error, held map[string]quarantine.Hold, sel quarantine.Selection, cur snapshot.Inputs) map[string]quarantine.Hold {
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
	stage := snapshot.StageReload
	var ie *snapshot.InputError
	if errors.As(err, &ie) && ie.Stage != "" {
		stage = ie.Stage // canary
	}
	if len(blamed) == 0 {
		p.reportError(ctx, stage, err)
		return held
	}
	held = maps.Clone(held) // the reported map stays as it was reported
	for id, h := range sel.Blame(blamed, stage, cur) {
		h.Err = c.Origins().LocateAt(h.Ref, h.Err)
		held[id] = h
	}
	p.report(ctx, held)
	p.Changed()
	return held
}
