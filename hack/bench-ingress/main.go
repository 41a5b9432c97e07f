// Command bench-ingress measures the Ingress example (examples/templates/ingress.yaml) at scale
// through the whole sidecar binary, a real HAProxy and real backends on loopback: N Ingresses
// (one file each, as manifests in file mode) with N backends (a Service, its EndpointSlice and
// one listener per backend), then path changes, each timed from the edit of one Ingress's
// file to "served" (a request for the new path answered by the backend the path names), with
// HAProxy's reloads counted and the sidecar's memory read from /proc. With --source=kube the
// objects are in a real kube-apiserver instead (benchrig.Kube), each change timed from the
// return of its API call. Run it through hack/bench-ingress.sh.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/benchrig"
)

func main() {
	sidecar := flag.String("sidecar", "bin/haproxy-sidecar", "the sidecar binary")
	example := flag.String("example", "examples/templates/ingress.yaml", "the Ingress example's ConfigMap")
	n := flag.Int("ingresses", 1000, "Ingresses, and backends (one Service each)")
	changes := flag.Int("changes", 10, "path changes (each edits one Ingress and waits until it is served)")
	services := flag.Int("new-services", 5, "Ingresses for a new Service, each added, served, deleted, no longer served")
	wait := flag.String("wait", "100ms:1s", "the sidecar's --wait (debounce)")
	keep := flag.Bool("keep", false, "keep the work directory")
	source := flag.String("source", "file", "where the sidecar reads the objects: file (a directory of manifests) or kube (a real kube-apiserver started here from KUBEBUILDER_ASSETS)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench-ingress: ")

	b, err := setup(*n, *example, *keep, *source)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Stop()
	fail := func(err error) {
		b.Stop()
		log.Fatal(err)
	}
	if err := b.start(*sidecar, *wait); err != nil {
		fail(err)
	}
	if err := b.changes(*changes); err != nil {
		fail(err)
	}
	if err := b.newServices(*services); err != nil {
		fail(err)
	}
	if err := b.newBackend(); err != nil {
		fail(err)
	}
	fmt.Printf("sidecar max RSS (VmHWM) over the run: %d MB\n", b.proxy.MaxRSS())
}

type bench struct {
	*benchrig.Rig
	kube  *benchrig.Kube // with --source=kube; nil: file mode
	proxy *benchrig.Proxy
	n     int
	port  int
}

func svcName(i int) string { return fmt.Sprintf("svc-%04d", i) }

// svcIP is the address of backend i's one endpoint: 127.1.0.1 and on.
func svcIP(i int) string { return fmt.Sprintf("127.1.%d.%d", i/250, i%250+1) }

// setup writes the manifests and starts one backend per Service (and one more for the new
// backend of the last step).
func setup(n int, example string, keep bool, source string) (*bench, error) {
	rig, err := benchrig.New("bench-ingress", keep)
	if err != nil {
		return nil, err
	}
	rig.StopOnSignal()
	b := &bench{Rig: rig, n: n}
	// One backend per Service, Service n included (named by no Ingress until the last step).
	if b.port, err = b.Backends(n+1, svcIP, svcName); err != nil {
		b.Stop()
		return nil, err
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
		if err := os.WriteFile(filepath.Join(b.In, name), content, 0o644); err != nil {
			return nil, err
		}
	}
	switch source {
	case "file":
	case "kube":
		if err := b.loadKube(files); err != nil {
			b.Stop()
			return nil, err
		}
	default:
		return nil, fmt.Errorf("--source %q: file or kube", source)
	}
	return b, nil
}

// loadKube starts kube-apiserver and puts the manifests' objects there.
func (b *bench) loadKube(files map[string][]byte) error {
	t0 := time.Now()
	var err error
	if b.kube, err = b.StartKube(); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		if err := b.kube.Put(name, files[name], 8); err != nil {
			return err
		}
	}
	fmt.Printf("kube-apiserver started and %d manifests applied in %d ms\n", len(names), time.Since(t0).Milliseconds())
	return nil
}

// put writes manifest name: its file replaced in one rename (as editors and ConfigMap volumes
// do), or its objects applied.
func (b *bench) put(name string, data []byte) error {
	if b.kube != nil {
		return b.kube.Put(name, data, 1)
	}
	return b.WriteFile(name, data)
}

