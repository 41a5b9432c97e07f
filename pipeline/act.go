package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/status"
)

// act carries out a decision. blamed are the changed inputs a refused reload is blamed on
// (held back from the next sync on).
func (p *Pipeline) act(ctx context.Context, d Decision, c *candidate.Candidate, plan *runtimeapi.Plan, reason string) (res Result, blamed map[string]error) {
	hash := c.Bundle.Hash
	switch d.Action {
	case DoNothing:
		return p.nothing(ctx, c, reason), nil
	case DoRuntime:
		if res, ok := p.runtimeUpdate(ctx, plan, c, reason); ok {
			return res, nil
		}
		return p.reload(ctx, c, plan, "the runtime API update failed", reason)
	case DoDefer:
		return p.deferReload(ctx, c, plan, d), nil
	case DoStandby:
		if res, ok := p.validated(ctx, c); !ok {
			return res, nil
		}
		p.prune()
		p.cfg.Health.Standby()
		p.cfg.Metrics.ConfigValid.Set(1)
		p.log.Info("standby: configuration rendered and valid, not applied (not the leader)", "reason", reason, "hash", short(hash))
		return Result{Outcome: StandingBy, Hash: hash}, nil
	case DoHold:
		err := errors.New(d.Why)
		p.log.Warn("configuration not applied", "why", d.Why, "hash", short(hash))
		p.cfg.Health.Failed(err)
		return Result{Outcome: Rejected, Hash: hash, Err: err}, nil
	}
	return p.reload(ctx, c, plan, d.Why, reason)
}

// nothing: HAProxy runs this rendering. The files are made to say so if the writer could not.
func (p *Pipeline) nothing(ctx context.Context, c *candidate.Candidate, reason string) Result {
	hash := c.Bundle.Hash
	p.cfg.Metrics.Renders.WithLabelValues("unchanged").Inc()
	if live := p.cfg.Store.Live(); (live == nil || live.Hash != hash) && !p.writer.Pending(hash) {
		// HAProxy got it through the runtime API and the write failed: write it again.
		if res, failed := p.write(ctx, c, reason); failed {
			return res
		}
	}
	if p.HAProxy().Runs == hash {
		p.cfg.Health.Applied() // still live; clears an error the operator has since fixed
	}
	p.log.Debug("render unchanged, nothing to do", "reason", reason, "hash", short(hash))
	return Result{Outcome: Unchanged, Hash: hash}
}

// validated makes sure c is staged and validated: ok false with the result to return when it
// is not valid or cannot be staged.
func (p *Pipeline) validated(ctx context.Context, c *candidate.Candidate) (Result, bool) {
	err := p.build.Validated(ctx, c)
	switch {
	case err == nil:
		return Result{}, true
	case candidate.IsRejected(err):
		// Nothing an operator edits changed, yet the rendering does not validate: pods (or
		// the environment) make the template produce a bad configuration.
		return p.cannotRender(err, p.q.Held), false
	}
	return p.fail(candidate.FailureStage(err, status.FailStage), err), false
}

// withStore runs f while the background writer does not write.
func (p *Pipeline) withStore(f func()) { p.writer.Exclusive(f) }

// prune deletes the generations nothing needs any more (the live, the last good and the newest
// staged ones stay).
func (p *Pipeline) prune() {
	good := p.HAProxy().Good.Gen
	p.withStore(func() {
		if err := p.cfg.Store.Prune(good); err != nil {
			p.log.Warn("prune old generations", "error", err)
		}
	})
}

// rollback makes the last good generation live again (a reload refused the new one).
func (p *Pipeline) rollback() {
	good := p.HAProxy().Good.Gen
	var err error
	p.withStore(func() {
		if p.cfg.Store.Live() != nil {
			err = p.cfg.Store.Rollback(good)
		}
		_ = p.cfg.Store.Prune(good)
	})
	if err != nil {
		p.log.Error("rollback to the last good generation failed", "error", err)
	}
}

