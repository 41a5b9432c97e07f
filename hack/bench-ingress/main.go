// Command bench-ingress measures the Ingress example (examples/templates/ingress.yaml) at scale
// through the whole sidecar binary, a real HAProxy and real backends on loopback: N Ingresses
// (one file each, as manifests in file mode) with N backends (a Service, its EndpointSlice and
// one listener per backend), then path changes, each timed from the edit of one Ingress's
// file to "served" (a request for the new path answered by the backend the path names), with
// HAProxy's reloads counted and the sidecar's memory read from /proc. Run it through
// hack/bench-ingress.sh.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/haproxycli"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload"
)

func main() {
	sidecar := flag.String("sidecar", "bin/haproxy-sidecar", "the sidecar binary")
	example := flag.String("example", "examples/templates/ingress.yaml", "the Ingress example's ConfigMap")
	n := flag.Int("ingresses", 1000, "Ingresses, and backends (one Service each)")
	changes := flag.Int("changes", 10, "path changes (each edits one Ingress and waits until it is served)")
	wait := flag.String("wait", "100ms:1s", "the sidecar's --wait (debounce)")
	keep := flag.Bool("keep", false, "keep the work directory")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench-ingress: ")

	b, err := setup(*n, *example, *keep)
	if err != nil {
		log.Fatal(err)
	}
	defer b.cleanup()
	fail := func(err error) {
		b.cleanup()
		log.Fatal(err)
	}
	if err := b.start(*sidecar, *wait); err != nil {
		fail(err)
	}
	if err := b.changes(*changes); err != nil {
		fail(err)
	}
	if err := b.newBackend(); err != nil {
		fail(err)
	}
	fmt.Printf("sidecar max RSS (VmHWM) over the run: %d MB\n", b.memory("VmHWM"))
}

type bench struct {
	dir, in, run string
	n            int
	port         int
	http         string
	metrics      string
	health       string
	sidecarPID   int
	procs        []*exec.Cmd
	servers      []*http.Server
	keep         bool
	cleanOnce    sync.Once
	client       *http.Client
}

func svcName(i int) string { return fmt.Sprintf("svc-%04d", i) }

// svcIP is the address of backend i's one endpoint: 127.1.0.1 and on.
func svcIP(i int) string { return fmt.Sprintf("127.1.%d.%d", i/250, i%250+1) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// setup writes the manifests and starts one backend per Service (and one more for the new
// backend of the last step).
func setup(n int, example string, keep bool) (*bench, error) {
	dir, err := os.MkdirTemp("", "bench-ingress")
	if err != nil {
		return nil, err
	}
	b := &bench{dir: dir, in: filepath.Join(dir, "in"), run: filepath.Join(dir, "run"), n: n, keep: keep,
		client: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	for _, d := range []string{b.in, b.run} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for attempt := 0; b.port == 0; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		var servers []*http.Server
		ok := true
		for i := 0; i <= n; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", svcIP(i), port))
			if err != nil {
				ok = false
				break
			}
			name := svcName(i)
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, name)
			})}
			go srv.Serve(l)
			servers = append(servers, srv)
		}
		if ok {
			b.port, b.servers = port, servers
			break
		}
		for _, s := range servers {
			s.Close()
		}
		if attempt > 20 {
			return nil, errors.New("no port free on every backend address")
		}
	}
	config, err := os.ReadFile(example)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"config.yaml":   config,
		"services.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services, namespace: lb}\n"),
	}
	var svcs, slices []any
	for i := 0; i <= n; i++ {
		svcs = append(svcs, map[string]any{"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": svcName(i), "namespace": "bench"},
			"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80, "targetPort": b.port}}}})
		slices = append(slices, map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata":    map[string]any{"name": svcName(i) + "-abcde", "namespace": "bench", "labels": map[string]any{"kubernetes.io/service-name": svcName(i)}},
			"addressType": "IPv4",
			"ports":       []any{map[string]any{"name": "http", "port": b.port, "protocol": "TCP"}},
			"endpoints": []any{map[string]any{"addresses": []any{svcIP(i)}, "conditions": map[string]any{"ready": true},
				"targetRef": map[string]any{"kind": "Pod", "namespace": "bench", "name": svcName(i) + "-pod"}}}})
	}
	// Service n (the last) is named by no Ingress until the last step.
	for name, items := range map[string][]any{"k8s-services.json": svcs, "endpointslices.json": slices} {
		j, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
		if err != nil {
			return nil, err
		}
		files[name] = j
	}
	for i := 0; i < n; i++ {
		files[fmt.Sprintf("ing-%04d.yaml", i)] = ingress(i, (i+1)%n, "/api")
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(b.in, name), content, 0o644); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// ingress is Ingress i: host ing-i.example.com, / to Service i and path to Service other.
func ingress(i, other int, path string) []byte {
	return fmt.Appendf(nil, `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ing-%04d, namespace: bench}
spec:
  ingressClassName: haproxy-sidecar
  rules:
  - host: ing-%04d.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: %s, port: {name: http}}}}
      - {path: %s, pathType: Prefix, backend: {service: {name: %s, port: {name: http}}}}
`, i, i, svcName(i), path, svcName(other))
}

