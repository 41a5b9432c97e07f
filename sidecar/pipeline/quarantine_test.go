package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"
)

// cluster is a fake source holding real objects: the services and config ConfigMaps and pods.
type cluster struct {
	mu       sync.Mutex
	services map[string]string // nil: no services ConfigMap
	template string            // "": no config ConfigMap
	pods     map[string]string // name -> IP (namespace shop, label app=name up to the dash)
	notes    map[string]string // pod name -> its annotation "note"
	tests    map[string]string // tests.NAME.yaml keys of the config ConfigMap
	origins  snapshot.Origins  // where the objects are written, as the file source says
	// endpointSlices are EndpointSlices (namespace shop, of the Service named up to the dash): name ->
	// the address of its one endpoint, which has no pod behind it.
	endpointSlices map[string]string
	// ingresses are watched Ingresses (namespace shop): name -> their annotation "note".
	ingresses map[string]string
	conv      snapshot.ObjectConverter
}

func (c *cluster) Run(ctx context.Context, changed func()) error { <-ctx.Done(); return nil }

func (c *cluster) Objects(context.Context) (*snapshot.Objects, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	objs := &snapshot.Objects{Origins: maps.Clone(c.origins)}
	if c.services != nil {
		objs.ConfigMaps = append(objs.ConfigMaps, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "services"}, Data: maps.Clone(c.services)})
	}
	if c.template != "" {
		data := map[string]string{"template": c.template}
		maps.Copy(data, c.tests)
		objs.ConfigMaps = append(objs.ConfigMaps, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "config"}, Data: data})
	}
	for _, name := range slices.Sorted(maps.Keys(c.pods)) {
		app, _, _ := strings.Cut(name, "-")
		objs.Pods = append(objs.Pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"app": app}, Annotations: map[string]string{"note": c.notes[name]},
				ResourceVersion: fmt.Sprintf("%x", hashString(c.pods[name]+"\x00"+c.notes[name]))},
			Status: corev1.PodStatus{PodIP: c.pods[name], Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	for _, name := range slices.Sorted(maps.Keys(c.endpointSlices)) {
		svc, _, _ := strings.Cut(name, "-")
		objs.EndpointSlices = append(objs.EndpointSlices, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc},
				ResourceVersion: fmt.Sprintf("%x", hashString(c.endpointSlices[name]))},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{c.endpointSlices[name]}}},
		})
	}
	for _, name := range slices.Sorted(maps.Keys(c.ingresses)) {
		o, err := c.conv.FromUnstructured(map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
			"metadata": map[string]any{"namespace": "shop", "name": name, "annotations": map[string]any{"note": c.ingresses[name]},
				"resourceVersion": fmt.Sprintf("%x", hashString(c.ingresses[name]))}})
		if err != nil {
			return nil, err
		}
		if objs.Resources == nil {
			objs.Resources = map[string][]*snapshot.Object{}
		}
		objs.Resources["ingresses"] = append(objs.Resources["ingresses"], o)
	}
	return objs, nil
}

func (c *cluster) edit(f func(c *cluster)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

func service(app string, extra ...string) string {
	return fmt.Sprintf(`{"namespace": "shop", "selector": {"app": %q}%s}`, app, strings.Join(extra, ""))
}

// kubeService is a services key whose servers are the endpoints of the Kubernetes Service
// name (EndpointSlices) instead of the pods a selector picks.
func kubeService(name string) string {
	return fmt.Sprintf(`{"namespace": "shop", "service": %q}`, name)
}

// tmplRenderer renders a small HAProxy-like configuration: the template text (a frontend),
// one backend per service with a server per pod (or endpoint), and a comment per watched
// object with its annotation "note". A template containing "BROKEN" is a render error in the
// template; a service with "broken": true makes the render fail where the template reads it;
// "poison" is printed into the configuration (haproxy -c, the checker of the rig, rejects
// "invalid", wherever it comes from: a service, a pod's address, a watched object's note).
type tmplRenderer struct{}

func (tmplRenderer) Render(_ context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	tmpl := s.Templates["template"]
	if s.Templates == nil {
		tmpl = "frontend fe\n    bind :80\n"
	}
	if strings.Contains(tmpl, "BROKEN") {
		ref := s.TemplateRef
		ref.Key = "template"
		return nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref, Line: 1, Err: errors.New("unexpected BROKEN")}
	}
	var b strings.Builder
	b.WriteString(tmpl)
	for _, svc := range s.Services {
		if svc.Field("broken") == true {
			ref := s.TemplateRef
			ref.Key = "template"
			return nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref, Line: 3, Err: fmt.Errorf("service %s: no attribute ports", svc.Field("name"))}
		}
		fmt.Fprintf(&b, "backend %s\n", svc.Field("name"))
		if p, ok := svc.Field("poison").(string); ok {
			fmt.Fprintf(&b, "    %s\n", p)
		}
		for name, pod := range svc.Field("pods").(*record.Record).All() {
			fmt.Fprintf(&b, "    server %s %v:80\n", name, lookupPath(pod, "status", "podIP"))
		}
	}
	for _, res := range s.Resources {
		for _, o := range res.Objects {
			fmt.Fprintf(&b, "# %s %s: %v\n", res.Name, o.Key(), lookupPath(o.Record(), "metadata", "annotations", "note"))
		}
	}
	out := []byte(b.String())
	return &render.Bundle{Config: out, Hash: fmt.Sprintf("h%x", hashString(string(out)))}, nil
}

