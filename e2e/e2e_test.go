package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// demoEnv is a temp copy of examples/local with real backends listening on the pod IPs, and
// the addresses HAProxy binds.
type demoEnv struct {
	dir      string // the manifests the sidecar watches
	port     int    // the backends' (and services') port
	httpAddr string
	cfgPath  string
	sock     string
	health   string
	metrics  string
	logs     *haproxytest.SyncBuffer // what the sidecars started by startSidecar logged
}

// backendNames maps the example pods' IPs to the names their backends answer with.
var backendNames = map[string]string{
	"127.0.0.11": "web-1", "127.0.0.12": "web-2", "127.0.0.13": "web-3",
	"127.0.0.21": "api-1", "127.0.0.22": "api-2",
}

func newDemoEnv(t *testing.T) *demoEnv {
	t.Helper()
	haproxytest.Binary(t)
	e := &demoEnv{dir: t.TempDir()}
	if err := copyDir("../examples/local", e.dir); err != nil {
		t.Fatal(err)
	}
	// All backends share one port, as the pods of a service do; find one free on every IP.
	for attempt := 0; ; attempt++ {
		port := haproxytest.FreePort(t)
		var ls []net.Listener
		ok := true
		for ip := range backendNames {
			l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, port))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		if ok {
			e.port = port
			for _, l := range ls {
				name := backendNames[strings.Split(l.Addr().String(), ":")[0]]
				srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					fmt.Fprintf(w, "%s %s\n", name, r.URL.Path)
				})}
				go srv.Serve(l)
				t.Cleanup(func() { srv.Close() })
			}
			break
		}
		for _, l := range ls {
			l.Close()
		}
		if attempt > 20 {
			t.Fatal("no port free on all backend IPs")
		}
	}
	e.editFile(t, "services.yaml", func(s string) string {
		return strings.ReplaceAll(s, `"ports": [8080]`, fmt.Sprintf(`"ports": [%d]`, e.port))
	})
	ports := haproxytest.FreePorts(t, 5) // distinct: HAProxy binds three, the sidecar two
	e.httpAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	t.Setenv("HTTP_BIND", e.httpAddr)
	t.Setenv("HTTPS_BIND", fmt.Sprintf("127.0.0.1:%d", ports[1]))
	t.Setenv("STATS_BIND", fmt.Sprintf("127.0.0.1:%d", ports[2]))
	run := haproxytest.ShortTempDir(t)
	e.cfgPath = filepath.Join(run, "haproxy.cfg")
	e.sock = filepath.Join(run, "master.sock")
	e.health = fmt.Sprintf("127.0.0.1:%d", ports[3])
	e.metrics = fmt.Sprintf("127.0.0.1:%d", ports[4])
	return e
}

// startSidecar runs the sidecar in-process, as `haproxy-sidecar run` with these flags would.
// The returned function stops it (it is also stopped when the test ends).
func (e *demoEnv) startSidecar(t *testing.T, extra ...string) (stop func()) {
	t.Helper()
	args := append([]string{
		"--source=file", "--dir", e.dir,
		"--haproxy-config", e.cfgPath, "--master-socket", e.sock, "--reload-timeout", "20s",
		"--env-allow", "HTTP_BIND,HTTPS_BIND,STATS_BIND", "--wait", "50ms:500ms",
		"--health-addr", e.health, "--metrics-addr", e.metrics,
	}, extra...)
	if e.logs == nil {
		e.logs = &haproxytest.SyncBuffer{}
	}
	r := runSidecar(t, e.logs, args...)
	return func() { r.stop(t) }
}

// instance is a second sidecar's view of the same inputs: its own HAProxy files, socket and
// endpoints.
func (e *demoEnv) instance(t *testing.T) *demoEnv {
	c := *e
	c.logs = nil // its own log
	run := haproxytest.ShortTempDir(t)
	c.cfgPath = filepath.Join(run, "haproxy.cfg")
	c.sock = filepath.Join(run, "master.sock")
	ports := haproxytest.FreePorts(t, 2)
	c.health = fmt.Sprintf("127.0.0.1:%d", ports[0])
	c.metrics = fmt.Sprintf("127.0.0.1:%d", ports[1])
	return &c
}

// startHAProxy starts HAProxy in master-worker mode on the configuration the sidecar wrote.
func (e *demoEnv) startHAProxy(t *testing.T) *haproxytest.Process {
	t.Helper()
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, err := os.Stat(e.cfgPath)
		return err == nil
	}, "the sidecar writes the first configuration")
	return haproxytest.Start(t, e.cfgPath, "-S", e.sock+",level,admin")
}

