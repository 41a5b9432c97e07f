package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// TestRestartLeavesHAProxyAlone: a restarted sidecar that finds HAProxy running what it last
// made live (by a reload or through the runtime API) does not reload it, and its runtime API
// works from the first change; once HAProxy was reloaded by someone else it cannot tell what
// runs, and reloads once.
func TestRestartLeavesHAProxyAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	ms := &reload.MasterSocket{Path: e.sock, Timeout: 5 * time.Second}
	haproxyReloads := func() int {
		t.Helper()
		p, err := ms.ShowProc(t.Context())
		if err != nil {
			t.Fatalf("show proc: %v", err)
		}
		return p.Reloads
	}
	// another is the sidecar started again: the same files and master socket, new ports.
	another := func() *demoEnv {
		c := *e
		c.health = fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
		c.metrics = fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
		return &c
	}
	const sidecarReloads = `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`
	// lastSuccess is set by a confirmed reload, or when the sidecar finds HAProxy running
	// what it made live (no reload needed): a "no reload for long" alert must not fire then.
	const lastSuccess = "haproxy_sidecar_last_reload_success_timestamp_seconds"

	stop := e.startSidecar(t)
	e.startHAProxy(t)
	e.waitReady(t)
	haproxytest.WaitFor(t, 10*time.Second, func() bool { return e.metric(t, lastSuccess) > 0 },
		"HAProxy started on the files the sidecar wrote: the success time is set")
	// HAProxy loaded the first configuration at its start; a change that needs a reload (a
	// new backend) lets the sidecar learn which load of HAProxy runs its configuration.
	e.editFile(t, "services.yaml", func(s string) string {
		return strings.Replace(s, "\ndata:\n", fmt.Sprintf("\ndata:\n  shop: |\n    {\"namespace\": \"demo\", \"selector\": \"app=api\", \"hostnames\": [\"shop.localhost\"], \"ports\": [%d]}\n", e.port), 1)
	})
	e.waitServed(t, "shop.localhost", "/", "api-1")
	live := e.settled(t).LiveConfig
	before := haproxyReloads()
	stop()

	t.Run("restarted after a reload: no reload", func(t *testing.T) {
		s := another()
		restarted := float64(time.Now().Unix())
		stop = s.startSidecar(t)
		if r := s.waitReady(t); r.LiveConfig != live {
			t.Fatalf("live configuration %s after the restart, want %s", r.LiveConfig, live)
		}
		haproxytest.WaitFor(t, 10*time.Second, func() bool { return s.metric(t, lastSuccess) >= restarted },
			"the restarted sidecar confirmed what HAProxy runs: the success time is its start")
		if got := haproxyReloads(); got != before {
			t.Errorf("HAProxy reloaded %d times since the restart, want 0", got-before)
		}
		if got := s.metric(t, sidecarReloads); got != 0 {
			t.Errorf("the sidecar counted %v reloads, want 0", got)
		}
		// The first sync adopts what HAProxy runs (the file source may notify once more as it
		// starts watching: that sync finds nothing to do either).
		if got := s.metric(t, `haproxy_sidecar_renders_total{result="unchanged"}`); got < 1 {
			t.Errorf("renders unchanged %v, want at least 1 (the first, adopted)", got)
		}
		if got := s.metric(t, `haproxy_sidecar_renders_total{result="success"}`); got != 0 {
			t.Errorf("renders that went live %v, want 0", got)
		}

		// The runtime API knows what HAProxy runs: a pod becoming ready needs no reload.
		s.editFile(t, "pods.yaml", func(src string) string {
			i := strings.Index(src, "name: api-5c6b-pqrst")
			tail := strings.Replace(src[i:], `status: "False"`, `status: "True"`, 1)
			return src[:i] + strings.Replace(tail, "ready: false", "ready: true", 1)
		})
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			for range 4 {
				if _, body, _, _ := s.get("shop.localhost", "/"); strings.HasPrefix(body, "api-2") {
					return true
				}
			}
			return false
		}, "api-2 serves once its pod is ready")
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			_, r := s.readyz(t)
			return r.LiveConfig != live
		}, "the new generation written and live")
		live = s.settled(t).LiveConfig
		if got := haproxyReloads(); got != before {
			t.Errorf("HAProxy reloaded %d times for a pod change, want 0 (runtime API)", got-before)
		}
		if got := s.metric(t, `haproxy_sidecar_change_to_live_seconds_count{path="runtime"}`); got < 1 {
			t.Errorf("changes live through the runtime API: %v observed, want at least the pod's", got)
		}
		stop()
	})

	t.Run("restarted after a runtime API change: no reload", func(t *testing.T) {
		s := another()
		stop = s.startSidecar(t)
		if r := s.waitReady(t); r.LiveConfig != live {
			t.Fatalf("live configuration %s after the restart, want %s", r.LiveConfig, live)
		}
		if got := haproxyReloads(); got != before {
			t.Errorf("HAProxy reloaded %d times since the restart, want 0", got-before)
		}
		stop()
	})

	t.Run("restarted with its source directory missing: ready on what HAProxy runs", func(t *testing.T) {
		aside := e.dir + ".aside"
		if err := os.Rename(e.dir, aside); err != nil {
			t.Fatal(err)
		}
		s := another()
		stop = s.startSidecar(t)
		var r readyz
		var code int
		// HAProxy serves what the sidecar made live: once the first sync has found that out
		// (the source's own report of the missing directory can come before it), /readyz is
		// 200 (docs/inputs.md) and names the directory, and HAProxy is left alone.
		if err := haproxytest.Poll(reportBound, func() bool {
			code, r = s.readyz(t)
			return s.metric(t, "haproxy_sidecar_source_up") == 0 && strings.Contains(r.Reason, e.dir) &&
				code == 200 && r.Ready && r.LiveConfig == live
		}); err != nil {
			t.Errorf("/readyz %d (ready %v, live %q, want %q, reason %q) while HAProxy serves the last good configuration", code, r.Ready, r.LiveConfig, live, r.Reason)
		}
		if got := haproxyReloads(); got != before {
			t.Errorf("HAProxy reloaded %d times since the restart, want 0", got-before)
		}
		if err := os.Rename(aside, e.dir); err != nil {
			t.Fatal(err)
		}
		haproxytest.WaitFor(t, reportBound, func() bool { return s.metric(t, "haproxy_sidecar_source_up") == 1 }, "source_up 1 once the directory is back")
		if r := s.settled(t); r.LiveConfig != live || haproxyReloads() != before {
			t.Errorf("live %q (want %q) and %d reloads once the unchanged directory is back, want none", r.LiveConfig, live, haproxyReloads()-before)
		}
		stop()
	})

	t.Run("restarted with --record-dir: the record moved there, no reload", func(t *testing.T) {
		records := t.TempDir()
		inState := filepath.Join(filepath.Dir(e.cfgPath), ".haproxy-sidecar", "loaded")
		if _, err := os.Stat(inState); err != nil {
			t.Fatalf("the record before the option: %v", err)
		}
		s := another()
		stop = s.startSidecar(t, "--record-dir", records)
		if r := s.waitReady(t); r.LiveConfig != live {
			t.Fatalf("live configuration %s after the restart, want %s", r.LiveConfig, live)
		}
		if _, err := os.Stat(inState); !os.IsNotExist(err) {
			t.Errorf("the record is still in the state directory: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(records, "loaded")); err != nil || !strings.HasPrefix(string(b), live+"\n") {
			t.Errorf("the record in --record-dir: %q, %v; want it to name %s", b, err, live)
		}
		if got := haproxyReloads(); got != before {
			t.Errorf("HAProxy reloaded %d times since the restart, want 0", got-before)
		}
		// A runtime API change records there, and a sidecar restarted with it adopts it.
		s.editFile(t, "pods.yaml", func(src string) string {
			i := strings.Index(src, "name: api-5c6b-pqrst")
			tail := strings.Replace(src[i:], `status: "True"`, `status: "False"`, 1)
			return src[:i] + strings.Replace(tail, "ready: true", "ready: false", 1)
		})
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			_, r := s.readyz(t)
			return r.LiveConfig != live
		}, "the pod's change live, its generation written")
		live = s.settled(t).LiveConfig
		stop()
		s = another()
		stop = s.startSidecar(t, "--record-dir", records)
		if r := s.waitReady(t); r.LiveConfig != live {
			t.Fatalf("live configuration %s after the restart, want %s", r.LiveConfig, live)
		}
		if got := haproxyReloads(); got != before {
			t.Errorf("HAProxy reloaded %d times since the restarts, want 0", got-before)
		}
		if _, err := os.Stat(inState); !os.IsNotExist(err) {
			t.Errorf("a record written in the state directory: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(records, "loaded")); err != nil || !strings.HasPrefix(string(b), live+"\n") {
			t.Errorf("the record in --record-dir after the runtime change: %q, %v; want it to name %s", b, err, live)
		}
		stop()
	})

	t.Run("HAProxy reloaded behind the sidecar's back: one reload", func(t *testing.T) {
		if err := ms.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
		outside := haproxyReloads()
		s := another()
		stop = s.startSidecar(t)
		s.waitReady(t)
		haproxytest.WaitFor(t, 10*time.Second, func() bool { return haproxyReloads() == outside+1 }, "the sidecar reloads HAProxy")
		if got := s.metric(t, sidecarReloads); got != 1 {
			t.Errorf("the sidecar counted %v reloads, want 1", got)
		}
		s.waitServed(t, "shop.localhost", "/", "api-")
	})
}
