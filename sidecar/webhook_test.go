package sidecar

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/admission"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// webhookOn returns the evaluator a sidecar running on a copy of examples/local answers reviews
// with (its good inputs those of its first sync), and that copy.
func webhookOn(t *testing.T, args ...string) (*admission.Inputs, string) {
	t.Helper()
	eval, dir, _ := webhookCounting(t, args...)
	return eval, dir
}

// countingRenderer counts the renderings of the renderer it wraps.
type countingRenderer struct {
	r candidate.Renderer
	n atomic.Int32
}

func (c *countingRenderer) Render(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	c.n.Add(1)
	return c.r.Render(ctx, s)
}

// webhookCounting is webhookOn with the renderings the evaluator makes counted.
func webhookCounting(t *testing.T, args ...string) (*admission.Inputs, string, *atomic.Int32) {
	t.Helper()
	dir := example(t)
	cfg, err := config.ParseOnce("validate", append([]string{"--source=file", "--dir", dir}, args...), "", func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	objs, _, err := readOnce(ctx, cfg.Source, cfg.Inputs, "", log)
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := onceDirs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	build, cleanup, err := stagingBuilder(cfg.Inputs, snapshot.PeersOptions{}, cfg.Render, dirs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	var q quarantine.State
	cur := build.Decode(objs)
	made := build.Make(ctx, objs, cur, &q, nil, true)
	if made.Candidate == nil || len(made.Held) > 0 {
		t.Fatalf("the example does not render: %v %v", made.Err, made.Held)
	}
	q.Accept(made.Candidate.Chosen, made.Current)
	ro := cfg.Render.Options(dirs.SSLDir)
	ro.MapsDir, ro.FilesDir = dirs.MapsDir, dirs.FilesDir
	rend := &countingRenderer{r: render.New(ro)}
	eval, stop, err := webhookEvaluator(cfg.Inputs, snapshot.PeersOptions{}, cfg.Render, dirs, rend,
		func(context.Context) (*snapshot.Objects, error) { return objs, nil },
		func() quarantine.State { return q })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return eval, dir, &rend.n
}

// proposed is the change of the object in the example's file, edited, as the API server sends
// it (JSON).
func proposed(t *testing.T, dir, file, old, new string) admission.Change {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, old) {
		t.Fatalf("%s does not hold %q", file, old)
	}
	s = strings.Replace(s, old, new, 1)
	s = s[strings.Index(s, "apiVersion:"):] // the first object of the file
	if i := strings.Index(s, "\n---"); i >= 0 {
		s = s[:i]
	}
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Kind     string
		Metadata struct{ Name, Namespace string }
	}
	if err := yaml.Unmarshal(j, &meta); err != nil {
		t.Fatal(err)
	}
	return admission.Change{Operation: "UPDATE", Kind: meta.Kind, Namespace: meta.Metadata.Namespace, Name: meta.Metadata.Name, Object: j}
}

func TestWebhookAllowsAGoodEdit(t *testing.T) {
	needHAProxy(t)
	eval, dir := webhookOn(t)
	v := eval.Evaluate(context.Background(), proposed(t, dir, "services.yaml", `"hostnames": ["api.localhost"]`, `"hostnames": ["api.localhost", "api2.localhost"]`))
	if !v.Allowed {
		t.Fatalf("a good edit is denied: %s", v.Reason)
	}
}

func TestWebhookDeniesAServiceThatWouldBeHeld(t *testing.T) {
	needHAProxy(t)
	eval, dir := webhookOn(t)
	for name, edit := range map[string][2]string{
		"not JSON":           {`"ports": [8080],` + "\n      \"ssl\"", `"ports": [8080,` + "\n      \"ssl\""},
		"HAProxy refuses it": {`"ports": [8080],` + "\n      \"ssl\"", `"ports": [99999],` + "\n      \"ssl\""},
	} {
		t.Run(name, func(t *testing.T) {
			v := eval.Evaluate(context.Background(), proposed(t, dir, "services.yaml", edit[0], edit[1]))
			if v.Allowed {
				t.Fatal("a bad service is allowed")
			}
			for _, want := range []string{"ConfigMap lb/services", `key "web"`} {
				if !strings.Contains(v.Reason, want) {
					t.Errorf("the reason %q does not say %q", v.Reason, want)
				}
			}
		})
	}
}