// servingDemo is the demo served (skipped with -short): the sidecar started on a copy of
// examples/local with extra flags, HAProxy running the configuration it wrote, /readyz ready.
func servingDemo(t *testing.T, extra ...string) *demoEnv {
	t.Helper()
	e, _ := servingDemoStop(t, extra...)
	return e
}

// servingDemoStop is servingDemo with the function that stops its sidecar.
func servingDemoStop(t *testing.T, extra ...string) (*demoEnv, func()) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	stop := e.startSidecar(t, extra...)
	e.startHAProxy(t)
	e.waitReady(t)
	return e, stop
}

// restarted is e's sidecar to be started again: the same inputs, files and master socket,
// its own endpoints and log.
func (e *demoEnv) restarted(t *testing.T) *demoEnv {
	c := *e
	c.logs = nil
	ports := haproxytest.FreePorts(t, 2)
	c.health = fmt.Sprintf("127.0.0.1:%d", ports[0])
	c.metrics = fmt.Sprintf("127.0.0.1:%d", ports[1])
	return &c
}

// haproxyReloads is how many times HAProxy was reloaded since it started.
func (e *demoEnv) haproxyReloads(t *testing.T) int {
	t.Helper()
	p, err := (&reload.MasterSocket{Path: e.sock, Timeout: 5 * time.Second}).ShowProc(t.Context())
	if err != nil {
		t.Fatalf("show proc: %v", err)
	}
	return p.Reloads
}

func (e *demoEnv) editFile(t *testing.T, name string, edit func(string) string) {
	t.Helper()
	path := filepath.Join(e.dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	after := edit(string(b))
	if after == string(b) {
		t.Fatalf("edit of %s changed nothing", name)
	}
	// Save as editors do: write a temp file and rename it over the original.
	tmp := path + ".swp~"
	if err := os.WriteFile(tmp, []byte(after), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// get sends one request through HAProxy and returns status and body.
func (e *demoEnv) get(host, path string) (int, string, http.Header, error) {
	req, _ := http.NewRequest("GET", "http://"+e.httpAddr+path, nil)
	req.Host = host
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, nil
}

// waitServed waits until a request for host+path is answered by a backend whose answer starts
// with want.
func (e *demoEnv) waitServed(t *testing.T, host, path, want string) {
	t.Helper()
	var last string
	err := haproxytest.Poll(10*time.Second, func() bool {
		code, body, _, err := e.get(host, path)
		last = fmt.Sprintf("%d %q %v", code, body, err)
		return code == 200 && strings.HasPrefix(body, want)
	})
	if err != nil {
		t.Fatalf("%s%s never answered by %s (last: %s)", host, path, want, last)
	}
}

type readyz struct {
	Ready      bool   `json:"ready"`
	Standby    bool   `json:"standby"`
	LiveConfig string `json:"liveConfig"`
	LastError  string `json:"lastError"`
	Written    string `json:"writtenConfig"`
	HAProxy    string `json:"haproxy"`
	Reason     string `json:"reason"`
	Held       []struct {
		Input  string `json:"input"`
		Object string `json:"object"`
		Stage  string `json:"stage"`
		Reason string `json:"reason"`
		Kept   bool   `json:"lastGoodKept"`
	} `json:"held"`
}

func (e *demoEnv) readyz(t *testing.T) (int, readyz) {
	t.Helper()
	resp, err := http.Get("http://" + e.health + "/readyz")
	if err != nil {
		return 0, readyz{}
	}
	defer resp.Body.Close()
	var r readyz
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("readyz body: %v", err)
	}
	return resp.StatusCode, r
}

// metric returns the value of one sample of the sidecar's /metrics ("name{labels}"), 0 if absent.
func (e *demoEnv) metric(t *testing.T, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + e.metrics + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// settled waits until the sidecar reports as live the generation the files on disk hold, so
// that what a test reads next is not a change still in flight.
func (e *demoEnv) settled(t *testing.T) readyz {
	t.Helper()
	var r readyz
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		target, err := os.Readlink(filepath.Join(filepath.Dir(e.cfgPath), ".haproxy-sidecar", "current"))
		if err != nil {
			return false
		}
		_, r = e.readyz(t)
		i := strings.LastIndex(target, "-")
		return r.Ready && len(r.LiveConfig) >= 12 && target[i+1:] == r.LiveConfig[:len(target[i+1:])]
	}, "the sidecar reports the generation on disk as live")
	return r
}

// settledPast is settled once a configuration other than past is live: HAProxy serves a
// runtime API change an instant before the sidecar records it live, when /readyz and the
// generation on disk still agree on past.
func (e *demoEnv) settledPast(t *testing.T, past string) readyz {
	t.Helper()
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r := e.readyz(t)
		return r.LiveConfig != past
	}, "a configuration other than "+past+" live")
	return e.settled(t)
}

