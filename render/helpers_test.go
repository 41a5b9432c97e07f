package render

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

var configRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}

func pod(name, ip string) map[string]any {
	status := map[string]any{"phase": "Running"}
	if ip != "" {
		status["podIP"] = ip
	}
	return map[string]any{
		"metadata": map[string]any{"name": name, "labels": map[string]any{"app": "x", "tier": "web"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "ports": []any{map[string]any{"containerPort": int64(8080)}}}}},
		"status":   status,
	}
}

// testServices are three services as the snapshot gives them (sorted by name), with
// multi-key dicts everywhere.
func testServices() []map[string]any {
	return []map[string]any{
		{
			"name": "api", "namespace": "web", "selector": map[string]any{"app": "api"},
			"hostnames": []any{"api.example.com", "^(www\\.)?api\\.example\\.org$"},
			"path":      "^/v1/", "ports": []any{int64(8080), int64(8443)}, "ssl": true,
			"pods": map[string]any{
				"api-c": pod("api-c", "10.0.1.3"), "api-a": pod("api-a", "10.0.1.1"),
				"api-b": pod("api-b", "10.0.1.2"), "api-d": pod("api-d", "10.0.1.4"),
			},
		},
		{
			"name": "shop", "namespace": "web", "selector": map[string]any{"app": "shop"},
			"hostnames": []any{"shop.example.com"}, "ports": []any{int64(80)}, "ssl": true,
			"pods": map[string]any{"shop-1": pod("shop-1", "10.0.2.11"), "shop-0": pod("shop-0", "10.0.2.10")},
		},
		{
			"name": "web", "namespace": "web", "selector": map[string]any{"app": "web"},
			"hostnames": []any{"www.example.com", "example.com"}, "ports": []any{int64(80)},
			"default": true,
			"pods":    map[string]any{"web-0": pod("web-0", "fd00::10")},
		},
	}
}

// serviceRecords is services as the snapshot has them: records, their maps records too (as
// inputs/snapshot makes them), but for their pods, kept as given (maps or records).
func serviceRecords(services []map[string]any) []*record.Record {
	out := make([]*record.Record, len(services))
	for i, svc := range services {
		out[i] = serviceRecord(svc)
	}
	return out
}

// serviceRecord is one service of serviceRecords.
func serviceRecord(svc map[string]any) *record.Record {
	m := make(map[string]any, len(svc))
	for k, v := range svc {
		m[k] = serviceValue(k, v)
	}
	return record.FromMap(nil, m)
}

// serviceValue is a service's key k's value v as serviceRecords holds it.
func serviceValue(k string, v any) any {
	if k == "pods" {
		return v
	}
	return record.Of(nil, v)
}

// setField sets s's service i's key to v (as serviceRecords holds it): a new record, as the
// snapshot makes one for a changed service.
func setField(s *snapshot.Snapshot, i int, key string, v any) {
	s.Services[i] = s.Services[i].Patched([]record.Change{{Key: key, Value: serviceValue(key, v)}})
}

func testSnapshot(templates map[string]string, key string) *snapshot.Snapshot {
	return &snapshot.Snapshot{
		Services:     serviceRecords(testServices()),
		Templates:    templates,
		TemplateKey:  key,
		TemplateRef:  configRef,
		Env:          map[string]string{"REGION": "eu", "HTTP_BIND": ""},
		Stats:        snapshot.Stats{Username: "stats", Password: "pw", PasswordSet: true},
		Certificates: []snapshot.Certificate{{Name: "example.com", PEM: []byte("PEM1")}, {Name: "shop", PEM: []byte("PEM2")}},
	}
}

// renderTpl renders one template (key "template") with testSnapshot.
func renderTpl(t *testing.T, tpl string) string {
	t.Helper()
	b, err := New(Options{SSLDir: "/ssl"}).Render(context.Background(), testSnapshot(map[string]string{"template": tpl}, "template"))
	if err != nil {
		t.Fatalf("render %q: %v", tpl, err)
	}
	return string(b.Config)
}

// renderErr renders s and returns its InputError, failing if there is none.
func renderErr(t *testing.T, s *snapshot.Snapshot) *snapshot.InputError {
	t.Helper()
	b, err := New(Options{SSLDir: "/ssl"}).Render(context.Background(), s)
	if err == nil {
		t.Fatalf("render succeeded, want an error; output:\n%s", b.Config)
	}
	var ie *snapshot.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error %T %v is not an *snapshot.InputError", err, err)
	}
	if ie.Stage != snapshot.StageRender {
		t.Errorf("stage %q, want %q", ie.Stage, snapshot.StageRender)
	}
	return ie
}

// largeWorldTimeout is the render budget of the tests that render thousands of routes: they
// check what is rendered, not how fast; a first render of 3,000 HTTPRoutes takes seconds under
// -race and took more than the default 10 s on a loaded machine (a red CI).
const largeWorldTimeout = 10 * time.Minute
