package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// TestDeletedObjectsAreHeld: deleting the services ConfigMap (its file) or the config
// ConfigMap does not go live: each is held at its last good version and reported, other
// changes still go live, and restoring the object ends the hold.
func TestDeletedObjectsAreHeld(t *testing.T) {
	e := servingDemo(t)
	good := e.settled(t)

	for _, file := range []string{"services.yaml", "config.yaml"} {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join(e.dir, file)
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			var r readyz
			haproxytest.WaitFor(t, 10*time.Second, func() bool {
				_, r = e.readyz(t)
				return len(r.Held) > 0
			}, "the deletion is held")
			if !strings.Contains(r.LastError, "deleted") {
				t.Errorf("reason %q does not say the object was deleted", r.LastError)
			}
			if !r.Ready || r.LiveConfig != good.LiveConfig {
				t.Errorf("live %q (ready %v), want the last good %q", r.LiveConfig, r.Ready, good.LiveConfig)
			}
			e.waitServed(t, "web.localhost", "/", "web-")
			e.waitServed(t, "api.localhost", "/v1/x", "api-1")

			undo := e.podChange(t, "api") // still goes live

			if err := os.WriteFile(path, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			undo()
			haproxytest.WaitFor(t, 10*time.Second, func() bool {
				_, r = e.readyz(t)
				return len(r.Held) == 0 && r.LastError == "" && r.LiveConfig == good.LiveConfig
			}, "the object is back and no longer held")
		})
	}
}

// TestStatsPasswordNeverLeaks: haproxy -c rejects the line that holds the stats password; the
// rejection is reported (log, /readyz) without the line, with the template line that wrote it.
func TestStatsPasswordNeverLeaks(t *testing.T) {
	const password = "Pw-9f3c1e77d2"
	e := servingDemo(t, "--statistics-password", password)
	e.editFile(t, "config.yaml", func(s string) string {
		// A typo in the keyword: haproxy -c rejects the line, and the error quotes it.
		return strings.Replace(s, "stats auth {{", "stats authx {{", 1)
	})
	var r readyz
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r = e.readyz(t)
		return len(r.Held) > 0 && r.Held[0].Stage == "validate"
	}, "the template is held at validation")
	if !strings.Contains(r.LastError, `from template "template" line 26: [a line holding a secret]`) || strings.Contains(r.LastError, "authx") {
		t.Errorf("the reason %q quotes the line, or does not say which template line wrote it", r.LastError)
	}
	if strings.Contains(r.LastError, password) || strings.Contains(r.Held[0].Reason, password) {
		t.Errorf("/readyz leaks the stats password: %q", r.LastError)
	}
	if logs := e.logs.String(); strings.Contains(logs, password) {
		i := strings.Index(logs, password)
		t.Errorf("the log leaks the stats password: ...%s...", logs[max(0, i-200):min(len(logs), i+50)])
	} else if !strings.Contains(logs, "[a line holding a secret]") {
		t.Error("the log does not show the withheld line")
	}
}

// TestHAProxyDeathIsNoticed: HAProxy killed (-9): haproxy_up 0 and /readyz 503 with the
// reason; started again on the same files: ready again, serving the live configuration, with
// no reload by the sidecar; changes go live again.
func TestHAProxyDeathIsNoticed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	e.startSidecar(t, "--probe-interval", "200ms")
	h := e.startHAProxy(t)
	e.waitReady(t)
	live := e.settled(t).LiveConfig
	reloads := e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`)

	h.Kill()
	var r readyz
	var code int
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		code, r = e.readyz(t)
		return code == 503 && r.HAProxy == "down" && e.metric(t, "haproxy_sidecar_haproxy_up") == 0
	}, "HAProxy's death is noticed")
	if !strings.Contains(r.Reason, "HAProxy is down") {
		t.Errorf("reason %q", r.Reason)
	}
	if !strings.Contains(e.logs.String(), "HAProxy is down") {
		t.Error("no log line says HAProxy is down")
	}

	e.startHAProxy(t)
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		code, r = e.readyz(t)
		return code == 200 && r.HAProxy == "up" && r.LiveConfig == live && e.metric(t, "haproxy_sidecar_haproxy_up") == 1
	}, "ready again once HAProxy runs")
	e.waitServed(t, "web.localhost", "/", "web-")
	if got := e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`); got != reloads {
		t.Errorf("the sidecar reloaded %v times after HAProxy came back on the live files, want 0", got-reloads)
	}
	e.podChange(t, "api")
}

