// Command bench-routes measures routes at scale through the kube source: N HTTPRoutes
// (examples/templates/httproute.yaml, attached to one Gateway) or N Ingresses
// (examples/templates/ingress.yaml), route i for host route-i.example.com (ing-i for
// Ingresses) with / to Service i and /api to Service i+1, N Services and their EndpointSlices,
// all in a real kube-apiserver and etcd (benchrig.Kube), read by the whole sidecar binary with
// --source=kube, served by a real HAProxy to real backends, one listener on its own loopback
// address per endpoint. It times the start to every route served, then changes of four kinds,
// each from the return of its API write to the first answer through HAProxy that shows it:
// a new route to a new Service, a path change, a route deleted, a backend's pod added. For each
// kind it prints p50, p95, p99 and max, the reloads HAProxy made (its own counter), the
// sidecar's runtime-API updates and its RSS, in one table per run. Run it through
// hack/bench-routes.sh.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/benchrig"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/exampleflags"
)

// changeDeadline bounds the wait for one change to be served.
const changeDeadline = 30 * time.Second

func main() {
	sidecar := flag.String("sidecar", "bin/haproxy-sidecar", "the sidecar binary")
	kindName := flag.String("kind", "httproute", "httproute (examples/templates/httproute.yaml) or ingress (examples/templates/ingress.yaml)")
	n := flag.Int("n", 1000, "routes, and Services (one pod each)")
	changes := flag.Int("changes", 50, "changes of each kind (at most -n)")
	wait := flag.String("wait", "20ms:1s", "the sidecar's --wait (debounce)")
	gap := flag.Duration("gap", 600*time.Millisecond, "least time from a change served and settled to the next, which also waits until the sidecar is idle (its status writes come back as changes it renders)")
	sample := flag.Int("sample", 20, "hosts polled from the sidecar's start until served")
	crds := flag.String("crds", "e2e/testdata/gateway-api", "the directory of the Gateway API CRDs (hack/gateway-api-crds.sh)")
	stages := flag.Bool("stages", false, "run the sidecar at debug level and print the medians of its sync stages (read, build, plan, apply) for each kind of change")
	keep := flag.Bool("keep", false, "keep the work directory (the logs, haproxy.cfg)")
	runIn := flag.String("run-in", "", "make the run directory (haproxy.cfg, the master socket, the sidecar's generations and its record of what HAProxy runs) under this directory: /dev/shm stands for the chart's configVolume.medium=Memory")
	profile := flag.String("start-profile", "", "write a CPU profile of the sidecar's first --start-profile-for to this file (the sidecar runs with --pprof)")
	heaps := flag.String("heap-profiles", "", "save the sidecar's heap profile in this directory each time its maximum RSS has grown by 5 MB (the sidecar runs with --pprof)")
	changesProfile := flag.String("changes-profile", "", "write a CPU profile of the sidecar over the changes of the kind --changes-profile-kind to this file (the sidecar runs with --pprof; go in PATH merges the profile's 2 s chunks)")
	changesProfileKind := flag.String("changes-profile-kind", "new", "the kind of change --changes-profile and --changes-trace look at: new (a new route), path, delete or pod")
	changesTrace := flag.String("changes-trace", "", "write a Go execution trace of the sidecar over the first --changes-trace-for of the changes of the kind --changes-profile-kind to this file (go tool trace; the sidecar runs with --pprof): where a slow change's sync waited")
	traceFor := flag.Duration("changes-trace-for", 30*time.Second, "how long --changes-trace traces")
	among := flag.Bool("new-among", false, "name the new routes so that they sort among the others (each after an existing one, spread over all) rather than after them all, as names in a cluster do")
	profileFor := flag.Duration("start-profile-for", 20*time.Second, "how long --start-profile profiles")
	statsSocket := flag.Bool("stats-socket", true, "the example declares a stats socket (STATS_SOCKET) and the sidecar sends the runtime API's commands there (--runtime-socket), as the Helm chart does; false: through the master socket")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench-routes: ")
	k, ok := kinds[*kindName]
	if !ok {
		log.Fatalf("--kind %q: httproute or ingress", *kindName)
	}
	if *changes < 1 || *changes > *n {
		log.Fatalf("--changes %d: between 1 and --n (%d)", *changes, *n)
	}
	rig, err := benchrig.New("bench-routes", *keep)
	if err != nil {
		log.Fatal(err)
	}
	if *runIn != "" {
		if err := rig.RunIn(*runIn); err != nil {
			log.Fatal(err)
		}
	}
	rig.StopOnSignal()
	switch *changesProfileKind {
	case "new", "path", "delete", "pod":
	default:
		log.Fatalf("--changes-profile-kind %q: new, path, delete or pod", *changesProfileKind)
	}
	rig.StartProfile, rig.StartProfileFor, rig.HeapProfiles = *profile, *profileFor, *heaps
	rig.Pprof = *changesProfile != "" || *changesTrace != ""
	b := &bench{rig: rig, kind: k, n: *n, changes: *changes, gap: *gap, sample: *sample, stages: *stages, wait: *wait,
		profile: *changesProfile, profileKind: *changesProfileKind, trace: *changesTrace, traceFor: *traceFor, among: *among, statsSocket: *statsSocket}
	err = b.run(*sidecar, *crds)
	rig.Stop()
	if err != nil {
		log.Fatal(err)
	}
}

