package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
)

// Runtime changes a running HAProxy through its runtime API where the change allows it, so
// that no reload is needed (see package runtimeapi).
type Runtime interface {
	// Plan compares a rendering with what HAProxy runs.
	Plan(config []byte, certs map[string][]byte) *runtimeapi.Plan
	// Apply makes the plan's runtime changes; on error what HAProxy runs is unknown.
	Apply(ctx context.Context, p *runtimeapi.Plan) error
	// Reloaded records that HAProxy loaded the plan's rendering.
	Reloaded(p *runtimeapi.Plan)
	// Undo takes the last Apply back.
	Undo(ctx context.Context) error
	// Forget records that what HAProxy runs is unknown.
	Forget()
}

// planRuntime compares the rendering with what HAProxy runs: why is "" when the runtime API can
// make the whole change, else why a reload is needed.
func (p *Pipeline) planRuntime(bundle *render.Bundle) (plan *runtimeapi.Plan, why string) {
	if p.cfg.Runtime == nil {
		return nil, "every change reloads (no runtime API)"
	}
	plan = p.cfg.Runtime.Plan(bundle.Config, bundle.Certificates)
	return plan, plan.Reload()
}

// runtimeUpdate makes a change live through the runtime API, at once, then writes and validates
// the generation and makes it live on disk with no reload, so that a later reload loads the
// same. A change that fails validation is taken back. done reports that the sync is over (res
// says how); otherwise fallback says why a reload is needed after all.
func (p *Pipeline) runtimeUpdate(ctx context.Context, plan *runtimeapi.Plan, bundle *render.Bundle, snap *snapshot.Snapshot, reason string) (res Result, fallback string, done bool) {
	m := p.cfg.Metrics
	start := time.Now()
	if err := p.cfg.Runtime.Apply(ctx, plan); err != nil {
		m.RuntimeFallbacks.Inc()
		p.log.Warn("runtime API update failed: reloading instead", "error", err)
		return Result{}, "the runtime API update failed: " + err.Error(), false
	}
	took := time.Since(start)
	gen, failed := p.stage(ctx, bundle, snap)
	if failed != nil {
		p.undoRuntime(ctx)
		return *failed, "", true
	}
	p.countRuntime(plan)
	if err := p.cfg.Store.Activate(gen); err != nil {
		return p.fail(fmt.Errorf("activate generation (HAProxy already runs it through the runtime API): %w", err)), "", true
	}
	p.cfg.Store.MarkGood(gen)
	p.reloadAt = time.Time{}
	m.RuntimeApplied(bundle.Hash)
	p.log.Info("configuration live without a reload", "reason", reason, "hash", short(bundle.Hash),
		"changes", plan.Summary(), "runtime_api", took.Round(time.Microsecond), "written", time.Since(start).Round(time.Millisecond))
	p.applied(snap, bundle, reason)
	return Result{Outcome: "applied", Hash: bundle.Hash}, "", true
}

// undoRuntime takes back a runtime change that did not validate; when that fails, HAProxy
// reloads the live files (the last good generation).
func (p *Pipeline) undoRuntime(ctx context.Context) {
	err := p.cfg.Runtime.Undo(ctx)
	if err == nil {
		p.log.Warn("the runtime API change did not validate and was taken back")
		return
	}
	p.log.Error("taking back a runtime API change that did not validate failed: reloading the last good configuration", "error", err)
	p.cfg.Runtime.Forget()
	p.lastReload = time.Now()
	if err := p.cfg.Reloader.Reload(ctx); err != nil {
		p.log.Error("reload of the last good configuration", "error", err)
	}
}

func (p *Pipeline) countRuntime(plan *runtimeapi.Plan) {
	for kind, n := range plan.Counts() {
		p.cfg.Metrics.RuntimeUpdates.WithLabelValues(kind).Add(float64(n))
	}
}

// deferReload holds a reload asked within MinReloadInterval of the previous one: the changes
// the runtime API can make are made now, and the reload happens when the interval is over,
// with whatever the inputs are then (latest wins).
func (p *Pipeline) deferReload(ctx context.Context, plan *runtimeapi.Plan, bundle *render.Bundle, why string) (Result, bool) {
	if p.cfg.MinReloadInterval <= 0 || p.lastReload.IsZero() {
		return Result{}, false
	}
	at := p.lastReload.Add(p.cfg.MinReloadInterval)
	wait := time.Until(at)
	if wait <= 0 {
		return Result{}, false
	}
	if plan != nil && plan.Changes() > 0 {
		if err := p.cfg.Runtime.Apply(ctx, plan); err != nil {
			p.log.Debug("runtime API update while a reload waits failed; the reload will load it", "error", err)
		} else {
			p.countRuntime(plan)
			p.log.Info("made at runtime while the reload waits", "changes", plan.Summary())
		}
	}
	p.reloadAt = at
	if err := p.cfg.Store.Prune(); err != nil {
		p.log.Warn("prune old generations", "error", err)
	}
	p.log.Info("reload deferred (--min-reload-interval)", "why", why, "in", wait.Round(time.Millisecond), "hash", short(bundle.Hash))
	return Result{Outcome: "deferred", Hash: bundle.Hash, ReloadIn: wait}, true
}

// reloadDone records a reload's outcome for the reload interval and the runtime API.
func (p *Pipeline) reloadDone(plan *runtimeapi.Plan, err error) {
	notRunning := errors.Is(err, reload.ErrNotRunning)
	if !notRunning {
		p.lastReload = time.Now()
	}
	p.reloadAt = time.Time{}
	if p.cfg.Runtime == nil {
		return
	}
	var failed *reload.Failed
	switch {
	case err == nil || notRunning:
		// HAProxy runs the files just made live (or loads them when it starts).
		p.cfg.Runtime.Reloaded(plan)
	case errors.As(err, &failed):
		// Refused: the previous workers keep running what they ran.
	default:
		p.cfg.Runtime.Forget()
	}
}
