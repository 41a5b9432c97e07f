package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/loadgen"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// churnPods is the size of the churn service: pods churn-00 .. churn-19 on 127.0.1.1 ..
// 127.0.1.20, each with a real backend answering its name.
const churnPods = 20

// churnEnv is the demo plus a service "churn" (host churn.localhost) of churnPods pods whose
// readiness the test sets.
type churnEnv struct {
	*demoEnv
	https  string
	client *http.Client // keep-alive: the checks of each step cost little
}

func newChurnEnv(t *testing.T) *churnEnv {
	t.Helper()
	e := &churnEnv{demoEnv: newDemoEnv(t), https: os.Getenv("HTTPS_BIND"),
		client: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	t.Cleanup(e.client.CloseIdleConnections)
	for i := 0; i < churnPods; i++ {
		name := churnName(i)
		l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", churnIP(i), e.port))
		if err != nil {
			t.Fatalf("backend %s: %v", name, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s\n", name, r.URL.Path)
		})}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
	}
	e.editFile(t, "services.yaml", func(s string) string {
		return strings.Replace(s, "\ndata:\n", fmt.Sprintf("\ndata:\n  churn: |\n    {\"namespace\": \"demo\", \"selector\": {\"app\": \"churn\"}, \"hostnames\": [\"churn.localhost\"], \"ports\": [%d]}\n", e.port), 1)
	})
	e.setReady(t, 2)
	return e
}

func churnName(i int) string { return fmt.Sprintf("churn-%02d", i) }
func churnIP(i int) string   { return fmt.Sprintf("127.0.1.%d", i+1) }

// setReady rewrites the churn pods so that the first n are ready, in one atomic rename.
func (e *churnEnv) setReady(t *testing.T, n int) {
	t.Helper()
	var b strings.Builder
	for i := 0; i < churnPods; i++ {
		ready := i < n
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: demo, labels: {app: churn}}
spec: {containers: [{name: app, image: backend}]}
status:
  phase: Running
  podIP: %s
  conditions: [{type: Ready, status: "%s"}]
  containerStatuses: [{name: app, ready: %v, image: backend, imageID: "", restartCount: 0}]
`, churnName(i), churnIP(i), map[bool]string{true: "True", false: "False"}[ready], ready)
	}
	path := e.dir + "/churn-pods.yaml"
	if err := os.WriteFile(path+".tmp~", []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp~", path); err != nil {
		t.Fatal(err)
	}
}

// liveServers returns the server names of a backend in the configuration on disk.
func (e *churnEnv) liveServers(backend string) []string {
	b, err := os.ReadFile(e.cfgPath)
	if err != nil {
		return nil
	}
	c, err := cfgparse.Parse(b)
	if err != nil {
		return nil
	}
	be := c.Proxy("backend", backend)
	if be == nil {
		return nil
	}
	var names []string
	for _, s := range be.Servers {
		names = append(names, s.Name)
	}
	return names
}

// waitChurnLive waits until the first n churn pods are the churn backend's servers on disk
// and the sidecar reports that generation live.
func (e *churnEnv) waitChurnLive(t *testing.T, n int) {
	t.Helper()
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprintf("%s-%d", churnName(i), e.port))
	}
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		got := e.liveServers("be_churn")
		slices.Sort(got)
		return slices.Equal(got, want)
	}, fmt.Sprintf("%d churn servers live on disk", n))
	e.settled(t)
}

// waitChurnRuntime waits until HAProxy itself (show servers state) routes to exactly the first
// n churn pods: the runtime API made the change, whether or not it is written yet.
func (e *churnEnv) waitChurnRuntime(t *testing.T, n int) {
	t.Helper()
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprintf("%s-%d", churnName(i), e.port))
	}
	var last string
	err := haproxytest.Poll(10*time.Second, func() bool {
		out, err := haproxytest.MasterCommand(e.sock, "@1 show servers state be_churn", 5*time.Second)
		if err != nil {
			return false
		}
		last = out
		var got []string
		for _, line := range strings.Split(out, "\n") {
			// be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state ...
			f := strings.Fields(line)
			if len(f) > 6 && f[1] == "be_churn" {
				if admin, _ := strconv.Atoi(f[6]); admin&0x67 == 0 { // not in maintenance
					got = append(got, f[3])
				}
			}
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	})
	if err != nil {
		t.Fatalf("HAProxy does not route to exactly %d churn pods: %v\n%s", n, err, last)
	}
}

// servedBy sends requests for churn.localhost until each of the first n pods answered;
// an answer from any other pod fails the test.
func (e *churnEnv) servedByFirst(t *testing.T, n int) {
	t.Helper()
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		want[churnName(i)] = true
	}
	seen := map[string]bool{}
	var last string
	err := haproxytest.Poll(10*time.Second, func() bool {
		// A round of requests between two polls: round robin reaches every server in n.
		for i := 0; i < 2*n && len(seen) < n; i++ {
			req, _ := http.NewRequest("GET", "http://"+e.httpAddr+"/", nil)
			req.Host = "churn.localhost"
			resp, err := e.client.Do(req)
			if err != nil {
				last = err.Error()
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || len(b) == 0 {
				last = fmt.Sprintf("%s %q", resp.Status, b)
				return false
			}
			who := strings.Fields(string(b))[0]
			if !want[who] {
				t.Fatalf("%s answered; only the %d ready pods may", who, n)
			}
			seen[who] = true
		}
		return len(seen) == n
	})
	if err != nil {
		t.Fatalf("only %d of %d ready pods answered (last %s)", len(seen), n, last)
	}
}

// reloads is HAProxy's own count of reloads (show proc), and the sidecar's.
func (e *churnEnv) reloads(t *testing.T) (haproxy int, sidecar float64) {
	t.Helper()
	p, err := (&reload.MasterSocket{Path: e.sock, Timeout: 5 * time.Second}).ShowProc(t.Context())
	if err != nil {
		t.Fatalf("show proc: %v", err)
	}
	return p.Reloads, e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`)
}