type bench struct {
	rig     *benchrig.Rig
	kube    *benchrig.Kube
	proxy   *benchrig.Proxy
	kind    kind
	n       int
	changes int
	gap     time.Duration
	sample  int
	stages  bool
	wait    string
	port    int // every backend's
	// profile, when set, is where the CPU profile of the sidecar over the changes of the kind
	// profileKind is written.
	profile     string
	profileKind string
	// trace, when set, is where the execution trace of the sidecar over the first traceFor of
	// the changes of the kind profileKind is written.
	trace       string
	traceFor    time.Duration
	among       bool // --new-among
	statsSocket bool // --stats-socket
	// exampleArgs are the --watch and --env-allow flags the example's header comment gives
	// (load reads them).
	exampleArgs []string
}

func (b *bench) routeName(i int) string { return fmt.Sprintf("%s-%05d", b.kind.prefix, i) }
func (b *bench) host(i int) string      { return b.routeName(i) + ".example.com" }

// newRouteName is the name of the route change c adds (and a later change deletes): after the
// loaded ones (route n+c), or with --new-among after route c*n/changes + n/changes/3, where an
// object added to a cluster usually sorts.
func (b *bench) newRouteName(c int) string {
	if b.among {
		return b.routeName((c*(b.n/b.changes)+b.n/b.changes/3)%b.n) + "-new"
	}
	return b.routeName(b.n + c)
}

// route is route i as loaded: / to Service i, /api to Service i+1.
func (b *bench) route(i int) map[string]any {
	return b.kind.route(b.routeName(i), b.host(i), []rule{{"/", svcName(i)}, {"/api", svcName((i + 1) % b.n)}})
}

// The routes and Services the changes touch, spread over all of them.
func (b *bench) pathRoute(c int) int { return c * (b.n / b.changes) }
func (b *bench) podService(c int) int {
	return (c*(b.n/b.changes) + b.n/b.changes/2 + 1) % b.n
}

// addedPod is the pod change c adds to Service podService(c): backend n+changes+c.
func (b *bench) addedPod(c int) endpoint {
	return endpoint{svcName(b.podService(c)) + "-added", addr(b.n + b.changes + c)}
}

// answer is what backend i answers: the name of its pod's Service, or of the added pod.
func (b *bench) answer(i int) string {
	if c := i - b.n - b.changes; c >= 0 {
		return b.addedPod(c).pod
	}
	return svcName(i)
}

func (b *bench) run(sidecar, crds string) error {
	var err error
	if b.port, err = b.rig.Backends(b.n+2*b.changes, addr, b.answer); err != nil {
		return fmt.Errorf("start the backends: %w", err)
	}
	if err := b.load(crds); err != nil {
		return err
	}
	st, err := b.start(sidecar)
	if err != nil {
		return err
	}
	cs := b.kindsOfChange()
	results := make([]*result, len(cs))
	for _, i := range byOrder(cs) {
		if results[i], err = b.measure(cs[i]); err != nil {
			return err
		}
	}
	// Every route is still served at the end, by its Service's pod or the one added to it.
	t0 := time.Now()
	late := b.notServed(func(i int) bool {
		got := b.proxy.Get(b.host(i), "/")
		return got == svcName(i) || strings.HasPrefix(got, svcName(i)+"-")
	})
	if len(late) > 0 {
		return fmt.Errorf("at the end, %d routes not served (the first: %s)", len(late), b.host(late[0]))
	}
	st.checkEnd = time.Since(t0)
	b.print(st, results)
	return nil
}

// load starts kube-apiserver and etcd and writes the objects: the template's ConfigMap, an
// empty services ConfigMap, the Gateway, the Services, their EndpointSlices and the routes.
func (b *bench) load(crds string) error {
	t0 := time.Now()
	var err error
	if b.kube, err = b.rig.StartKube(crds); err != nil {
		return err
	}
	started := time.Since(t0)
	config, err := os.ReadFile(b.kind.example)
	if err != nil {
		return fmt.Errorf("read the example: %w", err)
	}
	if b.exampleArgs, err = exampleflags.Args(config); err != nil {
		return fmt.Errorf("%s: %w", b.kind.example, err)
	}
	if err := b.kube.Put("config", config, 1); err != nil {
		return err
	}
	if err := b.kube.Apply("lb", objects(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "services", "namespace": "lb"}}), 1); err != nil {
		return err
	}
	if err := b.kube.Apply("front", objects(b.kind.front...), 1); err != nil {
		return err
	}
	t1 := time.Now()
	var svcs, slices, routes []map[string]any
	for i := range b.n {
		svcs = append(svcs, service(svcName(i), b.port))
		slices = append(slices, endpointSlice(svcName(i), b.port, endpoint{podName(i), addr(i)}))
		routes = append(routes, b.route(i))
	}
	for _, set := range []struct {
		name string
		objs []map[string]any
	}{{"services", svcs}, {"endpointslices", slices}, {"routes", routes}} {
		if err := b.kube.Apply(set.name, objects(set.objs...), 8); err != nil {
			return err
		}
	}
	fmt.Printf("kube-apiserver and etcd started in %.1f s; %d Services, EndpointSlices and %s written in %.1f s\n",
		started.Seconds(), b.n, b.kind.title, time.Since(t1).Seconds())
	return nil
}

