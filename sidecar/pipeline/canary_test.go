package pipeline

import (
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/rollout"
)

// TestFailedCanaryHoldsTheChange: a configuration the canary host's counters refused
// (--rollout=canary) is blamed as a refused reload is, at stage canary: the changed input is
// held with the canary's reason (rejected_total{stage="canary"}, an Event on its object), the
// rest goes live, and the input goes live once it changes and the canary passes.
func TestFailedCanaryHoldsTheChange(t *testing.T) {
	c := startCluster()
	// As with the Data Plane API: no runtime API, every change reloads.
	r := newQRigWith(t, c, "", tmplRenderer{}, func(cfg *Config) { cfg.Runtime = nil })
	r.sync(t, apply.Applied)
	c.edit(func(c *cluster) { c.template = "frontend fe\n    bind :81\n" })
	r.rl.failErr = &rollout.Refused{Canary: "https://lb1:5555/v3", RolledBack: true, Judgement: rollout.Judgement{
		Verdict: rollout.Fail, Counter: rollout.Counter5xx, Object: "frontend fe", Reason: "5xx responses: 100.0% of the 40 requests of frontend fe on the canary"}}
	res := r.sync(t, apply.Rejected)
	if got := r.held(); got != "templates:true" {
		t.Fatalf("held %q, want the template at its last good version", got)
	}
	h := r.p.q.Held["templates"]
	if h.Stage != snapshot.StageCanary || !strings.Contains(h.Reason(), "the canary host https://lb1:5555/v3 failed: 5xx responses") {
		t.Errorf("hold = stage %q, %q", h.Stage, h.Reason())
	}
	if !strings.Contains(res.Err.Error(), "the other hosts never had the new one") {
		t.Errorf("error %v", res.Err)
	}
	if v := value(r.metrics.Rejected.WithLabelValues(snapshot.StageCanary)); v != 1 {
		t.Errorf("rejected_total{stage=canary} = %v, want 1", v)
	}
	if v := value(r.metrics.Rejected.WithLabelValues(snapshot.StageReload)); v != 0 {
		t.Errorf("rejected_total{stage=reload} = %v, want 0", v)
	}
	warned := false
	for _, e := range r.events.all() {
		warned = warned || strings.HasPrefix(e, "Warning Rejected ConfigMap lb/config") && strings.Contains(e, "canary")
	}
	if !warned {
		t.Errorf("no Warning Event on the template's object: %v", r.events.all())
	}

	r.rl.failErr = nil
	c.edit(func(c *cluster) { c.pods["web-2"] = "10.0.0.2" })
	r.sync(t, apply.Applied)
	if live := r.live(t); !strings.Contains(live, "bind :80") || !strings.Contains(live, "web-2") {
		t.Errorf("the pod did not go live beside the held template:\n%s", live)
	}

	// With only cluster data changed, no input is to blame: the rendering itself is refused.
	r.rl.failErr = &rollout.Refused{Canary: "https://lb1:5555/v3", RolledBack: true, Judgement: rollout.Judgement{
		Verdict: rollout.Fail, Counter: rollout.CounterConnError, Object: "backend web", Reason: "failed connections (econ): 100.0%"}}
	c.edit(func(c *cluster) { c.pods["web-3"] = "10.0.0.3" })
	res = r.sync(t, apply.Rejected)
	if v := value(r.metrics.Rejected.WithLabelValues(snapshot.StageCanary)); v != 2 {
		t.Errorf("rejected_total{stage=canary} = %v after a refusal no input is blamed for, want 2", v)
	}
	if !strings.Contains(res.Err.Error(), "failed connections (econ)") {
		t.Errorf("error %v", res.Err)
	}
	r.rl.failErr = nil

	c.edit(func(c *cluster) { c.template = "frontend fe\n    bind :82\n" })
	r.sync(t, apply.Applied)
	if got := r.held(); got != "" {
		t.Errorf("held %q after the template changed and the canary passed", got)
	}
	if live := r.live(t); !strings.Contains(live, "bind :82") {
		t.Errorf("live:\n%s", live)
	}
}
