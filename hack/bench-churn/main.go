// Command bench-churn measures pod churn through the whole sidecar binary, a real HAProxy and
// real backends on loopback: a service's pods become ready and unready one at a time while a
// keep-alive load runs, and for each change the time from the edit of the pods file to
// "served" is recorded (a new pod answers a request; a removed pod is gone from HAProxy's
// servers). With --edit=services the same pods come and go through an operator's edit of the
// services ConfigMap instead (the churned service's selector names the pods it takes), beside
// --services other services, each with a pod of its own: what an operator's change costs when
// the configuration has that many backends. It prints the reloads HAProxy made, the runtime API updates the sidecar made, the
// requests that failed, and the latency percentiles. Run it through hack/bench-churn.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/benchrig"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/loadgen"
)

func main() {
	sidecar := flag.String("sidecar", "bin/haproxy-sidecar", "the sidecar binary")
	pods := flag.Int("pods", 20, "pods of the churned service")
	minReady := flag.Int("min-ready", 2, "fewest ready pods")
	changes := flag.Int("changes", 100, "pod readiness changes")
	interval := flag.Duration("interval", 50*time.Millisecond, "least time between two changes (a change also waits until the previous one is served)")
	conns := flag.Int("conns", 4, "keep-alive load connections")
	runtimeAPI := flag.Bool("runtime-api", true, "let the sidecar use the runtime API (false: every change reloads)")
	wait := flag.String("wait", "10ms:200ms", "the sidecar's --wait")
	keep := flag.Bool("keep", false, "keep the work directory")
	edit := flag.String("edit", "pods", "what each change edits: pods (their readiness) or services (the churned service's selector in the services ConfigMap)")
	services := flag.Int("services", 0, "other services beside the churned one, each with one pod (backends the configuration carries)")
	extra := flag.String("sidecar-args", "", "more flags for the sidecar, space-separated (--check-before-runtime, ...)")
	flag.Parse()
	if *edit != "pods" && *edit != "services" {
		log.Fatalf("--edit %q: pods or services", *edit)
	}
	log.SetFlags(0)
	log.SetPrefix("bench-churn: ")

	b, err := setup(*pods, *services, *edit == "services", *keep)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Stop()
	if err := b.start(*sidecar, *wait, *runtimeAPI, strings.Fields(*extra)); err != nil {
		b.Stop()
		log.Fatal(err)
	}
	res, err := b.churn(*changes, *minReady, *interval, *conns)
	if err != nil {
		b.Stop()
		log.Fatal(err)
	}
	res.print(*pods, *runtimeAPI, *edit, *services)
}

type bench struct {
	*benchrig.Rig
	port    int
	http    string
	metrics string
	pods    int
	ready   []bool
	// bySelector: a change edits the churned service's selector (the pods are all ready);
	// others are the other services.
	bySelector bool
	others     int
}

func podName(i int) string   { return fmt.Sprintf("churn-%02d", i) }
func podIP(i int) string     { return fmt.Sprintf("127.0.2.%d", i+1) }
func otherName(i int) string { return fmt.Sprintf("svc-%04d", i) }
func otherIP(i int) string   { return fmt.Sprintf("127.0.%d.%d", 3+i/250, i%250+1) }

