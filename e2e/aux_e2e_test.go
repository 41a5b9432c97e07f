package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// mapsTemplate is a config ConfigMap whose template routes by Host through a map file it
// renders (hosts.map), answers unknown hosts with an error page copied as it is (CRLF kept),
// and serves lua.localhost from a Lua script whose `{{` is no template.
const mapsTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: config
  namespace: lb
data:
  template: |
    global
      hard-stop-after 30s
      lua-load {{ filesdir }}/hello.lua
    defaults
      mode http
      option idle-close-on-response
      timeout connect 5s
      timeout client 30s
      timeout server 30s
    frontend http
      bind {{ env.HTTP_BIND }}
      http-request use-service lua.hello if { req.hdr(host) -m str lua.localhost }
      use_backend %[req.hdr(host),lower,map({{ mapsdir }}/hosts.map)]
      default_backend be_none
    backend be_none
      errorfile 503 {{ filesdir }}/503.http
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
    {%- endfor %}
  files.503.http: "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nCache-Control: no-cache\r\n\r\nno such site\n"
  files.hello.lua: |
    local answers = {{"greeting", "hello from lua"}}
    core.register_service("hello", "http", function(applet)
      local body = answers[1][2] .. "\n"
      applet:set_status(200)
      applet:add_header("content-length", string.len(body))
      applet:start_response()
      applet:send(body)
    end)