// writeIngress replaces Ingress i's file in one rename, as editors and ConfigMap volumes do.
func (b *bench) writeIngress(i, other int, path string) error {
	p := filepath.Join(b.in, fmt.Sprintf("ing-%04d.yaml", i))
	if err := os.WriteFile(p+".tmp~", ingress(i, other, path), 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp~", p)
}

func (b *bench) cleanup() {
	b.cleanOnce.Do(func() {
		for i := len(b.procs) - 1; i >= 0; i-- {
			p := b.procs[i]
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() { p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
		for _, s := range b.servers {
			s.Close()
		}
		if !b.keep {
			os.RemoveAll(b.dir)
		} else {
			log.Printf("work directory kept: %s", b.dir)
		}
	})
}

func (b *bench) spawn(logName, name string, env []string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(b.dir, logName))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	b.procs = append(b.procs, cmd)
	return cmd, nil
}

func waitUntil(what string, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

func (b *bench) start(sidecar, wait string) error {
	ports := make([]int, 4)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	b.http = fmt.Sprintf("127.0.0.1:%d", ports[0])
	b.metrics = fmt.Sprintf("127.0.0.1:%d", ports[2])
	b.health = fmt.Sprintf("127.0.0.1:%d", ports[3])
	env := []string{"HTTP_BIND=" + b.http, fmt.Sprintf("HTTPS_BIND=127.0.0.1:%d", ports[1])}
	cfg, sock := filepath.Join(b.run, "haproxy.cfg"), filepath.Join(b.run, "master.sock")
	t0 := time.Now()
	cmd, err := b.spawn("sidecar.log", sidecar, env, "run", "--source=file", "--dir", b.in,
		"--haproxy-config", cfg, "--master-socket", sock, "--env-allow", "HTTP_BIND,HTTPS_BIND", "--wait", wait,
		"--watch", "ingresses.v1.networking.k8s.io", "--watch", "services.v1",
		"--watch", "endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name",
		"--metrics-addr", b.metrics, "--health-addr", b.health)
	if err != nil {
		return err
	}
	b.sidecarPID = cmd.Process.Pid
	if err := waitUntil("the first configuration", 60*time.Second, func() bool { _, err := os.Stat(cfg); return err == nil }); err != nil {
		return err
	}
	first := time.Since(t0)
	if _, err := b.spawn("haproxy.log", "haproxy", env, "-W", "-S", sock+",level,admin", "-f", cfg); err != nil {
		return err
	}
	if err := waitUntil("HAProxy's master socket", 30*time.Second, func() bool { _, err := b.reloads(); return err == nil }); err != nil {
		return err
	}
	if err := waitUntil("the sidecar ready", 60*time.Second, func() bool {
		resp, err := http.Get("http://" + b.health + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}); err != nil {
		return err
	}
	for _, c := range []struct{ host, path, want string }{
		{"ing-0000.example.com", "/", svcName(0)},
		{"ing-0000.example.com", "/api/x", svcName(1)},
		{fmt.Sprintf("ing-%04d.example.com", b.n-1), "/api", svcName(0)},
	} {
		if err := waitUntil(c.host+c.path+" served", 30*time.Second, func() bool { return b.get(c.host, c.path) == c.want }); err != nil {
			return err
		}
	}
	st, _ := os.Stat(cfg)
	lines := func(name string) int {
		data, _ := os.ReadFile(filepath.Join(b.run, "maps", name))
		return strings.Count(string(data), "\n")
	}
	fmt.Printf("%d Ingresses, %d backends: first configuration written %d ms after start (haproxy.cfg %d kB, routes.map %d lines); RSS %d MB, max RSS %d MB\n",
		b.n, b.n, first.Milliseconds(), st.Size()/1024, lines("routes.map"), b.memory("VmRSS"), b.memory("VmHWM"))
	return nil
}

// get sends one request through HAProxy (a new connection) and returns the body, or the
// status and error.
func (b *bench) get(host, path string) string {
	req, _ := http.NewRequest("GET", "http://"+b.http+path, nil)
	req.Host = host
	resp, err := b.client.Do(req)
	if err != nil {
		return err.Error()
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.Status
	}
	return string(body)
}

func (b *bench) cli(cmd string) (string, error) {
	c := &haproxycli.Client{Path: filepath.Join(b.run, "master.sock"), Timeout: 5 * time.Second}
	return c.Command(context.Background(), cmd)
}

// reloads is HAProxy's reload counter (show proc on the master socket).
func (b *bench) reloads() (int, error) {
	out, err := b.cli("show proc")
	if err != nil {
		return 0, err
	}
	p, err := reload.ParseProc(out)
	return p.Reloads, err
}

// metric is one sample of the sidecar's /metrics (0 when absent).
func (b *bench) metric(sample string) float64 {
	resp, err := http.Get("http://" + b.metrics + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// memory is a field of the sidecar's /proc/PID/status in MB (VmRSS, VmHWM).
func (b *bench) memory(field string) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.sidecarPID))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb / 1024
		}
	}
	return 0
}

// settled waits until the sidecar has nothing in flight: the generation on disk is the one it
// reports live.
func (b *bench) settled() error {
	return waitUntil("the sidecar to settle", 30*time.Second, func() bool {
		target, err := os.Readlink(filepath.Join(b.run, ".haproxy-sidecar", "current"))
		if err != nil {
			return false
		}
		resp, err := http.Get("http://" + b.health + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var r struct {
			LiveConfig string `json:"liveConfig"`
		}
		if json.NewDecoder(resp.Body).Decode(&r) != nil {
			return false
		}
		h := target[strings.LastIndex(target, "-")+1:]
		return len(r.LiveConfig) >= len(h) && r.LiveConfig[:len(h)] == h
	})
}

// changes edits Ingress 0's second path (to Service 1) to a new path each time and waits
// until the new path is answered by Service 1 (before, the prefix / sends it to Service 0).
func (b *bench) changes(count int) error {
	if err := b.settled(); err != nil {
		return err
	}
	reloads0, err := b.reloads()
	if err != nil {
		return err
	}
	maps0 := b.metric(`haproxy_sidecar_runtime_updates_total{kind="map_updated"}`)
	var took []time.Duration
	var renders []float64
	for c := 1; c <= count; c++ {
		path := fmt.Sprintf("/v%d", c)
		sum0, n0 := b.metric("haproxy_sidecar_render_duration_seconds_sum"), b.metric("haproxy_sidecar_render_duration_seconds_count")
		t0 := time.Now()
		if err := b.writeIngress(0, 1, path); err != nil {
			return err
		}
		if err := waitUntil(path+" served", 30*time.Second, func() bool { return b.get("ing-0000.example.com", path+"/x") == svcName(1) }); err != nil {
			return err
		}
		took = append(took, time.Since(t0))
		if err := b.settled(); err != nil {
			return err
		}
		if n := b.metric("haproxy_sidecar_render_duration_seconds_count") - n0; n > 0 {
			renders = append(renders, (b.metric("haproxy_sidecar_render_duration_seconds_sum")-sum0)/n*1000)
		}
		time.Sleep(300 * time.Millisecond) // apart, so each change is debounced on its own
	}
	reloads1, err := b.reloads()
	if err != nil {
		return err
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	var all []string
	for _, d := range took {
		all = append(all, fmt.Sprintf("%.0f", ms(d)))
	}
	var rs []string
	for _, r := range renders {
		rs = append(rs, fmt.Sprintf("%.0f", r))
	}
	fmt.Printf("path change -> served (includes the debounce's minimum): %d changes: min %.0f ms, median %.0f ms, max %.0f ms (%s ms)\n",
		len(took), ms(sorted[0]), ms(sorted[len(sorted)/2]), ms(sorted[len(sorted)-1]), strings.Join(all, ", "))
	fmt.Printf("  build+render of each sync (snapshot, haproxy.cfg and routes.map): %s ms; HAProxy reloads: %d; map updates through the runtime API: %.0f; RSS %d MB\n",
		strings.Join(rs, ", "), reloads1-reloads0, b.metric(`haproxy_sidecar_runtime_updates_total{kind="map_updated"}`)-maps0, b.memory("VmRSS"))
	return nil
}

// newBackend points Ingress 0's path at the Service no Ingress named yet: a new backend, one
// reload.
func (b *bench) newBackend() error {
	reloads0, err := b.reloads()
	if err != nil {
		return err
	}
	path := "/new"
	t0 := time.Now()
	if err := b.writeIngress(0, b.n, path); err != nil {
		return err
	}
	if err := waitUntil(path+" served", 60*time.Second, func() bool { return b.get("ing-0000.example.com", path) == svcName(b.n) }); err != nil {
		return err
	}
	took := time.Since(t0)
	if err := b.settled(); err != nil {
		return err
	}
	reloads1, err := b.reloads()
	if err != nil {
		return err
	}
	fmt.Printf("a path to a new backend -> served: %d ms, HAProxy reloads: %d\n", took.Milliseconds(), reloads1-reloads0)
	return nil
}