// setup writes the manifests and starts one backend per pod (the other services' pods
// answer on the churned pods' port, at addresses of their own: nothing listens there).
func setup(pods, others int, bySelector, keep bool) (*bench, error) {
	rig, err := benchrig.New("bench-churn", keep)
	if err != nil {
		return nil, err
	}
	b := &bench{Rig: rig, pods: pods, ready: make([]bool, pods), bySelector: bySelector, others: others}
	if b.port, err = b.Backends(pods, podIP, podName); err != nil {
		b.Stop()
		return nil, err
	}
	hp, _ := benchrig.FreePort()
	mp, _ := benchrig.FreePort()
	b.http = fmt.Sprintf("127.0.0.1:%d", hp)
	b.metrics = fmt.Sprintf("127.0.0.1:%d", mp)
	files := map[string]string{
		"config.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: config, namespace: lb}
data:
  template: |
    global
      maxconn 4096
      hard-stop-after 30s
    defaults
      mode http
      option idle-close-on-response
      timeout connect 5s
      timeout client 30s
      timeout server 30s
      timeout http-keep-alive 10s
    frontend http
      bind {{ env.HTTP_BIND }}
    {%- for service in services %}
      use_backend be_{{ service.name }} if { hdr(host),field(1,:) -i {{ service.hostnames|join(" ") }} }
    {%- endfor %}
    {%- for service in services %}
    backend be_{{ service.name }}
      balance roundrobin
    {%- for name, pod in service.pods.items() %}{% for port in service.ports %}
      server {{ name }}-{{ port }} {{ pod.status.podIP }}:{{ port }}{% if service.name == "churn" %} check inter 2s{% endif %}
    {%- endfor %}{% endfor %}
    {%- endfor %}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(b.In, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	for i := 0; i < 2 && i < pods; i++ {
		b.ready[i] = true
	}
	if err := b.writeServices(); err != nil {
		return nil, err
	}
	return b, b.writePods()
}

// writeServices writes the services ConfigMap in one atomic rename: the churned service (its
// selector naming the ready pods, with --edit=services) and the others.
func (b *bench) writeServices() error {
	sel := `{"app": "churn"}`
	if b.bySelector {
		var in []string
		for i, r := range b.ready {
			if r {
				in = append(in, strconv.Itoa(i))
			}
		}
		sel = fmt.Sprintf(`"app=churn,idx in (%s)"`, strings.Join(in, ","))
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services, namespace: lb}\ndata:\n")
	fmt.Fprintf(&sb, "  churn: '{\"namespace\": \"demo\", \"selector\": %s, \"hostnames\": [\"churn.localhost\"], \"ports\": [%d]}'\n", sel, b.port)
	for i := 0; i < b.others; i++ {
		fmt.Fprintf(&sb, "  %s: '{\"namespace\": \"demo\", \"selector\": {\"app\": \"%s\"}, \"hostnames\": [\"%s.localhost\"], \"ports\": [%d]}'\n",
			otherName(i), otherName(i), otherName(i), b.port)
	}
	return b.WriteFile("services.yaml", []byte(sb.String()))
}

// writePods writes the pods file in one atomic rename: the churned pods (all ready with
// --edit=services, whose selector picks them) and one pod per other service.
func (b *bench) writePods() error {
	var sb strings.Builder
	pod := func(name, labels, ip string, ready bool) {
		st := map[bool]string{true: "True", false: "False"}[ready]
		fmt.Fprintf(&sb, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: demo, labels: {%s}}\n"+
			"spec: {containers: [{name: app, image: backend}]}\nstatus:\n  phase: Running\n  podIP: %s\n"+
			"  conditions: [{type: Ready, status: \"%s\"}]\n  containerStatuses: [{name: app, ready: %v, image: backend, imageID: \"\", restartCount: 0}]\n",
			name, labels, ip, st, ready)
	}
	for i := 0; i < b.pods; i++ {
		pod(podName(i), fmt.Sprintf("app: churn, idx: %q", strconv.Itoa(i)), podIP(i), b.ready[i] || b.bySelector)
	}
	for i := 0; i < b.others; i++ {
		pod(otherName(i)+"-pod", "app: "+otherName(i), otherIP(i), true)
	}
	return b.WriteFile("pods.yaml", []byte(sb.String()))
}

func (b *bench) start(sidecar, wait string, runtimeAPI bool, extra []string) error {
	hp, _ := benchrig.FreePort()
	env := []string{"HTTP_BIND=" + b.http}
	cfg, sock := filepath.Join(b.Run, "haproxy.cfg"), b.Socket()
	args := append([]string{"run", "--source=file", "--dir", b.In,
		"--haproxy-config", cfg, "--master-socket", sock, "--env-allow", "HTTP_BIND", "--wait", wait,
		"--runtime-api=" + strconv.FormatBool(runtimeAPI),
		"--metrics-addr", b.metrics, "--health-addr", fmt.Sprintf("127.0.0.1:%d", hp)}, extra...)
	if _, err := b.Spawn("sidecar.log", sidecar, env, args...); err != nil {
		return err
	}
	if err := benchrig.WaitUntil("the first configuration", 30*time.Second, func() bool { _, err := os.Stat(cfg); return err == nil }); err != nil {
		return err
	}
	if _, err := b.Spawn("haproxy.log", "haproxy", env, "-W", "-S", sock+",level,admin", "-f", cfg); err != nil {
		return err
	}
	if err := benchrig.WaitUntil("HAProxy's master socket", 30*time.Second, func() bool { _, err := b.Reloads(); return err == nil }); err != nil {
		return err
	}
	return benchrig.WaitUntil("HAProxy serving", 30*time.Second, func() bool {
		who, err := get(http.DefaultClient, b.http)
		return err == nil && strings.HasPrefix(who, "churn-")
	})
}

func get(c *http.Client, addr string) (string, error) {
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = "churn.localhost"
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %s", resp.Status)
	}
	return string(body), nil
}

type results struct {
	added, removed                 []time.Duration
	reloads                        int
	sidecarReloads, runtimeUpdates float64
	ok, failed                     int64
	errs                           []string
	took                           time.Duration
}