`

// Map files and other files rendered from the config ConfigMap go live with the generation:
// HAProxy routes by Host through the map, answers with the error page and runs the Lua
// script; a map change alone is served with no reload (the runtime API) and written; a map
// reference haproxy -c rejects is held like any validation failure, and the fix goes live.
func TestMapFilesEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	e.editFile(t, "config.yaml", func(string) string { return mapsTemplate })
	e.startSidecar(t)
	p := e.startHAProxy(t)
	good := e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	e.waitServed(t, "api.localhost", "/", "api-")
	e.waitServed(t, "static.localhost", "/", "web-")
	e.waitServed(t, "lua.localhost", "/", "hello from lua")
	if code, body, _, err := e.get("unknown.localhost", "/"); err != nil || code != 503 || body != "no such site\n" {
		t.Fatalf("unknown host: %d %q %v, want the error page", code, body, err)
	}
	mapsDir := filepath.Join(filepath.Dir(e.cfgPath), "maps")
	if fi, err := os.Lstat(mapsDir); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is not the stable symlink (%v)", mapsDir, err)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(e.cfgPath), "files", "503.http")); err != nil || !strings.Contains(string(b), "\r\n\r\n") {
		t.Fatalf("the error page on disk: %q %v", b, err)
	}

	t.Run("a map change alone goes live with no reload", func(t *testing.T) {
		before := reloadCount(t, p)
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "static.localhost be_web", "static.localhost be_api", 1)
		})
		e.waitServed(t, "static.localhost", "/", "api-")
		e.settledPast(t, good.LiveConfig) // the live configuration hash changes with the map
		if n := reloadCount(t, p) - before; n != 0 {
			t.Errorf("%d reloads for a map change, want none", n)
		}
		if b, _ := os.ReadFile(filepath.Join(mapsDir, "hosts.map")); !strings.Contains(string(b), "static.localhost be_api") {
			t.Errorf("the map on disk: %q", b)
		}
		e.waitServed(t, "web.localhost", "/", "web-")
	})

	t.Run("a map template that does not render is held, naming its key and line", func(t *testing.T) {
		live := e.settled(t)
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "    {{ hostname }} be_{{ service.name }}\n", "    {{ hostname }} be_{{ service.name }\n", 1)
		})
		var r readyz
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, r = e.readyz(t)
			return len(r.Held) > 0
		}, "the template set is held")
		if len(r.Held) != 1 || r.Held[0].Stage != "render" || !strings.Contains(r.LastError, `ConfigMap lb/config key "hosts.map" line 5`) {
			t.Errorf("held %+v (%s), want the template set at stage render, naming hosts.map line 5", r.Held, r.LastError)
		}
		if r.LiveConfig != live.LiveConfig {
			t.Errorf("live %q, want the last good %q", r.LiveConfig, live.LiveConfig)
		}
		e.waitServed(t, "static.localhost", "/", "api-")
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "    {{ hostname }} be_{{ service.name }\n", "    {{ hostname }} be_{{ service.name }}\n", 1)
		})
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, r = e.readyz(t)
			return r.Ready && len(r.Held) == 0 && r.LastError == "" && r.LiveConfig == live.LiveConfig
		}, "recovery once the map template is fixed")
	})

	t.Run("a missing map file is held like any validation failure", func(t *testing.T) {
		live := e.settled(t)
		before := reloadCount(t, p)
		e.editFile(t, "config.yaml", func(s string) string {
			const hosts = "      use_backend %[req.hdr(host),lower,map({{ mapsdir }}/hosts.map)]\n"
			return strings.Replace(s, hosts, "      use_backend %[req.hdr(host),lower,map({{ mapsdir }}/extra.map)] if { req.hdr(host),lower,map({{ mapsdir }}/extra.map) -m found }\n"+hosts, 1)
		})
		var r readyz
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, r = e.readyz(t)
			return len(r.Held) > 0
		}, "the template set is held")
		said := r.LastError
		for _, h := range r.Held {
			said += "\n" + h.Object + " " + h.Stage + ": " + h.Reason
		}
		if len(r.Held) != 1 || r.Held[0].Stage != "validate" || !strings.Contains(said, "ConfigMap lb/config") || !strings.Contains(said, "extra.map") {
			t.Errorf("held %+v, want the template set at stage validate naming extra.map:\n%s", r.Held, said)
		}
		if r.LiveConfig != live.LiveConfig || !r.Ready {
			t.Errorf("live %q (ready %v), want the last good %q", r.LiveConfig, r.Ready, live.LiveConfig)
		}
		e.waitServed(t, "static.localhost", "/", "api-")
		if reloadCount(t, p) != before {
			t.Error("HAProxy was reloaded for a rejected configuration")
		}

		// Other inputs still go live: a pod becomes ready.
		e.podChange(t, "api")

		// The fix: the map exists.
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "  hosts.map: |\n", "  extra.map: |\n    extra.localhost be_web\n  hosts.map: |\n", 1)
		})
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, r = e.readyz(t)
			return r.Ready && len(r.Held) == 0 && r.LastError == ""
		}, "recovery once the map exists")
		e.waitServed(t, "extra.localhost", "/", "web-")
	})
}

// With --reload=dataplane the map files and other files go through the host's map and
// general storages, which the templates see as mapsdir and filesdir; a map change reaches the
// remote HAProxy.
func TestMapFilesDataPlaneMode(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	e.editFile(t, "config.yaml", func(string) string { return mapsTemplate })
	host := standIn(t, dataplanetest.Options{})
	stateDir := t.TempDir()
	logs := &haproxytest.SyncBuffer{}
	runSidecar(t, logs, append(e.sidecarArgs(), "--reload=dataplane", "--dataplane-url", host.URL, "--state-dir", stateDir,
		"--dataplane-maps-dir", host.MapsDir, "--dataplane-files-dir", host.GeneralDir)...)
	e.waitReady(t)
	e.waitServed(t, "static.localhost", "/", "web-")
	e.waitServed(t, "lua.localhost", "/", "hello from lua")
	if code, body, _, err := e.get("unknown.localhost", "/"); err != nil || code != 503 || body != "no such site\n" {
		t.Fatalf("unknown host: %d %q %v, want the error page", code, body, err)
	}
	if m, g := host.MapFiles(t), host.GeneralFiles(t); !slices.Equal(m, []string{"hosts.map"}) || !slices.Equal(g, []string{"503.http", "hello.lua"}) {
		t.Errorf("the host's storages hold %v and %v", m, g)
	}
	if !strings.Contains(host.StoredConfig(t), host.MapsDir+"/hosts.map") {
		t.Errorf("the configuration does not name the host's map storage:\n%s", host.StoredConfig(t))
	}
	for _, name := range []string{"maps", "files"} {
		if fi, err := os.Lstat(filepath.Join(stateDir, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s/%s is not the live generation's symlink: %v", stateDir, name, err)
		}
	}

	before := len(host.Reloads())
	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "static.localhost be_web", "static.localhost be_api", 1)
	})
	e.waitServed(t, "static.localhost", "/", "api-")
	if b, _ := os.ReadFile(filepath.Join(host.MapsDir, "hosts.map")); !strings.Contains(string(b), "static.localhost be_api") {
		t.Errorf("the host's map: %q", b)
	}
	if n := len(host.Reloads()) - before; n != 1 {
		t.Errorf("%d reloads of the host for a map change, want 1", n)
	}
}