// remove removes manifest name: its file, or its objects.
func (b *bench) remove(name string) error {
	if b.kube != nil {
		return b.kube.Remove(name)
	}
	return os.Remove(filepath.Join(b.In, name))
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
	return b.put(fmt.Sprintf("ing-%04d.yaml", i), ingress(i, other, path))
}

func (b *bench) start(sidecar, wait string) error {
	source := []string{"--source=file", "--dir", b.In}
	if b.kube != nil {
		source = []string{"--source=kube", "--kubeconfig", b.kube.Kubeconfig}
	}
	var err error
	b.proxy, err = b.StartProxy(sidecar, nil, append(source, "--env-allow", "HTTP_BIND,HTTPS_BIND", "--wait", wait,
		"--watch", "ingresses.v1.networking.k8s.io", "--watch", "services.v1",
		"--watch", "endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name")...)
	if err != nil {
		return err
	}
	for _, c := range []struct{ host, path, want string }{
		{"ing-0000.example.com", "/", svcName(0)},
		{"ing-0000.example.com", "/api/x", svcName(1)},
		{fmt.Sprintf("ing-%04d.example.com", b.n-1), "/api", svcName(0)},
	} {
		if err := benchrig.WaitUntil(c.host+c.path+" served", 30*time.Second, func() bool { return b.proxy.Get(c.host, c.path) == c.want }); err != nil {
			return err
		}
	}
	st, _ := os.Stat(b.proxy.Config)
	lines := func(name string) int {
		data, _ := os.ReadFile(filepath.Join(b.Run, "maps", name))
		return strings.Count(string(data), "\n")
	}
	fmt.Printf("%d Ingresses, %d backends: first configuration written %d ms after start (haproxy.cfg %d kB, routes.map %d lines); RSS %d MB, max RSS %d MB\n",
		b.n, b.n, b.proxy.FirstConfig.Milliseconds(), st.Size()/1024, lines("routes.map"), b.proxy.RSS(), b.proxy.MaxRSS())
	return nil
}

// changes edits Ingress 0's second path (to Service 1) to a new path each time and waits
// until the new path is answered by Service 1 (before, the prefix / sends it to Service 0).
func (b *bench) changes(count int) error {
	if err := b.proxy.Settled(); err != nil {
		return err
	}
	reloads0, err := b.Reloads()
	if err != nil {
		return err
	}
	maps0 := b.proxy.Metric(`haproxy_sidecar_runtime_updates_total{kind="map_updated"}`)
	var took []time.Duration
	var renders []float64
	for c := 1; c <= count; c++ {
		path := fmt.Sprintf("/v%d", c)
		sum0, n0 := b.proxy.Metric("haproxy_sidecar_render_duration_seconds_sum"), b.proxy.Metric("haproxy_sidecar_render_duration_seconds_count")
		t0 := time.Now()
		if err := b.writeIngress(0, 1, path); err != nil {
			return err
		}
		if err := benchrig.WaitUntil(path+" served", 30*time.Second, func() bool { return b.proxy.Get("ing-0000.example.com", path+"/x") == svcName(1) }); err != nil {
			return err
		}
		took = append(took, time.Since(t0))
		if err := b.proxy.Settled(); err != nil {
			return err
		}
		if n := b.proxy.Metric("haproxy_sidecar_render_duration_seconds_count") - n0; n > 0 {
			renders = append(renders, (b.proxy.Metric("haproxy_sidecar_render_duration_seconds_sum")-sum0)/n*1000)
		}
		time.Sleep(300 * time.Millisecond) // apart, so each change is debounced on its own
	}
	reloads1, err := b.Reloads()
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
		strings.Join(rs, ", "), reloads1-reloads0, b.proxy.Metric(`haproxy_sidecar_runtime_updates_total{kind="map_updated"}`)-maps0, b.proxy.RSS())
	return nil
}