// churn makes the changes: each turns one pod ready or unready (at random, within
// [minReady, pods]) and waits until it is served.
func (b *bench) churn(changes, minReady int, interval time.Duration, conns int) (*results, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	reloads0, err := b.Reloads()
	if err != nil {
		return nil, err
	}
	sidecar0 := benchrig.Metric(b.metrics, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`)
	runtime0 := benchrig.Metric(b.metrics, "haproxy_sidecar_runtime_updates_total")
	l := loadgen.Start(b.http, "churn.localhost", conns)
	res := &results{}
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	for c := 0; c < changes && ctx.Err() == nil; c++ {
		next := time.Now().Add(interval)
		var ready, unready []int
		for i, r := range b.ready {
			if r {
				ready = append(ready, i)
			} else {
				unready = append(unready, i)
			}
		}
		add := len(ready) <= minReady || (len(unready) > 0 && rng.IntN(2) == 0)
		var pod int
		if add {
			pod = unready[rng.IntN(len(unready))]
		} else {
			pod = ready[rng.IntN(len(ready))]
		}
		b.ready[pod] = add
		t0 := time.Now()
		write := b.writePods
		if b.bySelector {
			write = b.writeServices
		}
		if err := write(); err != nil {
			return nil, err
		}
		name := podName(pod)
		var err error
		if add {
			// Served: the new pod answers (round robin reaches it within a round).
			err = benchrig.WaitUntil(name+" answering", 30*time.Second, func() bool {
				for i := 0; i < 2*b.pods; i++ {
					if who, _ := get(client, b.http); who == name {
						return true
					}
				}
				return false
			})
			res.added = append(res.added, time.Since(t0))
		} else {
			// Served: HAProxy no longer has the server (it routes nothing more to it).
			err = benchrig.WaitUntil(name+" gone from HAProxy", 30*time.Second, func() bool {
				out, err := b.CLI("@1 show servers state be_churn")
				return err == nil && strings.Contains(out, " be_churn ") && !hasLiveServer(out, name)
			})
			res.removed = append(res.removed, time.Since(t0))
		}
		if err != nil {
			return nil, err
		}
		time.Sleep(time.Until(next))
	}
	res.took = time.Since(start)
	// Let the last change settle (written, and reloaded if it reloads) before counting.
	time.Sleep(500 * time.Millisecond)
	l.Stop()
	reloads1, err := b.Reloads()
	if err != nil {
		return nil, err
	}
	res.reloads = reloads1 - reloads0
	res.sidecarReloads = benchrig.Metric(b.metrics, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`) - sidecar0
	res.runtimeUpdates = benchrig.Metric(b.metrics, "haproxy_sidecar_runtime_updates_total") - runtime0
	res.ok, res.failed, res.errs = l.OK(), l.Failed(), l.Errors()
	return res, nil
}

// hasLiveServer reports whether `show servers state` lists the server other than in
// maintenance (admin state bits 0x01 forced, 0x02 inherited, 0x04 configured, 0x20 resolution,
// 0x40 host name maintenance).
func hasLiveServer(out, name string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 6 && strings.HasPrefix(f[3], name+"-") {
			admin, _ := strconv.Atoi(f[6])
			return admin&0x67 == 0
		}
	}
	return false
}

func (r *results) print(pods int, runtimeAPI bool, edit string, others int) {
	mode := "runtime API on"
	if !runtimeAPI {
		mode = "runtime API off (every change reloads)"
	}
	all := append(slices.Clone(r.added), r.removed...)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	what := "pod churn"
	if edit == "services" {
		what = "services edits"
	}
	fmt.Printf("%s, %s, %d other services: %d changes (%d pods in and out, one at a time) in %v\n", what, mode, others, len(all), pods, r.took.Round(time.Millisecond))
	fmt.Printf("  reloads:             %d (HAProxy's counter), %v (sidecar)\n", r.reloads, r.sidecarReloads)
	fmt.Printf("  runtime updates:     %v\n", r.runtimeUpdates)
	fmt.Printf("  requests:            %d ok, %d failed", r.ok, r.failed)
	if len(r.errs) > 0 {
		fmt.Printf(" (first: %s)", strings.Join(r.errs, "; "))
	}
	fmt.Println()
	fmt.Printf("  change -> served:    p50 %s  p90 %s  p99 %s  max %s\n", ms(benchrig.Percentile(all, .5)), ms(benchrig.Percentile(all, .9)), ms(benchrig.Percentile(all, .99)), ms(benchrig.Percentile(all, 1)))
	fmt.Printf("    pod ready (%3d):   p50 %s  p99 %s\n", len(r.added), ms(benchrig.Percentile(r.added, .5)), ms(benchrig.Percentile(r.added, .99)))
	fmt.Printf("    pod unready (%3d): p50 %s  p99 %s\n", len(r.removed), ms(benchrig.Percentile(r.removed, .5)), ms(benchrig.Percentile(r.removed, .99)))
}