func lookupPath(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(*record.Record)
		if !ok {
			return nil
		}
		v, _ = m.Get(p)
	}
	return v
}

type qrig struct {
	c       *cluster
	p       *Pipeline
	rl      *reloader
	cli     *cli
	store   *generation.Store
	metrics *status.Metrics
	health  *status.Health
	events  *events
	dir     string
}

type events struct {
	mu  sync.Mutex
	got []string // "Warning Rejected ConfigMap lb/services: message"
}

func (e *events) Event(ref snapshot.Ref, warning bool, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	typ := "Normal"
	if warning {
		typ = "Warning"
	}
	e.got = append(e.got, fmt.Sprintf("%s %s %s: %s", typ, reason, ref, message))
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

func newQRig(t *testing.T, c *cluster, dir string) *qrig {
	return newQRigWith(t, c, dir, tmplRenderer{})
}

func newQRigWith(t *testing.T, c *cluster, dir string, rd candidate.Renderer, opts ...func(*Config)) *qrig {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	store, err := generation.Open(filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "certs"), "")
	if err != nil {
		t.Fatal(err)
	}
	r := &qrig{c: c, rl: &reloader{path: filepath.Join(dir, "haproxy.cfg")}, cli: &cli{}, store: store,
		metrics: status.NewMetrics(), health: &status.Health{}, events: &events{}, dir: dir}
	log := slog.New(slog.DiscardHandler)
	cfg := Config{
		Source: c, Inputs: snapshot.Builder{}, Renderer: rd, Store: store, Checker: &checker{},
		Reloader: r.rl, Metrics: r.metrics, Health: r.health, Recorder: r.events, Logger: log,
		Runtime:    runtimeapi.New(runtimeapi.Options{Client: r.cli, Logger: log}),
		KeepInputs: true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	r.p, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *qrig) sync(t *testing.T, want apply.Outcome) apply.Result {
	t.Helper()
	res := r.p.Sync(context.Background(), "test")
	if res.Outcome != want {
		t.Fatalf("outcome %v (%v), want %v", res.Outcome, res.Err, want)
	}
	return res
}

// live is the configuration on disk now.
func (r *qrig) live(t *testing.T) string {
	t.Helper()
	g := r.store.Live()
	if g == nil {
		return ""
	}
	return readFile(t, g.ConfigFile())
}

// held lists the held inputs as "id:kept".
func (r *qrig) held() string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(r.p.q.Held)) {
		out = append(out, fmt.Sprintf("%s:%v", id, r.p.q.Held[id].Kept))
	}
	return strings.Join(out, " ")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func gaugeValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	return d.GetGauge().GetValue()
}

func startCluster() *cluster {
	return &cluster{
		services: map[string]string{"web": service("web"), "api": service("api")},
		template: "frontend fe\n    bind :80\n",
		pods:     map[string]string{"web-1": "10.0.0.1", "api-1": "10.0.1.1"},
	}
}