// TestUnreachableMasterSocket: a sidecar started on the files of a running HAProxy with a
// master socket path that does not answer says so (error, /readyz 503, haproxy_up 0) instead
// of "not running yet"; HAProxy keeps serving what it ran.
func TestUnreachableMasterSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	stop := e.startSidecar(t)
	e.startHAProxy(t)
	e.waitReady(t)
	stop()

	wrong := e.instance(t)
	wrong.cfgPath = e.cfgPath // the running HAProxy's files
	wrong.sock = filepath.Join(haproxytest.ShortTempDir(t), "nobody.sock")
	wrong.startSidecar(t, "--probe-interval", "200ms")
	var r readyz
	var code int
	haproxytest.WaitFor(t, 15*time.Second, func() bool {
		code, r = wrong.readyz(t)
		return code == 503 && r.HAProxy == "down" && wrong.metric(t, `haproxy_sidecar_sync_failures_total{stage="reload"}`) >= 1
	}, "the unreachable master socket is an error")
	// From the first report on, not "not running": HAProxy runs, its socket does not answer.
	if !strings.Contains(r.Reason, "HAProxy runs (pid ") {
		t.Errorf("first /readyz reason %q: want HAProxy found running", r.Reason)
	}
	if !strings.Contains(r.LastError+r.Reason, wrong.sock) {
		t.Errorf("the error does not name the socket: %q / %q", r.LastError, r.Reason)
	}
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r = wrong.readyz(t)
		return strings.Contains(r.Reason, "HAProxy runs (pid ") && strings.Contains(r.Reason, wrong.sock)
	}, "/readyz says HAProxy runs but its socket does not answer, naming the socket")
	if r.LiveConfig != "" {
		t.Errorf("live config %q reported while HAProxy cannot be asked", r.LiveConfig)
	}
	if strings.Contains(wrong.logs.String(), "not running yet") {
		t.Error(`logged "not running yet" for a HAProxy that runs`)
	}
	e.waitServed(t, "web.localhost", "/", "web-")
}

// TestRefusedReloadIsNotRetried: a configuration HAProxy refuses at reload (a port in use) is
// not reloaded again on later events with the same template; other changes go live.
func TestRefusedReloadIsNotRetried(t *testing.T) {
	e := servingDemo(t)
	// Something else holds a port: binding it passes haproxy -c, fails at reload.
	holder, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	addr := holder.Addr().String()
	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "frontend http\n", fmt.Sprintf("frontend http\n      bind %s\n", addr), 1)
	})
	const failed = `haproxy_sidecar_reloads_total{endpoint="master-socket",result="failed"}`
	haproxytest.WaitFor(t, 20*time.Second, func() bool { return e.metric(t, failed) == 1 }, "the refused reload")
	var r readyz
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r = e.readyz(t)
		return len(r.Held) == 1 && r.Held[0].Stage == "reload"
	}, "the template held at stage reload")
	// Later events: pods change, twice; the template is not reloaded again.
	undo := e.podChange(t, "api")
	undo()
	e.waitServed(t, "web.localhost", "/", "web-")
	e.editFile(t, "pods.yaml", func(s string) string { return s + "\n# touched\n" })
	e.settled(t)
	if got := e.metric(t, failed); got != 1 {
		t.Errorf("%v refused reloads, want 1: the same template was reloaded again", got)
	}
}

