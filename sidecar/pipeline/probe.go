package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/decide"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// What HAProxy runs when the sidecar starts, and when HAProxy starts or is reloaded without
// it: the probe, adoption at start, and the sync's look at a load the sidecar did not make.

// loadIdentifier is a reloader that can tell which load of HAProxy runs now (see
// reload.MasterSocket.LoadID): with it, a restarted sidecar leaves HAProxy alone when HAProxy
// still runs what the sidecar last made live, and the sidecar notices when HAProxy dies or
// restarts.
type loadIdentifier interface {
	LoadID(ctx context.Context) (string, error)
}

// downAfter is how long probes must keep failing before HAProxy counts as down: the 2.6 and
// 3.0 masters refuse connections while they parse the configuration on a reload (1-2 s for
// 10,000 backends). The sidecar's own reloads are not probed at all (Reloading).
const downAfter = 3 * time.Second

// downProbes: with a short --probe-interval, failing for this many intervals is enough.
const downProbes = 10

// watch asks HAProxy every ProbeInterval whether it runs, until ctx ends: the haproxy_up
// gauge, /readyz, a log line when it goes down or comes back, and a sync when it runs a load
// the sidecar did not make (it restarted, or someone reloaded it), so that the sidecar makes
// sure it runs the live configuration.
func (p *Pipeline) watch(ctx context.Context, li loadIdentifier) {
	t := time.NewTimer(0)
	defer t.Stop()
	var failingSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, p.cfg.ProbeInterval)
		id, err := li.LoadID(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case p.HAProxy().Reloading:
			// The sidecar's own reload: the master may refuse connections meanwhile.
		case err != nil && (errors.Is(err, reload.ErrNotRunning) || errors.Is(err, context.DeadlineExceeded)):
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(failingSince) >= min(downAfter, p.cfg.ProbeInterval*downProbes) {
				p.haproxyDown(err)
			}
		default:
			// It answered (an answer that names no load, after a refused reload, is still
			// an answer).
			failingSince = time.Time{}
			p.haproxyUp(id)
		}
		interval := p.cfg.ProbeInterval
		if !failingSince.IsZero() {
			interval = min(interval, 250*time.Millisecond) // confirm soon
		}
		t.Reset(interval)
	}
}

func (p *Pipeline) haproxyDown(err error) {
	p.cfg.Metrics.HAProxyUp.Set(0)
	wasReady := p.cfg.Health.Ready()
	pid := 0
	if p.cfg.FindHAProxy != nil {
		pid = p.cfg.FindHAProxy()
	}
	before, _ := p.haproxy.Record(live.ProbedDown{Why: err.Error(), Process: pid})
	if before.Probe.Seen == live.Down {
		return
	}
	if wasReady || p.cfg.ExpectRunning {
		p.log.Warn("HAProxy is down: its master socket does not answer", "error", err)
	} else {
		p.log.Info("HAProxy is not running (yet)", "error", err)
	}
}

func (p *Pipeline) haproxyUp(id string) {
	p.cfg.Metrics.HAProxyUp.Set(1)
	before, after := p.haproxy.Record(live.ProbedUp{Load: id})
	if before.Probe.Seen == live.Down {
		p.log.Info("HAProxy is up", "load", id)
	}
	if after.Restarted && !before.Restarted {
		p.haproxyChanged() // a load the sidecar did not make: the next sync looks
	}
}

// noticeHAProxy, at the start of a sync, deals with HAProxy running a load the sidecar did not
// make: it started (after the sidecar wrote its files, or again after a crash) or someone
// reloaded it. Either way it loaded the files on disk: when they are the last good rendering,
// that is what it runs (no reload needed); otherwise what it runs is unknown, and the sync
// reloads.
func (p *Pipeline) noticeHAProxy(ctx context.Context) {
	li, ok := p.cfg.Reloader.(loadIdentifier)
	if !ok {
		return
	}
	if before, _ := p.haproxy.Record(live.RestartNoticed{}); !before.Restarted || !p.adoptTried {
		return // the first sync finds out what HAProxy runs itself (adopt)
	}
	id, err := li.LoadID(ctx)
	if err != nil || id == p.HAProxy().Load {
		return // down again (the probe reports it), or the sidecar's own reload
	}
	p.writer.Drop() // HAProxy loaded what the disk held when it started
	s := p.HAProxy()
	livegen, good := p.cfg.Store.Live(), s.Good.Bundle
	if livegen == nil || good == nil || livegen.Hash != good.Hash {
		p.log.WarnContext(ctx, "HAProxy runs a configuration load the sidecar did not make: reloading it with the live configuration", "load", id)
		p.haproxy.Record(live.RestartedUnknown{})
		return
	}
	if s.LoadsAtStart != "" {
		p.log.InfoContext(ctx, "HAProxy started on the configuration the sidecar wrote", "hash", short(livegen.Hash), "load", id)
	} else {
		p.log.WarnContext(ctx, "HAProxy restarted or was reloaded by someone else: it loaded the live configuration", "hash", short(livegen.Hash), "load", id)
	}
	model := p.apply.Loaded(ctx, good)
	p.haproxy.Record(live.RestartedOnGood{Load: id, Model: model, At: time.Now()})
	p.cfg.Metrics.RunsConfirmed(livegen.Hash)
	p.cfg.Health.Applied()
}

