package e2e

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// startNodes listens on one port free on every node address (standing for the nodes'
// InternalIPs) with a nodeBackend each: the Service's fixed node port.
func startNodes(t *testing.T, ips map[string]string) (int, map[string]*nodeBackend) {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		port := haproxytest.FreePort(t)
		ls := map[string]net.Listener{}
		for name, ip := range ips {
			l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, port))
			if err != nil {
				break
			}
			ls[name] = l
		}
		if len(ls) == len(ips) {
			backends := map[string]*nodeBackend{}
			for name, l := range ls {
				backends[name] = &nodeBackend{name: name}
				go backends[name].serve(l)
				t.Cleanup(func() { l.Close() })
			}
			return port, backends
		}
		for _, l := range ls {
			l.Close()
		}
	}
	t.Fatal("no port free on every node address")
	return 0, nil
}

// lbHost is the load balancer someone else configures, as its Data Plane API stores it: a
// frontend to the backend whose servers the sidecar manages, and a frontend and a backend it
// does not manage.
const lbHost = `# lb1: configured by the network team; the sidecar manages the servers of nodes_https

global
  # the runtime API, for the Data Plane API
  stats socket %s mode 600 level admin
  hard-stop-after 5s

defaults unnamed_defaults_1
  # TCP to the nodes
  mode tcp
  timeout connect 1s
  timeout client 5s
  timeout server 5s

frontend https
  bind %s
  default_backend nodes_https

frontend admin
  bind %s
  default_backend static

backend nodes_https
  balance roundrobin

backend static
  server static1 %s
`