// TestOneBadInputDoesNotFreezeTheRest: for each kind of bad operator input, the input is held
// (at its last good version, or left out when new), a pod change of another service goes live
// in the same sync, and fixing the input brings it in.
func TestOneBadInputDoesNotFreezeTheRest(t *testing.T) {
	tests := []struct {
		name     string
		bad      func(c *cluster)
		fix      func(c *cluster)
		wantHeld string
		stage    string
		inLive   string // what the live configuration keeps of the bad input's last good version
	}{
		{
			name: "a services key that is not JSON", stage: "decode",
			bad:      func(c *cluster) { c.services["web"] = `{"namespace": "shop"` },
			fix:      func(c *cluster) { c.services["web"] = service("web", `, "v": 2`) },
			wantHeld: "service/web:true", inLive: "backend web",
		},
		{
			name: "a new service whose data breaks the template", stage: "render",
			bad:      func(c *cluster) { c.services["shop"] = service("shop", `, "broken": true`) },
			fix:      func(c *cluster) { c.services["shop"] = service("shop") },
			wantHeld: "service/shop:false",
		},
		{
			name: "a changed service haproxy -c rejects", stage: "validate",
			bad:      func(c *cluster) { c.services["web"] = service("web", `, "poison": "invalid keyword"`) },
			fix:      func(c *cluster) { c.services["web"] = service("web", `, "poison": "# fine"`) },
			wantHeld: "service/web:true", inLive: "backend web",
		},
		{
			name: "a broken template", stage: "render",
			bad:      func(c *cluster) { c.template = "frontend fe\n    bind :80 BROKEN\n" },
			fix:      func(c *cluster) { c.template = "frontend fe\n    bind :81\n" },
			wantHeld: "templates:true", inLive: "bind :80",
		},
		{
			name: "a template haproxy -c rejects", stage: "validate",
			bad:      func(c *cluster) { c.template = "frontend fe\n    invalid :80\n" },
			fix:      func(c *cluster) { c.template = "frontend fe\n    bind :82\n" },
			wantHeld: "templates:true", inLive: "bind :80",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startCluster()
			r := newQRig(t, c, "")
			r.sync(t, apply.Applied)
			before := value(r.metrics.Rejected.WithLabelValues(tt.stage))

			c.edit(tt.bad)
			c.edit(func(c *cluster) { c.pods["api-2"] = "10.0.1.2" }) // another service's pod becomes ready
			res := r.sync(t, apply.Applied)
			if got := r.held(); got != tt.wantHeld {
				t.Fatalf("held %q, want %q", got, tt.wantHeld)
			}
			if res.Held != 1 {
				t.Errorf("result says %d held", res.Held)
			}
			live := r.live(t)
			if !strings.Contains(live, "server api-2 10.0.1.2:80") {
				t.Errorf("the other service's new pod did not go live:\n%s", live)
			}
			if tt.inLive != "" && !strings.Contains(live, tt.inLive) {
				t.Errorf("the held input's last good version is not live (want %q):\n%s", tt.inLive, live)
			}
			if strings.Contains(live, "invalid") || strings.Contains(live, "BROKEN") {
				t.Errorf("the bad input reached the live configuration:\n%s", live)
			}
			if v := value(r.metrics.Rejected.WithLabelValues(tt.stage)); v != before+1 {
				t.Errorf("rejected_total{stage=%q} = %v, want %v", tt.stage, v, before+1)
			}
			kind, _, _ := strings.Cut(strings.TrimSuffix(strings.TrimSuffix(tt.wantHeld, ":true"), ":false"), "/")
			if v := gaugeValue(r.metrics.HeldInputs.WithLabelValues(kind)); v != 1 {
				t.Errorf("held_inputs = %v", v)
			}
			if evs := r.events.all(); len(evs) == 0 || !strings.HasPrefix(evs[len(evs)-1], "Warning Rejected") && !strings.Contains(strings.Join(evs, "\n"), "Warning Rejected") {
				t.Errorf("no Warning Event: %q", evs)
			}

			// The same inputs again: nothing new, nothing reported twice.
			r.sync(t, apply.Unchanged)
			if v := value(r.metrics.Rejected.WithLabelValues(tt.stage)); v != before+1 {
				t.Errorf("the same hold was counted again: %v", v)
			}

			c.edit(tt.fix)
			seen := len(r.events.all())
			// Applied, or unchanged when the fixed input renders as the last good one did:
			// either way it is no longer held, and the operator is told.
			if res := r.p.Sync(context.Background(), "test"); res.Outcome != apply.Applied && res.Outcome != apply.Unchanged {
				t.Fatalf("after the fix: %v (%v)", res.Outcome, res.Err)
			}
			if got := r.held(); got != "" {
				t.Fatalf("still held after the fix: %q", got)
			}
			if v := gaugeValue(r.metrics.ConfigValid); v != 1 {
				t.Errorf("config_valid = %v after the fix", v)
			}
			if evs := r.events.all()[seen:]; !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Normal Accepted") }) {
				t.Errorf("no Normal Event for the fix: %q", evs)
			}
		})
	}
}

