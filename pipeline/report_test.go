package pipeline

import (
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/status"
)

// TestAHoldIsListedBeforeItIsCounted: when rejected_total has grown for a hold (it is counted
// just before its Warning Event is sent), /readyz lists the hold already, so that whoever sees
// the counter grow finds what it counts.
func TestAHoldIsListedBeforeItIsCounted(t *testing.T) {
	c := startCluster()
	var at *atWarning
	r := newQRigWith(t, c, "", tmplRenderer{}, func(cfg *Config) {
		at = &atWarning{t: t, health: cfg.Health, rejected: cfg.Metrics.Rejected.WithLabelValues(snapshot.StageDecode)}
		cfg.Recorder = at
	})
	r.sync(t, Applied)
	before := value(at.rejected)

	c.edit(func(c *cluster) { c.services["web"] = `{"namespace": "shop"` })
	r.sync(t, Unchanged) // held at its last good version

	seen := at.all()
	if len(seen) != 1 {
		t.Fatalf("Warning Events %+v, want one, for the hold", seen)
	}
	if seen[0].counted != before+1 {
		t.Errorf("at the Event rejected_total{stage=decode} is %v, want %v: the hold is counted before it is told", seen[0].counted, before+1)
	}
	if !slices.Contains(seen[0].listed, "service/web") {
		t.Errorf("rejected_total had grown while /readyz listed %q, without service/web", seen[0].listed)
	}
}

// atWarning is a Recorder that notes, at each Warning Event, what rejected_total and /readyz
// say at that moment.
type atWarning struct {
	t        *testing.T
	health   *status.Health
	rejected prometheus.Counter

	mu   sync.Mutex
	seen []seenAtWarning
}

type seenAtWarning struct {
	counted float64
	listed  []string // the inputs /readyz lists
}

func (a *atWarning) Event(ref snapshot.Ref, warning bool, reason, message string) {
	if !warning {
		return
	}
	s := seenAtWarning{counted: value(a.rejected)}
	for _, h := range readyzHeld(a.t, a.health) {
		s.listed = append(s.listed, h.Input)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, s)
}

func (a *atWarning) all() []seenAtWarning {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}
