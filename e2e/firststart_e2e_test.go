package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// TestFirstStartWithEveryServiceHeld: started with every services key bad and a template whose
// HTTPS frontend needs a service's backend, the sidecar holds the services; the certificate,
// whose frontend then fails haproxy -c, is left out saying the services left out may be at
// fault; no spurious error follows; once the services are fixed, everything goes live.
func TestFirstStartWithEveryServiceHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	e.editFile(t, "config.yaml", func(s string) string {
		s = s[:strings.Index(s, "  # Tests of the template")] // its test has no service web
		return strings.Replace(s, "      http-request set-header X-Forwarded-Proto https\n",
			"      http-request set-header X-Forwarded-Proto https\n      default_backend be_web\n", 1)
	})
	e.editFile(t, "services.yaml", func(s string) string { return strings.ReplaceAll(s, `"ports": [`, `"ports": [[`) })
	e.startSidecar(t)
	e.startHAProxy(t)

	var r readyz
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		_, r = e.readyz(t)
		return r.LiveConfig != "" && len(r.Held) >= 2
	}, "a configuration goes live with the services held")
	certs := 0
	for _, h := range r.Held {
		t.Logf("held %s: %s", h.Input, h.Reason)
		if strings.HasPrefix(h.Input, "service/") {
			continue
		}
		certs++
		if !strings.Contains(h.Reason, "left out meanwhile, held back themselves") {
			t.Errorf("%s is blamed without a word of the services left out: %s", h.Input, h.Reason)
		}
	}
	if certs == 0 {
		t.Error("the certificate went live: its frontend's default_backend is a held service's")
	}
	if logs := e.logs.String(); strings.Contains(logs, "stage=activate") {
		t.Errorf("a spurious error:\n%s", logs)
	}

	e.editFile(t, "services.yaml", func(s string) string { return strings.ReplaceAll(s, `"ports": [[`, `"ports": [`) })
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		_, r = e.readyz(t)
		return len(r.Held) == 0 && r.LastError == ""
	}, "everything goes live once the services are fixed")
	e.waitServed(t, "web.localhost", "/", "web-")
}