// newServices adds an Ingress for the Service no Ingress names yet (host new.example.com, a new
// backend) and times it from the file's creation until served by that Service, then deletes it
// and times it until the host is no longer served, count times; it counts HAProxy's reloads and
// the runtime API's backend changes, and waits until HAProxy no longer has the backend (show
// backend). From HAProxy 3.4 on a new backend needs no reload; before, each is one.
func (b *bench) newServices(count int) error {
	if count == 0 {
		return nil
	}
	if err := b.proxy.Settled(); err != nil {
		return err
	}
	reloads0, err := b.Reloads()
	if err != nil {
		return err
	}
	metric := func(kind string) float64 {
		return b.proxy.Metric(`haproxy_sidecar_runtime_updates_total{kind="` + kind + `"}`)
	}
	added0, removed0 := metric("backend_added"), metric("backend_removed")
	backend := "be_bench_" + svcName(b.n) + "_http"
	runs := func() bool {
		out, err := b.CLI("@1 show backend")
		return err == nil && slices.Contains(strings.Fields(out), backend)
	}
	var served, gone, deleted []time.Duration
	for c := 0; c < count; c++ {
		t0 := time.Now()
		if err := b.put("ing-new.yaml", newIngress(svcName(b.n))); err != nil {
			return err
		}
		if err := benchrig.WaitUntil("new.example.com served", 30*time.Second, func() bool { return b.proxy.Get("new.example.com", "/") == svcName(b.n) }); err != nil {
			return err
		}
		served = append(served, time.Since(t0))
		if err := b.proxy.Settled(); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond) // apart, so each change is debounced on its own
		t0 = time.Now()
		if err := b.remove("ing-new.yaml"); err != nil {
			return err
		}
		if err := benchrig.WaitUntil("new.example.com no longer served", 30*time.Second, func() bool { return strings.HasPrefix(b.proxy.Get("new.example.com", "/"), "404") }); err != nil {
			return err
		}
		gone = append(gone, time.Since(t0))
		if err := b.proxy.Settled(); err != nil {
			return err
		}
		if err := benchrig.WaitUntil(backend+" gone from show backend", 30*time.Second, func() bool { return !runs() }); err != nil {
			return err
		}
		deleted = append(deleted, time.Since(t0))
		time.Sleep(300 * time.Millisecond)
	}
	reloads1, err := b.Reloads()
	if err != nil {
		return err
	}
	fmt.Printf("an Ingress for a new Service -> served: %s; deleted -> no longer served: %s, backend gone from show backend: %s (%d each)\n",
		summary(served), summary(gone), summary(deleted), count)
	fmt.Printf("  HAProxy reloads: %d; backends added / removed through the runtime API: %.0f / %.0f\n",
		reloads1-reloads0, metric("backend_added")-added0, metric("backend_removed")-removed0)
	return nil
}

// newIngress is an Ingress for host new.example.com to Service svc.
func newIngress(svc string) []byte {
	return fmt.Appendf(nil, `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ing-new, namespace: bench}
spec:
  ingressClassName: haproxy-sidecar
  rules:
  - host: new.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: %s, port: {name: http}}}}
`, svc)
}

// summary is "min A ms, median B ms, max C ms (all ms)".
func summary(took []time.Duration) string {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	var all []string
	for _, d := range took {
		all = append(all, fmt.Sprintf("%.0f", ms(d)))
	}
	return fmt.Sprintf("min %.0f ms, median %.0f ms, max %.0f ms (%s ms)", ms(sorted[0]), ms(sorted[len(sorted)/2]), ms(sorted[len(sorted)-1]), strings.Join(all, ", "))
}

// newBackend points Ingress 0's path at the Service no Ingress named yet: a new backend (one
// reload before HAProxy 3.4).
func (b *bench) newBackend() error {
	reloads0, err := b.Reloads()
	if err != nil {
		return err
	}
	path := "/new"
	t0 := time.Now()
	if err := b.writeIngress(0, b.n, path); err != nil {
		return err
	}
	if err := benchrig.WaitUntil(path+" served", 60*time.Second, func() bool { return b.proxy.Get("ing-0000.example.com", path) == svcName(b.n) }); err != nil {
		return err
	}
	took := time.Since(t0)
	if err := b.proxy.Settled(); err != nil {
		return err
	}
	reloads1, err := b.Reloads()
	if err != nil {
		return err
	}
	fmt.Printf("a path to a new backend -> served: %d ms, HAProxy reloads: %d\n", took.Milliseconds(), reloads1-reloads0)
	return nil
}
