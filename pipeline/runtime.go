package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/status"
)

// Runtime changes a running HAProxy through its runtime API where the change allows it, so
// that no reload is needed (see package runtimeapi). It keeps no state: what HAProxy runs as
// the runtime API sees it is the Model in the pipeline's record of HAProxy (package live).
type Runtime interface {
	// Plan compares a rendering (configuration, certificates, map files) with what HAProxy
	// runs (m; nil: not known).
	Plan(m *runtimeapi.Model, config []byte, certs, maps map[string][]byte) *runtimeapi.Plan
	// Apply makes the plan's runtime changes to what HAProxy runs (current) and returns what
	// it runs then; on error what HAProxy runs is not known.
	Apply(ctx context.Context, p *runtimeapi.Plan, current *runtimeapi.Model) (*runtimeapi.Model, error)
	// Tidy deletes the removed servers HAProxy kept because they still had connections; it
	// returns what HAProxy runs then, and how many are left.
	Tidy(ctx context.Context, m *runtimeapi.Model) (*runtimeapi.Model, int)
}

// tidyInterval is how often removed servers that still had connections are deleted again
// while no change comes.
const tidyInterval = 5 * time.Second

func (p *Pipeline) tidy(ctx context.Context) {
	if p.cfg.Runtime == nil {
		return
	}
	m, left := p.cfg.Runtime.Tidy(ctx, p.HAProxy().Model)
	p.change(func(s live.State) live.State { return s.RuntimeTidied(m) })
	if left > 0 {
		p.log.Debug("removed servers still holding connections, in maintenance", "servers", left)
	}
}

// planRuntime compares the rendering with what HAProxy runs: why is "" when the runtime API can
// make the whole change, else why a reload is needed.
func (p *Pipeline) planRuntime(bundle *render.Bundle) (plan *runtimeapi.Plan, why string) {
	if p.cfg.Runtime == nil {
		return nil, "every change reloads (no runtime API)"
	}
	s := p.HAProxy()
	plan = p.cfg.Runtime.Plan(s.Model, bundle.Config, bundle.Certificates, bundle.Maps)
	if why := plan.Reload(); why != "" {
		return plan, why
	}
	// The contents of map files change through the runtime API (the plan); other files, and
	// map files added or removed, only through a reload: those of the last good rendering are
	// the ones HAProxy loaded.
	return plan, auxChanged(s.Good.Bundle, bundle)
}

// auxChanged says which files of the rendering b differ from those of the rendering HAProxy
// loaded in a way only a reload makes live: other files added, removed or changed, map files
// added or removed ("" when none, or when what HAProxy loaded is not known: nil).
func auxChanged(loaded, b *render.Bundle) string {
	if loaded == nil {
		return ""
	}
	var changed []string
	for _, set := range []struct {
		what      string
		was, want map[string][]byte
		contents  bool // a change of contents needs a reload
	}{{"map file", loaded.Maps, b.Maps, false}, {"file", loaded.Files, b.Files, true}} {
		for _, name := range slices.Sorted(maps.Keys(set.want)) {
			if was, ok := set.was[name]; !ok {
				changed = append(changed, set.what+" "+name+" added")
			} else if set.contents && !bytes.Equal(was, set.want[name]) {
				changed = append(changed, set.what+" "+name+" changed")
			}
		}
		for _, name := range slices.Sorted(maps.Keys(set.was)) {
			if _, ok := set.want[name]; !ok {
				changed = append(changed, set.what+" "+name+" removed")
			}
		}
	}
	if len(changed) == 0 {
		return ""
	}
	if len(changed) > 3 {
		changed = append(changed[:3], fmt.Sprintf("and %d more", len(changed)-3))
	}
	return strings.Join(changed, ", ") + " (files other than map contents change through a reload)"
}

// runtimeUpdate makes a change live through the runtime API, at once, and has the rendering
// written as the live generation with no reload (at once when it was validated already, else
// by the background writer, which validates it first), so that a later reload loads the same.
// ok is false when the runtime API failed: the caller reloads instead.
func (p *Pipeline) runtimeUpdate(ctx context.Context, plan *runtimeapi.Plan, c *candidate.Candidate, reason string) (Result, bool) {
	m := p.cfg.Metrics
	hash := c.Bundle.Hash
	start := time.Now()
	// Until the rendering is live on disk, the record of what HAProxy runs would be wrong
	// half way: it says nothing (the write records it again).
	before, _ := p.change(live.State.RuntimeChanging)
	model, err := p.cfg.Runtime.Apply(ctx, plan, before.Model)
	if err != nil {
		m.RuntimeFallbacks.Inc()
		p.change(live.State.RuntimeFailed)
		if before.LoadsAtStart != "" {
			// Expected while HAProxy has not started: the reload path writes the files it
			// will load (and says so).
			p.log.Info("runtime API not reachable, HAProxy not started yet: writing the configuration instead", "error", err)
		} else {
			p.log.Warn("runtime API update failed: reloading instead", "error", err)
		}
		return Result{}, false
	}
	load := ""
	if before.LoadsAtStart != "" {
		// HAProxy answered: it started on the files the sidecar wrote while it was down, and
		// now runs them with these changes. Learn its load now, or the probe would take it
		// for a start the sidecar knows nothing of and forget these changes.
		load = p.loadID(ctx)
	}
	p.cfg.Health.Applied() // HAProxy answered: it runs it (the files follow)
	p.change(func(s live.State) live.State { return s.RuntimeApplied(hash, model, load, time.Now()) })
	m.Renders.WithLabelValues("success").Inc()
	p.countRuntime(plan)
	m.RuntimeApplied(hash)
	p.log.Info("configuration live without a reload", "reason", reason, "hash", short(hash),
		"changes", plan.Summary(), "runtime_api", time.Since(start).Round(time.Microsecond))
	if res, failed := p.write(ctx, c, reason); failed {
		return res, true
	}
	return Result{Outcome: Applied, Hash: hash}, true
}

