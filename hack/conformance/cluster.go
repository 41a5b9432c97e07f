package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/benchrig"
)

// Bounds of the waits for the cluster's pieces.
const (
	startTimeout = 2 * time.Minute
	callTimeout  = 30 * time.Second
)

// cluster is what a cluster runs besides the API server: kube-controller-manager (Deployments
// to pods, Services to EndpointSlices, namespaces emptied and deleted), kube-scheduler (pods to
// the node) and kwok (a node, and the status of its pods: running, with an IP of the node's pod
// CIDR, ready).
type cluster struct {
	rig    *benchrig.Rig
	kube   *benchrig.Kube
	bins   string // hack/conformance-bins.sh's directory
	client kubernetes.Interface
	dyn    dynamic.Interface
}

// startControlPlane starts kube-controller-manager and kube-scheduler, each serving its health
// on a port free on loopback, and returns once both answer /healthz.
func (c *cluster) startControlPlane() error {
	kc := c.kube.Kubeconfig
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		port, err := benchrig.FreePort()
		if err != nil {
			return err
		}
		args := []string{"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
			"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port)}
		cmd, err := c.rig.Spawn(name+".log", filepath.Join(c.bins, name), nil, args...)
		if err != nil {
			return err
		}
		if err := c.healthy(name, cmd, fmt.Sprintf("https://127.0.0.1:%d/healthz", port)); err != nil {
			return err
		}
	}
	return nil
}

// healthy waits until url answers 200, or fails when the process exits first.
func (c *cluster) healthy(name string, cmd *exec.Cmd, url string) error {
	// Its serving certificate is one it made for itself.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return c.waitWhileRunning(name+" healthy", name+".log", cmd, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// waitWhileRunning polls cond every 200 ms until it holds, for startTimeout at most; it fails
// at once when the process cmd (its output in logName) exits first.
func (c *cluster) waitWhileRunning(what, logName string, cmd *exec.Cmd, cond func() bool) error {
	var exited bool
	err := benchrig.WaitUntil(what, startTimeout, func() bool {
		select {
		case <-c.rig.Done(cmd):
			exited = true
			return true
		default:
		}
		if cond() {
			return true
		}
		time.Sleep(200 * time.Millisecond)
		return false
	})
	if exited {
		return fmt.Errorf("waiting for %s: %s exited: %v (its log: %s)", what, filepath.Base(cmd.Path), cmd.ProcessState, filepath.Join(c.rig.Dir, logName))
	}
	return err
}

// startNode creates the node (its pod CIDR podCIDR, its address nodeIP) and starts kwok for it;
// it returns once the node is Ready.
func (c *cluster) startNode(name, nodeIP, podCIDR string) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	_, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	cancel()
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	port, err := benchrig.FreePort()
	if err != nil {
		return err
	}
	cmd, err := c.rig.Spawn("kwok.log", filepath.Join(c.bins, "kwok"), nil, "--kubeconfig", c.kube.Kubeconfig,
		"--config", filepath.Join(c.bins, "kwok.yaml"), "--manage-single-node", name,
		"--node-ip", nodeIP, "--cidr", podCIDR, "--server-address", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	return c.waitWhileRunning("node "+name+" ready", "kwok.log", cmd, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			return false
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

var gatewayClasses = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}

// gatewayClass is the GatewayClass of the sidecar's controller.
func gatewayClass(name, controller string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: %s}
spec: {controllerName: %s}
`, name, controller)
}

// classAccepted is the status of GatewayClass name's Accepted condition ("True", "False", or ""
// when it has none for its current generation).
func (c *cluster) classAccepted(name string) (string, *unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	gc, err := c.dyn.Resource(gatewayClasses).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("get GatewayClass %s: %w", name, err)
	}
	conds, _, _ := unstructured.NestedSlice(gc.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		gen, _ := m["observedGeneration"].(int64)
		if m["type"] == "Accepted" && gen == gc.GetGeneration() {
			s, _ := m["status"].(string)
			return s, gc, nil
		}
	}
	return "", gc, nil
}

// waitClassAccepted waits up to wait for the sidecar to accept GatewayClass name (its
// Accepted condition at the class's generation): the suite's setup runs no test without it, and
// the status is the sidecar's to write.
func (c *cluster) waitClassAccepted(name string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		status, _, err := c.classAccepted(name)
		if err != nil {
			return err
		}
		if status == "True" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GatewayClass %s: not accepted by the sidecar within %v (Accepted %q)", name, wait, status)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
