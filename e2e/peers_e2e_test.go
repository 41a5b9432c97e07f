package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// peersExample is the template of stick tables shared by the replicas.
const peersExample = "../examples/templates/peers.yaml"

// replica is one HAProxy replica of the peers test with its own sidecar (a process, for its
// own pod name and HTTP_BIND): its pod name and IP (127.0.0.N: loopback addresses are all
// local on Linux, so each replica binds its own peer line's address, as a pod binds its IP).
type replica struct {
	name, ip string
	dir      string // the manifests its sidecar reads
	cfgPath  string
	sock     string
	health   string
	sidecar  *sidecarProcess
	haproxy  *haproxytest.Process
}

// peersCluster is the replicas' common ports: HTTP and the peers protocol, free on every IP.
type peersCluster struct {
	bin            string
	httpPort, peer int
}

var peerIPs = []string{"127.0.0.61", "127.0.0.62", "127.0.0.63"}

// freeOnAll is two ports free on every replica IP.
func freeOnAll(t *testing.T) (int, int) {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		ports := haproxytest.FreePorts(t, 2)
		ok := true
		for _, ip := range peerIPs {
			for _, p := range ports {
				l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, p))
				if err != nil {
					ok = false
					continue
				}
				l.Close()
			}
		}
		if ok {
			return ports[0], ports[1]
		}
	}
	t.Fatal("no two ports free on every replica IP")
	return 0, 0
}