// adoptLive is adopt, at start, for the live generation on disk when there is no rendering to
// compare it with (the source cannot be read): HAProxy runs what the sidecar made live before,
// which is then what is live (and /readyz says so), until the inputs can be read again.
func (p *Pipeline) adoptLive(ctx context.Context) {
	livegen := p.cfg.Store.Live()
	if p.adoptTried || p.standby() || livegen == nil || p.HAProxy().Record.Hash != livegen.Hash {
		return
	}
	c, err := generation.Read(livegen)
	if err != nil || c.Hash() != livegen.Hash {
		return
	}
	bundle := &render.Bundle{Config: c.Config, Certificates: c.Certs, Maps: c.Maps, Files: c.Files, Hash: livegen.Hash}
	p.adopt(ctx, bundle)
	p.adoptTried = p.HAProxy().Runs == livegen.Hash
}

// adopt leaves HAProxy alone at start when it runs what the rendering asks for already: the
// live generation is this rendering and HAProxy's load is the one recorded when it was made
// live (by an earlier run of the sidecar). Without this, restarting the sidecar would reload
// HAProxy. When that cannot be shown, what HAProxy runs stays unknown and the sync goes on as
// usual (a reload).
func (p *Pipeline) adopt(ctx context.Context, bundle *render.Bundle) {
	li, canTell := p.cfg.Reloader.(loadIdentifier)
	livegen := p.cfg.Store.Live()
	rec := p.HAProxy().Record
	if !canTell || rec.Hash == "" || livegen == nil || livegen.Hash != bundle.Hash || rec.Hash != bundle.Hash {
		return
	}
	id, err := li.LoadID(ctx)
	if err != nil || id != rec.LoadID {
		p.log.InfoContext(ctx, "HAProxy may not run the live configuration: it will be reloaded",
			"recorded_load", rec.LoadID, "load", id, "error", err)
		return
	}
	model := p.apply.Loaded(ctx, bundle)
	p.haproxy.Record(live.Adopted{Bundle: bundle, Gen: livegen, Load: id, Model: model, At: time.Now()})
	p.cfg.Metrics.ConfigValid.Set(1)
	p.cfg.Metrics.RunsConfirmed(bundle.Hash)
	p.log.InfoContext(ctx, "HAProxy already runs this configuration: no reload", "hash", short(bundle.Hash), "load", id)
}

// reuse ends a sync without rendering when nothing asked for one since the read of the last
// rendering that went live (asked has not moved: only HAProxy's own state did, as when HAProxy
// starts on the files the sidecar wrote) and, HAProxy's state noticed, that rendering needs
// nothing done: the render would give the same rendering, and decide nothing (at 3,000
// HTTPRoutes a render takes up to 1.4 s, which a real change would wait behind). When HAProxy
// runs something else (it restarted on other files), the sync renders and acts as always.
func (p *Pipeline) reuse(ctx context.Context, asked uint64, reason string) (apply.Result, bool) {
	r := p.rendered
	if r.hash == "" || r.asked != asked || p.trying {
		return apply.Result{}, false
	}
	s := p.HAProxy()
	d := decide.Decide(decide.Facts{Rendered: r.hash, HAProxy: s, Standby: p.standby(), ExpectRunning: p.cfg.ExpectRunning,
		Now: time.Now(), MinReloadInterval: p.cfg.MinReloadInterval})
	if livegen := p.cfg.Store.Live(); d.Action != decide.DoNothing || livegen == nil || livegen.Hash != r.hash {
		return apply.Result{}, false
	}
	p.acceptChecked()
	if s.Runs == r.hash {
		p.cfg.Health.Applied()
	}
	p.log.DebugContext(ctx, "nothing asked for a new rendering and HAProxy runs the last one: not rendered",
		"reason", reason, "hash", short(r.hash))
	return apply.Result{Outcome: apply.Unchanged, Hash: r.hash, Action: decide.DoNothing}, true
}