// TestNodePortServersMode runs examples/templates/nodeport.yaml with --dataplane-mode=servers
// against a host someone else configures (the Data Plane API stand-in and its real HAProxy):
// the servers of nodes_https follow the nodes (InternalIPs, the fixed node port, PROXY v2,
// checks) while every other section of the host stays byte for byte; a template line the API's
// model cannot hold is held, naming the template and the keyword, while node changes still go
// live; fixed, it goes live.
func TestNodePortServersMode(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy and kube-apiserver")
	}
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	const example = "../examples/templates/nodeport.yaml"
	ips := map[string]string{"node-1": "127.0.0.31", "node-2": "127.0.0.32", "node-3": "127.0.0.33"}
	nodePort, nodes := startNodes(t, ips)

	front, admin := fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
	sock := filepath.Join(haproxytest.ShortTempDir(t), "admin.sock")
	host := standIn(t, dataplanetest.Options{Config: fmt.Sprintf(lbHost, sock, front, admin, haproxytest.Backend(t, "static"))})
	before := hostSections(host.StoredConfig(t))

	k.Namespace(t, "lb")
	k.Namespace(t, "ingress-nginx")
	setNode(t, k.Client, "node-1", ips["node-1"], true)
	setNode(t, k.Client, "node-2", ips["node-2"], true)
	k.ApplyEndpointSlice(t, controllerSlice("node-1", "node-2"))
	k.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}, Data: map[string]string{
		// bind is the sidecar's own rendering (checked with haproxy -c); the host's frontend is its own.
		"https": fmt.Sprintf(`{"namespace": "ingress-nginx", "service": "ingress-nginx-controller", "nodePort": %d, "bind": "127.0.0.1:%d"}`, nodePort, haproxytest.FreePort(t)),
	}})
	template := exampleConfigMap(t, example)
	k.ApplyConfigMap(t, template)

	args := append([]string{"--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb", "--wait", "20ms:500ms",
		"--reload=dataplane", "--dataplane-url", host.URL, "--dataplane-mode=servers", "--state-dir", t.TempDir()},
		exampleWatchFlags(t, example)...)
	e.startSidecar(t, args...)
	e.waitReady(t)

	// servedBy waits until exactly these nodes answer the host's frontend.
	servedBy := func(t *testing.T, want ...string) {
		t.Helper()
		var last map[string]int
		err := haproxytest.Poll(20*time.Second, func() bool {
			last = map[string]int{}
			for range 4 * len(want) {
				c, err := net.DialTimeout("tcp", front, 2*time.Second)
				if err != nil {
					last["error: "+err.Error()]++
					continue
				}
				_ = c.SetDeadline(time.Now().Add(3 * time.Second))
				b, _ := io.ReadAll(c)
				c.Close()
				last[strings.TrimSpace(string(b))]++
			}
			if len(last) != len(want) {
				return false
			}
			for _, n := range want {
				if last[n] == 0 {
					return false
				}
			}
			return true
		})
		if err != nil {
			t.Fatalf("the host's frontend: answers %v, want %v; stored configuration:\n%s", last, want, host.StoredConfig(t))
		}
	}
	// untouched checks every section of the host but nodes_https against the one it started with.
	untouched := func(t *testing.T) {
		t.Helper()
		after := hostSections(host.StoredConfig(t))
		for head, text := range before {
			if head != "backend nodes_https" && after[head] != text {
				t.Errorf("the host's %q changed:\n%s\nwas:\n%s", head, after[head], text)
			}
		}
		if len(after) != len(before) {
			t.Errorf("the host has %d sections, had %d", len(after), len(before))
		}
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			got, _ := haproxytest.Get(admin)
			return got == "static"
		}, "the host's other frontend still answers")
	}
	managed := func() string { return hostSections(host.StoredConfig(t))["backend nodes_https"] }

	servedBy(t, "node-1", "node-2")
	for _, want := range []string{
		fmt.Sprintf("server node-1 127.0.0.31:%d check send-proxy-v2", nodePort),
		fmt.Sprintf("server node-2 127.0.0.32:%d check send-proxy-v2", nodePort),
	} {
		if !strings.Contains(managed(), want) {
			t.Errorf("nodes_https has no %q:\n%s", want, managed())
		}
	}
	if srcs := nodes["node-1"].sources(); len(srcs) == 0 || srcs[0] != "127.0.0.1" {
		t.Errorf("node-1 got PROXY v2 headers with sources %v, want the client's 127.0.0.1", srcs)
	}
	untouched(t)

	t.Run("a node becoming NotReady leaves, a new one joins", func(t *testing.T) {
		setNode(t, k.Client, "node-2", ips["node-2"], false)
		servedBy(t, "node-1")
		setNode(t, k.Client, "node-3", ips["node-3"], true)
		k.ApplyEndpointSlice(t, controllerSlice("node-1", "node-2", "node-3"))
		servedBy(t, "node-1", "node-3")
		untouched(t)
	})

	t.Run("a template line the API's model cannot hold is held; nodes still follow; fixed, it goes live", func(t *testing.T) {
		bad := template.DeepCopy()
		bad.Data["template"] = strings.Replace(bad.Data["template"], "send-proxy-v2 check", "send-proxy-v2 check source 0.0.0.0", 1)
		k.ApplyConfigMap(t, bad)
		var reason string
		haproxytest.WaitFor(t, 20*time.Second, func() bool {
			_, r := e.readyz(t)
			for _, h := range r.Held {
				if strings.Contains(h.Object, "config") && strings.Contains(h.Reason, `"source" has no field`) {
					reason = h.Reason
					return true
				}
			}
			return false
		}, "the template held, naming the keyword")
		if !strings.Contains(reason, "--dataplane-mode=servers") || !strings.Contains(reason, "server node-") {
			t.Errorf("held for %q: want the mode and the server named", reason)
		}
		setNode(t, k.Client, "node-2", ips["node-2"], true)
		servedBy(t, "node-1", "node-2", "node-3")
		k.ApplyConfigMap(t, template)
		haproxytest.WaitFor(t, 20*time.Second, func() bool {
			_, r := e.readyz(t)
			return r.Ready && len(r.Held) == 0
		}, "nothing held once the template is fixed")
		servedBy(t, "node-1", "node-2", "node-3")
		untouched(t)
	})
}

// hostSections is the text of each section of a configuration the Data Plane API stores, by
// header line (the API's own version comments left out).
func hostSections(config string) map[string]string {
	out := map[string]string{}
	for _, block := range strings.Split(config, "\n\n") {
		first, _, _ := strings.Cut(block, "\n")
		if !strings.HasPrefix(first, "# _version") {
			out[first] = block
		}
	}
	return out
}
