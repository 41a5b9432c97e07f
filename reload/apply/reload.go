package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/rollout"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/tracing"

	"go.opentelemetry.io/otel/attribute"
)

// reload makes the candidate live through a reload: the files swapped atomically, HAProxy
// reloaded, the reload confirmed; a refused reload, or a canary that failed, rolls the files
// back (the caller blames the changed inputs: Result.Refused).
func (a *Applier) reload(ctx context.Context, j Job, why string) Result {
	m := a.cfg.Metrics
	hash := j.Bundle.Hash
	a.cfg.Writer.Drop() // a rendering waiting to be written is older than this one
	m.Rendered("success")
	a.log.InfoContext(ctx, "reloading HAProxy", "why", why, "hash", short(hash))
	if err := a.cfg.Writer.Activate(j.Gen); err != nil {
		return a.cfg.Report.Failure(ctx, failure.Activate, fmt.Errorf("activate generation: %w", err))
	}
	start := time.Now()
	rctx, span := tracing.Start(ctx, "reload", attribute.String("reload.endpoint", a.cfg.Endpoint), attribute.String("reload.why", why))
	err := a.reloadHAProxy(rctx)
	tracing.End(span, err)
	took := time.Since(start)
	var failed *reload.Failed
	var canary *rollout.Refused
	switch {
	case err == nil:
		load := a.loadID(ctx)
		a.cfg.Health.Applied()
		model := a.cfg.Runtime.Learn(ctx, j.Plan.Loaded())
		a.cfg.HAProxy.Record(live.Reloaded{Bundle: j.Bundle, Gen: j.Gen, Load: load, Model: model, At: time.Now()})
		m.ReloadSucceeded(a.countedEndpoint(), took, hash)
		if !a.cfg.ReloaderCounts {
			m.ObserveLive(ctx, live.PathReload) // else per host, by the reloader
		}
		a.applied(j.Info, hash, j.Reason)
		a.log.InfoContext(ctx, "configuration live", "reason", j.Reason, "hash", short(hash),
			"revision", j.Info.Revision, "services", j.Info.Services, "certificates", j.Info.Certificates, "reload", took.Round(time.Millisecond))
		return Result{Outcome: Applied, Hash: hash, Reloaded: true}
	case errors.Is(err, reload.ErrNotRunning):
		return a.writtenWhileDown(j, err)
	case errors.Is(err, reload.ErrRenderAgain):
		a.cfg.HAProxy.Record(live.RenderAgain{At: time.Now()})
		a.rollback()
		a.log.InfoContext(ctx, "rendering again before anything goes live", "reason", err)
		a.cfg.Changed()
		return Result{Outcome: Rejected, Hash: hash, Err: err}
	case errors.As(err, &canary):
		// Blamed as a refused reload is: the canary runs the last good configuration again,
		// the other hosts never left it.
		a.cfg.HAProxy.Record(live.ReloadRefused{Hash: hash, At: time.Now()})
		a.rollback()
		rerr := &snapshot.InputError{Stage: snapshot.StageCanary, Ref: j.Info.TemplateRef, Err: err}
		return Result{Outcome: Rejected, Hash: hash, Err: rerr, Refused: true}
	case errors.As(err, &failed):
		a.cfg.HAProxy.Record(live.ReloadRefused{Hash: hash, At: time.Now()})
		a.rollback()
		if !a.cfg.ReloaderCounts {
			m.ReloadEnded(a.cfg.Endpoint, "failed")
		}
		rerr := &snapshot.InputError{Stage: snapshot.StageReload, Ref: j.Info.TemplateRef,
			Err: fmt.Errorf("HAProxy refused the new configuration at reload (the previous one keeps serving): %w", err)}
		return Result{Outcome: Rejected, Hash: hash, Err: rerr, Refused: true}
	default:
		a.cfg.HAProxy.Record(live.ReloadUnknown{At: time.Now()})
		if !a.cfg.ReloaderCounts {
			m.ReloadEnded(a.cfg.Endpoint, "error")
		}
		return a.cfg.Report.Failure(ctx, failure.Reload, fmt.Errorf("reload: %w", err))
	}
}

