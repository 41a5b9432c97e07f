package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/loadgen"
)

// runtimeMapsTemplate routes by Host through hosts.map: a static host, the services' host
// names, and a host per pod (<pod>.pods.localhost), so that pods change the map too. Unknown
// hosts get 404.
const runtimeMapsTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: config
  namespace: lb
data:
  template: |
    global
      hard-stop-after 30s
    defaults
      mode http
      option idle-close-on-response
      timeout connect 5s
      timeout client 30s
      timeout server 30s
    frontend http
      bind {{ env.HTTP_BIND }}
      use_backend %[req.hdr(host),lower,map({{ mapsdir }}/hosts.map)]
      default_backend be_none
    backend be_none
      http-request return status 404 content-type text/plain string "no such site"
    {%- for service in services %}
    backend be_{{ service.name }}
    {%- for name, pod in service.pods.items() %}
      server {{ name }} {{ pod.status.podIP }}:{{ service.ports[0] }}
    {%- endfor %}
    {%- endfor %}
  hosts.map: |
    # rendered by haproxy-sidecar
    static.localhost be_web
    {%- for service in services %}
    {%- for hostname in service.hostnames if not hostname.startswith('^') %}
    {{ hostname }} be_{{ service.name }}
    {%- endfor %}
    {%- for name, pod in service.pods.items() %}
    {{ name }}.pods.localhost be_{{ service.name }}
    {%- endfor %}
    {%- endfor %}
