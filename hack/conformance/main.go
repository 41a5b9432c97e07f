// Command conformance runs the Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance,
// the test binary hack/conformance-bins.sh builds) against the sidecar serving
// examples/templates/httproute.yaml, on one machine without a container runtime: etcd and
// kube-apiserver (benchrig.Kube), kube-controller-manager and kube-scheduler, kwok for a node
// and the status of its pods, one echo-basic process per pod listening on the pod's IP, the
// Gateway API CRDs of the suite's release, HAProxy and the sidecar binary with --source=kube
// writing the Gateways' and routes' status; each in a process group of its own, all stopped at
// the end, also on failure and Ctrl-C. It writes the suite's report.yaml, its log and a summary
// (summary.txt) to --out, and the logs of every piece to --out/logs.
//
// The pod IPs and the Gateway's address must be local addresses: hack/conformance.sh runs it in
// a network namespace of its own where 10.244.0.0/16 is (unshare -n, ip route add local).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/benchrig"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/exampleflags"
)

// defaultFeatures are the GATEWAY-HTTP profile's core features and the extended ones the
// example serves. Not claimed: what the example does not do (mirroring, retries, CORS, static
// or empty addresses, backendRef filters, client certificates, infrastructure labels).
const defaultFeatures = "Gateway,HTTPRoute,ReferenceGrant," +
	"HTTPRouteQueryParamMatching,HTTPRouteMethodMatching,HTTPRouteResponseHeaderModification," +
	"HTTPRoutePortRedirect,HTTPRouteSchemeRedirect,HTTPRoutePathRedirect,HTTPRouteHostRewrite,HTTPRoutePathRewrite," +
	"HTTPRouteParentRefPort,HTTPRouteDestinationPortMatching,HTTPRouteNamedRouteRule,GatewayPort8080,GatewayHTTPListenerIsolation," +
	"HTTPRouteRequestTimeout,HTTPRouteBackendTimeout," +
	"HTTPRoute303RedirectStatusCode,HTTPRoute307RedirectStatusCode,HTTPRoute308RedirectStatusCode," +
	"HTTPRouteBackendProtocolH2C,HTTPRouteBackendProtocolWebSocket,GatewayHTTPSListenerDetectMisdirectedRequests"

// options are the harness's flags.
type options struct {
	bins, sidecar, example, out string
	class, controller, features string
	profiles, version, runTest  string
	address, nodeIP, podCIDR    string
	addressPool                 string
	timeout, classWait          time.Duration
	keep                        bool
}

func main() {
	var o options
	flag.StringVar(&o.bins, "bins", "", "the directory hack/conformance-bins.sh prints (with KUBEBUILDER_ASSETS for the API server)")
	flag.StringVar(&o.sidecar, "sidecar", "bin/haproxy-sidecar", "the sidecar binary")
	flag.StringVar(&o.example, "example", "examples/templates/httproute.yaml", "the template's ConfigMap; its header comment gives the --watch and --env-allow flags")
	flag.StringVar(&o.out, "out", "bin/conformance", "where report.yaml, summary.txt, conformance.log and logs/ are written")
	flag.StringVar(&o.class, "gateway-class", "haproxy-sidecar", "the GatewayClass the suite uses (the example's default GATEWAY_CLASS)")
	flag.StringVar(&o.controller, "controller-name", "haproxy-sidecar.io/controller", "the GatewayClass's controllerName (the sidecar's --status-controller-name)")
	flag.StringVar(&o.features, "supported-features", defaultFeatures, "the features claimed: the profile's core ones and the extended ones the example serves")
	flag.StringVar(&o.profiles, "conformance-profiles", "GATEWAY-HTTP", "the suite's profiles")
	flag.StringVar(&o.version, "version", "dev", "the sidecar's version, for the report")
	flag.StringVar(&o.runTest, "run-test", "", "run this one test of the suite (a short check) instead of all; the harness fails unless it passes")
	flag.StringVar(&o.address, "address", "10.244.0.1", "the Gateway's address: HAProxy listens on it (ports 80 and 443) and the sidecar publishes it")
	flag.StringVar(&o.addressPool, "address-pool", "10.244.2.0/26", "the addresses of the Gateways after the first (--address), one each, oldest first: the example's GATEWAY_ADDRESSES, so that each Gateway has frontends of its own")
	flag.StringVar(&o.nodeIP, "node-ip", "10.244.0.2", "the node's address")
	flag.StringVar(&o.podCIDR, "pod-cidr", "10.244.1.0/24", "the node's pod CIDR, where kwok takes the pods' IPs")
	flag.DurationVar(&o.timeout, "timeout", 80*time.Minute, "how long the suite may run (a full run takes about 2 min on 2 cores when the tests pass; a failing test waits up to its own timeouts)")
	flag.DurationVar(&o.classWait, "class-wait", time.Minute, "how long to wait for the sidecar to accept the GatewayClass (the suite needs it)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (every log, haproxy.cfg)")
	flag.Parse()
	log.SetFlags(log.Ltime)
	log.SetPrefix("conformance: ")
	if o.bins == "" {
		log.Fatal("--bins: the directory hack/conformance-bins.sh prints (run hack/conformance.sh)")
	}
	if err := checkLocal(o.address, o.nodeIP, o.podCIDR, o.addressPool); err != nil {
		log.Fatal(err)
	}
	rig, err := benchrig.New("conformance", o.keep)
	if err != nil {
		log.Fatal(err)
	}
	// A network namespace without a default route: the API server cannot guess its address.
	rig.APIServerArgs = map[string][]string{"advertise-address": {o.nodeIP}}
	rig.StopOnSignal()
	h := &harness{o: o, rig: rig}
	err = h.run()
	if h.pods != nil {
		h.pods.stopPods()
	}
	if cerr := h.collectLogs(); cerr != nil {
		log.Print(cerr)
	}
	if err != nil {
		rig.Keep = true
	}
	rig.Stop()
	if err != nil {
		log.Fatal(err)
	}
}