// settledPast waits until the sidecar has made live a generation other than prev (a
// readyz LiveConfig) and settled on it.
func (e *churnEnv) settledPast(t *testing.T, prev string) {
	t.Helper()
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r := e.readyz(t)
		return r.LiveConfig != prev
	}, "a new generation goes live")
	e.settled(t)
}

func (e *churnEnv) start(t *testing.T) {
	t.Helper()
	e.startSidecar(t, "--wait", "10ms:200ms")
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitChurnLive(t, 2)
	e.servedByFirst(t, 2)
}

// TestRuntimeAPIScalingWithoutReloads scales a service from 2 to 20 ready pods and back, 50
// times: no reload at all (HAProxy's own reload counter does not move), and after each
// change has settled (HAProxy routes to exactly the ready pods; every fifth cycle also written
// and reported live), traffic reaches exactly the ready pods.
func TestRuntimeAPIScalingWithoutReloads(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newChurnEnv(t)
	e.start(t)
	hBefore, sBefore := e.reloads(t)
	addedBefore := e.metric(t, `haproxy_sidecar_runtime_updates_total{kind="server_added"}`)

	start := time.Now()
	const cycles = 50
	for c := 0; c < cycles; c++ {
		for _, n := range []int{churnPods, 2} {
			e.setReady(t, n)
			// Settled in HAProxy (the runtime API made the change), then, every few
			// cycles, on disk too (written, validated, reported live).
			e.waitChurnRuntime(t, n)
			if c%5 == 4 {
				e.waitChurnLive(t, n)
			}
			e.servedByFirst(t, n)
		}
	}
	t.Logf("%d scale cycles (2 -> %d -> 2) settled and checked in %v", cycles, churnPods, time.Since(start).Round(time.Millisecond))

	hAfter, sAfter := e.reloads(t)
	if hAfter != hBefore || sAfter != sBefore {
		t.Errorf("reloads during scaling: HAProxy %d -> %d, sidecar %v -> %v; want none", hBefore, hAfter, sBefore, sAfter)
	}
	if got := e.metric(t, `haproxy_sidecar_runtime_updates_total{kind="server_added"}`) - addedBefore; got != cycles*(churnPods-2) {
		t.Errorf("%v servers added at runtime, want %d", got, cycles*(churnPods-2))
	}
	if got := e.metric(t, `haproxy_sidecar_reloads_avoided_total`); got < 2*cycles {
		t.Errorf("reloads avoided %v, want at least %d", got, 2*cycles)
	}
}