`

// mapEnv is the demo with runtimeMapsTemplate, the sidecar and HAProxy running.
type mapEnv struct {
	*demoEnv
	proc    *haproxytest.Process
	mapFile string // the live hosts.map, through the stable maps directory
}

func newMapEnv(t *testing.T, sidecarArgs ...string) *mapEnv {
	t.Helper()
	e := &mapEnv{demoEnv: newDemoEnv(t)}
	e.editFile(t, "config.yaml", func(string) string { return runtimeMapsTemplate })
	e.startSidecar(t, sidecarArgs...)
	e.proc = e.startHAProxy(t)
	e.mapFile = filepath.Join(filepath.Dir(e.cfgPath), "maps", "hosts.map")
	e.waitReady(t)
	e.waitServed(t, "static.localhost", "/", "web-")
	e.waitServed(t, "api.localhost", "/", "api-")
	e.settled(t)
	return e
}

// editMap edits the hosts.map template.
func (e *mapEnv) editMap(t *testing.T, old, new string) {
	t.Helper()
	e.editFile(t, "config.yaml", func(s string) string { return strings.Replace(s, old, new, 1) })
}

// waitNotServed waits until host is answered 404 (not in the map).
func (e *mapEnv) waitNotServed(t *testing.T, host string) {
	t.Helper()
	var last string
	if err := haproxytest.Poll(10*time.Second, func() bool {
		code, body, _, err := e.get(host, "/")
		last = fmt.Sprintf("%d %q %v", code, body, err)
		return code == 404 && body == "no such site"
	}); err != nil {
		t.Fatalf("%s still served (last: %s)", host, last)
	}
}

// mapOnDisk says whether the live hosts.map has the line.
func (e *mapEnv) mapOnDisk(t *testing.T, line string) bool {
	t.Helper()
	b, err := os.ReadFile(e.mapFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains("\n"+string(b), "\n"+line+"\n")
}

// TestMapUpdatesWithoutReload: an existing host sent to another backend, a new host for an
// existing backend, a host removed: each served through the runtime API with no reload
// (HAProxy's own reload counter does not move), the files on disk updated, counted and
// logged as map updates.
func TestMapUpdatesWithoutReload(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newMapEnv(t)
	before := reloadCount(t, e.proc)
	updated := e.metric(t, `haproxy_sidecar_runtime_updates_total{kind="map_updated"}`)

	t.Run("an existing host to another backend", func(t *testing.T) {
		live := e.settled(t).LiveConfig
		e.editMap(t, "static.localhost be_web", "static.localhost be_api")
		e.waitServed(t, "static.localhost", "/", "api-")
		e.settledPast(t, live) // the live configuration hash changes with the map
		if !e.mapOnDisk(t, "static.localhost be_api") {
			t.Error("the map on disk is not the one served")
		}
	})
	t.Run("a new host for an existing backend", func(t *testing.T) {
		live := e.settled(t).LiveConfig
		e.editMap(t, "    static.localhost be_api\n", "    static.localhost be_api\n    new.localhost be_web\n")
		e.waitServed(t, "new.localhost", "/", "web-")
		e.settledPast(t, live)
		if !e.mapOnDisk(t, "new.localhost be_web") {
			t.Error("the new host is not in the map on disk")
		}
	})
	t.Run("a host removed", func(t *testing.T) {
		live := e.settled(t).LiveConfig
		e.editMap(t, "    new.localhost be_web\n", "")
		e.waitNotServed(t, "new.localhost")
		e.settledPast(t, live)
		if e.mapOnDisk(t, "new.localhost be_web") {
			t.Error("the removed host is still in the map on disk")
		}
		e.waitServed(t, "static.localhost", "/", "api-")
		e.waitServed(t, "web.localhost", "/", "web-")
	})
	t.Run("a pod's host: pods change the map too", func(t *testing.T) {
		live := e.settled(t).LiveConfig
		e.editFile(t, "pods.yaml", func(s string) string {
			return strings.Replace(s, "name: web-7d9f-abcde\n", "name: web-7d9f-zzzzz\n", 1)
		})
		e.waitServed(t, "web-7d9f-zzzzz.pods.localhost", "/", "web-")
		e.waitNotServed(t, "web-7d9f-abcde.pods.localhost")
		e.settledPast(t, live)
	})
	if n := reloadCount(t, e.proc) - before; n != 0 {
		t.Errorf("%d reloads for map changes, want none", n)
	}
	// The counter moves just after the change is recorded live.
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		return e.metric(t, `haproxy_sidecar_runtime_updates_total{kind="map_updated"}`)-updated >= 4
	}, "4 map updates counted")
	if got := e.metric(t, `haproxy_sidecar_runtime_updates_total{kind="map_updated"}`) - updated; got != 4 {
		t.Errorf("%v map updates counted, want 4", got)
	}
	if logs := e.logs.String(); !strings.Contains(logs, `changes="1 map_updated"`) || !strings.Contains(logs, `changes="1 server_added, 1 server_removed, 1 map_updated"`) {
		t.Errorf("no summary log line naming the map update:\n%s", logs)
	}

	t.Run("a map change together with a frontend change: one reload", func(t *testing.T) {
		before := reloadCount(t, e.proc)
		e.editFile(t, "config.yaml", func(s string) string {
			s = strings.Replace(s, "static.localhost be_api", "static.localhost be_web", 1)
			return strings.Replace(s, "      default_backend be_none\n", "      http-response set-header X-Frontend v2\n      default_backend be_none\n", 1)
		})
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			_, body, h, _ := e.get("static.localhost", "/")
			return h.Get("X-Frontend") == "v2" && strings.HasPrefix(body, "web-")
		}, "the frontend and the map change served")
		e.settled(t)
		if n := reloadCount(t, e.proc) - before; n != 1 {
			t.Errorf("%d reloads, want exactly one", n)
		}
		if !e.mapOnDisk(t, "static.localhost be_web") {
			t.Error("the map on disk is not the one served")
		}
	})
}

// TestMapUpdatesUnderLoadFailNoRequest: 50 map changes (a host moved between two backends, a
// host added and removed) under a keep-alive load and a load of new connections on the moving
// host: not one request fails, and HAProxy is not reloaded.
func TestMapUpdatesUnderLoadFailNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("load test with a real HAProxy")
	}
	e := newMapEnv(t)
	before := reloadCount(t, e.proc)
	keepAlive := loadgen.Start(e.httpAddr, "static.localhost", 4)
	fresh := loadgen.StartNewConnections(e.httpAddr, "static.localhost", 2)
	backends := []string{"be_web", "be_api"}
	answers := []string{"web-", "api-"}
	start := time.Now()
	const changes = 50
	for i := 1; i <= changes; i++ {
		to, from := i%2, (i+1)%2
		extra := ""
		if i%5 == 0 {
			extra = fmt.Sprintf("    extra-%d.localhost be_web\n", i)
		}
		e.editFile(t, "config.yaml", func(s string) string {
			s = strings.Replace(s, "static.localhost "+backends[from], "static.localhost "+backends[to], 1)
			if i := strings.Index(s, "    extra-"); i >= 0 {
				s = s[:i] + s[i+strings.Index(s[i:], "\n")+1:]
			}
			return strings.Replace(s, "    static.localhost", extra+"    static.localhost", 1)
		})
		e.waitServed(t, "static.localhost", "/", answers[to])
		if extra != "" {
			e.waitServed(t, fmt.Sprintf("extra-%d.localhost", i), "/", "web-")
		}
	}
	took := time.Since(start)
	e.settled(t)
	keepAlive.Stop()
	fresh.Stop()
	ok, failed := keepAlive.OK()+fresh.OK(), keepAlive.Failed()+fresh.Failed()
	t.Logf("%d map changes served in %v; %d requests succeeded, %d failed", changes, took.Round(time.Millisecond), ok, failed)
	if n := reloadCount(t, e.proc) - before; n != 0 {
		t.Errorf("%d reloads, want none", n)
	}
	if ok < 100 {
		t.Errorf("only %d requests succeeded: the load did not run", ok)
	}
	if failed != 0 {
		t.Errorf("%d requests failed; first errors: %v %v", failed, keepAlive.Errors(), fresh.Errors())
	}
}

// TestMapUpdateRejectedLaterIsTakenBack: a pod change goes live through the runtime API (a
// server and a map entry) before haproxy -c has seen it; when validation rejects it (here a
// haproxy -c wrapper refusing a map that names the pod), the runtime changes are taken back
// through the runtime API, with no reload, and the rejection is reported; removing the pod
// recovers.
func TestMapUpdateRejectedLaterIsTakenBack(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	wrapper := filepath.Join(t.TempDir(), "haproxy")
	script := fmt.Sprintf(`#!/bin/sh
