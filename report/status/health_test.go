package status

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
)

// readyz answers /readyz from h: the status code and the body.
func readyz(t *testing.T, h *Health) (int, healthBody) {
	t.Helper()
	mux := http.NewServeMux()
	h.Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var b healthBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return rec.Code, b
}

// TestSourceDownIsAReasonNotUnreadiness: while HAProxy serves, a source that cannot be
// followed is the reason /readyz gives (named, with why and since when), and readiness stays
// 200; before anything is live, it says why nothing is.
func TestSourceDownIsAReasonNotUnreadiness(t *testing.T) {
	st := live.State{}
	h := &Health{HAProxy: func() live.State { return st }, Redact: func(s string) string { return strings.ReplaceAll(s, "hunter2", "[REDACTED]") }}

	h.SourceDown(errors.New("etcd source: cannot reach etcd (password hunter2)"))
	code, b := readyz(t, h)
	if code != http.StatusServiceUnavailable || !strings.Contains(b.Reason, "no configuration is live yet: etcd source: cannot reach etcd") {
		t.Errorf("nothing live, source down: %d %q", code, b.Reason)
	}

	st = live.State{Live: "abc", Probe: live.Probe{Seen: live.Up}}
	code, b = readyz(t, h)
	if code != http.StatusOK || !b.Ready {
		t.Errorf("HAProxy serves, source down: %d ready %v, want 200", code, b.Ready)
	}
	if b.Source != "down" || b.SourceDown == "" || !strings.Contains(b.SourceErr, "etcd source: cannot reach etcd") || b.Reason != b.SourceErr {
		t.Errorf("source %q since %q error %q reason %q", b.Source, b.SourceDown, b.SourceErr, b.Reason)
	}
	if strings.Contains(b.Reason, "hunter2") {
		t.Errorf("the reason %q is not redacted", b.Reason)
	}

	h.SourceUp()
	code, b = readyz(t, h)
	if code != http.StatusOK || b.Source != "up" || b.Reason != "" || b.SourceErr != "" || b.SourceDown != "" {
		t.Errorf("source back: %d source %q reason %q error %q since %q", code, b.Source, b.Reason, b.SourceErr, b.SourceDown)
	}
}

// TestStoppingIsNotReady: once the sidecar is asked to stop, /readyz answers 503 saying so,
// while HAProxy runs a good configuration and even on a standby: load balancers that follow the
// pod's readiness stop sending to it while HAProxy still serves (the pod drains).
func TestStoppingIsNotReady(t *testing.T) {
	st := live.State{Live: "abc", Probe: live.Probe{Seen: live.Up}}
	h := &Health{HAProxy: func() live.State { return st }}
	if code, _ := readyz(t, h); code != http.StatusOK {
		t.Fatalf("serving: %d, want 200", code)
	}
	h.Standby()
	h.Stopping()
	code, b := readyz(t, h)
	if code != http.StatusServiceUnavailable || b.Ready || !b.Stopping || !strings.HasPrefix(b.Reason, "stopping") {
		t.Errorf("stopping: %d ready %v stopping %v reason %q, want 503 saying it stops", code, b.Ready, b.Stopping, b.Reason)
	}
	if h.Ready() {
		t.Error("Ready() while stopping: haproxy_sidecar_ready would say 1")
	}
}