// podManifest is the Pod of replica i, running and ready, labelled as the replicas are.
func podManifest(name, ip string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: lb, labels: {app: haproxy, pod-template-hash: abc}}
status: {phase: Running, podIP: %s, conditions: [{type: Ready, status: "True"}]}
`, name, ip)
}

// newReplica makes replica i's directory: the example and the Pods of the replicas given.
func (c *peersCluster) newReplica(t *testing.T, i int, pods []*replica) *replica {
	t.Helper()
	r := &replica{name: fmt.Sprintf("lb-%d", i+1), ip: peerIPs[i], dir: t.TempDir()}
	example, err := os.ReadFile(peersExample)
	if err != nil {
		t.Fatal(err)
	}
	// The test's file descriptor limit is below what maxconn 20000 asks for.
	haproxytest.WriteFile(t, r.dir, "config.yaml", strings.Replace(string(example), "maxconn 20000", "maxconn 1000", 1))
	haproxytest.WriteFile(t, r.dir, "services.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services, namespace: lb}\ndata: {}\n")
	for _, p := range append(pods, r) {
		haproxytest.WriteFile(t, r.dir, p.name+".yaml", podManifest(p.name, p.ip))
	}
	run := haproxytest.ShortTempDir(t)
	r.cfgPath = filepath.Join(run, "haproxy.cfg")
	r.sock = filepath.Join(run, "master.sock")
	ports := haproxytest.FreePorts(t, 2)
	r.health = fmt.Sprintf("127.0.0.1:%d", ports[0])
	r.sidecar = startSidecarProcess(t, c.bin,
		[]string{"HAPROXY_SIDECAR_POD_NAME=" + r.name, "POD_NAMESPACE=lb", fmt.Sprintf("HTTP_BIND=%s:%d", r.ip, c.httpPort)},
		"--source=file", "--dir", r.dir, "--peers-selector", "app=haproxy", "--peers-port", fmt.Sprint(c.peer),
		"--haproxy-config", r.cfgPath, "--master-socket", r.sock, "--reload-timeout", "20s",
		"--env-allow", "HTTP_BIND", "--wait", "50ms:500ms",
		"--health-addr", r.health, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", ports[1]))
	haproxytest.WaitFor(t, 20*time.Second, func() bool {
		_, err := os.Stat(r.cfgPath)
		return err == nil
	}, r.name+"'s sidecar writes the first configuration")
	r.haproxy = haproxytest.Start(t, r.cfgPath, "-S", r.sock+",level,admin")
	return r
}

// live waits until the configuration r's HAProxy runs (its sidecar ready with the files on
// disk live) holds every line of want and none of absent.
func (r *replica) live(t *testing.T, want, absent []string) {
	t.Helper()
	var last string
	err := haproxytest.Poll(20*time.Second, func() bool {
		resp, err := http.Get("http://" + r.health + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		b, err := os.ReadFile(r.cfgPath)
		if err != nil || resp.StatusCode != 200 {
			return false
		}
		last = string(b)
		return containsAllNone(last, want, absent)
	})
	if err != nil {
		t.Fatalf("%s never ran a configuration with %q and without %q; last:\n%s", r.name, want, absent, last)
	}
}

// visit sends one request with the session cookie through r.
func (r *replica) visit(t *testing.T, port int, session string) {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s:%d/", r.ip, port), nil)
	req.AddCookie(&http.Cookie{Name: "SESSIONID", Value: session})
	resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("request through %s: %v", r.name, err)
	}
	resp.Body.Close()
}

// table is r's current worker's `show table sessions`.
func (r *replica) table() string {
	out, _ := r.haproxy.Command("@1 show table sessions")
	return out
}

// hasSessions waits until r's table holds every session.
func (r *replica) hasSessions(t *testing.T, sessions ...string) {
	t.Helper()
	r.hasSessionsWithin(t, 10*time.Second, sessions...)
}

// hasSessionsWithin is hasSessions with its deadline.
func (r *replica) hasSessionsWithin(t *testing.T, deadline time.Duration, sessions ...string) {
	t.Helper()
	var last string
	err := haproxytest.Poll(deadline, func() bool {
		last = r.table()
		for _, s := range sessions {
			if !strings.Contains(last, " key="+s+" ") {
				return false
			}
		}
		return true
	})
	if err != nil {
		peers, _ := r.haproxy.Command("@1 show peers")
		t.Fatalf("%s's table never held %v; last:\n%s\nshow peers:\n%s", r.name, sessions, last, peers)
	}
}

// resynced waits until r's current worker is done with its initial resync: a process learns
// the tables first from the process it replaces (through the local peer), else from the remote
// peers, for up to 5 s, and teaches the next one only once that phase is over (show peers says
// resync_timeout=<PAST>). A reload before that, and the tables are relearnt from the remote
// peers only.
func (r *replica) resynced(t *testing.T) {
	t.Helper()
	var last string
	err := haproxytest.Poll(20*time.Second, func() bool {
		last, _ = r.haproxy.Command("@1 show peers")
		return strings.Contains(last, "resync_timeout=<PAST>")
	})
	if err != nil {
		t.Fatalf("%s's peers never done with their initial resync; last:\n%s", r.name, last)
	}
}

// reloads is how many times r's HAProxy was reloaded since it started. The master socket
// refuses connections while the master re-executes itself for a reload: asked again then.
func (r *replica) reloads(t *testing.T) int {
	t.Helper()
	n := -1
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		n = r.tryReloads()
		return n >= 0
	}, r.name+"'s master answers show proc")
	return n
}

// tryReloads is reloads, -1 when the master does not answer.
func (r *replica) tryReloads() int {
	p, err := (&reload.MasterSocket{Path: r.haproxy.MasterSocket, Timeout: 5 * time.Second}).ShowProc(context.Background())
	if err != nil {
		return -1
	}
	return p.Reloads
}

// peerLines are the peers section lines the example renders for these replicas.
func peerLines(port int, rs ...*replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("  peer %s %s:%d\n", r.name, r.ip, port))
	}
	return out
}

// TestPeersSharedStickTables: the HAProxy replicas of examples/templates/peers.yaml, each with
// its sidecar, share their stick tables: an entry made through one is seen on the others, a
// replica started receives the tables, a replica added or removed reloads the others (a peers
// section cannot change at runtime) and the entries survive those reloads.
func TestPeersSharedStickTables(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with real HAProxy replicas")
	}
	if !haproxytest.InstalledVersion(t).AtLeast(2, 2) {
		t.Skip("localpeer needs HAProxy 2.2")
	}
	c := &peersCluster{bin: sidecarBinary(t)}
	c.httpPort, c.peer = freeOnAll(t)

	// Two replicas, each knowing both pods.
	r1 := c.newReplica(t, 0, []*replica{{name: "lb-2", ip: peerIPs[1]}})
	r2 := c.newReplica(t, 1, []*replica{r1})
	two := peerLines(c.peer, r1, r2)
	r1.live(t, append([]string{"localpeer lb-1\n"}, two...), nil)
	r2.live(t, append([]string{"localpeer lb-2\n"}, two...), nil)
	r1.visit(t, c.httpPort, "s1")
	r1.hasSessions(t, "s1")
	r2.hasSessions(t, "s1") // pushed by replica 1's peer
	r2.visit(t, c.httpPort, "s2")
	r1.hasSessions(t, "s2")

	// A third replica, in the order Kubernetes makes it: its Pod (with its IP) is seen by the
	// others before its containers start. Its Pod added to their directories, they reload and
	// keep their entries; started, it receives the tables from them.
	r1.resynced(t)
	r2.resynced(t)
	before1, before2 := r1.reloads(t), r2.reloads(t)
	third := &replica{name: "lb-3", ip: peerIPs[2]}
	for _, r := range []*replica{r1, r2} {
		haproxytest.WriteFile(t, r.dir, third.name+".yaml", podManifest(third.name, third.ip))
	}
	three := peerLines(c.peer, r1, r2, third)
	for _, r := range []*replica{r1, r2} {
		r.live(t, three, nil)
	}
	waitReloaded(t, r1, before1)
	waitReloaded(t, r2, before2)
	r1.hasSessions(t, "s1", "s2") // kept across the reload: the old process taught the new one
	r2.hasSessions(t, "s1", "s2")
	r1.resynced(t)
	r2.resynced(t)
	r3 := c.newReplica(t, 2, []*replica{r1, r2})
	r3.live(t, append([]string{"localpeer lb-3\n"}, three...), nil)
	// Pushed to the new replica by a remote peer once its wait for a local one (5 s) is over.
	r3.hasSessionsWithin(t, 30*time.Second, "s1", "s2")
	r3.visit(t, c.httpPort, "s3")
	r1.hasSessions(t, "s3")
	r2.hasSessions(t, "s3")

	// Replica 3 removed: its HAProxy and sidecar stopped, its Pod deleted everywhere; the
	// others reload without it, keep every entry and still share new ones.
	r1.resynced(t)
	r2.resynced(t)
	before1, before2 = r1.reloads(t), r2.reloads(t)
	r3.haproxy.Kill()
	r3.sidecar.signal(t, syscall.SIGTERM)
	for _, r := range []*replica{r1, r2} {
		if err := os.Remove(filepath.Join(r.dir, r3.name+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []*replica{r1, r2} {
		r.live(t, two, []string{"lb-3"})
	}
	waitReloaded(t, r1, before1)
	waitReloaded(t, r2, before2)
	r1.hasSessions(t, "s1", "s2", "s3")
	r2.hasSessions(t, "s1", "s2", "s3")
	r2.visit(t, c.httpPort, "s4")
	r1.hasSessions(t, "s4")
}

// waitReloaded waits until r's HAProxy was reloaded since it counted before (the reload the
// peers change asks for).
func waitReloaded(t *testing.T, r *replica, before int) {
	t.Helper()
	haproxytest.WaitFor(t, 20*time.Second, func() bool { return r.tryReloads() > before }, r.name+" reloaded")
}

// TestPeersFromTheKubernetesAPI: with --source=kube and --peers alone, the replicas are the pods
// with the labels of the sidecar's own pod (--pod-name) but pod-template-hash, ready or not
// yet: the peers section of examples/templates/peers.yaml follows them as they are created,
// start, and are deleted, each change a reload of a running HAProxy.
func TestPeersFromTheKubernetesAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy and kube-apiserver")
	}
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	k.Namespace(t, "lb")
	raw, err := os.ReadFile(peersExample)
	if err != nil {
		t.Fatal(err)
	}
	example, _, _ := unstructured.NestedStringMap(decodeDocs(t, raw)[0].Object, "data")
	example["template"] = strings.Replace(example["template"], "maxconn 20000", "maxconn 1000", 1)
	k.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "config", Namespace: "lb"}, Data: example})
	pod := func(name, hash string, lbls ...string) *corev1.Pod {
		l := map[string]string{"app": "haproxy", "pod-template-hash": hash}
		if len(lbls) > 0 {
			l = map[string]string{"app": lbls[0]}
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lb", Labels: l},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "haproxy", Image: "haproxy"}}}}
	}
	k.ApplyPod(t, pod("lb-a", "new"))
	k.SetPodReady(t, "lb", "lb-a", "127.0.0.71", true)
	k.ApplyPod(t, pod("lb-b", "old")) // another revision of the Deployment: a peer too
	k.SetPodReady(t, "lb", "lb-b", "127.0.0.72", true)
	k.ApplyPod(t, pod("web-1", "", "web"))
	k.SetPodReady(t, "lb", "web-1", "127.0.0.73", true)
	port := haproxytest.FreePort(t)
	e.startSidecar(t, "--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb",
		"--peers", "--pod-name", "lb-a", "--peers-port", fmt.Sprint(port))
	e.startHAProxy(t)
	e.waitReady(t)
	cfg := func(want, absent []string) {
		t.Helper()
		var last string
		haproxytest.WaitFor(t, 20*time.Second, func() bool {
			b, _ := os.ReadFile(e.cfgPath)
			last = string(b)
			return containsAllNone(last, want, absent)
		}, fmt.Sprintf("a configuration with %q and without %q", want, absent))
		e.settled(t)
	}
	peer := func(name, ip string) string { return fmt.Sprintf("  peer %s %s:%d\n", name, ip, port) }
	cfg([]string{"localpeer lb-a\n", "peers mypeers\n" + peer("lb-a", "127.0.0.71") + peer("lb-b", "127.0.0.72")}, []string{"web-1"})

	reloads := e.haproxyReloads(t)
	k.ApplyPod(t, pod("lb-c", "new"))
	k.SetPodReady(t, "lb", "lb-c", "127.0.0.74", false) // running, not ready yet: a peer already
	cfg([]string{peer("lb-b", "127.0.0.72") + peer("lb-c", "127.0.0.74")}, nil)
	if got := e.haproxyReloads(t); got <= reloads {
		t.Errorf("HAProxy reloaded %d times, want more than %d: a peers section changes by a reload", got, reloads)
	}
	k.DeletePod(t, "lb", "lb-b")
	cfg([]string{peer("lb-a", "127.0.0.71") + peer("lb-c", "127.0.0.74")}, []string{"lb-b"})
}

// containsAllNone says whether text holds every string of want and none of absent.
func containsAllNone(text string, want, absent []string) bool {
	for _, w := range want {
		if !strings.Contains(text, w) {
			return false
		}
	}
	for _, a := range absent {
		if strings.Contains(text, a) {
			return false
		}
	}
	return true
}