// TestRuntimeAPICertificateWithoutReload replaces a certificate's PEM: the new certificate is
// served with no reload, and still after a later reload.
func TestRuntimeAPICertificateWithoutReload(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newChurnEnv(t)
	e.start(t)
	if cn, err := servedCertificate(e.https, "web.localhost"); err != nil || cn != "web.localhost" {
		t.Fatalf("served %q (%v) before the change, want web.localhost", cn, err)
	}
	hBefore, sBefore := e.reloads(t)
	live := e.settled(t).LiveConfig

	certPEM, keyPEM := tlsPair(t, "rotated.localhost")
	writeCertificate(t, e.demoEnv, "localhost.pem", certPEM, keyPEM)
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		cn, _ := servedCertificate(e.https, "web.localhost")
		return cn == "rotated.localhost"
	}, "the replaced certificate is served")
	e.settledPast(t, live)
	if h, s := e.reloads(t); h != hBefore || s != sBefore {
		t.Errorf("reloads: HAProxy %d -> %d, sidecar %v -> %v; want none", hBefore, h, sBefore, s)
	}
	if got := e.metric(t, `haproxy_sidecar_runtime_updates_total{kind="certificate_updated"}`); got != 1 {
		t.Errorf("certificate updates %v, want 1", got)
	}

	// A change that needs a reload: the reloaded HAProxy loads the new certificate from disk.
	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "  balance roundrobin\n", "  balance roundrobin\n      http-response set-header X-After reload\n", 1)
	})
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, _, h, _ := e.get("web.localhost", "/")
		return h.Get("X-After") == "reload"
	}, "the template change is served")
	e.settled(t)
	if h, _ := e.reloads(t); h != hBefore+1 {
		t.Fatalf("HAProxy reloads %d -> %d, want one", hBefore, h)
	}
	if cn, err := servedCertificate(e.https, "web.localhost"); err != nil || cn != "rotated.localhost" {
		t.Fatalf("after the reload: served %q (%v), want rotated.localhost", cn, err)
	}
}

// writeCertificate replaces certificates.yaml with one certificate and its key.
func writeCertificate(t *testing.T, e *demoEnv, name string, certPEM, keyPEM []byte) {
	t.Helper()
	indent := func(b []byte) string {
		return "    " + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n    ")
	}
	doc := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: certificates, namespace: lb}
data:
  %s: |
%s
---
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: lb}
type: Opaque
stringData:
  %s: |
