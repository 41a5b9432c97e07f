package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/loadgen"
)

// TestReloadsUnderKeepAliveLoadFailNoRequest: 20 template changes, each a confirmed HAProxy
// reload, under a bounded keep-alive load on loopback; not one request may fail.
func TestReloadsUnderKeepAliveLoadFailNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("load test with a real HAProxy")
	}
	e := newDemoEnv(t)
	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "  balance roundrobin\n", "  balance roundrobin\n      http-response set-header X-Gen gen-0\n", 1)
	})
	e.startSidecar(t)
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	reloadsBefore := e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`)

	load := loadgen.Start(e.httpAddr, "web.localhost", 8)
	const reloads = 20
	for i := 1; i <= reloads; i++ {
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, fmt.Sprintf("X-Gen gen-%d\n", i-1), fmt.Sprintf("X-Gen gen-%d\n", i), 1)
		})
		want := fmt.Sprintf("gen-%d", i)
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, _, h, _ := e.get("web.localhost", "/")
			return h.Get("X-Gen") == want
		}, "reload "+want+" serves")
		e.settled(t)
	}
	load.Stop()

	if got := e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`) - reloadsBefore; got != reloads {
		t.Errorf("%v confirmed reloads, want %d", got, reloads)
	}
	t.Logf("%d requests succeeded, %d failed across %d reloads", load.OK(), load.Failed(), reloads)
	if load.OK() < 100 {
		t.Errorf("only %d requests succeeded: the load did not run", load.OK())
	}
	if n := load.Failed(); n != 0 {
		t.Errorf("%d requests failed during reloads; first errors: %v", n, load.Errors())
	}
}