func (e *demoEnv) waitReady(t *testing.T) readyz {
	t.Helper()
	var r readyz
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		var code int
		code, r = e.readyz(t)
		return code == 200 && r.Ready
	}, "sidecar ready")
	return r
}

// TestLocalDemoEndToEnd is the demo, automated: real HAProxy, real backends, the sidecar on a
// copy of examples/local, edits as an operator makes them.
func TestLocalDemoEndToEnd(t *testing.T) {
	e := servingDemo(t)

	t.Run("traffic reaches the ready pods", func(t *testing.T) {
		e.waitServed(t, "web.localhost", "/", "web-")
		e.waitServed(t, "api.localhost", "/v1/users", "api-1")
		seen := map[string]bool{}
		for i := 0; i < 20; i++ {
			_, body, _, err := e.get("web.localhost", "/")
			if err != nil {
				t.Fatal(err)
			}
			seen[strings.Fields(body)[0]] = true
		}
		if !seen["web-1"] || !seen["web-2"] || len(seen) != 2 {
			t.Fatalf("web answered from %v, want web-1 and web-2", seen)
		}
		if code, _, _, _ := e.get("api.localhost", "/other"); code != 503 {
			t.Fatalf("api outside its path: status %d, want 503 (no backend)", code)
		}
	})

	t.Run("a new service in the services ConfigMap gets traffic", func(t *testing.T) {
		e.editFile(t, "services.yaml", func(s string) string {
			return strings.Replace(s, "\ndata:\n", fmt.Sprintf("\ndata:\n  shop: |\n    {\"namespace\": \"demo\", \"selector\": \"app=api\", \"hostnames\": [\"shop.localhost\"], \"ports\": [%d]}\n", e.port), 1)
		})
		e.waitServed(t, "shop.localhost", "/", "api-1")
	})

	t.Run("a pod becoming ready gets traffic", func(t *testing.T) {
		e.editFile(t, "pods.yaml", func(s string) string {
			i := strings.Index(s, "name: api-5c6b-pqrst")
			tail := strings.Replace(s[i:], `status: "False"`, `status: "True"`, 1)
			tail = strings.Replace(tail, "ready: false", "ready: true", 1)
			return s[:i] + tail
		})
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			_, body, _, _ := e.get("shop.localhost", "/")
			return strings.HasPrefix(body, "api-2")
		}, "api-2 serves once its pod is ready")
	})

	t.Run("a new template goes live", func(t *testing.T) {
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "  balance roundrobin\n", "  balance roundrobin\n      http-response set-header X-Template v2\n", 1)
		})
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			_, _, h, _ := e.get("web.localhost", "/")
			return h.Get("X-Template") == "v2"
		}, "the swapped template's header")
		e.settled(t)
	})

	t.Run("a broken template is rejected and the old config keeps serving", func(t *testing.T) {
		before := e.metric(t, `haproxy_sidecar_rejected_total{stage="render"}`)
		live := e.settled(t)
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "{%- for service in services %}\n\n    backend", "{%- for service in services %}\n\n    backend {{ service.name|nosuchfilter }}", 1)
		})
		var r readyz
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			_, r = e.readyz(t)
			return r.LastError != ""
		}, "the rejection is reported")
		for _, want := range []string{`ConfigMap lb/config key "template"`, "line", "nosuchfilter"} {
			if !strings.Contains(r.LastError, want) {
				t.Errorf("error %q does not mention %q", r.LastError, want)
			}
		}
		if got := e.metric(t, `haproxy_sidecar_rejected_total{stage="render"}`); got != before+1 {
			t.Errorf("rejected_total{stage=render} = %v, want %v", got, before+1)
		}
		if r.LiveConfig != live.LiveConfig || !r.Ready {
			t.Errorf("live config changed to %q (ready %v), want %q", r.LiveConfig, r.Ready, live.LiveConfig)
		}
		_, _, h, err := e.get("web.localhost", "/")
		if err != nil || h.Get("X-Template") != "v2" {
			t.Fatalf("old config no longer serving: header %q, err %v", h.Get("X-Template"), err)
		}

		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(strings.Replace(s, "{{ service.name|nosuchfilter }}", "", 1), "X-Template v2", "X-Template v3", 1)
		})
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			_, _, h, _ := e.get("web.localhost", "/")
			return h.Get("X-Template") == "v3"
		}, "the fixed template goes live")
		if r := e.settled(t); r.LastError != "" {
			t.Errorf("error still reported after the fix: %q", r.LastError)
		}
	})
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