// TestHeldInputsSayWhereTheyAreWritten: read from files, a held input's reason (the log,
// /readyz) starts with where it is written; an edit elsewhere in its file that moves it updates
// the position without reporting the hold again.
func TestHeldInputsSayWhereTheyAreWritten(t *testing.T) {
	web := snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services", Key: "web"}
	at := func(line int) snapshot.Origins {
		return snapshot.Origins{web: {Position: snapshot.Position{File: "lb/services.yaml", Line: line, Col: 5}, Style: snapshot.Literal}}
	}
	c := startCluster()
	c.origins = at(10)
	r := newQRig(t, c, "")
	r.sync(t, apply.Applied)

	c.edit(func(c *cluster) { c.services["web"] = "{\n  \"namespace\": \"shop\"\n" })
	r.sync(t, apply.Unchanged) // held at its last good version: the same configuration
	before := value(r.metrics.Rejected.WithLabelValues("decode"))
	reason := func() string { // what the log and /readyz say
		if got := r.held(); got != "service/web:true" {
			t.Fatalf("held %q", got)
		}
		return r.p.q.Held["service/web"].Reason()
	}
	if got, want := reason(), `lb/services.yaml:11:26: decode: ConfigMap lb/services key "web" line 2 column 22: invalid JSON`; !strings.HasPrefix(got, want) {
		t.Errorf("reason %q\nwant %q...", got, want)
	}

	c.edit(func(c *cluster) { c.origins = at(14) }) // lines added above it
	c.edit(func(c *cluster) { c.pods["api-2"] = "10.0.1.2" })
	r.sync(t, apply.Applied)
	if got := reason(); !strings.HasPrefix(got, "lb/services.yaml:15:26: ") {
		t.Errorf("after the lines moved: %q", got)
	}
	if v := value(r.metrics.Rejected.WithLabelValues("decode")); v != before {
		t.Errorf("the hold was reported again when only its lines moved: rejected_total %v, was %v", v, before)
	}
}

// TestTwoBadAmongMany: the search finds both culprits among many changes; the rest go live.
func TestTwoBadAmongMany(t *testing.T) {
	c := startCluster()
	r := newQRig(t, c, "")
	r.sync(t, apply.Applied)
	c.edit(func(c *cluster) {
		for i := range 8 {
			c.services[fmt.Sprintf("s%d", i)] = service(fmt.Sprintf("s%d", i))
		}
		c.services["s2"] = service("s2", `, "poison": "invalid"`)
		c.services["s6"] = service("s6", `, "broken": true`)
	})
	r.sync(t, apply.Applied)
	if got := r.held(); got != "service/s2:false service/s6:false" {
		t.Fatalf("held %q", got)
	}
	live := r.live(t)
	for _, s := range []string{"s0", "s1", "s3", "s4", "s5", "s7"} {
		if !strings.Contains(live, "backend "+s+"\n") {
			t.Errorf("%s did not go live", s)
		}
	}
}

