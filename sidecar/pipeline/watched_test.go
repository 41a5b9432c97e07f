package pipeline

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// watchingCluster is a cluster whose source also gives watched Ingresses (name -> the note
// annotation), as --watch ingresses.v1.networking.k8s.io would.
type watchingCluster struct {
	*cluster
	mu        sync.Mutex
	ingresses map[string]string
	conv      snapshot.ObjectConverter
}

func (w *watchingCluster) Objects(ctx context.Context) (*snapshot.Objects, error) {
	objs, err := w.cluster.Objects(ctx)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	objs.Resources = map[string][]*snapshot.Object{}
	for _, name := range slices.Sorted(maps.Keys(w.ingresses)) {
		o, err := w.conv.FromUnstructured(map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
			"metadata": map[string]any{"namespace": "shop", "name": name, "annotations": map[string]any{"note": w.ingresses[name]}}})
		if err != nil {
			return nil, err
		}
		objs.Resources["ingresses"] = append(objs.Resources["ingresses"], o)
	}
	return objs, nil
}

// TestWatchedObjectLeftOut: a watched object whose data the template cannot print is left out
// and reported, like a pod; the rest (other objects, a pod) goes live; fixed, it comes back.
func TestWatchedObjectLeftOut(t *testing.T) {
	c := startCluster()
	c.template = jinjaTemplate + `{%- for ing in resources.ingresses.all %}
# ingress {{ ing.metadata.name }}: {{ ing.metadata.annotations.note }}
{%- endfor %}
`
	c.notes = map[string]string{}
	w := &watchingCluster{cluster: c, ingresses: map[string]string{"a": "fine"}}
	var specs watchspec.List
	if err := specs.Set("ingresses.v1.networking.k8s.io"); err != nil {
		t.Fatal(err)
	}
	r := newQRigWith(t, c, "", render.New(render.Options{SSLDir: "/ssl"}), func(cfg *Config) {
		cfg.Source, cfg.Inputs = w, snapshot.Builder{Options: snapshot.Options{Resources: specs}}
	})
	r.sync(t, apply.Applied)
	if live := r.live(t); !strings.Contains(live, "# ingress a: fine") {
		t.Fatalf("the ingress is not live:\n%s", live)
	}

	w.mu.Lock()
	w.ingresses["b"] = "line\n    server evil 6.6.6.6:80"
	w.ingresses["c"] = "also fine"
	w.mu.Unlock()
	c.edit(func(c *cluster) { c.pods["api-2"] = "10.0.1.2" })
	r.sync(t, apply.Applied)
	live := r.live(t)
	if strings.Contains(live, "6.6.6.6") || strings.Contains(live, "ingress b") {
		t.Fatalf("injected:\n%s", live)
	}
	if !strings.Contains(live, "# ingress c: also fine") || !strings.Contains(live, "server api-2 10.0.1.2:80") {
		t.Errorf("the other changes did not go live:\n%s", live)
	}
	if got := r.held(); got != "ingress/shop/b:false" {
		t.Fatalf("held %q", got)
	}
	if v := gaugeValue(r.metrics.HeldInputs.WithLabelValues("ingress")); v != 1 {
		t.Errorf("held_inputs{kind=ingress} = %v, want 1", v)
	}
	h := r.p.q.Held["ingress/shop/b"]
	if h.Ref != (snapshot.Ref{Kind: "Ingress", Namespace: "shop", Name: "b"}) || !strings.Contains(h.Reason(), "metadata.annotations.note") {
		t.Errorf("hold %+v: %s", h.Ref, h.Reason())
	}

	w.mu.Lock()
	w.ingresses["b"] = "fixed"
	w.mu.Unlock()
	r.sync(t, apply.Applied)
	if got := r.held(); got != "" {
		t.Fatalf("held %q once fixed", got)
	}
	if v := gaugeValue(r.metrics.HeldInputs.WithLabelValues("ingress")); v != 0 {
		t.Errorf("held_inputs{kind=ingress} = %v once fixed, want 0", v)
	}
	if live := r.live(t); !strings.Contains(live, "# ingress b: fixed") {
		t.Errorf("the fixed ingress is not live:\n%s", live)
	}
}
