package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/rollout"
)

// Canary rollout (--rollout=canary): a new configuration goes to one host first, the canary,
// which is then watched for Window through HAProxy's own counters (package rollout) against the
// other hosts, which still run the previous configuration. If it holds, the other hosts follow
// (in parallel, as without a canary); if not, the canary is given its previous configuration
// again and Reload returns a *rollout.Refused: no other host ever sees the new one.
//
// The canary is the first host (in --dataplane-url order) that needs the change and whose
// configuration is known, so that it can be returned to it; when no host's is (the first push
// after a start that found the hosts' content changed), the change goes to every host at once.
// A canary that cannot be reached hands the role to the next such host. A configuration the
// canary's API refuses is refused (*reload.Failed) without trying the others.
//
// The canary is sampled when the watch starts, then every tenth of the window (at most every
// second, at least every 50 ms): a threshold that trips rolls it back at once; the other hosts
// are sampled at the start, when the canary trips a threshold (they may fail as much: then it is
// not the canary's doing) and when the window ends. The window ends early only when ctx ends
// (the sidecar stops): the canary then keeps the new configuration and nothing else changes.

// Canary configures the canary rollout.
type Canary struct {
	// Window is how long the canary is watched (default DefaultCanaryWindow).
	Window     time.Duration
	Thresholds rollout.Thresholds
	// PromoteInconclusive promotes a canary whose counters cannot tell (too little traffic,
	// its process restarted, its statistics unreadable from the start); false rolls it back.
	PromoteInconclusive bool
	// OnVerdict is told each verdict and whether the new configuration was promoted (for
	// metrics and Events). It must not block.
	OnVerdict func(endpoint string, j rollout.Judgement, promoted bool)
}

// DefaultCanaryWindow is how long a canary is watched by default.
const DefaultCanaryWindow = 30 * time.Second

// maxSampleTime bounds one reading of a host's statistics.
const maxSampleTime = 10 * time.Second

// canary rolls want out to a canary first. done is false when the rollout goes on to every
// host (the canary passed, or there is none); otherwise err is Reload's outcome.
func (r *Reloader) canary(ctx context.Context, want *payload) (done bool, err error) {
	var candidates []*host
	unknown := 0
	for _, h := range r.hosts {
		h.mu.Lock()
		has := h.has
		h.mu.Unlock()
		switch {
		case has == nil:
			unknown++
		case has.hash != want.hash:
			candidates = append(candidates, h)
		}
	}
	if len(candidates) == 0 {
		if unknown > 0 {
			r.log.Info("no canary: no host's current configuration is known (the first push since the start), so none could be returned to it; pushing to every host", "content_hash", short(want.hash))
		}
		return false, nil
	}
	var errs []error
	for _, h := range candidates {
		h.mu.Lock()
		prev := h.has
		h.mu.Unlock()
		r.log.Info("canary: the new configuration goes to one host first", "endpoint", h.c.label, "content_hash", short(want.hash), "window", r.cfg.Canary.Window)
		o := r.attemptWithin(ctx, h, want)
		switch {
		case o.err == nil:
			return r.watch(ctx, h, prev, want)
		case errors.Is(o.err, ErrSSLDirChanged):
			return true, fmt.Errorf("dataplane: not pushed, rendering again: %w", o.err)
		case o.rejected():
			return true, &reload.Failed{Output: "canary " + o.err.Error()}
		case ctx.Err() != nil:
			return true, fmt.Errorf("dataplane: canary: %w", o.err)
		}
		errs = append(errs, o.err)
		r.log.Warn("the canary host could not be updated; the next host is the canary", "endpoint", h.c.label, "error", o.err)
	}
	return true, fmt.Errorf("dataplane: no canary host could be updated: %w", errors.Join(errs...))
}