// reload makes c live through a reload: the files swapped atomically, HAProxy reloaded, the
// reload confirmed; a refused reload rolls the files back and blames the changed inputs.
func (p *Pipeline) reload(ctx context.Context, c *candidate.Candidate, plan *runtimeapi.Plan, why, reason string) (Result, map[string]error) {
	m := p.cfg.Metrics
	hash := c.Bundle.Hash
	p.writer.Drop() // a rendering waiting to be written is older than this one
	if res, ok := p.validated(ctx, c); !ok {
		return res, nil
	}
	m.Renders.WithLabelValues("success").Inc()
	p.log.Info("reloading HAProxy", "why", why, "hash", short(hash))
	var err error
	p.withStore(func() { err = p.cfg.Store.Activate(c.Gen) })
	if err != nil {
		return p.fail(status.FailActivate, fmt.Errorf("activate generation: %w", err)), nil
	}
	rstart := time.Now()
	err = p.reloadHAProxy(ctx)
	took := time.Since(rstart)
	var failed *reload.Failed
	switch {
	case err == nil:
		load := p.loadID(ctx)
		p.cfg.Health.Applied()
		p.change(func(s live.State) live.State { return s.Reloaded(c.Bundle, c.Gen, load, plan.Loaded(), time.Now()) })
		m.ReloadSucceeded(p.countedEndpoint(), took, hash)
		p.applied(c.Info, hash, reason)
		p.log.Info("configuration live", "reason", reason, "hash", short(hash),
			"revision", c.Info.Revision, "services", c.Info.Services, "certificates", c.Info.Certificates, "reload", took.Round(time.Millisecond))
		return Result{Outcome: Applied, Hash: hash, Reloaded: true}, nil
	case errors.Is(err, reload.ErrNotRunning):
		// The files are in place: HAProxy loads them when it starts.
		p.change(func(s live.State) live.State {
			s = s.WrittenWhileDown(c.Bundle, c.Gen, plan.Loaded())
			if p.cfg.ExpectRunning {
				s = s.ProbedDown(err.Error())
			}
			return s
		})
		p.prune()
		p.cfg.Health.Written()
		if p.cfg.ExpectRunning {
			// HAProxy ran on these files before the sidecar started: not reaching it is a
			// fault (a wrong --master-socket, HAProxy down), not a start-up race.
			m.SyncFailures.WithLabelValues(status.FailReload).Inc()
			p.log.Error("HAProxy cannot be reached: the configuration is written and not loaded", "hash", short(hash), "error", err)
			return Result{Outcome: Failed, Hash: hash, Err: err, Retry: true}, nil
		}
		p.log.Info("configuration written; HAProxy is not running yet and will load it at start",
			"reason", reason, "hash", short(hash), "error", err)
		return Result{Outcome: Written, Hash: hash}, nil
	case errors.Is(err, reload.ErrRenderAgain):
		p.change(func(s live.State) live.State { return s.RenderAgain(time.Now()) })
		p.rollback()
		p.log.Info("rendering again before anything goes live", "reason", err)
		p.Changed()
		return Result{Outcome: Rejected, Hash: hash, Err: err}, nil
	case errors.As(err, &failed):
		p.change(func(s live.State) live.State { return s.ReloadRefused(hash, time.Now()) })
		p.rollback()
		if !p.cfg.ReloaderCounts {
			m.Reloads.WithLabelValues(p.cfg.Endpoint, "failed").Inc()
		}
		rerr := &snapshot.InputError{Stage: snapshot.StageReload, Ref: c.Info.TemplateRef,
			Err: fmt.Errorf("HAProxy refused the new configuration at reload (the previous one keeps serving): %w", err)}
		blamed := p.changedIn(c)
		for id := range blamed {
			blamed[id] = rerr
		}
		if len(blamed) > 0 {
			// Without them, the rest may go live: sync again at once.
			p.Changed()
		} else {
			p.reportError(snapshot.StageReload, rerr)
		}
		return Result{Outcome: Rejected, Hash: hash, Err: rerr}, blamed
	default:
		p.change(func(s live.State) live.State { return s.ReloadUnknown(time.Now()) })
		if !p.cfg.ReloaderCounts {
			m.Reloads.WithLabelValues(p.cfg.Endpoint, "error").Inc()
		}
		return p.fail(status.FailReload, fmt.Errorf("reload: %w", err)), nil
	}
}