// TestOneSidecarPerStateDirectory: a second sidecar on the state directory of a running one
// stops at once, naming the first one's pid; the first keeps serving.
func TestOneSidecarPerStateDirectory(t *testing.T) {
	e := servingDemo(t)
	second := e.instance(t)
	cfg, err := config.ParseRun([]string{"--source=file", "--dir", e.dir, "--haproxy-config", second.cfgPath,
		"--state-dir", filepath.Join(filepath.Dir(e.cfgPath), ".haproxy-sidecar"), "--master-socket", second.sock,
		"--health-addr", second.health, "--metrics-addr", second.metrics}, "", os.Getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = sidecar.Run(ctx, cfg, sidecar.Env{Log: testWriter{t}})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || ctx.Err() != nil {
		t.Fatalf("the second sidecar: %v (context %v)", err, ctx.Err())
	}
	e.waitServed(t, "web.localhost", "/", "web-")
	e.podChange(t, "api")
}

// badPod is a ready pod of the web service whose address HAProxy refuses.
const badPod = `apiVersion: v1
kind: Pod
metadata:
  name: web-7d9f-badip
  namespace: demo
  labels:
    app: web
status:
  phase: Running
  podIP: 10.0.0.300
  conditions:
  - type: Ready
    status: "True"
`

// TestBadPodNeverFreezes: a ready pod whose address HAProxy refuses is left out and reported on
// itself while another pod's change goes live; a sidecar restarted with it present is ready
// (HAProxy serves what it stands behind); once the pod is gone, nothing is held.
func TestBadPodNeverFreezes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	stop := e.startSidecar(t)
	e.startHAProxy(t)
	e.waitReady(t)

	haproxytest.WriteFile(t, e.dir, "bad-pod.yaml", badPod)
	heldPod := func(r readyz) bool {
		for _, h := range r.Held {
			if h.Input == "pod/demo/web-7d9f-badip" && h.Object == "Pod demo/web-7d9f-badip" && strings.Contains(h.Reason, "10.0.0.300") {
				return true
			}
		}
		return false
	}
	var r readyz
	haproxytest.WaitFor(t, 15*time.Second, func() bool {
		var code int
		code, r = e.readyz(t)
		return code == 200 && heldPod(r)
	}, "the pod is held, reported on /readyz, and the sidecar stays ready")
	if got := e.metric(t, `haproxy_sidecar_held_inputs{kind="pod"}`); got != 1 {
		t.Errorf("held_inputs{kind=pod} = %v, want 1", got)
	}
	e.podChange(t, "api") // another pod goes live meanwhile
	e.waitServed(t, "web.localhost", "/", "web-")

	stop()
	e.startSidecar(t)
	haproxytest.WaitFor(t, 20*time.Second, func() bool {
		var code int
		code, r = e.readyz(t)
		return code == 200 && heldPod(r)
	}, "restarted with the pod present: ready, the pod held")

	if err := os.Remove(filepath.Join(e.dir, "bad-pod.yaml")); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 15*time.Second, func() bool {
		_, r = e.readyz(t)
		return r.Ready && !heldPod(r) && len(r.Held) == 0
	}, "nothing held once the pod is gone")
}

// TestFullDiskStillServesRuntimeChanges: with the state directory's disk full, a pod change
// the runtime API can make still goes live (no reload); haproxy_sidecar_files_behind says the
// files are behind; once there is room they follow.
func TestFullDiskStillServesRuntimeChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small filesystem to fill (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	e := newDemoEnv(t)
	e.startSidecar(t, "--state-dir", filepath.Join(dir, "state"))
	e.startHAProxy(t)
	e.waitReady(t)
	reloads := e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`)

	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 4096); ; {
		if _, err := f.Write(buf); err != nil {
			break // full
		}
	}
	f.Close()
	e.podChange(t, "api") // served: the runtime API needs no disk
	haproxytest.WaitFor(t, 10*time.Second, func() bool { return e.metric(t, "haproxy_sidecar_files_behind") == 1 },
		"files_behind says the files are behind")
	if got := e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`); got != reloads {
		t.Errorf("%v reloads for a pod change on a full disk, want 0", got-reloads)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 15*time.Second, func() bool { return e.metric(t, "haproxy_sidecar_files_behind") == 0 },
		"the files follow once there is room")
	target, err := os.Readlink(filepath.Join(dir, "state", "current"))
	if _, r := e.readyz(t); err != nil || len(r.LiveConfig) < 12 || !strings.HasSuffix(target, r.LiveConfig[:12]) {
		t.Errorf("the live generation on disk is %q (%v), HAProxy runs %q", target, err, r.LiveConfig)
	}
}