// watch watches the canary h, which had prev, now that it has want, and promotes or rolls back.
func (r *Reloader) watch(ctx context.Context, h *host, prev, want *payload) (bool, error) {
	cc := r.cfg.Canary
	var others []*host
	for _, o := range r.hosts {
		if o != h {
			others = append(others, o)
		}
	}
	j, err := r.judge(ctx, h, others)
	if err != nil {
		return true, fmt.Errorf("dataplane: canary %s: the watch stopped (it keeps the new configuration): %w", h.c.label, err)
	}
	promoted := j.Verdict == rollout.Pass || j.Verdict == rollout.Inconclusive && cc.PromoteInconclusive
	if cc.OnVerdict != nil {
		cc.OnVerdict(h.c.label, j, promoted)
	}
	log := r.log.With("endpoint", h.c.label, "verdict", j.Verdict.String(), "requests", j.Requests, "content_hash", short(want.hash))
	if promoted {
		if j.Verdict == rollout.Inconclusive {
			log.Warn("canary inconclusive; promoted (--canary-inconclusive=promote): the other hosts follow", "reason", j.Reason)
		} else {
			log.Info("canary passed: the other hosts follow", "reason", j.Reason)
		}
		return false, nil
	}
	log.Error("canary failed: rolling it back to the last good configuration; the other hosts keep theirs", "counter", j.Counter, "object", j.Object, "reason", j.Reason)
	o := r.attemptWithin(ctx, h, prev)
	if o.err != nil && ctx.Err() == nil {
		r.log.Error("could not roll the canary back yet; retrying in the background", "endpoint", h.c.label, "error", o.err)
		r.retryInBackground(ctx, []*host{h}, prev)
	}
	return true, &rollout.Refused{Canary: h.c.label, Judgement: j, RolledBack: o.err == nil}
}

// judge samples the canary and the other hosts over the window and returns the verdict; an
// error only when ctx ended.
func (r *Reloader) judge(ctx context.Context, h *host, others []*host) (rollout.Judgement, error) {
	cc := r.cfg.Canary
	th := cc.Thresholds
	start, err := r.sample(ctx, h)
	if err != nil {
		if ctx.Err() != nil {
			return rollout.Judgement{}, ctx.Err()
		}
		return rollout.Judgement{Verdict: rollout.Inconclusive, Reason: "the canary's statistics cannot be read: " + err.Error()}, nil
	}
	base := r.sampleAll(ctx, others)

	window := time.NewTimer(cc.Window)
	defer window.Stop()
	tick := time.NewTicker(min(max(cc.Window/10, 50*time.Millisecond), time.Second))
	defer tick.Stop()
	var lastErr error
	for {
		final := false
		select {
		case <-ctx.Done():
			return rollout.Judgement{}, ctx.Err()
		case <-tick.C:
		case <-window.C:
			final = true
		}
		now, err := r.sample(ctx, h)
		if err != nil {
			if ctx.Err() != nil {
				return rollout.Judgement{}, ctx.Err()
			}
			lastErr = err
			r.log.Debug("canary: could not read its statistics", "endpoint", h.c.label, "error", err)
			if final {
				return rollout.Judgement{Verdict: rollout.Fail, Counter: "statistics", Reason: "the canary's statistics could no longer be read at the end of the window (is its HAProxy still running?): " + lastErr.Error()}, nil
			}
			continue
		}
		cw := rollout.Window{Start: start, Now: now}
		j := rollout.Judge(th, cw, nil, final)
		if (j.Verdict == rollout.Fail || final) && len(others) > 0 {
			// The other hosts only excuse: read them when it matters.
			j = rollout.Judge(th, cw, windows(base, r.sampleAll(ctx, others)), final)
		}
		if j.Verdict != rollout.Watching {
			return j, nil
		}
	}
}

// attemptWithin updates one host as the fan-out does, within Timeout.
func (r *Reloader) attemptWithin(ctx context.Context, h *host, want *payload) outcome {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	return r.attempt(ctx, h, want, false)
}

// sample reads a host's counters, bounded in time.
func (r *Reloader) sample(ctx context.Context, h *host) (rollout.Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, min(r.cfg.Timeout, maxSampleTime))
	defer cancel()
	return h.c.Sample(ctx)
}

// sampleAll reads the hosts' counters concurrently (Concurrency at a time); nil for a host
// that did not answer.
func (r *Reloader) sampleAll(ctx context.Context, hosts []*host) []*rollout.Sample {
	out := make([]*rollout.Sample, len(hosts))
	sem := make(chan struct{}, r.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			s, err := r.sample(ctx, h)
			if err != nil {
				r.log.Debug("canary: could not read another host's statistics; it is left out of the comparison", "endpoint", h.c.label, "error", err)
				return
			}
			out[i] = &s
		}()
	}
	wg.Wait()
	return out
}

// windows pairs the hosts' samples that were read both times.
func windows(start, now []*rollout.Sample) []rollout.Window {
	var out []rollout.Window
	for i := range start {
		if start[i] != nil && now[i] != nil {
			out = append(out, rollout.Window{Start: *start[i], Now: *now[i]})
		}
	}
	return out
}