// checkLocal fails unless the addresses can be listened on here: the harness runs in a network
// namespace where the pod CIDR is local.
func checkLocal(addrs ...string) error {
	for _, a := range addrs {
		if ip, _, err := net.ParseCIDR(a); err == nil {
			a = ip.String()
		}
		l, err := net.Listen("tcp", net.JoinHostPort(a, "0"))
		if err != nil {
			return fmt.Errorf("%s is not a local address here (%v): run the harness through hack/conformance.sh, which makes 10.244.0.0/16 local in a network namespace of its own", a, err)
		}
		l.Close()
	}
	return nil
}

type harness struct {
	o       options
	rig     *benchrig.Rig
	kube    *benchrig.Kube
	cluster *cluster
	pods    *pods
}

func (h *harness) run() error {
	t0 := time.Now()
	if err := os.MkdirAll(h.o.out, 0o755); err != nil {
		return err
	}
	var err error
	if h.kube, err = h.rig.StartKube(filepath.Join(h.o.bins, "crds")); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", h.kube.Kubeconfig)
	if err != nil {
		return fmt.Errorf("read the kubeconfig: %w", err)
	}
	c := &cluster{rig: h.rig, kube: h.kube, bins: h.o.bins}
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	h.cluster = c
	if err := c.startControlPlane(); err != nil {
		return err
	}
	const node = "kwok-node-0"
	if err := c.startNode(node, h.o.nodeIP, h.o.podCIDR); err != nil {
		return err
	}
	if h.pods, err = startPods(h.rig, c.client, node, filepath.Join(h.o.bins, "echo-basic")); err != nil {
		return err
	}
	if err := h.startSidecar(); err != nil {
		return err
	}
	if err := c.waitClassAccepted(h.o.class, h.o.classWait); err != nil {
		return err
	}
	log.Printf("cluster, HAProxy and the sidecar up in %.0f s; running the suite (logs: %s)", time.Since(t0).Seconds(), h.rig.Dir)
	return h.runSuite()
}

// startSidecar puts the example's ConfigMap and the GatewayClass, and starts the sidecar and
// HAProxy on the Gateway's address, with the flags the example's header lists.
func (h *harness) startSidecar() error {
	example, err := os.ReadFile(h.o.example)
	if err != nil {
		return fmt.Errorf("read the example: %w", err)
	}
	args, err := exampleflags.Args(example)
	if err != nil {
		return fmt.Errorf("%s: %w", h.o.example, err)
	}
	if err := h.kube.Put("config", example, 1); err != nil {
		return err
	}
	services := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services, namespace: lb}\n")
	if err := h.kube.Put("services", services, 1); err != nil {
		return err
	}
	if err := h.kube.Put("gatewayclass", []byte(gatewayClass(h.o.class, h.o.controller)), 1); err != nil {
		return err
	}
	args = append(args, "--source=kube", "--kubeconfig", h.kube.Kubeconfig, "--namespace", "lb",
		"--tls-secret-namespaces", "*", "--publish-address", h.o.address, "--status-controller-name", h.o.controller)
	env := []string{"HTTP_BIND=" + net.JoinHostPort(h.o.address, "80"), "HTTPS_BIND=" + net.JoinHostPort(h.o.address, "443"),
		"GATEWAY_CLASS=" + h.o.class, "GATEWAY_CONTROLLER=" + h.o.controller, "GATEWAY_ADDRESSES=" + gatewayAddresses(h.o.address, h.o.addressPool)}
	_, err = h.rig.StartProxy(h.o.sidecar, env, args...)
	return err
}

// gatewayAddresses is first, then every host address of the CIDR pool, comma-separated.
func gatewayAddresses(first, pool string) string {
	addrs := []string{first}
	if p, err := netip.ParsePrefix(pool); err == nil {
		for a := p.Masked().Addr().Next(); p.Contains(a.Next()); a = a.Next() {
			addrs = append(addrs, a.String())
		}
	}
	return strings.Join(addrs, ",")
}

