package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/reload"
)

// downAfter is how long probes must keep failing before HAProxy counts as down: the 2.6 and
// 3.0 masters refuse connections while they parse the configuration on a reload (1-2 s for
// 10,000 backends). The sidecar's own reloads are not probed at all (reloading).
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
		case p.reloading.Load():
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
	if p.haproxyState.Swap(-1) != -1 {
		if p.cfg.Health.Ready() || p.cfg.ExpectRunning {
			p.log.Warn("HAProxy is down: its master socket does not answer", "error", err)
		} else {
			p.log.Info("HAProxy is not running (yet)", "error", err)
		}
	}
	p.cfg.Health.HAProxyDown(err.Error())
}

func (p *Pipeline) haproxyUp(id string) {
	p.cfg.Metrics.HAProxyUp.Set(1)
	if p.haproxyState.Swap(1) == -1 {
		p.log.Info("HAProxy is up", "load", id)
	}
	p.cfg.Health.HAProxyUp()
	if id == "" {
		return
	}
	prev, _ := p.probedLoad.Swap(id).(string)
	// A load the sidecar did not make, while it knows which one HAProxy should run (it made
	// one, or wrote files while HAProxy was down): let the next sync look.
	if mine := p.currentLoad(); prev != id && id != mine && (mine != "" || p.writtenDown.Load()) {
		p.restarted.Store(true)
		p.Changed()
	}
}

// noticeHAProxy, at the start of a sync, deals with HAProxy running a load the sidecar did not
// make: it started (after the sidecar wrote its files, or again after a crash) or someone
// reloaded it. Either way it loaded the files on disk: when they are the last good rendering,
// that is what it runs (no reload needed); otherwise what it runs is unknown, and the sync
// reloads.
func (p *Pipeline) noticeHAProxy(ctx context.Context) {
	li, ok := p.cfg.Reloader.(loadIdentifier)
	if !ok || !p.restarted.Swap(false) || !p.adoptTried {
		return // the first sync finds out what HAProxy runs itself (adopt)
	}
	id, err := li.LoadID(ctx)
	if err != nil || id == p.currentLoad() {
		return // down again (the probe reports it), or the sidecar's own reload
	}
	p.writer.Drop() // HAProxy loaded what the disk held when it started
	live, good := p.cfg.Store.Live(), p.goodBundle()
	if live == nil || good == nil || live.Hash != good.Hash {
		p.log.Warn("HAProxy runs a configuration load the sidecar did not make: reloading it with the live configuration", "load", id)
		p.setRuns("")
		p.setLoad("", "", true)
		if p.cfg.Runtime != nil {
			p.cfg.Runtime.Forget()
		}
		return
	}
	if p.writtenDown.Load() {
		p.log.Info("HAProxy started on the configuration the sidecar wrote", "hash", short(live.Hash), "load", id)
	} else {
		p.log.Warn("HAProxy restarted or was reloaded by someone else: it loaded the live configuration", "hash", short(live.Hash), "load", id)
	}
	p.setRuns(live.Hash)
	if p.cfg.Runtime != nil {
		plan, _ := p.planRuntime(good)
		p.cfg.Runtime.Reloaded(plan)
	}
	p.setLoad(live.Hash, id, true)
	p.cfg.Metrics.LiveGenerationInfo.Reset()
	p.cfg.Metrics.LiveGenerationInfo.WithLabelValues(live.Hash).Set(1)
	p.writtenDown.Store(false)
	p.liveIfRunning(live.Hash)
}