%s
`, name, indent(certPEM), name, indent(keyPEM))
	path := e.dir + "/certificates.yaml"
	if err := os.WriteFile(path+".tmp~", []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp~", path); err != nil {
		t.Fatal(err)
	}
}

// TestRuntimeAPIStructuralChangesReloadOnce: a frontend change and a new backend each take
// exactly one reload.
func TestRuntimeAPIStructuralChangesReloadOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newChurnEnv(t)
	e.start(t)
	t.Run("frontend change", func(t *testing.T) {
		before, _ := e.reloads(t)
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "frontend http\n", "frontend http\n      http-response set-header X-Frontend v2\n", 1)
		})
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			_, _, h, _ := e.get("web.localhost", "/")
			return h.Get("X-Frontend") == "v2"
		}, "the frontend change is served")
		e.settled(t)
		if after, _ := e.reloads(t); after != before+1 {
			t.Fatalf("HAProxy reloads %d -> %d, want exactly one", before, after)
		}
	})
	t.Run("new backend", func(t *testing.T) {
		before, _ := e.reloads(t)
		e.editFile(t, "services.yaml", func(s string) string {
			return strings.Replace(s, "\ndata:\n", fmt.Sprintf("\ndata:\n  shop: |\n    {\"namespace\": \"demo\", \"selector\": {\"app\": \"api\"}, \"hostnames\": [\"shop.localhost\"], \"ports\": [%d]}\n", e.port), 1)
		})
		e.waitServed(t, "shop.localhost", "/", "api-")
		e.settled(t)
		if after, _ := e.reloads(t); after != before+1 {
			t.Fatalf("HAProxy reloads %d -> %d, want exactly one", before, after)
		}
	})
	t.Run("old workers are counted from show proc", func(t *testing.T) {
		p, err := (&reload.MasterSocket{Path: e.sock, Timeout: 5 * time.Second}).ShowProc(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		body := e.metricsText(t)
		if !strings.Contains(body, "\nhaproxy_sidecar_old_workers ") {
			t.Fatalf("no haproxy_sidecar_old_workers sample in /metrics")
		}
		// Old workers leave as their connections close: the sample is HAProxy's count of a
		// moment, at most what show proc said just before.
		if got := e.metric(t, "haproxy_sidecar_old_workers"); got > float64(p.OldWorkers) {
			t.Fatalf("old workers %v, show proc said %d", got, p.OldWorkers)
		}
	})
}

func (e *churnEnv) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + e.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestRuntimeAPIMixedChangesUnderLoadFailNoRequest: 100 mixed changes (pod churn, certificate
// replacements, template changes that reload) under a bounded keep-alive load on loopback
// against the churned service: not one request fails.
func TestRuntimeAPIMixedChangesUnderLoadFailNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("load test with a real HAProxy")
	}
	e := newChurnEnv(t)
	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "  balance roundrobin\n", "  balance roundrobin\n      http-response set-header X-Gen gen-0\n", 1)
	})
	e.start(t)
	hBefore, _ := e.reloads(t)

	load := loadgen.Start(e.httpAddr, "churn.localhost", 4)
	sizes := []int{20, 5, 12, 2, 17, 9, 1, 20, 3, 14}
	gen, certs := 0, 0
	for i := 0; i < 100; i++ {
		switch {
		case i%10 == 4: // a template change: reload
			gen++
			g := gen
			e.editFile(t, "config.yaml", func(s string) string {
				return strings.Replace(s, fmt.Sprintf("X-Gen gen-%d\n", g-1), fmt.Sprintf("X-Gen gen-%d\n", g), 1)
			})
			haproxytest.WaitFor(t, 15*time.Second, func() bool {
				_, _, h, _ := e.get("churn.localhost", "/")
				return h.Get("X-Gen") == fmt.Sprintf("gen-%d", g)
			}, "the template change is served")
			e.settled(t)
		case i%10 == 8: // a certificate replacement: runtime API
			certs++
			cn := fmt.Sprintf("gen%d.localhost", certs)
			live := e.settled(t).LiveConfig
			certPEM, keyPEM := tlsPair(t, cn)
			writeCertificate(t, e.demoEnv, "localhost.pem", certPEM, keyPEM)
			haproxytest.WaitFor(t, 10*time.Second, func() bool {
				got, _ := servedCertificate(e.https, "web.localhost")
				return got == cn
			}, "the replaced certificate is served")
			e.settledPast(t, live)
		default: // pod churn: runtime API
			n := sizes[i%len(sizes)]
			e.setReady(t, n)
			e.waitChurnRuntime(t, n)
		}
	}
	e.waitChurnLive(t, sizes[99%len(sizes)])
	load.Stop()

	hAfter, _ := e.reloads(t)
	t.Logf("%d requests succeeded, %d failed during 100 changes (%d HAProxy reloads)", load.OK(), load.Failed(), hAfter-hBefore)
	if hAfter-hBefore != gen {
		t.Errorf("HAProxy reloads %d, want %d (one per template change)", hAfter-hBefore, gen)
	}
	if load.OK() < 100 {
		t.Errorf("only %d requests succeeded: the load did not run", load.OK())
	}
	if n := load.Failed(); n != 0 {
		t.Errorf("%d requests failed; first errors: %v", n, load.Errors())
	}
}

// TestRuntimeAPIThroughTheStatsSocket: with --runtime-socket, pods scaled go live through the
// runtime API, with no reload, whether the template declares a stats socket there (its
// commands skip the master's relay) or not (a template of one's own under the chart: they go
// through the master socket, and the sidecar says so once).
func TestRuntimeAPIThroughTheStatsSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("declared=%v", declared), func(t *testing.T) {
			e := newChurnEnv(t)
			stats := filepath.Join(filepath.Dir(e.sock), "runtime.sock")
			t.Setenv("STATS_SOCKET", "")
			if declared {
				t.Setenv("STATS_SOCKET", stats)
			}
			e.editFile(t, "config.yaml", func(s string) string {
				return strings.Replace(s, "      hard-stop-after 30s\n",
					"      hard-stop-after 30s\n    {%- if env.STATS_SOCKET %}\n      stats socket {{ env.STATS_SOCKET }} mode 600 level admin\n    {%- endif %}\n", 1)
			})
			e.startSidecar(t, "--wait", "10ms:200ms", "--runtime-socket", stats, "--env-allow", "HTTP_BIND,HTTPS_BIND,STATS_BIND,STATS_SOCKET")
			e.startHAProxy(t)
			e.waitReady(t)
			e.waitChurnLive(t, 2)
			if cfg := readFile(t, e.cfgPath); strings.Contains(cfg, "stats socket "+stats) != declared {
				t.Fatalf("the configuration declares the stats socket: %v, want %v", !declared, declared)
			}
			hBefore, sBefore := e.reloads(t)
			for _, n := range []int{5, 2, 7} {
				e.setReady(t, n)
				e.waitChurnRuntime(t, n)
				e.servedByFirst(t, n)
			}
			if hAfter, sAfter := e.reloads(t); hAfter != hBefore || sAfter != sBefore {
				t.Errorf("reloads: HAProxy %d -> %d, sidecar %v -> %v; want none", hBefore, hAfter, sBefore, sAfter)
			}
			said := strings.Count(e.logs.String(), "the stats socket cannot be used")
			if declared && said != 0 || !declared && said != 1 {
				t.Errorf("the sidecar said %d times that the stats socket cannot be used, want %d", said, map[bool]int{true: 0, false: 1}[declared])
			}
		})
	}
}