// TestRefusedReloadHoldsTheChange: a configuration that passes haproxy -c but that HAProxy
// refuses at reload holds the changed input, the rest goes live, and the refused rendering is
// never reloaded again.
func TestRefusedReloadHoldsTheChange(t *testing.T) {
	c := startCluster()
	r := newQRig(t, c, "")
	r.sync(t, apply.Applied)
	c.edit(func(c *cluster) { c.template = "frontend fe\n    bind :443\n" })
	r.rl.failErr = &reload.Failed{Output: "[ALERT] cannot bind :443"}
	res := r.sync(t, apply.Rejected)
	if got := r.held(); got != "templates:true" {
		t.Fatalf("held %q", got)
	}
	if !strings.Contains(res.Err.Error(), "cannot bind") {
		t.Errorf("error %v does not give HAProxy's reason", res.Err)
	}
	r.rl.failErr = nil
	// The next sync renders without the template change: the last good configuration, plus
	// a new pod.
	c.edit(func(c *cluster) { c.pods["web-2"] = "10.0.0.2" })
	r.sync(t, apply.Applied)
	if live := r.live(t); !strings.Contains(live, "bind :80") || !strings.Contains(live, "web-2") {
		t.Errorf("live:\n%s", live)
	}
	if r.rl.count() != 1 {
		t.Errorf("%d reloads, want 1 (the start; the refused one is not counted, the pod went live at runtime)", r.rl.count())
	}
}

// TestDeletedObjectsAreHeld: deleting the services ConfigMap or the config ConfigMap is held
// like a bad input; deleting one key is a change that goes live.
func TestDeletedObjectsAreHeld(t *testing.T) {
	c := startCluster()
	r := newQRig(t, c, "")
	r.sync(t, apply.Applied)
	c.edit(func(c *cluster) { c.services = nil; c.template = "" })
	r.sync(t, apply.Unchanged)
	if got := r.held(); got != "service/api:true service/web:true templates:true" {
		t.Fatalf("held %q", got)
	}
	if live := r.live(t); !strings.Contains(live, "backend web") || !strings.Contains(live, "bind :80") {
		t.Errorf("live:\n%s", live)
	}
	c.edit(func(c *cluster) {
		c.services = map[string]string{"web": service("web")}
		c.template = "frontend fe\n    bind :80\n"
	})
	r.sync(t, apply.Applied)
	if got := r.held(); got != "" {
		t.Fatalf("held %q", got)
	}
	if live := r.live(t); strings.Contains(live, "backend api") {
		t.Errorf("a deleted key did not go live:\n%s", live)
	}
}

// TestRestartKeepsLastGood: a restarted sidecar holds a bad input at the version HAProxy
// served before the restart, not leaving it out.
func TestRestartKeepsLastGood(t *testing.T) {
	c := startCluster()
	dir := t.TempDir()
	r := newQRig(t, c, dir)
	r.sync(t, apply.Applied)
	c.edit(func(c *cluster) { c.services["web"] = `{"namespace":` })
	again := newQRig(t, c, dir)
	again.sync(t, apply.Applied)
	if got := again.held(); got != "service/web:true" {
		t.Fatalf("held %q", got)
	}
	if live := again.live(t); !strings.Contains(live, "backend web") {
		t.Errorf("the web service was dropped at the restart:\n%s", live)
	}
}

// TestNewTemplateNeverGoodBlocksNothingElse: a broken template at the very start renders
// nothing (not the built-in template instead of the operator's).
func TestBrokenTemplateAtStart(t *testing.T) {
	c := startCluster()
	c.template = "BROKEN"
	r := newQRig(t, c, "")
	res := r.sync(t, apply.Rejected)
	if r.store.Live() != nil {
		t.Errorf("a configuration went live: %q", r.live(t))
	}
	if !strings.Contains(res.Err.Error(), `ConfigMap lb/config key "template"`) {
		t.Errorf("error %v", res.Err)
	}
}

