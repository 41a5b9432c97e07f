package e2e

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// runaway makes the demo's template loop (nearly) forever before it writes anything.
func runaway(s string) string {
	return strings.Replace(s, "    global\n", "    {% for i in range(10 ** 12) %}{% for j in range(10 ** 12) %}{% endfor %}{% endfor %}\n    global\n", 1)
}

// TestRunawayTemplateIsRejected: a template that runs past --render-timeout is a render
// error naming the budget; the last good configuration keeps serving; fixing the template
// recovers.
func TestRunawayTemplateIsRejected(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	e.startSidecar(t, "--render-timeout", "300ms")
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")

	const rejected = `haproxy_sidecar_rejected_total{stage="render"}`
	before := e.metric(t, rejected)
	e.editFile(t, "config.yaml", runaway)
	haproxytest.WaitFor(t, 30*time.Second, func() bool { return e.metric(t, rejected) > before }, "the runaway template is rejected")
	_, r := e.readyz(t)
	for _, want := range []string{`ConfigMap lb/config key "template"`, "time budget of 300ms", "--render-timeout"} {
		if !strings.Contains(r.LastError, want) {
			t.Errorf("last error %q does not say %q", r.LastError, want)
		}
	}
	e.waitServed(t, "web.localhost", "/", "web-")
	// Held, not retried: other changes go live meanwhile.
	undo := e.podChange(t, "api")
	undo()

	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "    {% for i in range(10 ** 12) %}{% for j in range(10 ** 12) %}{% endfor %}{% endfor %}\n", "", 1)
	})
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		_, r := e.readyz(t)
		return r.LastError == ""
	}, "the fixed template goes live")
}

// TestStopDuringRunawayRender: the sidecar stops within 5 s of being told to (SIGTERM
// cancels run's context), even in the middle of a render that would run for hours.
func TestStopDuringRunawayRender(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	e := newDemoEnv(t)
	e.editFile(t, "config.yaml", runaway)
	stop := e.startSidecar(t, "--render-timeout", "1h", "--validate=false")
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		buf := make([]byte, 1<<20)
		return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("/jinja.(*evaluator)."))
	}, "the sidecar is rendering the runaway template")
	start := time.Now()
	stop()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the sidecar took %v to stop", d)
	}
}