func TestWebhookDeniesATemplateThatWouldBeHeld(t *testing.T) {
	needHAProxy(t)
	eval, dir := webhookOn(t)
	for name, c := range map[string]struct{ old, new, want string }{
		"syntax":          {"{%- endfor %}\n\n    {% if certificates %}", "{%- endfo %}\n\n    {% if certificates %}", "line"},
		"haproxy -c":      {"balance roundrobin", "balance sideways", "sideways"},
		"rendering fails": {"timeout client 30s", "timeout client 30s\n      # {{ 1/0 }}", "division"},
		"a test fails":    {"{{ port }} check inter 2s", "{{ port }} inter 2s", "routes"},
	} {
		t.Run(name, func(t *testing.T) {
			v := eval.Evaluate(context.Background(), proposed(t, dir, "config.yaml", c.old, c.new))
			if v.Allowed {
				t.Fatal("a bad template is allowed")
			}
			t.Log(v.Reason)
			for _, want := range []string{"ConfigMap lb/config", c.want} {
				if !strings.Contains(v.Reason, want) {
					t.Errorf("the reason %q does not say %q", v.Reason, want)
				}
			}
		})
	}
}

// TestWebhookSaysWhatHAProxyWarns: a change HAProxy accepts with a warning is allowed, and the
// warning goes back to kubectl.
func TestWebhookSaysWhatHAProxyWarns(t *testing.T) {
	needHAProxy(t)
	eval, dir := webhookOn(t)
	v := eval.Evaluate(context.Background(), proposed(t, dir, "config.yaml", "      timeout client 30s\n", ""))
	if !v.Allowed || len(v.Warnings) == 0 || !strings.Contains(v.Warnings[0], "haproxy -c: missing timeouts") {
		t.Errorf("allowed %v, warnings %q", v.Allowed, v.Warnings)
	}
}

// TestWebhookAllowsWhatIsNoInputAtOnce: the webhook is asked about every ConfigMap and Secret
// of the namespace; those the sidecar does not read are allowed without a rendering.
func TestWebhookAllowsWhatIsNoInputAtOnce(t *testing.T) {
	needHAProxy(t)
	eval, _, renders := webhookCounting(t)
	other := admission.Change{Operation: "UPDATE", Kind: "ConfigMap", Namespace: "lb", Name: "other",
		Object: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other","namespace":"lb"},"data":{"x":"{{ not a template"}}`)}
	if v := eval.Evaluate(context.Background(), other); !v.Allowed {
		t.Errorf("an unrelated ConfigMap is denied: %s", v.Reason)
	}
	other.Operation, other.Object = "DELETE", nil
	if v := eval.Evaluate(context.Background(), other); !v.Allowed {
		t.Errorf("deleting an unrelated ConfigMap is denied: %s", v.Reason)
	}
	if n := renders.Load(); n != 0 {
		t.Errorf("%d renderings for objects the sidecar does not read", n)
	}
}

func TestWebhookDeletes(t *testing.T) {
	needHAProxy(t)
	eval, _ := webhookOn(t)
	v := eval.Evaluate(context.Background(), admission.Change{Operation: "DELETE", Kind: "Pod", Namespace: "demo", Name: "web-7d9f-abcde"})
	if !v.Allowed {
		t.Errorf("deleting a pod is denied: %s", v.Reason)
	}
	v = eval.Evaluate(context.Background(), admission.Change{Operation: "DELETE", Kind: "ConfigMap", Namespace: "lb", Name: "services"})
	if v.Allowed || !strings.Contains(v.Reason, "services") {
		t.Errorf("deleting the services ConfigMap: allowed %v, reason %q", v.Allowed, v.Reason)
	}
}
