package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// The bounds the issue sets for a source that goes away: reported within reportBound,
// and what changed meanwhile live within catchUpBound of the source's return.
const (
	reportBound  = 5 * time.Second
	catchUpBound = 2 * time.Second
)

// shopService is the services entry these tests add while the source is away.
func (e *demoEnv) shopService() string {
	return fmt.Sprintf(`{"namespace": "demo", "selector": "app=api", "hostnames": ["shop.localhost"], "ports": [%d]}`, e.port)
}

// awaitSourceDown waits (reportBound) until the sidecar reports its source down: source_up 0,
// /readyz 200 (HAProxy serves) with a reason that says each of want, and the log line; HAProxy
// keeps serving meanwhile.
func (e *demoEnv) awaitSourceDown(t *testing.T, logLine string, want ...string) {
	t.Helper()
	var r readyz
	var code int
	haproxytest.WaitFor(t, reportBound, func() bool {
		code, r = e.readyz(t)
		return e.metric(t, "haproxy_sidecar_source_up") == 0 && r.Reason != ""
	}, "source_up 0 and a /readyz reason")
	if code != 200 || !r.Ready {
		t.Errorf("/readyz %d (ready %v) while HAProxy serves, want 200", code, r.Ready)
	}
	for _, w := range want {
		if !strings.Contains(r.Reason, w) {
			t.Errorf("/readyz reason %q does not say %q", r.Reason, w)
		}
	}
	haproxytest.WaitFor(t, reportBound, func() bool { return strings.Contains(e.logs.String(), logLine) }, "the log line "+logLine)
	e.waitServed(t, "web.localhost", "/", "web-")
}

// awaitCaughtUp waits (catchUpBound from back) until shop.localhost is served, then for the
// source reported up again with no reason left.
func (e *demoEnv) awaitCaughtUp(t *testing.T, back time.Time) {
	t.Helper()
	haproxytest.WaitFor(t, catchUpBound-time.Since(back), func() bool {
		code, body, _, _ := e.get("shop.localhost", "/")
		return code == 200 && strings.HasPrefix(body, "api-1")
	}, "what changed while the source was away is served")
	t.Logf("served %v after the source's return", time.Since(back).Round(time.Millisecond))
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		code, r := e.readyz(t)
		return e.metric(t, "haproxy_sidecar_source_up") == 1 && code == 200 && r.Reason == ""
	}, "source_up 1 and no reason once the source is back")
}

// TestFileSourceDirectoryAway: the watched directory removed while serving: the process keeps
// running, HAProxy keeps serving, the source is reported down within 5 s; the directory put
// back (with a service added meanwhile): served within 2 s.
func TestFileSourceDirectoryAway(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	e.startSidecar(t)
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	if v := e.metric(t, "haproxy_sidecar_source_up"); v != 1 {
		t.Errorf("source_up = %v, want 1", v)
	}

	// The restored directory is made beside it, then renamed into place in one step.
	restored := e.dir + ".restored"
	if err := copyDir(e.dir, restored); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.dir); err != nil {
		t.Fatal(err)
	}
	e.awaitSourceDown(t, "file source: cannot watch the directory", "file source", e.dir, "removed or moved")

	services := filepath.Join(restored, "services.yaml")
	b, err := os.ReadFile(services)
	if err != nil {
		t.Fatal(err)
	}
	added := strings.Replace(string(b), "\ndata:\n", "\ndata:\n  shop: |\n    "+e.shopService()+"\n", 1)
	if err := os.WriteFile(services, []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if err := os.Rename(restored, e.dir); err != nil {
		t.Fatal(err)
	}
	e.awaitCaughtUp(t, back)
}

// TestFileSourceDirectoryMissingAtStart: started before its directory exists, the sidecar does
// not exit: it says why nothing is live (source_up 0, /readyz 503 naming the directory), and
// configures HAProxy once the directory appears.
func TestFileSourceDirectoryMissingAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	aside := e.dir + ".aside"
	if err := os.Rename(e.dir, aside); err != nil {
		t.Fatal(err)
	}
	e.startSidecar(t)
	var r readyz
	var code int
	haproxytest.WaitFor(t, reportBound, func() bool {
		code, r = e.readyz(t)
		return code != 0 && e.metric(t, "haproxy_sidecar_source_up") == 0 && strings.Contains(r.Reason, e.dir)
	}, "source_up 0 and a /readyz reason naming the directory")
	if code != 503 || r.Ready {
		t.Errorf("/readyz %d (ready %v) with nothing live, want 503", code, r.Ready)
	}
	if err := os.Rename(aside, e.dir); err != nil {
		t.Fatal(err)
	}
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	if v := e.metric(t, "haproxy_sidecar_source_up"); v != 1 {
		t.Errorf("source_up = %v once the directory is there, want 1", v)
	}
}