# haproxy, whose -c also refuses a hosts.map naming rejected-pod (a rule of this test)
if [ "$1" = "-c" ] && [ "$2" = "-f" ]; then
  for m in $(grep -o '[^ (]*/hosts\.map' "$3"); do
    if grep -q '^rejected-pod\.pods\.localhost ' "$m"; then
      echo "[ALERT]    (1) : config : map $m: rejected-pod is not allowed here" >&2
      exit 1
    fi
  done
fi
exec %s "$@"
`, haproxytest.Binary(t))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newMapEnv(t, "--haproxy-bin", wrapper)
	before := reloadCount(t, e.proc)
	good := e.settled(t)
	rejected := e.metric(t, `haproxy_sidecar_rejected_total{stage="validate"}`)

	pod := `apiVersion: v1
kind: Pod
metadata: {name: rejected-pod, namespace: demo, labels: {app: web}}
spec: {containers: [{name: app, image: backend}]}
status:
  phase: Running
  podIP: 127.0.0.11
  conditions: [{type: Ready, status: "True"}]
  containerStatuses: [{name: app, ready: true, image: backend, imageID: "", restartCount: 0}]
`
	if err := os.WriteFile(filepath.Join(e.dir, "rejected-pod.yaml"), []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 15*time.Second, func() bool {
		return e.metric(t, `haproxy_sidecar_rejected_total{stage="validate"}`) > rejected
	}, "validation rejects the change")
	e.waitNotServed(t, "rejected-pod.pods.localhost")
	out, err := e.proc.Command("@1 show map " + e.mapFile)
	if err != nil || strings.Contains(out, "rejected-pod") || !strings.Contains(out, "static.localhost be_web") {
		t.Fatalf("HAProxy's map after the rejection (%v):\n%s", err, out)
	}
	if out, _ := e.proc.Command("@1 show servers state be_web"); strings.Contains(out, " rejected-pod ") {
		t.Fatalf("the rejected pod's server is still in HAProxy:\n%s", out)
	}
	// The counter grows as the hold is reported, just before /readyz says it: wait for it.
	var r readyz
	if err := haproxytest.Poll(15*time.Second, func() bool {
		_, r = e.readyz(t)
		return strings.Contains(r.LastError, "rejected-pod is not allowed")
	}); err != nil || r.LiveConfig != good.LiveConfig {
		t.Errorf("live %q (want %q), last error %q", r.LiveConfig, good.LiveConfig, r.LastError)
	}
	if e.mapOnDisk(t, "rejected-pod.pods.localhost be_web") {
		t.Error("the rejected map was written")
	}
	if !strings.Contains(e.logs.String(), "runtime API changes that did not validate were taken back") {
		t.Error("no log line says the runtime changes were taken back")
	}

	if err := os.Remove(filepath.Join(e.dir, "rejected-pod.yaml")); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 15*time.Second, func() bool {
		_, r = e.readyz(t)
		return r.Ready && r.LastError == ""
	}, "recovery once the pod is gone")
	e.waitServed(t, "static.localhost", "/", "web-")
	if n := reloadCount(t, e.proc) - before; n != 0 {
		t.Errorf("%d reloads, want none", n)
	}
}