// TestDiskFailureIsCountedAndRetried: a generation that cannot be written (the state
// directory gone, a full or read-only disk) is a failed sync, counted by stage and retried;
// no input is held for it.
func TestDiskFailureIsCountedAndRetried(t *testing.T) {
	c := startCluster()
	r := newQRig(t, c, "")
	r.sync(t, apply.Applied)
	if err := os.RemoveAll(r.store.StateDir()); err != nil {
		t.Fatal(err)
	}
	c.edit(func(c *cluster) { c.template = "frontend fe\n    bind :81\n" })
	res := r.sync(t, apply.Failed)
	if !res.Retry {
		t.Error("a disk failure is not retried")
	}
	if v := value(r.metrics.SyncFailures.WithLabelValues(failure.Staging)); v != 1 {
		t.Errorf("sync_failures_total{stage=stage} = %v, want 1", v)
	}
	if got := r.held(); got != "" {
		t.Errorf("held %q for a disk failure", got)
	}
	if err := os.MkdirAll(r.store.StateDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	r.sync(t, apply.Applied)
	if live := r.live(t); !strings.Contains(live, "bind :81") {
		t.Errorf("live:\n%s", live)
	}
}

// jinjaTemplate prints what the data holds where an injection could happen: hostnames and a
// pod annotation.
const jinjaTemplate = `frontend fe
    bind :80
{%- for s in services %}
backend {{ s.name }}
    # {{ s.hostnames|default([])|join(" ") }}
{%- for name, pod in s.pods.items() %}
    server {{ name }} {{ pod.status.podIP }}:80 # {{ pod.metadata.annotations.note }}
{%- endfor %}
{%- endfor %}
`

// TestDataCannotInject: a value from the data that would start a new line (a hostname, a pod
// annotation) is never printed: the service is held, the pod left out, and everything else
// goes live.
func TestDataCannotInject(t *testing.T) {
	c := startCluster()
	c.template = jinjaTemplate
	c.notes = map[string]string{}
	r := newQRigWith(t, c, "", render.New(render.Options{SSLDir: "/ssl"}))
	r.sync(t, apply.Applied)
	c.edit(func(c *cluster) {
		c.services["evil"] = service("web", `, "hostnames": ["a.example\n    http-request return status 200 content-type text/plain string INJECTED"]`)
		c.pods["web-2"] = "10.0.0.2"
		c.notes["web-2"] = "line\n    server evil 6.6.6.6:80"
		c.pods["api-2"] = "10.0.1.2"
	})
	r.sync(t, apply.Applied)
	live := r.live(t)
	if strings.Contains(live, "INJECTED") || strings.Contains(live, "evil") || strings.Contains(live, "6.6.6.6") {
		t.Fatalf("injected:\n%s", live)
	}
	if !strings.Contains(live, "server api-2 10.0.1.2:80") {
		t.Errorf("the other pod did not go live:\n%s", live)
	}
	if got := r.held(); got != "pod/shop/web-2:false service/evil:false" {
		t.Fatalf("held %q", got)
	}
	h := r.p.q.Held["service/evil"]
	if !strings.Contains(h.Reason(), "hostnames[0]") || h.Ref.Key != "evil" {
		t.Errorf("hold %+v does not name the key and field", h)
	}
	if reason := r.p.q.Held["pod/shop/web-2"].Reason(); !strings.Contains(reason, "metadata.annotations.note") {
		t.Errorf("pod reason %q", reason)
	}
	c.edit(func(c *cluster) { c.notes["web-2"] = "fine" })
	r.sync(t, apply.Applied)
	if got := r.held(); got != "service/evil:false" {
		t.Fatalf("held %q after the pod was fixed", got)
	}
	if live := r.live(t); !strings.Contains(live, "server web-2 10.0.0.2:80 # fine") {
		t.Errorf("the fixed pod is not live:\n%s", live)
	}
}

// TestBadClusterDataNeverFreezes: a pod whose address haproxy -c refuses is found and left out,
// as if it were not ready, and reported on itself; another pod's change goes live meanwhile;
// once its address is fixed, it is served.
func TestBadClusterDataNeverFreezes(t *testing.T) {
	c := startCluster()
	r := newQRig(t, c, "")
	r.sync(t, apply.Applied)

	c.edit(func(c *cluster) { c.pods["web-2"] = "10.0.0.invalid" })
	// It renders without validation (pods only), goes live through the runtime API, and the
	// write's check rejects it: taken back, and the next sync looks for what is at fault.
	r.sync(t, apply.Rejected)
	if live := r.live(t); strings.Contains(live, "web-2") {
		t.Fatalf("the rejected rendering is live:\n%s", live)
	}
	res := r.sync(t, apply.Unchanged)
	if got := r.held(); got != "pod/shop/web-2:false" {
		t.Fatalf("held %q, want the pod alone", got)
	}
	if res.Held != 1 || gaugeValue(r.metrics.HeldInputs.WithLabelValues("pod")) != 1 {
		t.Errorf("held %d, held_inputs{kind=pod} %v", res.Held, gaugeValue(r.metrics.HeldInputs.WithLabelValues("pod")))
	}
	if evs := r.events.all(); !slices.ContainsFunc(evs, func(e string) bool {
		return strings.HasPrefix(e, "Warning Rejected Pod shop/web-2: ") && strings.Contains(e, "left out")
	}) {
		t.Errorf("no Warning Event on the pod: %q", evs)
	}

	c.edit(func(c *cluster) { c.pods["api-2"] = "10.0.1.2" }) // another pod becomes ready
	r.sync(t, apply.Applied)
	live := r.live(t)
	if !strings.Contains(live, "server api-2 10.0.1.2:80") || strings.Contains(live, "web-2") {
		t.Fatalf("the other pod is not live, or the bad one is:\n%s", live)
	}
	if got := r.held(); got != "pod/shop/web-2:false" {
		t.Errorf("held %q", got)
	}

	c.edit(func(c *cluster) { c.pods["web-2"] = "10.0.0.2" })
	r.sync(t, apply.Applied)
	if live := r.live(t); !strings.Contains(live, "server web-2 10.0.0.2:80") {
		t.Fatalf("the fixed pod is not live:\n%s", live)
	}
	if got := r.held(); got != "" {
		t.Errorf("still held: %q", got)
	}
}

// TestTemplateTestsHoldTheTemplate: a template change whose own tests fail is held at its last
// good version, naming the test and the assertion, while another change goes live; fixing the
// template (or the test) releases it.
func TestTemplateTestsHoldTheTemplate(t *testing.T) {
	c := startCluster()
	c.tests = map[string]string{"tests.fe.yaml": "expect:\n- contains: 'frontend fe'\n- notContains: 'bind :9999'\n"}
	r := newQRig(t, c, "")
	r.sync(t, apply.Applied)

	c.edit(func(c *cluster) {
		c.template = "frontend fe\n    bind :9999\n"
		c.pods["api-2"] = "10.0.1.2"
	})
	r.sync(t, apply.Applied)
	if got := r.held(); got != "templates:true" {
		t.Fatalf("held %q, want the templates at their last good version", got)
	}
	h := r.p.q.Held["templates"]
	if h.Stage != "test" || !strings.Contains(h.Reason(), `key "tests.fe.yaml"`) || !strings.Contains(h.Reason(), "test fe: expect[1]") {
		t.Errorf("the hold does not name the test and assertion: %s %q", h.Stage, h.Reason())
	}
	live := r.live(t)
	if !strings.Contains(live, "server api-2 10.0.1.2:80") || strings.Contains(live, ":9999") {
		t.Fatalf("the other change is not live, or the held template is:\n%s", live)
	}

	c.edit(func(c *cluster) { c.template = "frontend fe\n    bind :8888\n" })
	r.sync(t, apply.Applied)
	if got := r.held(); got != "" {
		t.Errorf("still held: %q", got)
	}
	if live := r.live(t); !strings.Contains(live, "bind :8888") {
		t.Errorf("the fixed template is not live:\n%s", live)
	}
}

// TestAFailingTestAtFirstStartIsHeldAndNamed: at the first start (nothing has a last good
// version), a template set whose test fails is the hold /readyz lists, and the sync's error is
// the test's, not a failure of the rendering without the other new inputs.
func TestAFailingTestAtFirstStartIsHeldAndNamed(t *testing.T) {
	c := startCluster()
	c.tests = map[string]string{"tests.fe.yaml": "expect:\n- contains: 'bind :9999'\n"}
	r := newQRig(t, c, "")
	res := r.sync(t, apply.Rejected)
	if !strings.Contains(res.Err.Error(), "test fe: expect[0]") {
		t.Errorf("error %v does not name the test", res.Err)
	}
	if got := r.held(); got != "templates:false" {
		t.Fatalf("held %q, want the template set (never good: left out)", got)
	}
	if h := r.p.q.Held["templates"]; h.Stage != "test" || !strings.Contains(h.Reason(), `key "tests.fe.yaml"`) {
		t.Errorf("hold %s %q does not name the test's key", h.Stage, h.Reason())
	}
	c.edit(func(c *cluster) { c.template = "frontend fe\n    bind :9999\n" })
	r.sync(t, apply.Applied)
	if got := r.held(); got != "" {
		t.Errorf("still held once fixed: %q", got)
	}
}