// writtenWhileDown: the files are in place but HAProxy does not run (err): it loads them when
// it starts; when it should run, not reaching it is a fault (a wrong --master-socket, HAProxy
// down), not a start-up race.
func (a *Applier) writtenWhileDown(j Job, err error) Result {
	hash := j.Bundle.Hash
	ev := live.WrittenWhileDown{Bundle: j.Bundle, Gen: j.Gen, Model: j.Plan.Loaded()}
	if a.cfg.ExpectRunning {
		ev.Unreachable = err.Error()
	}
	a.cfg.HAProxy.Record(ev)
	a.prune()
	a.cfg.Health.Written()
	if a.cfg.ExpectRunning {
		a.cfg.Metrics.SyncFailed(failure.Reload)
		a.log.Error("HAProxy cannot be reached: the configuration is written and not loaded", "hash", short(hash), "error", err)
		return Result{Outcome: Failed, Hash: hash, Err: err, Retry: true}
	}
	a.log.Info("configuration written; HAProxy is not running yet and will load it at start",
		"reason", j.Reason, "hash", short(hash), "error", err)
	return Result{Outcome: Written, Hash: hash}
}

// reloadHAProxy asks for a reload; the probe does not take the master's silence meanwhile
// for HAProxy being down. The caller records the outcome, which ends the reload.
func (a *Applier) reloadHAProxy(ctx context.Context) error {
	a.cfg.HAProxy.Record(live.ReloadStarted{})
	return a.cfg.Reloader.Reload(ctx)
}

// loadIdentifier is a reloader that can tell which load of HAProxy runs now (see
// reload.MasterSocket.LoadID).
type loadIdentifier interface {
	LoadID(ctx context.Context) (string, error)
}

// loadID is the HAProxy load that runs now, when the reloader can tell ("" otherwise).
func (a *Applier) loadID(ctx context.Context) string {
	li, ok := a.cfg.Reloader.(loadIdentifier)
	if !ok {
		return ""
	}
	id, err := li.LoadID(ctx)
	if err != nil {
		a.log.DebugContext(ctx, "cannot tell which load of HAProxy runs the new configuration", "error", err)
		return ""
	}
	return id
}

// rollback makes the last good generation live again (a reload refused the new one).
func (a *Applier) rollback() {
	if err := a.cfg.Writer.Rollback(a.cfg.HAProxy.State().Good.Gen); err != nil {
		a.log.Error("rollback to the last good generation failed", "error", err)
	}
}

// deferReload holds a reload asked within MinReloadInterval of the previous one: the changes
// the runtime API can make are made now, and the reload happens when the interval is over,
// with whatever the inputs are then (latest wins).
func (a *Applier) deferReload(ctx context.Context, j Job) Result {
	plan, d := j.Plan, j.Decision
	if plan.Changes() > 0 {
		// HAProxy will run no rendering until the reload: the old one with some of the new
		// servers.
		before, _ := a.cfg.HAProxy.Record(live.RuntimeChanging{})
		if m, err := a.cfg.Runtime.Apply(ctx, plan, before.Model); err != nil {
			a.cfg.HAProxy.Record(live.RuntimeFailed{})
			a.log.DebugContext(ctx, "runtime API update while a reload waits failed; the reload will load it", "error", err)
		} else {
			a.cfg.HAProxy.Record(live.RuntimeWhileWaiting{Model: m})
			a.cfg.Metrics.RuntimeUpdated(plan.Counts())
			a.log.InfoContext(ctx, "made at runtime while the reload waits", "changes", plan.Summary())
		}
	}
	a.cfg.HAProxy.Record(live.ReloadDeferred{At: d.At})
	a.prune()
	wait := time.Until(d.At)
	a.log.InfoContext(ctx, "reload deferred (--min-reload-interval)", "why", d.Why, "in", wait.Round(time.Millisecond), "hash", short(j.Bundle.Hash))
	return Result{Outcome: Deferred, Hash: j.Bundle.Hash, ReloadIn: wait}
}

// countedEndpoint is the endpoint label reloads are counted under ("" when the reloader
// counts them).
func (a *Applier) countedEndpoint() string {
	if a.cfg.ReloaderCounts {
		return ""
	}
	return a.cfg.Endpoint
}
