package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/tracing"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"

	"go.opentelemetry.io/otel/attribute"
)

// Runtime changes a running HAProxy through its runtime API where the change allows it, so
// that no reload is needed (see package runtimeapi). It keeps no state: what HAProxy runs as
// the runtime API sees it is the Model in the record of HAProxy (package live).
type Runtime interface {
	// Plan compares a rendering (configuration, certificates, map files) with what HAProxy
	// runs (m; nil: not known).
	Plan(m *runtimeapi.Model, config []byte, certs, maps map[string][]byte) *runtimeapi.Plan
	// Apply makes the plan's runtime changes to what HAProxy runs (current) and returns what
	// it runs then; on error what HAProxy runs is not known.
	Apply(ctx context.Context, p *runtimeapi.Plan, current *runtimeapi.Model) (*runtimeapi.Model, error)
	// Tidy deletes the removed servers HAProxy kept because they still had connections (and
	// the removed backends they kept); it returns what HAProxy runs then, and how many are left.
	Tidy(ctx context.Context, m *runtimeapi.Model) (*runtimeapi.Model, int)
	// Learn returns m, what HAProxy runs once it loaded a configuration, with what the runtime
	// API can tell of that HAProxy (its version: whether it adds backends at runtime).
	Learn(ctx context.Context, m *runtimeapi.Model) *runtimeapi.Model
}

// reloadsOnly is the Runtime when there is no runtime API: every change reloads.
type reloadsOnly struct{}

func (reloadsOnly) Plan(*runtimeapi.Model, []byte, map[string][]byte, map[string][]byte) *runtimeapi.Plan {
	return runtimeapi.ReloadPlan("every change reloads (no runtime API)")
}

func (reloadsOnly) Apply(context.Context, *runtimeapi.Plan, *runtimeapi.Model) (*runtimeapi.Model, error) {
	return nil, errors.New("no runtime API")
}

func (reloadsOnly) Tidy(_ context.Context, m *runtimeapi.Model) (*runtimeapi.Model, int) { return m, 0 }

func (reloadsOnly) Learn(_ context.Context, m *runtimeapi.Model) *runtimeapi.Model { return m }

// Plan compares the rendering with what HAProxy runs: why is "" when the runtime API can make
// the whole change, else why a reload is needed.
func (a *Applier) Plan(b *render.Bundle) (plan *runtimeapi.Plan, why string) {
	return PlanFor(a.cfg.Runtime, a.cfg.HAProxy.State(), b)
}

// PlanFor compares the rendering b with what HAProxy runs as s says, through rt (nil: no
// runtime API): why is "" when the runtime API can make the whole change, else why a reload
// is needed. It changes nothing.
func PlanFor(rt Runtime, s live.State, b *render.Bundle) (plan *runtimeapi.Plan, why string) {
	if rt == nil {
		rt = reloadsOnly{}
	}
	plan = rt.Plan(s.Model, b.Config, b.Certificates, b.Maps)
	if why := plan.Reload(); why != "" {
		return plan, why
	}
	// The contents of map files change through the runtime API (the plan); other files, and
	// map files added or removed, only through a reload: those of the last good rendering are
	// the ones HAProxy loaded.
	return plan, auxChanged(s.Good.Bundle, b)
}

// Loaded is what the runtime API sees of HAProxy once it loaded b (nil without a runtime API),
// HAProxy's version included when it answers.
func (a *Applier) Loaded(ctx context.Context, b *render.Bundle) *runtimeapi.Model {
	return a.cfg.Runtime.Learn(ctx, a.cfg.Runtime.Plan(nil, b.Config, b.Certificates, b.Maps).Loaded())
}

