package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/exampleflags"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// proxyV2Signature starts a PROXY protocol v2 header.
var proxyV2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")

// nodeBackend stands for a node's node port: it reads the PROXY protocol v2 header HAProxy
// sends, then answers with the node's name. Connections without a header (HAProxy's health
// checks) are closed.
type nodeBackend struct {
	name string
	mu   sync.Mutex
	srcs []string // the client addresses the headers carried
}

func (b *nodeBackend) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			r := bufio.NewReader(c)
			head := make([]byte, 16)
			if _, err := io.ReadFull(r, head); err != nil || !bytes.Equal(head[:12], proxyV2Signature) || head[12] != 0x21 {
				return
			}
			body := make([]byte, binary.BigEndian.Uint16(head[14:16]))
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			if head[13] == 0x11 && len(body) >= 12 { // TCP over IPv4: source address first
				b.mu.Lock()
				b.srcs = append(b.srcs, net.IP(body[:4]).String())
				b.mu.Unlock()
			}
			fmt.Fprintf(c, "%s\n", b.name)
		}()
	}
}

func (b *nodeBackend) sources() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.srcs...)
}

// exampleWatchFlags are the --watch flags an example's header comment lists.
func exampleWatchFlags(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, w := range exampleflags.Watch(b) {
		args = append(args, "--watch", w)
	}
	if len(args) == 0 {
		t.Fatalf("%s lists no --watch flag", path)
	}
	return args
}

// exampleConfigMap reads an example template's ConfigMap.
func exampleConfigMap(t *testing.T, path string) *corev1.ConfigMap {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := sigyaml.UnmarshalStrict(b, cm); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cm
}

func setNode(t *testing.T, c kubernetes.Interface, name, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
		{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
	}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node %s status: %v", name, err)
	}
}

// controllerSlice is the EndpointSlice of the ingress controller's Service with one ready
// endpoint on each node (TEST-NET addresses: they are never dialled).
func controllerSlice(nodes ...string) *discoveryv1.EndpointSlice {
	yes := true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "ingress-nginx-controller-abc", Namespace: "ingress-nginx", Labels: map[string]string{discoveryv1.LabelServiceName: "ingress-nginx-controller"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, n := range nodes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("192.0.2.%d", 10+i)}, NodeName: &n,
			Conditions: discoveryv1.EndpointConditions{Ready: &yes}})
	}
	return s
}