// reloadHAProxy asks for a reload; the probe does not take the master's silence meanwhile
// for HAProxy being down. The caller records the outcome, which ends the reload.
func (p *Pipeline) reloadHAProxy(ctx context.Context) error {
	p.change(live.State.ReloadStarted)
	return p.cfg.Reloader.Reload(ctx)
}

// loadID is the HAProxy load that runs now, when the reloader can tell ("" otherwise).
func (p *Pipeline) loadID(ctx context.Context) string {
	li, ok := p.cfg.Reloader.(loadIdentifier)
	if !ok {
		return ""
	}
	id, err := li.LoadID(ctx)
	if err != nil {
		p.log.Debug("cannot tell which load of HAProxy runs the new configuration", "error", err)
		return ""
	}
	return id
}

// changedIn returns the inputs of c that are not at their last good version.
func (p *Pipeline) changedIn(c *candidate.Candidate) map[string]error {
	out := map[string]error{}
	inC := map[string]bool{}
	for _, in := range c.Chosen {
		inC[in.ID()] = true
		if g, ok := p.q.Good[in.ID()]; !ok || g.Hash != in.Hash {
			out[in.ID()] = nil
		}
	}
	for id := range p.q.Good {
		if !inC[id] {
			out[id] = nil // deleted
		}
	}
	return out
}

// deferReload holds a reload asked within MinReloadInterval of the previous one: the changes
// the runtime API can make are made now, and the reload happens when the interval is over,
// with whatever the inputs are then (latest wins).
func (p *Pipeline) deferReload(ctx context.Context, c *candidate.Candidate, plan *runtimeapi.Plan, d Decision) Result {
	if res, ok := p.validated(ctx, c); !ok {
		return res
	}
	if plan != nil && plan.Changes() > 0 {
		// HAProxy will run no rendering until the reload: the old one with some of the new
		// servers.
		before, _ := p.change(live.State.RuntimeChanging)
		if m, err := p.cfg.Runtime.Apply(ctx, plan, before.Model); err != nil {
			p.change(live.State.RuntimeFailed)
			p.log.Debug("runtime API update while a reload waits failed; the reload will load it", "error", err)
		} else {
			p.change(func(s live.State) live.State { return s.RuntimeWhileWaiting(m) })
			p.countRuntime(plan)
			p.log.Info("made at runtime while the reload waits", "changes", plan.Summary())
		}
	}
	p.change(func(s live.State) live.State { return s.ReloadDeferred(d.At) })
	p.prune()
	wait := time.Until(d.At)
	p.log.Info("reload deferred (--min-reload-interval)", "why", d.Why, "in", wait.Round(time.Millisecond), "hash", short(c.Bundle.Hash))
	return Result{Outcome: Deferred, Hash: c.Bundle.Hash, ReloadIn: wait}
}

// applied finishes a change that went live: old generations pruned, health and events.
func (p *Pipeline) applied(info candidate.Info, hash, reason string) {
	p.prune()
	p.appliedStatus(info, hash, reason)
}

// appliedStatus reports a change that went live, if HAProxy still runs it (a write finishing
// late never reports an older rendering over a newer one).
func (p *Pipeline) appliedStatus(info candidate.Info, hash, reason string) {
	if p.HAProxy().Runs != hash {
		return
	}
	p.cfg.Health.Applied()
	if p.cfg.Recorder != nil {
		msg := fmt.Sprintf("configuration %s is live (%s)", short(hash), reason)
		if info.TemplateRef != (snapshot.Ref{}) {
			p.cfg.Recorder.Event(refObject(info.TemplateRef), false, "Applied", msg)
		}
		if info.ServicesRef != (snapshot.Ref{}) {
			p.cfg.Recorder.Event(refObject(info.ServicesRef), false, "Applied", msg)
		}
	}
}
