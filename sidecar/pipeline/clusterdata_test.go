package pipeline

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"
)

// badClusterObject is one way a cluster object nobody edits by hand turns bad.
type badClusterObject struct {
	name     string
	bad, fix func(c *cluster)
	id       string // its ID among the held inputs
	object   string // how reports name it
	kept     bool   // held at its last good version (it was good before); else left out
	whileBad string // what the live configuration shows of it while it is held ("": nothing)
	absent   string // what it does not show then (besides the bad value)
	fixed    string // what it shows once fixed
}

// TestBadEndpointSliceNeverFreezes: an EndpointSlice with an address haproxy -c refuses is
// held (at its last good version, or left out when new), reported on itself, while the other
// changes go live; fixed, it is served.
func TestBadEndpointSliceNeverFreezes(t *testing.T) {
	for _, tt := range []badClusterObject{
		{
			name: "a slice that was good turns bad", id: "endpointslice/shop/cart-a", object: "EndpointSlice shop/cart-a", kept: true,
			bad:      func(c *cluster) { c.endpointSlices["cart-a"] = "10.0.2.invalid" },
			fix:      func(c *cluster) { c.endpointSlices["cart-a"] = "10.0.2.3" },
			whileBad: "server ep-10-0-2-1 10.0.2.1:80", fixed: "server ep-10-0-2-3 10.0.2.3:80",
		},
		{
			name: "a new slice that is bad", id: "endpointslice/shop/cart-b", object: "EndpointSlice shop/cart-b",
			bad:      func(c *cluster) { c.endpointSlices["cart-b"] = "10.0.2.invalid" },
			fix:      func(c *cluster) { c.endpointSlices["cart-b"] = "10.0.2.2" },
			whileBad: "server ep-10-0-2-1 10.0.2.1:80", absent: "ep-10-0-2-invalid", fixed: "server ep-10-0-2-2 10.0.2.2:80",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := startCluster()
			c.services["cart"] = kubeService("cart")
			c.endpointSlices = map[string]string{"cart-a": "10.0.2.1"}
			checkClusterObjectHeld(t, c, nil, tt)
		})
	}
}

// TestBadWatchedObjectNeverFreezes: a watched object (--watch) whose value the template prints
// and haproxy -c refuses is held (at its last good version, or left out when new), reported on
// itself, while the other changes go live; fixed, it is live.
func TestBadWatchedObjectNeverFreezes(t *testing.T) {
	var specs watchspec.List
	if err := specs.Set("ingresses.v1.networking.k8s.io"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []badClusterObject{
		{
			name: "an object that was good turns bad", id: "ingress/shop/a", object: "Ingress shop/a", kept: true,
			bad:      func(c *cluster) { c.ingresses["a"] = "invalid" },
			fix:      func(c *cluster) { c.ingresses["a"] = "v2" },
			whileBad: "# ingresses shop/a: v1", fixed: "# ingresses shop/a: v2",
		},
		{
			name: "a new object that is bad", id: "ingress/shop/b", object: "Ingress shop/b",
			bad:      func(c *cluster) { c.ingresses["b"] = "invalid" },
			fix:      func(c *cluster) { c.ingresses["b"] = "v1" },
			whileBad: "# ingresses shop/a: v1", absent: "shop/b", fixed: "# ingresses shop/b: v1",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := startCluster()
			c.ingresses = map[string]string{"a": "v1"}
			checkClusterObjectHeld(t, c, func(cfg *Config) { cfg.Inputs = snapshot.Builder{Options: snapshot.Options{Resources: specs}} }, tt)
		})
	}
}