// runSuite runs the suite's test binary until it ends (or --timeout), printing each test's
// result as it comes, then writes the summary.
func (h *harness) runSuite() error {
	reportPath := filepath.Join(h.o.out, "report.yaml")
	os.Remove(reportPath) // a report left by an earlier run is not this one's
	args := []string{"-test.run", "^TestConformance$", "-test.v", "-test.timeout", h.o.timeout.String(),
		"-gateway-class", h.o.class, "-supported-features", h.o.features, "-conformance-profiles", h.o.profiles,
		"-report-output", reportPath, "-cleanup-base-resources=false",
		"-organization", "haproxy-sidecar", "-project", "haproxy-sidecar",
		"-url", "https://github.com/haproxy-sidecar/haproxy-sidecar", "-version", h.o.version,
		"-contact", "https://github.com/haproxy-sidecar/haproxy-sidecar/issues"}
	if h.o.runTest != "" {
		args = append(args, "-run-test", h.o.runTest)
	}
	t0 := time.Now()
	cmd, err := h.rig.Spawn("conformance.log", filepath.Join(h.o.bins, "conformance.test"), []string{"KUBECONFIG=" + h.kube.Kubeconfig}, args...)
	if err != nil {
		return err
	}
	logPath := filepath.Join(h.rig.Dir, "conformance.log")
	var printed int64
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	timeout := time.After(h.o.timeout + time.Minute) // the binary's own -test.timeout first
	for running := true; running; {
		select {
		case <-h.rig.Done(cmd):
			running = false
		case <-timeout:
			log.Printf("the suite still runs after %v: stopping it", h.o.timeout+time.Minute)
			h.rig.StopProcess(cmd)
			running = false
		case <-tick.C:
		}
		printed = printResults(logPath, printed)
	}
	log.Printf("the suite ran %.1f min (%v)", time.Since(t0).Minutes(), cmd.ProcessState)
	return h.summarize(reportPath, logPath)
}

// printResults prints the test results the suite's log has past offset, in whole lines; it
// returns the offset read up to.
func printResults(path string, offset int64) int64 {
	f, err := os.Open(path)
	if err != nil {
		return offset
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset
	}
	data, _ := io.ReadAll(f)
	end := bytes.LastIndexByte(data, '\n') + 1
	for _, m := range testLine.FindAllSubmatch(data[:end], -1) {
		if string(m[1]) != "SKIP" { // the tests of features not claimed: most of the suite
			fmt.Printf("%s %s (%s)\n", m[1], m[2], m[3])
		}
	}
	return offset + int64(end)
}

// summarize writes summary.txt (and prints it) from the suite's report and log, and the log
// beside the report.
func (h *harness) summarize(reportPath, logPath string) error {
	logData, err := os.ReadFile(logPath)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.o.out, "conformance.log"), logData, 0o644); err != nil {
		return err
	}
	data, err := os.ReadFile(reportPath)
	if err != nil {
		return fmt.Errorf("the suite wrote no report (its log: %s): %w", filepath.Join(h.o.out, "conformance.log"), err)
	}
	r, err := parseReport(data)
	if err != nil {
		return err
	}
	res := results(logData)
	text := r.summary() + "\n"
	if len(res["PASS"]) > 0 {
		text += "passed: " + strings.Join(res["PASS"], ", ") + "\n"
	}
	if err := os.WriteFile(filepath.Join(h.o.out, "summary.txt"), []byte(text), 0o644); err != nil {
		return err
	}
	fmt.Print(text)
	// The closing line CI reads, as a test runner's.
	fmt.Printf("conformance: %d passed, %d failed\n", len(res["PASS"]), len(res["FAIL"]))
	if h.o.runTest != "" && !slices.Contains(res["PASS"], h.o.runTest) {
		return fmt.Errorf("%s did not pass (the suite's log: %s)", h.o.runTest, filepath.Join(h.o.out, "conformance.log"))
	}
	// make test runs the whole suite: a test of a claimed feature that fails fails it.
	if len(res["FAIL"]) > 0 {
		return fmt.Errorf("%d test(s) failed: %s (the suite's log: %s)", len(res["FAIL"]), strings.Join(res["FAIL"], ", "), filepath.Join(h.o.out, "conformance.log"))
	}
	return nil
}

// collectLogs copies every piece's log and HAProxy's configuration to --out/logs.
func (h *harness) collectLogs() error {
	dir := filepath.Join(h.o.out, "logs")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(h.rig.Dir, "*.log"))
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "conformance.log" }) // in --out already
	files = append(files, filepath.Join(h.rig.Run, "haproxy.cfg"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("collect the logs: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			return fmt.Errorf("collect the logs: %w", err)
		}
	}
	return nil
}
