package render

import (
	"context"
	"strings"
	"testing"
)

// TestIngressNginxFirstAnnotationWins: an Ingress with both allowlist-source-range and
// whitelist-source-range, and both permanent-redirect and temporal-redirect, is served as the
// example's comments say and ingress-nginx does: the first of each pair wins. The example's
// loops (`for n in [...] if s.allow is none ...`, `... if ... and not s.redirect`) rely on
// the loop filter seeing what the body set for the item before, as in Jinja2; with the
// filter run for every item first, the second annotation would win.
func TestIngressNginxFirstAnnotationWins(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"}
	example := loadConfigMapData(t, "../examples/templates/ingress-nginx.yaml")
	w := newNginxWorld(1, 0)
	const p = "nginx.ingress.kubernetes.io/"
	w.ingresses["a/both"] = map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"name": "both", "namespace": "a", "annotations": map[string]any{
			p + "allowlist-source-range": "10.1.0.0/16", p + "whitelist-source-range": "192.168.0.0/24",
			p + "permanent-redirect": "https://first.example.com/", p + "temporal-redirect": "https://second.example.com/",
		}},
		"spec": map[string]any{"ingressClassName": "nginx", "rules": []any{map[string]any{"host": "both.example.com",
			"http": map[string]any{"paths": []any{map[string]any{"path": "/", "pathType": "Prefix",
				"backend": map[string]any{"service": map[string]any{"name": "web", "port": map[string]any{"number": int64(80)}}}}}}}}},
	}
	b, err := New(opts).Render(context.Background(), w.snapshot(t, example))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b.Config)
	for _, want := range []string{"{ src 10.1.0.0/16 }", `redirect location "https://first.example.com/" code 301`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("the config has no %q:\n%s", want, cfg)
		}
	}
	for _, not := range []string{"192.168.0.0/24", "second.example.com"} {
		if strings.Contains(cfg, not) {
			t.Errorf("the config has %q, of the second annotation:\n%s", not, cfg)
		}
	}
}