// Tidy deletes again the removed servers that still had connections.
func (a *Applier) Tidy(ctx context.Context) {
	m, left := a.cfg.Runtime.Tidy(ctx, a.cfg.HAProxy.State().Model)
	a.cfg.HAProxy.Record(live.RuntimeTidied{Model: m})
	if left > 0 {
		a.log.Debug("removed servers still holding connections, in maintenance", "servers", left)
	}
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
// When the runtime API failed, the Result says RuntimeFailed: the caller reloads instead.
func (a *Applier) runtimeUpdate(ctx context.Context, j Job) Result {
	m := a.cfg.Metrics
	hash, plan := j.Bundle.Hash, j.Plan
	start := time.Now()
	// Until the rendering is live on disk, the record of what HAProxy runs would be wrong
	// half way: it says nothing (the write records it again).
	before, _ := a.cfg.HAProxy.Record(live.RuntimeChanging{})
	rctx, span := tracing.Start(ctx, "runtime api", attribute.String("runtime.changes", plan.Summary()))
	model, err := a.cfg.Runtime.Apply(rctx, plan, before.Model)
	tracing.End(span, err)
	if err != nil {
		m.RuntimeFellBack()
		a.cfg.HAProxy.Record(live.RuntimeFailed{})
		if before.LoadsAtStart != "" {
			// Expected while HAProxy has not started: the reload path writes the files it
			// will load (and says so).
			a.log.InfoContext(ctx, "runtime API not reachable, HAProxy not started yet: writing the configuration instead", "error", err)
		} else {
			a.log.WarnContext(ctx, "runtime API update failed: reloading instead", "error", err)
		}
		return Result{RuntimeFailed: true}
	}
	load := ""
	if before.LoadsAtStart != "" {
		// HAProxy answered: it started on the files the sidecar wrote while it was down, and
		// now runs them with these changes. Learn its load now, or the probe would take it
		// for a start the sidecar knows nothing of and forget these changes.
		load = a.loadID(ctx)
	}
	a.cfg.Health.Applied() // HAProxy answered: it runs it (the files follow)
	a.cfg.HAProxy.Record(live.RuntimeApplied{Hash: hash, Model: model, Load: load, At: time.Now()})
	m.Rendered("success")
	m.RuntimeUpdated(plan.Counts())
	m.RuntimeApplied(hash)
	m.ObserveLive(ctx, live.PathRuntime)
	a.log.InfoContext(ctx, "configuration live without a reload", "reason", j.Reason, "hash", short(hash),
		"changes", plan.Summary(), "runtime_api", time.Since(start).Round(time.Microsecond))
	if res, failed := a.write(ctx, j); failed {
		return res
	}
	return Result{Outcome: Applied, Hash: hash}
}

// write makes the rendering HAProxy runs (through the runtime API) the live generation, with
// no reload: at once when it was validated already; else through the background writer, or,
// when none runs (Sync called on its own), here. failed is true with the result of a failure.
func (a *Applier) write(ctx context.Context, j Job) (res Result, failed bool) {
	job := &generation.WriteJob{Hash: j.Bundle.Hash, Content: j.Bundle.Content(),
		Payload: written{bundle: j.Bundle, info: j.Info, reason: j.Reason}}
	if j.Gen != nil {
		if err := a.cfg.Writer.Activate(j.Gen); err != nil {
			return a.cfg.Report.Failure(ctx, failure.Activate, err), true
		}
		a.Written(generation.Written{Job: job, Gen: j.Gen})
		return Result{}, false
	}
	if a.cfg.Writer.Queue(job) {
		return Result{}, false
	}
	w := a.cfg.Writer.WriteNow(ctx, job)
	switch {
	case w.Rejected != nil:
		a.cfg.HAProxy.Record(live.CheckRefused{Hash: job.Hash, Err: w.Rejected})
		a.revertRuntime(ctx)
		a.cfg.ValidateNext() // the data at fault is searched for
		a.cfg.Changed()
		return a.cfg.Report.Rejection(ctx, w.Rejected), true
	case w.Err != nil:
		return a.cfg.Report.Failure(ctx, failure.StageOf(w.Err, failure.Write), w.Err), true
	}
	a.Written(w)
	return Result{}, false
}

// written is what a write needs to report.
type written struct {
	bundle *render.Bundle
	info   snapshot.Summary
	reason string
}

// Written records a write of the background writer (or one made at once): on success the
// rendering is the last good one and is reported live; a rejection or failure makes the next
// sync deal with it.
func (a *Applier) Written(w generation.Written) {
	pl := w.Job.Payload.(written)
	switch {
	case w.Superseded:
		// A newer rendering is being written.
	case w.Rejected != nil:
		// The next sync validates, takes the runtime changes back or past the data at
		// fault, and reports the rejection.
		a.cfg.HAProxy.Record(live.CheckRefused{Hash: w.Job.Hash, Err: w.Rejected})
		a.cfg.ValidateNext()
		a.cfg.Changed()
	case w.Err != nil:
		if errors.Is(w.Err, context.Canceled) {
			return
		}
		// Disk trouble (full, read-only): HAProxy runs the change already; the next sync
		// tries the write again, after a pause (files_behind says they are behind). The
		// same trouble is reported once.
		if msg := w.Err.Error(); a.lastWriteErr.Swap(msg) != msg {
			// The background writer's: no sync's context.
			a.cfg.Report.Failure(context.Background(), failure.StageOf(w.Err, failure.Write), w.Err)
		}
		time.AfterFunc(time.Second, a.cfg.Changed)
	default:
		a.lastWriteErr.Store("")
		_, after := a.cfg.HAProxy.Record(live.FilesWritten{Bundle: pl.bundle, Gen: w.Gen, At: time.Now()})
		if after.Runs != pl.bundle.Hash {
			// A newer change went live meanwhile: its own write reports it.
			return
		}
		a.applied(pl.info, pl.bundle.Hash, pl.reason)
		a.log.Debug("generation written and validated", "hash", short(pl.bundle.Hash), "waited", w.Waited.Round(time.Millisecond), "took", w.Took.Round(time.Millisecond))
	}
}

// revertRuntime brings HAProxy back to the last good rendering, through the runtime API when
// it can, else by reloading the live files (the last good generation).
func (a *Applier) revertRuntime(ctx context.Context) {
	s := a.cfg.HAProxy.State()
	good := s.Good.Bundle
	var plan *runtimeapi.Plan
	if good != nil {
		plan = a.cfg.Runtime.Plan(s.Model, good.Config, good.Certificates, good.Maps)
		if plan.Reload() == "" {
			before, _ := a.cfg.HAProxy.Record(live.RuntimeChanging{})
			m, err := a.cfg.Runtime.Apply(ctx, plan, before.Model)
			if err == nil {
				a.cfg.HAProxy.Record(live.RevertedAtRuntime{Model: m, At: time.Now()})
				a.reportLive(good.Hash)
				a.log.WarnContext(ctx, "runtime API changes that did not validate were taken back", "changes", plan.Summary())
				return
			}
			a.log.ErrorContext(ctx, "taking back runtime API changes that did not validate failed: reloading the last good configuration", "error", err)
		}
	}
	a.cfg.HAProxy.Record(live.RuntimeFailed{})
	if err := a.reloadHAProxy(ctx); err != nil {
		a.log.ErrorContext(ctx, "reload of the last good configuration", "error", err)
		a.cfg.HAProxy.Record(live.ReloadUnknown{At: time.Now()})
		return
	}
	if good == nil {
		a.cfg.HAProxy.Record(live.ReloadUnknown{At: time.Now()})
		return
	}
	load := a.loadID(ctx)
	a.cfg.HAProxy.Record(live.Reloaded{Bundle: good, Gen: s.Good.Gen, Load: load, Model: a.cfg.Runtime.Learn(ctx, plan.Loaded()), At: time.Now()})
	a.reportLive(good.Hash)
}

// reportLive reports the rendering hash live again after a revert: the rejected one was
// reported live when the runtime API made it so (the caller then reports the rejection).
func (a *Applier) reportLive(hash string) {
	a.cfg.Metrics.LiveAgain(hash)
	a.cfg.Health.Applied()
}
