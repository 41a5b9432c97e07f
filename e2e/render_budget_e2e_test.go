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
	e := servingDemo(t, "--render-timeout", "300ms")
	e.waitServed(t, "web.localhost", "/", "web-")

	const rejected = `haproxy_sidecar_rejected_total{stage="render"}`
	before := e.metric(t, rejected)
	e.editFile(t, "config.yaml", runaway)
	// Held on its object, with a reason naming the budget (reported before the sync that held
	// it ends: wait for the hold itself, not for a sync's last error).
	var r readyz
	held := func() bool {
		_, r = e.readyz(t)
		for _, h := range r.Held {
			if h.Object == "ConfigMap lb/config" && strings.Contains(h.Reason, `ConfigMap lb/config key "template"`) &&
				strings.Contains(h.Reason, "time budget of 300ms") && strings.Contains(h.Reason, "--render-timeout") {
				return true
			}
		}
		return false
	}
	if err := haproxytest.Poll(30*time.Second, held); err != nil {
		t.Fatalf("the runaway template is not held naming its budget: held %+v, last error %q", r.Held, r.LastError)
	}
	for _, want := range []string{`ConfigMap lb/config key "template"`, "time budget of 300ms", "--render-timeout"} {
		if !strings.Contains(r.LastError, want) {
			t.Errorf("last error %q does not say %q", r.LastError, want)
		}
	}
	if e.metric(t, rejected) <= before {
		t.Errorf("%s did not grow", rejected)
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
		return len(r.Held) == 0 && r.LastError == ""
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

// TestARunawayTemplateHoldsUpNoOtherChange: while a changed template runs (its budget an hour
// here), a pod and a new service go live with the last good template; the template, fixed,
// goes live too.
func TestARunawayTemplateHoldsUpNoOtherChange(t *testing.T) {
	e := servingDemo(t, "--render-timeout", "1h")
	e.waitServed(t, "web.localhost", "/", "web-")

	e.editFile(t, "config.yaml", runaway)
	rendering := func() bool {
		buf := make([]byte, 1<<20)
		return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("/jinja.(*evaluator)."))
	}
	haproxytest.WaitFor(t, 30*time.Second, rendering, "the sidecar renders the runaway template")
	e.podChange(t, "api")  // waits until the ready pod serves
	e.podChange(t, "shop") // a new service, through the services ConfigMap
	if !rendering() {
		t.Fatal("the runaway template stopped rendering: the changes did not go live beside it")
	}
	if code, r := e.readyz(t); code != 200 || r.LastError != "" {
		t.Errorf("readyz %d %q while a template is tried", code, r.LastError)
	}

	e.editFile(t, "config.yaml", func(s string) string {
		s = strings.Replace(s, "    {% for i in range(10 ** 12) %}{% for j in range(10 ** 12) %}{% endfor %}{% endfor %}\n", "", 1)
		const bind = `bind {{ env.HTTP_BIND|default("127.0.0.1:8000", true) }}`
		if !strings.Contains(s, bind) {
			t.Fatalf("the demo's template has no line %q to add a header after", bind)
		}
		return strings.Replace(s, bind, bind+"\n      http-response set-header X-Template fixed", 1)
	})
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		_, _, h, err := e.get("web.localhost", "/")
		return err == nil && h.Get("X-Template") == "fixed"
	}, "the fixed template goes live")
}