// checkClusterObjectHeld starts a rig on c, makes tt's object bad while another service's pod
// becomes ready, and checks that the object is held and reported on itself (Event, log,
// held_inputs, /readyz) while the pod goes live, that later changes go live too with nothing
// reported again, and that fixing the object brings it in.
func checkClusterObjectHeld(t *testing.T, c *cluster, opt func(*Config), tt badClusterObject) {
	t.Helper()
	logs := &haproxytest.SyncBuffer{}
	r := newQRigWith(t, c, "", tmplRenderer{}, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		if opt != nil {
			opt(cfg)
		}
	})
	r.sync(t, apply.Applied)
	kind, _, _ := strings.Cut(tt.id, "/")
	if tt.whileBad != "" && !strings.Contains(r.live(t), tt.whileBad) {
		t.Fatalf("the object's good version is not live at the start:\n%s", r.live(t))
	}

	c.edit(tt.bad)
	c.edit(func(c *cluster) { c.pods["api-2"] = "10.0.1.2" }) // another service's pod becomes ready
	// Nothing an operator edits changed: the rendering goes its usual way and is refused (by
	// the write's check, or before the reload), then the next sync looks for what is at fault.
	r.sync(t, apply.Rejected)
	if live := r.live(t); strings.Contains(live, "invalid") {
		t.Fatalf("the rejected rendering is live:\n%s", live)
	}
	res := r.sync(t, apply.Applied)
	want := tt.id + ":" + map[bool]string{true: "true", false: "false"}[tt.kept]
	if got := r.held(); got != want {
		t.Fatalf("held %q, want %q", got, want)
	}
	live := r.live(t)
	if !strings.Contains(live, "server api-2 10.0.1.2:80") {
		t.Errorf("the other service's pod did not go live:\n%s", live)
	}
	if strings.Contains(live, "invalid") {
		t.Errorf("the bad object is live:\n%s", live)
	}
	if tt.whileBad != "" && !strings.Contains(live, tt.whileBad) {
		t.Errorf("the object's last good version, or the others, (%q) not live:\n%s", tt.whileBad, live)
	}
	if tt.absent != "" && strings.Contains(live, tt.absent) {
		t.Errorf("the new bad object is not left out (%q):\n%s", tt.absent, live)
	}

	// Reported on itself: an Event, a log line, held_inputs{kind}, /readyz.
	if res.Held != 1 || gaugeValue(r.metrics.HeldInputs.WithLabelValues(kind)) != 1 {
		t.Errorf("held %d, held_inputs{kind=%q} %v, want 1 and 1", res.Held, kind, gaugeValue(r.metrics.HeldInputs.WithLabelValues(kind)))
	}
	warnings := func() []string {
		return slices.DeleteFunc(r.events.all(), func(e string) bool { return !strings.HasPrefix(e, "Warning Rejected "+tt.object+": ") })
	}
	says := tt.object + " is left out: with it the configuration fails: "
	if tt.kept {
		says = tt.object + " is held at its last good version: with this version the configuration fails: "
	}
	if evs := warnings(); len(evs) != 1 || !strings.Contains(evs[0], says) || !strings.Contains(evs[0], "invalid") {
		t.Errorf("want one Warning Event on %s saying %q and HAProxy's reason: %q", tt.object, says, r.events.all())
	}
	if !strings.Contains(logs.String(), "input="+tt.id) || !strings.Contains(logs.String(), "input held back") {
		t.Errorf("no log line names %s:\n%s", tt.id, logs.String())
	}
	if held := readyzHeld(t, r.health); len(held) != 1 || held[0].Input != tt.id || held[0].Object != tt.object || held[0].Kept != tt.kept || held[0].Stage != "validate" ||
		!strings.HasPrefix(held[0].Reason, says) {
		t.Errorf("/readyz lists %+v, want %s (%s, kept %v, stage validate)", held, tt.id, tt.object, tt.kept)
	}

	// While it is held, other changes go live, and it is not reported again.
	c.edit(func(c *cluster) { c.pods["web-2"] = "10.0.0.2" })
	r.sync(t, apply.Applied)
	if live := r.live(t); !strings.Contains(live, "server web-2 10.0.0.2:80") || strings.Contains(live, "invalid") {
		t.Errorf("the next change did not go live, or the bad object did:\n%s", live)
	}
	if got := r.held(); got != want {
		t.Errorf("held %q, want %q", got, want)
	}
	if evs := warnings(); len(evs) != 1 {
		t.Errorf("reported again: %q", evs)
	}

	c.edit(tt.fix)
	r.sync(t, apply.Applied)
	if live := r.live(t); !strings.Contains(live, tt.fixed) {
		t.Errorf("the fixed object is not live (want %q):\n%s", tt.fixed, live)
	}
	if got := r.held(); got != "" {
		t.Errorf("still held once fixed: %q", got)
	}
	if v := gaugeValue(r.metrics.HeldInputs.WithLabelValues(kind)); v != 0 {
		t.Errorf("held_inputs{kind=%q} = %v once fixed", kind, v)
	}
	if held := readyzHeld(t, r.health); len(held) != 0 {
		t.Errorf("/readyz still lists %+v", held)
	}
	if !slices.Contains(r.events.all(), "Normal Accepted "+tt.object+": "+tt.object+" is no longer held back: its current version is in use") {
		t.Errorf("no Normal Event on %s once fixed: %q", tt.object, r.events.all())
	}
}

// readyzHeld is the held list /readyz answers.
func readyzHeld(t *testing.T, h *status.Health) []status.HeldInput {
	t.Helper()
	mux := http.NewServeMux()
	h.Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var body struct {
		Held []status.HeldInput `json:"held"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("/readyz: %v: %s", err, rec.Body)
	}
	return body.Held
}