// TestNodePortExample runs examples/templates/nodeport.yaml against a real kube-apiserver and
// HAProxy: TCP traffic reaches the nodes (loopback addresses standing for InternalIPs) that run
// a ready endpoint of the Service, with the PROXY protocol; a node becoming NotReady, a node
// joining and a node leaving go live through the runtime API with no reload.
func TestNodePortExample(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	const example = "../examples/templates/nodeport.yaml"

	// The nodes' node port, free on every node address.
	ips := map[string]string{"node-1": "127.0.0.31", "node-2": "127.0.0.32", "node-3": "127.0.0.33"}
	backends := map[string]*nodeBackend{}
	var nodePort int
	for attempt := 0; nodePort == 0; attempt++ {
		port := haproxytest.FreePort(t)
		var ls []net.Listener
		for name, ip := range ips {
			l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, port))
			if err != nil {
				break
			}
			ls = append(ls, l)
			backends[name] = &nodeBackend{name: name}
		}
		if len(ls) == len(ips) {
			nodePort = port
			for _, l := range ls {
				name := map[string]string{"127.0.0.31": "node-1", "127.0.0.32": "node-2", "127.0.0.33": "node-3"}[strings.Split(l.Addr().String(), ":")[0]]
				go backends[name].serve(l)
				t.Cleanup(func() { l.Close() })
			}
			break
		}
		for _, l := range ls {
			l.Close()
		}
		if attempt > 20 {
			t.Fatal("no port free on every node address")
		}
	}
	bind := fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))

	k.Namespace(t, "lb")
	k.Namespace(t, "ingress-nginx")
	setNode(t, k.Client, "node-1", ips["node-1"], true)
	setNode(t, k.Client, "node-2", ips["node-2"], true)
	k.ApplyEndpointSlice(t, controllerSlice("node-1", "node-2"))
	k.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}, Data: map[string]string{
		"https": fmt.Sprintf(`{"namespace": "ingress-nginx", "service": "ingress-nginx-controller", "nodePort": %d, "bind": %q}`, nodePort, bind),
	}})
	k.ApplyConfigMap(t, exampleConfigMap(t, example))

	args := append([]string{"--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb", "--wait", "20ms:500ms"},
		exampleWatchFlags(t, example)...)
	e.startSidecar(t, args...)
	e.startHAProxy(t)
	e.waitReady(t)

	// answers connects n times and returns who answered.
	answers := func(n int) map[string]int {
		seen := map[string]int{}
		for range n {
			c, err := net.DialTimeout("tcp", bind, 2*time.Second)
			if err != nil {
				seen["error: "+err.Error()]++
				continue
			}
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			b, _ := io.ReadAll(c)
			c.Close()
			seen[strings.TrimSpace(string(b))]++
		}
		return seen
	}
	// servedBy waits until exactly these nodes answer.
	servedBy := func(t *testing.T, nodes ...string) {
		t.Helper()
		var last map[string]int
		err := haproxytest.Poll(15*time.Second, func() bool {
			last = answers(4 * len(nodes))
			if len(last) != len(nodes) {
				return false
			}
			for _, n := range nodes {
				if last[n] == 0 {
					return false
				}
			}
			return true
		})
		if err != nil {
			cfg, _ := os.ReadFile(e.cfgPath)
			t.Fatalf("want answers from %v, got %v; haproxy.cfg:\n%s", nodes, last, cfg)
		}
	}
	reloads := func() int {
		p, err := (&reload.MasterSocket{Path: e.sock, Timeout: 5 * time.Second}).ShowProc(t.Context())
		if err != nil {
			t.Fatalf("show proc: %v", err)
		}
		return p.Reloads
	}

	servedBy(t, "node-1", "node-2")
	cfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("server node-1 127.0.0.31:%d send-proxy-v2 check", nodePort),
		fmt.Sprintf("server node-2 127.0.0.32:%d send-proxy-v2 check", nodePort),
		"bind " + bind,
	} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("haproxy.cfg has no %q:\n%s", want, cfg)
		}
	}
	if srcs := backends["node-1"].sources(); len(srcs) == 0 || srcs[0] != "127.0.0.1" {
		t.Errorf("node-1 got PROXY v2 headers with sources %v, want the client's 127.0.0.1", srcs)
	}
	e.settled(t)
	before := reloads()

	t.Run("a node becoming NotReady gets no traffic, with no reload", func(t *testing.T) {
		setNode(t, k.Client, "node-2", ips["node-2"], false)
		servedBy(t, "node-1")
	})
	t.Run("a new node with an endpoint gets traffic, with no reload", func(t *testing.T) {
		setNode(t, k.Client, "node-3", ips["node-3"], true)
		k.ApplyEndpointSlice(t, controllerSlice("node-1", "node-2", "node-3"))
		servedBy(t, "node-1", "node-3")
	})
	t.Run("a node ready again and a node leaving, with no reload", func(t *testing.T) {
		setNode(t, k.Client, "node-2", ips["node-2"], true)
		servedBy(t, "node-1", "node-2", "node-3")
		if err := k.Client.CoreV1().Nodes().Delete(context.Background(), "node-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		servedBy(t, "node-2", "node-3")
	})
	e.settled(t)
	if after := reloads(); after != before {
		t.Errorf("HAProxy reloaded %d times for node changes; want none (the runtime API)", after-before)
	}
	// The files follow: the configuration on disk is what HAProxy runs.
	cfg, err = os.ReadFile(filepath.Clean(e.cfgPath))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cfg), "server node-1 ") || !strings.Contains(string(cfg), "server node-3 127.0.0.33") {
		t.Errorf("haproxy.cfg does not follow the nodes:\n%s", cfg)
	}
}
