package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// watchTemplate prints what the watched resources hold: a backend per Ingress with its
// EndpointSlices' endpoints joined with the Nodes, every Ingress whole (tojson), and a custom
// resource.
const watchTemplate = `global
    log stdout format raw local0 notice
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend http
    bind {{ env.HTTP_BIND }}
{%- for ing in resources.ingresses.all %}
{%- for rule in ing.spec.rules %}
    use_backend be_{{ ing.metadata.namespace }}_{{ ing.metadata.name }} if { hdr(host) -i {{ rule.host }} }
{%- endfor %}
{%- endfor %}
{%- for ing in resources.ingresses.all %}
backend be_{{ ing.metadata.namespace }}_{{ ing.metadata.name }}
    # {{ ing|tojson }}
{%- set svc = ing.spec.rules[0].http.paths[0].backend.service.name %}
{%- for slice in resources.endpointslices.by_service.get(ing.metadata.namespace ~ "/" ~ svc, []) %}
{%- for ep in slice.endpoints %}
    # endpoint {{ ep.addresses[0] }} on {{ ep.nodeName }}: node address {{ resources.nodes.by_name[ep.nodeName].status.addresses|selectattr("type", "equalto", "InternalIP")|map(attribute="address")|first }}
{%- endfor %}
{%- endfor %}
{%- endfor %}
# nodes: {{ resources.nodes.all|map(attribute="metadata.name")|join(",") }} {{ resources.nodes.all|map(attribute="metadata.resourceVersion")|join(",") }}
{%- for cron in resources.crontabs.all %}
# crontab {{ cron.metadata.namespace }}/{{ cron.metadata.name }} {{ cron.metadata.uid }}: {{ cron.spec|tojson }}
{%- endfor %}
`

// TestWatchedResourcesEndToEnd: Ingresses, EndpointSlices, Nodes and a custom resource created
// through a real kube-apiserver render the same bytes read through the Kubernetes API, straight
// from etcd, and from a directory of what kubectl get -o yaml prints (the render command, with
// the --watch flags, validated by haproxy -c).
func TestWatchedResourcesEndToEnd(t *testing.T) {
	haproxytest.Binary(t)
	k := kubetest.Start(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HTTP_BIND", fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t)))

	k.Namespace(t, "lb")
	k.Namespace(t, "web")
	k.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"},
		Data: map[string]string{"none": `{"namespace": "web", "selector": "app=none"}`}})
	k.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "config", Namespace: "lb"},
		Data: map[string]string{"template": watchTemplate}})
	prefix := networkingv1.PathTypePrefix
	for _, name := range []string{"shop", "api"} {
		_, err := k.Client.NetworkingV1().Ingresses("web").Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web", Annotations: map[string]string{"note": "<" + name + ">"}},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: name + ".example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	yes := true
	for i, node := range []string{"node-a", "node-b"} {
		setNode(t, k.Client, node, fmt.Sprintf("192.0.2.%d", i+1), true)
		n := node
		k.ApplyEndpointSlice(t, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("shop-%d", i), Namespace: "web", Labels: map[string]string{discoveryv1.LabelServiceName: "shop"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("192.0.2.%d", 10+i)}, NodeName: &n, Conditions: discoveryv1.EndpointConditions{Ready: &yes}}},
		})
	}
	crontabs := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "crontabs.stable.example.com"},
		"spec": map[string]any{"group": "stable.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
		Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		_, err := dyn.Resource(crontabs).Namespace("web").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": map[string]any{"name": "nightly", "namespace": "web"},
			"spec": map[string]any{"cronSpec": "0 3 * * *", "replicas": int64(2), "ratio": 0.5, "image": "<cron>"}}}, metav1.CreateOptions{})
		return err == nil
	}, "the CronTab is created once the API server serves crontabs")

	// What kubectl get -o yaml prints, as manifests for the file source.
	dir := t.TempDir()
	for i, what := range [][]string{
		{"configmaps", "-n", "lb"},
		{"ingresses.v1.networking.k8s.io", "-A"},
		{"endpointslices.v1.discovery.k8s.io", "-A"},
		{"nodes.v1."}, // kubectl writes the core group as an empty last part
		{"crontabs.v1.stable.example.com", "-A"},
	} {
		out, err := exec.Command(k.KubectlPath, append([]string{"--kubeconfig", k.Kubeconfig, "get", "-o", "yaml"}, what...)...).Output()
		if err != nil {
			t.Fatalf("kubectl get %v: %v", what, err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.yaml", i)), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	watch := []string{
		"--watch", "ingresses.v1.networking.k8s.io",
		"--watch", "endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name",
		"--watch", "nodes.v1",
		"--watch", "crontabs.v1.stable.example.com",
		"--env-allow", "HTTP_BIND", "--namespace", "lb",
	}
	render := func(source ...string) []byte {
		t.Helper()
		out := t.TempDir()
		if err := renderOnce(append(append(source, watch...), "--out", out), false); err != nil {
			t.Fatalf("render %v: %v", source, err)
		}
		b, err := os.ReadFile(filepath.Join(out, "haproxy.cfg"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	fromKube := render("--source=kube", "--kubeconfig", k.Kubeconfig)
	fromEtcd := render("--source=etcd", "--etcd-endpoints", k.EtcdURL, "--etcd-prefix", k.EtcdPrefix)
	fromFile := render("--source=file", "--dir", dir)
	if !bytes.Equal(fromKube, fromEtcd) {
		t.Errorf("kube and etcd render differently:\n--- kube\n%s\n--- etcd\n%s", fromKube, fromEtcd)
	}
	if !bytes.Equal(fromKube, fromFile) {
		t.Errorf("kube and file render differently:\n--- kube\n%s\n--- file\n%s", fromKube, fromFile)
	}
	for _, want := range []string{
		"use_backend be_web_api if { hdr(host) -i api.example.com }",
		"use_backend be_web_shop if { hdr(host) -i shop.example.com }",
		`"kind": "Ingress"`, `"note": "\u003cshop\u003e"`,
		"# endpoint 192.0.2.10 on node-a: node address 192.0.2.1",
		"# endpoint 192.0.2.11 on node-b: node address 192.0.2.2",
		"# nodes: node-a,node-b ",
		`# crontab web/nightly `, `{"cronSpec": "0 3 * * *", "image": "\u003ccron\u003e", "ratio": 0.5, "replicas": 2}`,
	} {
		if !strings.Contains(string(fromKube), want) {
			t.Errorf("the rendering has no %q:\n%s", want, fromKube)
		}
	}
	if strings.Contains(string(fromKube), "managedFields") {
		t.Errorf("managedFields in the rendering:\n%s", fromKube)
	}
}