// startup is what the start took, from the sidecar's start.
type startup struct {
	firstConfig   time.Duration // haproxy.cfg written
	sample        time.Duration // a sample of the hosts served
	all           time.Duration // every host served: the sample's time if each was at its check, else the last late one's
	late          int           // hosts not served yet when checked
	checkAll      time.Duration // how long the check of every host took
	checkEnd      time.Duration // the same at the end of the run
	status        time.Duration // the status of every object written (0: none to write)
	statusObjects int           // objects whose status was written
	reloads       int           // HAProxy's, from its start to the first change
	renders       map[string]float64
	rss, maxRSS   int // MB, once the status is written
}

// start starts the sidecar and HAProxy and waits until every route is served and the status
// of every object written, so that the changes are measured on a quiet sidecar.
func (b *bench) start(sidecar string) (*startup, error) {
	args := append([]string{"--source=kube", "--kubeconfig", b.kube.Kubeconfig, "--wait", b.wait, "--log-format=json"}, b.exampleArgs...)
	if b.stages {
		args = append(args, "--log-level=debug")
	}
	var err error
	var env []string
	if b.statsSocket {
		sock := filepath.Join(b.rig.Run, "runtime.sock")
		env = []string{"STATS_SOCKET=" + sock}
		args = append(args, "--runtime-socket", sock)
		for i := range args[:len(args)-1] {
			if args[i] == "--env-allow" {
				args[i+1] += ",STATS_SOCKET"
			}
		}
	}
	if b.proxy, err = b.rig.StartProxy(sidecar, env, args...); err != nil {
		return nil, err
	}
	st := &startup{firstConfig: b.proxy.FirstConfig}
	served := func(i int) bool { return b.proxy.Get(b.host(i), "/") == svcName(i) }
	if err := untilServed(spread(b.n, b.sample), served); err != nil {
		return nil, err
	}
	st.sample = time.Since(b.proxy.Started)
	st.all = st.sample
	t0 := time.Now()
	late := b.notServed(served)
	st.checkAll, st.late = time.Since(t0), len(late)
	if len(late) > 0 {
		if err := untilServed(late, served); err != nil {
			return nil, err
		}
		st.all = time.Since(b.proxy.Started)
	}
	// The Gateway's and every route's status (none for Ingresses: no address is published).
	want := 0
	if len(b.kind.front) > 0 {
		want = b.n + len(b.kind.front)
	}
	if want > 0 {
		var last time.Time
		err := benchrig.WaitUntil("the status of every object written", 2*time.Minute+time.Duration(b.n)*40*time.Millisecond, func() bool {
			st.statusObjects, last = b.statusWritten()
			if st.statusObjects < want {
				time.Sleep(500 * time.Millisecond) // the whole log is read each time
			}
			return st.statusObjects >= want
		})
		if err != nil {
			log.Printf("%v: %d of %d written", err, st.statusObjects, want)
		}
		st.status = last.Sub(b.proxy.Started)
	}
	if err := b.quiet(); err != nil {
		return nil, err
	}
	st.renders = delta(b.samples("haproxy_sidecar_renders_total"), nil)
	if st.reloads, err = b.rig.Reloads(); err != nil {
		return nil, err
	}
	st.rss, st.maxRSS = b.proxy.RSS(), b.proxy.MaxRSS()
	return st, nil
}

// untilServed polls the hosts in turn until each is served.
func untilServed(hosts []int, served func(int) bool) error {
	return benchrig.WaitUntil(fmt.Sprintf("%d hosts served", len(hosts)), 5*time.Minute, func() bool {
		for len(hosts) > 0 && served(hosts[0]) {
			hosts = hosts[1:]
		}
		return len(hosts) == 0
	})
}

// spread is k indices of [0, n) spread evenly, the first and the last included.
func spread(n, k int) []int {
	k = max(min(k, n), 1)
	var out []int
	for j := range k {
		out = append(out, j*(n-1)/max(k-1, 1))
	}
	return out
}

// notServed checks every host once, 4 at a time, and returns those not served.
func (b *bench) notServed(served func(int) bool) []int {
	var mu sync.Mutex
	var out []int
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if !served(i) {
					mu.Lock()
					out = append(out, i)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range b.n {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// haproxyVersion is the version of the HAProxy first in PATH (the one the bench runs).
func haproxyVersion() string {
	out, err := exec.Command("haproxy", "-v").Output()
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(out)); len(f) > 2 {
		return f[2]
	}
	return "?"
}

func (b *bench) logPath() string { return filepath.Join(b.rig.Dir, "sidecar.log") }