// write makes the rendering HAProxy runs (through the runtime API) the live generation, with
// no reload: at once when it was validated already; else through the background writer, or,
// when none runs (Sync called on its own), here. failed is true with the result of a failure.
func (p *Pipeline) write(ctx context.Context, c *candidate.Candidate, reason string) (res Result, failed bool) {
	job := &generation.WriteJob{Hash: c.Bundle.Hash, Content: c.Bundle.Content(), Keep: p.HAProxy().Good.Gen,
		Payload: writePayload{bundle: c.Bundle, info: c.Info, reason: reason}}
	if c.Gen != nil {
		var err error
		p.withStore(func() { err = p.cfg.Store.Activate(c.Gen) })
		if err != nil {
			return p.fail(status.FailActivate, err), true
		}
		p.written(generation.Written{Job: job, Gen: c.Gen})
		return Result{}, false
	}
	if p.writer.Queue(job) {
		return Result{}, false
	}
	w := p.writer.WriteNow(ctx, job, candidate.IsRejected)
	switch {
	case w.Rejected != nil:
		p.revertRuntime(ctx)
		return p.cannotRender(w.Rejected, p.q.Held), true
	case w.Err != nil:
		return p.fail(candidate.FailureStage(w.Err, status.FailWrite), w.Err), true
	}
	p.written(w)
	return Result{}, false
}

// writePayload is what the pipeline needs back from a write.
type writePayload struct {
	bundle *render.Bundle
	info   candidate.Info
	reason string
}

// written records a write of the background writer (or one made at once): on success the
// rendering is the last good one and is reported live; a rejection or failure makes the
// next sync deal with it.
func (p *Pipeline) written(w generation.Written) {
	pl := w.Job.Payload.(writePayload)
	switch {
	case w.Superseded:
		// A newer rendering is being written.
	case w.Rejected != nil:
		// The next sync takes the runtime changes back and reports the rejection.
		p.Changed()
	case w.Err != nil:
		if errors.Is(w.Err, context.Canceled) {
			return
		}
		// Disk trouble: the next sync tries again, after a pause.
		p.fail(candidate.FailureStage(w.Err, status.FailWrite), w.Err)
		time.AfterFunc(time.Second, p.Changed)
	default:
		_, after := p.change(func(s live.State) live.State { return s.FilesWritten(pl.bundle, w.Gen, time.Now()) })
		if after.Runs != pl.bundle.Hash {
			// A newer change went live meanwhile: its own write reports it.
			return
		}
		p.applied(pl.info, pl.bundle.Hash, pl.reason)
		p.log.Debug("generation written and validated", "hash", short(pl.bundle.Hash), "waited", w.Waited.Round(time.Millisecond), "took", w.Took.Round(time.Millisecond))
	}
}

// revertRuntime brings HAProxy back to the last good rendering, through the runtime API when
// it can, else by reloading the live files (the last good generation).
func (p *Pipeline) revertRuntime(ctx context.Context) {
	var plan *runtimeapi.Plan
	s := p.HAProxy()
	good := s.Good.Bundle
	if good != nil && p.cfg.Runtime != nil {
		plan = p.cfg.Runtime.Plan(s.Model, good.Config, good.Certificates, good.Maps)
		if plan.Reload() == "" {
			before, _ := p.change(live.State.RuntimeChanging)
			m, err := p.cfg.Runtime.Apply(ctx, plan, before.Model)
			if err == nil {
				p.change(func(s live.State) live.State { return s.RevertedAtRuntime(m, time.Now()) })
				p.reportLive(good.Hash)
				p.log.Warn("runtime API changes that did not validate were taken back", "changes", plan.Summary())
				return
			}
			p.log.Error("taking back runtime API changes that did not validate failed: reloading the last good configuration", "error", err)
		}
	}
	p.change(live.State.RuntimeFailed)
	if err := p.reloadHAProxy(ctx); err != nil {
		p.log.Error("reload of the last good configuration", "error", err)
		p.change(func(s live.State) live.State { return s.ReloadUnknown(time.Now()) })
		return
	}
	if good == nil {
		p.change(func(s live.State) live.State { return s.ReloadUnknown(time.Now()) })
		return
	}
	load := p.loadID(ctx)
	p.change(func(s live.State) live.State { return s.Reloaded(good, s.Good.Gen, load, plan.Loaded(), time.Now()) })
	p.reportLive(good.Hash)
}

// reportLive reports the rendering hash live again after a revert: the rejected one was
// reported live when the runtime API made it so (the caller then reports the rejection).
func (p *Pipeline) reportLive(hash string) {
	p.cfg.Metrics.LiveGenerationInfo.Reset()
	p.cfg.Metrics.LiveGenerationInfo.WithLabelValues(hash).Set(1)
	p.cfg.Health.Applied()
}

func (p *Pipeline) countRuntime(plan *runtimeapi.Plan) {
	for kind, n := range plan.Counts() {
		p.cfg.Metrics.RuntimeUpdates.WithLabelValues(kind).Add(float64(n))
	}
}
