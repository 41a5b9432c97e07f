package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

func ptrTo[T any](v T) *T { return &v }

// service is a Service of namespace web with one port (name may be empty) whose target port
// is the demo backends' port. The API server allocates its cluster IP.
func service(name, portName string, port, target int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: portName, Port: int32(port), TargetPort: intstr.FromInt32(int32(target))}}},
	}
}

// endpointSlice is the EndpointSlice of a Service of namespace web: one port (as the Service
// port's name), and the addresses given, ready or not (address -> ready).
func endpointSlice(svc, portName string, port int, ready map[string]bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-abcde", Namespace: "web", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo(portName), Port: ptrTo(int32(port)), Protocol: ptrTo(corev1.ProtocolTCP)}},
	}
	for _, addr := range slices.Sorted(maps.Keys(ready)) {
		ep := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(ready[addr])}}
		// Named after the pod, but one endpoint without a pod, named after its address.
		if name := backendNames[addr]; name != "" && addr != "127.0.0.12" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "web", Name: name}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// putEndpointSlice writes an EndpointSlice straight into the API server's etcd, encoded as the
// API server stores it. The API refuses loopback addresses in EndpointSlices (no pod has one),
// and the backends standing for pods listen on loopback addresses so that no traffic leaves
// the machine; the API server then serves the slice like any other (its watch cache follows
// etcd), as if an EndpointSlice controller had written it. It returns once the API serves it.
func putEndpointSlice(t *testing.T, k *kubetest.Env, s *discoveryv1.EndpointSlice) {
	t.Helper()
	s = s.DeepCopy()
	s.UID = types.UID("uid-endpointslice-" + s.Namespace + "-" + s.Name)
	s.CreationTimestamp = metav1.Unix(1700000000, 0)
	s.ResourceVersion = ""
	var buf bytes.Buffer
	enc := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), discoveryv1.SchemeGroupVersion)
	if err := enc.Encode(s, &buf); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{k.EtcdURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kubetest.CallTimeout)
	defer cancel()
	resp, err := cli.Put(ctx, k.EtcdPrefix+"/endpointslices/"+s.Namespace+"/"+s.Name, buf.String())
	if err != nil {
		t.Fatalf("put EndpointSlice %s/%s into etcd: %v", s.Namespace, s.Name, err)
	}
	rev := resp.Header.Revision
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		got, err := k.Client.DiscoveryV1().EndpointSlices(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{ResourceVersion: "0"})
		return err == nil && got.ResourceVersion == strconv.FormatInt(rev, 10)
	}, "the API server serves the EndpointSlice written into etcd")
}

func applyService(t *testing.T, k *kubetest.Env, s *corev1.Service) {
	t.Helper()
	k.Namespace(t, s.Namespace)
	if _, err := k.Client.CoreV1().Services(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Service %s/%s: %v", s.Namespace, s.Name, err)
	}
}

// tlsSecret is a kubernetes.io/tls Secret of namespace lb labelled as a certificate input,
// for host.
func tlsSecret(t *testing.T, name, host string) *corev1.Secret {
	cert, key := testcert.Pair(t, host)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lb", Labels: map[string]string{"haproxy-sidecar/certificate": "true"}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
}

// nsTLSSecret is a kubernetes.io/tls Secret of namespace ns, unlabelled: what an Ingress of ns
// names, read with --tls-secret-namespaces.
func nsTLSSecret(ns, name string, cert, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
}

// servedSerial connects to addr with TLS (SNI serverName, no verification) and returns the
// serial number of the certificate the server presents: two certificates for one host differ.
func servedSerial(addr, serverName string) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: serverName, InsecureSkipVerify: true})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// serialOf is the serial number of a PEM certificate.
func serialOf(t *testing.T, certPEM []byte) string {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}

// waitServedSerial waits until HTTPS for host presents the certificate of that serial.
func waitServedSerial(t *testing.T, addr, host, serial, what string) {
	t.Helper()
	var got string
	var err error
	if haproxytest.Poll(15*time.Second, func() bool {
		got, err = servedSerial(addr, host)
		return err == nil && got == serial
	}) != nil {
		t.Fatalf("%s: SNI %s is served serial %s (%v), want %s", what, host, got, err, serial)
	}
}

// exampleFlag is the value of a flag an example's header comment lists ("#   --NAME VALUE").
func exampleFlag(t *testing.T, path, name string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#\s+--` + regexp.QuoteMeta(name) + `\s+'?([^'\s]+)'?`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s lists no --%s", path, name)
	}
	return []string{"--" + name, string(m[1])}
}

// ingressPath is one path of an Ingress rule to a Service port: a number, or a name.
func ingressPath(pathType networkingv1.PathType, path, svc string, port any) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: path, PathType: ptrTo(pathType), Backend: networkingv1.IngressBackend{Service: ingressService(svc, port)}}
}

func ingressService(svc string, port any) *networkingv1.IngressServiceBackend {
	b := &networkingv1.IngressServiceBackend{Name: svc}
	switch p := port.(type) {
	case int:
		b.Port.Number = int32(p)
	case string:
		b.Port.Name = p
	}
	return b
}

func ingressRule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

// updateIngress changes an Ingress of namespace web through the API, retrying on conflicts.
func updateIngress(t *testing.T, k *kubetest.Env, name string, change func(*networkingv1.Ingress)) {
	t.Helper()
	api := k.Client.NetworkingV1().Ingresses("web")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ing, err := api.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(ing)
		_, err = api.Update(context.Background(), ing, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update Ingress web/%s: %v", name, err)
	}
}

// getTLS sends one HTTPS request to addr with SNI and Host host, and returns status and body.
func getTLS(addr, host, path string) (int, string, error) {
	req, _ := http.NewRequest("GET", "https://"+addr+path, nil)
	req.Host = host
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{ServerName: host, InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// route is a request ("host/path") and the answer expected: the start of a backend's answer,
// or "404" for HAProxy's own "no rule matches".
type route struct{ request, want string }

// waitRoutes waits until every request is answered as expected; it names those that are not.
func waitRoutes(t *testing.T, e *demoEnv, routes ...route) {
	t.Helper()
	var wrong []string
	err := haproxytest.Poll(15*time.Second, func() bool {
		wrong = wrong[:0]
		for _, r := range routes {
			host, path, _ := strings.Cut(r.request, "/")
			code, body, _, err := e.get(host, "/"+path)
			ok := err == nil && (r.want == "404" && code == 404 || r.want != "404" && code == 200 && strings.HasPrefix(body, r.want))
			if !ok {
				wrong = append(wrong, fmt.Sprintf("%s: %d %q %v, want %s", r.request, code, body, err, r.want))
			}
		}
		return len(wrong) == 0
	})
	if err != nil {
		cfg, _ := os.ReadFile(e.cfgPath)
		var mapFiles strings.Builder
		ents, _ := os.ReadDir(filepath.Join(filepath.Dir(e.cfgPath), "maps"))
		for _, ent := range ents {
			b, _ := os.ReadFile(filepath.Join(filepath.Dir(e.cfgPath), "maps", ent.Name()))
			fmt.Fprintf(&mapFiles, "--- %s\n%s", ent.Name(), b)
		}
		t.Fatalf("not routed as expected:\n%s\nhaproxy.cfg:\n%s\n%s", strings.Join(wrong, "\n"), cfg, &mapFiles)
	}
}

// kubectlGet writes to path what kubectl get -o yaml prints of args.
func kubectlGet(t *testing.T, k *kubetest.Env, path string, args ...string) {
	t.Helper()
	out, err := exec.Command(k.KubectlPath, append([]string{"--kubeconfig", k.Kubeconfig, "--cache-dir", t.TempDir(), "get", "-o", "yaml"}, args...)...).Output()
	if err != nil {
		t.Fatalf("kubectl get %v: %v", args, err)
	}
	saveFile(t, path, out)
}

// saveFile writes b to path as editors save: a temporary file (a dot file, which the file
// source skips) renamed over it.
func saveFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// renderSources renders with the render command from the Kubernetes API, straight from etcd,
// and from a directory of what kubectl get -o yaml prints of the resources given, and returns
// each rendering's files (haproxy.cfg and maps/*; certificates by name only) by source.
func renderSources(t *testing.T, k *kubetest.Env, gets [][]string, flags ...string) map[string]map[string]string {
	t.Helper()
	dir := t.TempDir()
	for i, what := range gets {
		kubectlGet(t, k, filepath.Join(dir, fmt.Sprintf("%d.yaml", i)), what...)
	}
	// One output directory for all three, so that the paths in haproxy.cfg are the same.
	out := filepath.Join(t.TempDir(), "out")
	renderings := map[string]map[string]string{}
	for source, args := range map[string][]string{
		"kube": {"--source=kube", "--kubeconfig", k.Kubeconfig},
		"etcd": {"--source=etcd", "--etcd-endpoints", k.EtcdURL, "--etcd-prefix", k.EtcdPrefix},
		"file": {"--source=file", "--dir", dir},
	} {
		if err := os.RemoveAll(out); err != nil {
			t.Fatal(err)
		}
		if err := renderOnce(append(append(args, flags...), "--namespace", "lb", "--out", out), false); err != nil {
			t.Fatalf("render from %s: %v", source, err)
		}
		files := map[string]string{}
		err := filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(out, path)
			if strings.HasPrefix(rel, "certs/") {
				files[rel] = "(a certificate)" // private keys are never printed
				return nil
			}
			b, err := os.ReadFile(path)
			files[rel] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		renderings[source] = files
	}
	for _, source := range []string{"etcd", "file"} {
		names := maps.Clone(renderings["kube"])
		maps.Copy(names, renderings[source])
		for _, name := range slices.Sorted(maps.Keys(names)) {
			if a, b := renderings["kube"][name], renderings[source][name]; a != b {
				t.Errorf("%s renders differently from kube and %s:\n--- kube\n%s\n--- %s\n%s", name, source, a, source, b)
			}
		}
	}
	return renderings
}

// applyIngressExample creates through k's API what the Ingress example is checked on: the
// example's config ConfigMap in namespace lb, TLS Secrets, Services web and api of namespace
// web with EndpointSlices of e's backends, and the Ingresses shop, legacy and other. It returns
// the flags the example's header lists: --watch, and --tls-secret-namespaces web,shop.
func applyIngressExample(t *testing.T, k *kubetest.Env, e *demoEnv) []string {
	t.Helper()
	const example = "../examples/templates/ingress.yaml"
	ctx := context.Background()

	k.Namespace(t, "lb")
	k.Namespace(t, "web")
	k.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}})
	k.ApplyConfigMap(t, exampleConfigMap(t, example))
	// Certificates: the TLS Secrets the Ingresses name in their own namespace (read with
	// --tls-secret-namespaces), one copied into lb as "web.copied-tls" (the way without the
	// flag), one no Ingress names, and a Secret of another type.
	shopCert, shopKey := testcert.Pair(t, "shop.example.com")
	apiCert, apiKey := testcert.Pair(t, "api.example.com")
	k.ApplySecret(t, nsTLSSecret("web", "shop-tls", shopCert, shopKey))
	k.ApplySecret(t, nsTLSSecret("web", "api-tls", apiCert, apiKey))
	k.ApplySecret(t, tlsSecret(t, "web.copied-tls", "copied.example.com"))
	k.ApplySecret(t, tlsSecret(t, "unused", "unused.example.com"))
	k.ApplySecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "password", Namespace: "web"}, StringData: map[string]string{"password": "hunter2"}})

	// web: a named port; api: an unnamed one whose number differs from the pods' port.
	applyService(t, k, service("web", "http", 80, e.port))
	applyService(t, k, service("api", "", 8080, e.port))
	putEndpointSlice(t, k, endpointSlice("web", "http", e.port, map[string]bool{"127.0.0.11": true, "127.0.0.12": true, "127.0.0.13": false}))
	putEndpointSlice(t, k, endpointSlice("api", "", e.port, map[string]bool{"127.0.0.21": true}))

	ingresses := []*networkingv1.Ingress{{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "web"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptrTo("haproxy-sidecar"),
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}, {SecretName: "missing-tls"}},
			Rules: []networkingv1.IngressRule{ingressRule("shop.example.com",
				ingressPath(networkingv1.PathTypePrefix, "/", "web", "http"),
				ingressPath(networkingv1.PathTypeExact, "/checkout", "api", 8080),
				ingressPath(networkingv1.PathTypePrefix, "/api/", "api", 8080),
			)},
		},
	}, {
		// The legacy annotation; a wildcard host, an ImplementationSpecific path, a rule without
		// host, the default backend.
		ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: "web", Annotations: map[string]string{"kubernetes.io/ingress.class": "haproxy-sidecar"}},
		Spec: networkingv1.IngressSpec{
			DefaultBackend: &networkingv1.IngressBackend{Service: ingressService("api", 8080)},
			TLS: []networkingv1.IngressTLS{{Hosts: []string{"api.example.com"}, SecretName: "api-tls"},
				{Hosts: []string{"copied.example.com"}, SecretName: "copied-tls"}},
			Rules: []networkingv1.IngressRule{
				ingressRule("*.legacy.example.com", ingressPath(networkingv1.PathTypeImplementationSpecific, "/v1", "web", 80)),
				ingressRule("", ingressPath(networkingv1.PathTypeExact, "/healthz", "web", 80)),
			},
		},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "web"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptrTo("nginx"),
			Rules:            []networkingv1.IngressRule{ingressRule("other.example.com", ingressPath(networkingv1.PathTypePrefix, "/", "web", "http"))},
		},
	}}
	for _, ing := range ingresses {
		if _, err := k.Client.NetworkingV1().Ingresses("web").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The flags the example's header lists: --watch, and --tls-secret-namespaces web,shop.
	return append(exampleWatchFlags(t, example), exampleFlag(t, example, "tls-secret-namespaces")...)
}

// ingressExampleRoutes are requests and the backends that answer them once the objects
// applyIngressExample creates are served.
func ingressExampleRoutes() []route {
	return []route{
		{"shop.example.com/", "web-"},
		{"shop.example.com/cart", "web-"},
		{"shop.example.com/checkout", "api-1"},   // Exact
		{"shop.example.com/checkout/", "web-"},   // not Exact: the prefix /
		{"shop.example.com/api", "api-1"},        // Prefix /api/ serves /api
		{"shop.example.com/api/v2", "api-1"},     // and /api/v2
		{"shop.example.com/apiary", "web-"},      // not /apiary
		{"SHOP.example.com:8000/api/x", "api-1"}, // Host's case and port do not matter
		{"a.legacy.example.com/v1", "web-"},      // wildcard host, ImplementationSpecific
		{"a.legacy.example.com/v1beta", "web-"},  // as a string prefix
		{"a.legacy.example.com/v2", "api-1"},     // the default backend
		{"b.a.legacy.example.com/v1", "api-1"},   // the wildcard is one label: default
		{"anything.example.com/healthz", "web-"}, // a rule without host
		{"other.example.com/", "api-1"},          // another class: not served (default)
	}
}

// TestIngressExample runs examples/templates/ingress.yaml against a real kube-apiserver and
// HAProxy: Ingresses, Services, EndpointSlices and TLS Secrets created through the API route
// requests by host and path to real backends on loopback addresses (standing for pods) and
// serve the Ingresses' certificates; paths edited and added and the default backend changed go
// live with no reload (map updates), endpoints too (servers), a new backend with none from
// HAProxy 3.4 on and one reload before;
// the same objects render the same bytes read from the API, from etcd and from files.
func TestIngressExample(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	httpsAddr := os.Getenv("HTTPS_BIND")
	ctx := context.Background()

	watch := applyIngressExample(t, k, e)
	e.startSidecar(t, append([]string{"--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb", "--wait", "20ms:500ms"}, watch...)...)
	p := e.startHAProxy(t)
	e.waitReady(t)

	waitRoutes(t, e, ingressExampleRoutes()...)
	// Only ready endpoints are servers: web-3 is not ready.
	for range 10 {
		if _, body, _, _ := e.get("shop.example.com", "/"); strings.HasPrefix(body, "web-3") {
			t.Fatalf("web-3 (not ready) answered")
		}
	}
	cfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"backend be_web_web_http\n", "backend be_web_web_80\n", "backend be_web_api_8080\n",
		fmt.Sprintf("server web-1-%d 127.0.0.11:%d\n", e.port, e.port),
		fmt.Sprintf("server 127.0.0.12-%d 127.0.0.12:%d\n", e.port, e.port),
		fmt.Sprintf("server api-1-%d 127.0.0.21:%d\n", e.port, e.port),
		"# ingress web/shop: TLS secret missing-tls: no certificate web.missing-tls\n",
		" crt " + filepath.Join(filepath.Dir(e.cfgPath), "certs") + "/web.api-tls.pem crt ",
	} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("haproxy.cfg has no %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(string(cfg), "unused.pem") {
		t.Errorf("haproxy.cfg loads a certificate no Ingress names:\n%s", cfg)
	}
	routes, err := os.ReadFile(filepath.Join(filepath.Dir(e.cfgPath), "maps", "routes.map"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nshop.example.com/api/ be_web_api_8080\n", "\nshop.example.com/ be_web_web_http\n",
		"\nshop.example.com/checkout? be_web_api_8080\n", "\nshop.example.com/api? be_web_api_8080\n",
		"\n*.legacy.example.com/v1 be_web_web_80\n", "\n/healthz? be_web_web_80\n", "\ndefault? be_web_api_8080\n"} {
		if !strings.Contains(string(routes), want) {
			t.Errorf("routes.map has no %q:\n%s", want[1:], routes)
		}
	}
	if strings.Index(string(routes), "shop.example.com/api/ ") > strings.Index(string(routes), "shop.example.com/ ") {
		t.Errorf("routes.map does not list the longest prefix first:\n%s", routes)
	}
	if strings.Contains(string(routes), "other.example.com") {
		t.Errorf("routes.map routes an Ingress of another class:\n%s", routes)
	}

	t.Run("HTTPS with the certificate each Ingress names", func(t *testing.T) {
		for _, host := range []string{"shop.example.com", "api.example.com", "copied.example.com"} {
			if cn, err := testcert.ServedCN(httpsAddr, host); err != nil || cn != host {
				t.Errorf("SNI %s: served CN %q (%v), want %q", host, cn, err, host)
			}
		}
		if code, body, err := getTLS(httpsAddr, "shop.example.com", "/checkout"); err != nil || code != 200 || !strings.HasPrefix(body, "api-1") {
			t.Errorf("https://shop.example.com/checkout: %d %q %v, want api-1", code, body, err)
		}
	})

	t.Run("a TLS Secret rotated in the Ingress's namespace: served through the runtime API, no reload", func(t *testing.T) {
		e.settled(t)
		before, updated := reloadCount(t, p), e.metric(t, `haproxy_sidecar_runtime_updates_total{kind="certificate_updated"}`)
		cert, key := testcert.Pair(t, "shop.example.com")
		k.ApplySecret(t, nsTLSSecret("web", "shop-tls", cert, key))
		waitServedSerial(t, httpsAddr, "shop.example.com", serialOf(t, cert), "the rotated certificate")
		e.settled(t)
		if n := reloadCount(t, p) - before; n != 0 {
			t.Errorf("%d reloads for a rotated certificate, want none", n)
		}
		if n := e.metric(t, `haproxy_sidecar_runtime_updates_total{kind="certificate_updated"}`) - updated; n < 1 {
			t.Errorf("runtime_updates_total{kind=\"certificate_updated\"} grew by %v, want the update counted", n)
		}
	})

	t.Run("a TLS Secret whose key does not fit: held and reported on it, the other certificates go live", func(t *testing.T) {
		e.settled(t)
		before := reloadCount(t, p)
		apiSerial, _ := servedSerial(httpsAddr, "api.example.com")
		badCert, _ := testcert.Pair(t, "api.example.com")
		_, otherKey := testcert.Pair(t, "other.example.com")
		k.ApplySecret(t, nsTLSSecret("web", "api-tls", badCert, otherKey))
		shopCert, shopKey := testcert.Pair(t, "shop.example.com")
		k.ApplySecret(t, nsTLSSecret("web", "shop-tls", shopCert, shopKey))
		waitServedSerial(t, httpsAddr, "shop.example.com", serialOf(t, shopCert), "the other certificate")
		var r readyz
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, r = e.readyz(t)
			return len(r.Held) == 1
		}, "the bad certificate is held")
		h := r.Held[0]
		if h.Input != "certificate/web.api-tls" || h.Object != `Secret web/api-tls key "tls.key"` || !h.Kept ||
			!strings.Contains(h.Reason, "the private key does not fit the certificate") {
			t.Errorf("held: %+v", h)
		}
		if got, err := servedSerial(httpsAddr, "api.example.com"); err != nil || got != apiSerial {
			t.Errorf("SNI api.example.com: served serial %s (%v), want the last good one %s", got, err, apiSerial)
		}
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			evs, err := k.Client.CoreV1().Events("web").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Secret,involvedObject.name=api-tls"})
			if err != nil {
				return false
			}
			for _, ev := range evs.Items {
				if ev.Type == corev1.EventTypeWarning && ev.Reason == "Rejected" && strings.Contains(ev.Message, "does not fit") {
					return true
				}
			}
			return false
		}, "a Warning Event on Secret web/api-tls")

		// Fixed: served, nothing held.
		goodCert, goodKey := testcert.Pair(t, "api.example.com")
		k.ApplySecret(t, nsTLSSecret("web", "api-tls", goodCert, goodKey))
		waitServedSerial(t, httpsAddr, "api.example.com", serialOf(t, goodCert), "the fixed certificate")
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, r := e.readyz(t)
			return r.Ready && len(r.Held) == 0
		}, "nothing held once the Secret is fixed")
		e.settled(t)
		if n := reloadCount(t, p) - before; n != 0 {
			t.Errorf("%d reloads for certificates held and rotated, want none", n)
		}
	})

	e.settled(t)
	before := reloadCount(t, p)

	t.Run("paths edited and added and the default backend changed: map updates, no reload", func(t *testing.T) {
		updateIngress(t, k, "shop", func(ing *networkingv1.Ingress) {
			paths := &ing.Spec.Rules[0].HTTP.Paths
			(*paths)[2].Path = "/store" // api, was /api/
			*paths = append(*paths, ingressPath(networkingv1.PathTypeExact, "/new", "web", "http"))
		})
		updateIngress(t, k, "legacy", func(ing *networkingv1.Ingress) {
			ing.Spec.DefaultBackend.Service = ingressService("web", "http")
		})
		waitRoutes(t, e,
			route{"shop.example.com/store/x", "api-1"},
			route{"shop.example.com/api/v2", "web-"},
			route{"shop.example.com/new", "web-"},
			route{"a.legacy.example.com/v2", "web-"},
			route{"shop.example.com/checkout", "api-1"},
		)
		e.settled(t)
		if n := reloadCount(t, p) - before; n != 0 {
			t.Errorf("%d reloads for path and default backend changes, want none (map updates)", n)
		}
		if n := e.metric(t, `haproxy_sidecar_runtime_updates_total{kind="map_updated"}`); n < 1 {
			t.Errorf("runtime_updates_total{kind=\"map_updated\"} is %v, want the map updates counted", n)
		}
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(e.cfgPath), "maps", "routes.map"))
		if !strings.Contains(string(b), "shop.example.com/store/ be_web_api_8080\n") {
			t.Errorf("routes.map on disk:\n%s", b)
		}
	})

	t.Run("an endpoint becoming ready: a server, no reload", func(t *testing.T) {
		before := reloadCount(t, p)
		putEndpointSlice(t, k, endpointSlice("web", "http", e.port, map[string]bool{"127.0.0.11": true, "127.0.0.12": true, "127.0.0.13": true}))
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, body, _, _ := e.get("shop.example.com", "/")
			return strings.HasPrefix(body, "web-3")
		}, "web-3 answers once ready")
		e.settled(t)
		if n := reloadCount(t, p) - before; n != 0 {
			t.Errorf("%d reloads for an endpoint, want none", n)
		}
	})

	t.Run("a path to a new backend: no reload from HAProxy 3.4 on, one before", func(t *testing.T) {
		before := reloadCount(t, p)
		applyService(t, k, service("static", "", 80, e.port))
		putEndpointSlice(t, k, endpointSlice("static", "", e.port, map[string]bool{"127.0.0.22": true}))
		updateIngress(t, k, "shop", func(ing *networkingv1.Ingress) {
			ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, ingressPath(networkingv1.PathTypePrefix, "/static", "static", 80))
		})
		waitRoutes(t, e, route{"shop.example.com/static/logo.png", "api-2"}, route{"shop.example.com/store", "api-1"})
		e.settled(t)
		if n, want := reloadCount(t, p)-before, backendReloads(t); n != want {
			t.Errorf("%d reloads for a new backend, want %d (HAProxy %s)", n, want, haproxytest.InstalledVersion(t))
		}
	})

	t.Run("a path to a Service that does not exist and a path with white space: noted, the rest served", func(t *testing.T) {
		live := e.settled(t).LiveConfig
		updateIngress(t, k, "legacy", func(ing *networkingv1.Ingress) {
			ing.Spec.Rules[1].HTTP.Paths = append(ing.Spec.Rules[1].HTTP.Paths,
				ingressPath(networkingv1.PathTypePrefix, "/gone", "gone", 80),
				ingressPath(networkingv1.PathTypeImplementationSpecific, "/a b", "web", 80))
		})
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			code, _, _, err := e.get("anything.example.com", "/gone/x")
			return err == nil && code == 503 // its backend has no server
		}, "/gone routed to a backend without servers")
		e.settledPast(t, live) // the files follow a change the runtime API made (HAProxy 3.4)
		cfg, _ := os.ReadFile(e.cfgPath)
		for _, want := range []string{"# Service web/gone has no port 80 (or is not there)\n", `# ingress web/legacy: path "/a b" not served`} {
			if !strings.Contains(string(cfg), want) {
				t.Errorf("haproxy.cfg has no %q:\n%s", want, cfg)
			}
		}
		waitRoutes(t, e, route{"shop.example.com/static/x", "api-2"}, route{"anything.example.com/healthz", "web-"})
	})

	t.Run("the same from etcd and from files", func(t *testing.T) {
		r := renderSources(t, k, [][]string{
			{"configmaps", "-n", "lb"},
			{"secrets", "-n", "lb"},
			{"secrets", "-n", "web"},
			{"ingresses.v1.networking.k8s.io", "-A"},
			{"services.v1.", "-A"},
			{"endpointslices.v1.discovery.k8s.io", "-A"},
		}, watch...)
		kube := r["kube"]
		for _, want := range []string{"shop.example.com/store/ be_web_api_8080", "shop.example.com/static/ be_web_static_80"} {
			if !strings.Contains(kube["maps/routes.map"], want) {
				t.Errorf("routes.map has no %q:\n%s", want, kube["maps/routes.map"])
			}
		}
		for _, name := range []string{"web.shop-tls", "web.api-tls", "web.copied-tls"} {
			if !strings.Contains(kube["haproxy.cfg"], "/certs/"+name+".pem") || kube["certs/"+name+".pem"] == "" {
				t.Errorf("the rendering does not load %s:\n%s", name, kube["haproxy.cfg"])
			}
		}
	})
}

// moveAPIPath moves Ingress shop's path /api/ (Service api) to /store.
func moveAPIPath(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[2].Path = "/store" }

// addStaticPath adds to Ingress shop a path /static to Service static.
func addStaticPath(ing *networkingv1.Ingress) {
	ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, ingressPath(networkingv1.PathTypePrefix, "/static", "static", 80))
}

// removeStaticPath takes addStaticPath back: no rule names Service static any more.
func removeStaticPath(ing *networkingv1.Ingress) {
	paths := ing.Spec.Rules[0].HTTP.Paths
	ing.Spec.Rules[0].HTTP.Paths = paths[:len(paths)-1]
}

// backendReloads is how many reloads a backend added or removed takes with the example
// templates (whose defaults section is named): none from HAProxy 3.4 on, which adds and
// removes backends at runtime; one before.
func backendReloads(t *testing.T) int {
	if haproxytest.InstalledVersion(t).AtLeast(3, 4) {
		return 0
	}
	return 1
}

// ingressEdits make the changes checkIngressLive checks, through one source's inputs.
type ingressEdits struct {
	movePath   func(t *testing.T) // moveAPIPath
	addBackend func(t *testing.T) // Service static, its endpoint 127.0.0.22 (api-2), and addStaticPath
	// removeBackend takes the path to Service static back (removeStaticPath).
	removeBackend func(t *testing.T)
}

// checkIngressLive runs a sidecar with args, and HAProxy, on their own files and addresses
// (e's backends), on the objects applyIngressExample creates, and checks that: requests are
// routed by host and path, an Ingress's certificate is served; a path moved is served with no
// reload (a map update); a path to a new backend is served, and taken back is no longer, with
// no reload from HAProxy 3.4 on (show proc's reload counter; the backend gone from show
// backend), with one reload each before 3.4.
func checkIngressLive(t *testing.T, e *demoEnv, edits ingressEdits, args ...string) {
	c := e.instance(t)
	c.httpAddr = fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
	httpsAddr := fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
	t.Setenv("HTTP_BIND", c.httpAddr)
	t.Setenv("HTTPS_BIND", httpsAddr)
	t.Setenv("STATS_BIND", fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t)))
	c.startSidecar(t, args...)
	p := c.startHAProxy(t)
	c.waitReady(t)

	waitRoutes(t, c, ingressExampleRoutes()...)
	c.settled(t)
	if cn, err := testcert.ServedCN(httpsAddr, "shop.example.com"); err != nil || cn != "shop.example.com" {
		t.Errorf("SNI shop.example.com: served CN %q (%v), want shop.example.com (Secret web/shop-tls)", cn, err)
	}

	before, updates := reloadCount(t, p), c.metric(t, `haproxy_sidecar_runtime_updates_total{kind="map_updated"}`)
	edits.movePath(t)
	waitRoutes(t, c,
		route{"shop.example.com/store/x", "api-1"},
		route{"shop.example.com/store", "api-1"},
		route{"shop.example.com/api/v2", "web-"}, // no longer a path of its own: the prefix /
		route{"shop.example.com/checkout", "api-1"},
	)
	c.settled(t)
	if n := reloadCount(t, p) - before; n != 0 {
		t.Errorf("%d reloads for a path moved, want none (a map update)", n)
	}
	if n := c.metric(t, `haproxy_sidecar_runtime_updates_total{kind="map_updated"}`) - updates; n < 1 {
		t.Errorf("runtime_updates_total{kind=\"map_updated\"} grew by %v, want the map update counted", n)
	}
	routes := readString(t, filepath.Join(filepath.Dir(c.cfgPath), "maps", "routes.map"))
	if !strings.Contains(routes, "\nshop.example.com/store/ be_web_api_8080\n") || strings.Contains(routes, "shop.example.com/api/") {
		t.Errorf("routes.map on disk:\n%s", routes)
	}

	const static = "be_web_static_80"
	runs := func(backend string) bool {
		out, err := p.Command("@1 show backend")
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(strings.Fields(out), backend)
	}
	before = reloadCount(t, p)
	edits.addBackend(t)
	waitRoutes(t, c, route{"shop.example.com/static/logo.png", "api-2"}, route{"shop.example.com/store", "api-1"})
	c.settled(t)
	if n, want := reloadCount(t, p)-before, backendReloads(t); n != want {
		t.Errorf("%d reloads for a new backend, want %d (HAProxy %s)", n, want, haproxytest.InstalledVersion(t))
	}
	if !runs(static) {
		t.Errorf("HAProxy serves the new backend's path but show backend has no %s", static)
	}

	before = reloadCount(t, p)
	edits.removeBackend(t)
	waitRoutes(t, c, route{"shop.example.com/static/logo.png", "web-"}, route{"shop.example.com/store", "api-1"})
	c.settled(t)
	// Deleted at once, or, when HAProxy still had a connection to its server, by the next
	// tidying (every 5 s).
	haproxytest.WaitFor(t, 15*time.Second, func() bool { return !runs(static) }, static+" gone from show backend")
	if n, want := reloadCount(t, p)-before, backendReloads(t); n != want {
		t.Errorf("%d reloads for a backend removed, want %d (HAProxy %s)", n, want, haproxytest.InstalledVersion(t))
	}
}

// TestIngressExampleFromEtcdAndFiles runs the Ingress example live, as TestIngressExample does
// from the Kubernetes API, from the two other sources, on the same objects created through a
// real kube-apiserver: read straight from its etcd (--source=etcd), the changes made through
// the API; and from a directory of what kubectl get -o yaml prints of them (--source=file), the
// changes made by rewriting the Ingress's manifest file. Each time a real HAProxy routes by host
// and path to the right backends, a path moved goes live with no reload (show proc's reload
// counter unchanged), and a path to a new backend, then taken back, with none on HAProxy 3.4
// and one each before.
func TestIngressExampleFromEtcdAndFiles(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	watch := applyIngressExample(t, k, e)
	flags := append([]string{"--namespace", "lb", "--wait", "20ms:500ms"}, watch...)

	// The file source's manifests, taken before the etcd part changes anything; each Ingress in
	// a file of its own.
	dir := t.TempDir()
	for name, get := range map[string][]string{
		"lb-configmaps.yaml":  {"configmaps", "-n", "lb"},
		"lb-secrets.yaml":     {"secrets", "-n", "lb"},
		"web-secrets.yaml":    {"secrets", "-n", "web"},
		"services.yaml":       {"services.v1.", "-A"},
		"endpointslices.yaml": {"endpointslices.v1.discovery.k8s.io", "-A"},
		"ingress-shop.yaml":   {"ingresses.v1.networking.k8s.io", "-n", "web", "shop"},
		"ingress-legacy.yaml": {"ingresses.v1.networking.k8s.io", "-n", "web", "legacy"},
		"ingress-other.yaml":  {"ingresses.v1.networking.k8s.io", "-n", "web", "other"},
	} {
		kubectlGet(t, k, filepath.Join(dir, name), get...)
	}

	t.Run("etcd", func(t *testing.T) {
		checkIngressLive(t, e, ingressEdits{
			movePath: func(t *testing.T) { updateIngress(t, k, "shop", moveAPIPath) },
			addBackend: func(t *testing.T) {
				applyService(t, k, service("static", "", 80, e.port))
				putEndpointSlice(t, k, endpointSlice("static", "", e.port, map[string]bool{"127.0.0.22": true}))
				updateIngress(t, k, "shop", addStaticPath)
			},
			removeBackend: func(t *testing.T) { updateIngress(t, k, "shop", removeStaticPath) },
		}, append([]string{"--source=etcd", "--etcd-endpoints", k.EtcdURL, "--etcd-prefix", k.EtcdPrefix}, flags...)...)
	})

	t.Run("file", func(t *testing.T) {
		shop := filepath.Join(dir, "ingress-shop.yaml")
		checkIngressLive(t, e, ingressEdits{
			movePath: func(t *testing.T) { rewriteIngressFile(t, shop, moveAPIPath) },
			addBackend: func(t *testing.T) {
				svc := service("static", "", 80, e.port)
				svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
				slice := endpointSlice("static", "", e.port, map[string]bool{"127.0.0.22": true})
				slice.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
				saveFile(t, filepath.Join(dir, "static.yaml"), []byte(mustYAML(t, svc)+"---\n"+mustYAML(t, slice)))
				rewriteIngressFile(t, shop, addStaticPath)
			},
			removeBackend: func(t *testing.T) { rewriteIngressFile(t, shop, removeStaticPath) },
		}, append([]string{"--source=file", "--dir", dir}, flags...)...)
	})
}

// rewriteIngressFile changes the Ingress a manifest file holds (as kubectl get -o yaml prints
// one) and saves the file.
func rewriteIngressFile(t *testing.T, path string, change func(*networkingv1.Ingress)) {
	t.Helper()
	var ing networkingv1.Ingress
	if err := sigyaml.UnmarshalStrict([]byte(readString(t, path)), &ing); err != nil || ing.Kind != "Ingress" {
		t.Fatalf("%s: kind %q, %v", path, ing.Kind, err)
	}
	change(&ing)
	saveFile(t, path, []byte(mustYAML(t, &ing)))
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := sigyaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTLSSecretNamespacesRBAC: what the Helm chart grants for sidecar.tlsSecretNamespaces (a
// Role per namespace, a ClusterRole for "*"), and examples/kubernetes/rbac-tls.yaml and
// rbac-tls-all.yaml, applied to a real API server, are enough for the kube source to read the
// TLS Secrets of those namespaces and to report on them with Events, and no more.
func TestTLSSecretNamespacesRBAC(t *testing.T) {
	helm := helmBin(t)
	k := kubetest.Start(t)
	for _, ns := range []string{"lb", "web", "shop"} {
		k.Namespace(t, ns)
	}
	// apply applies manifests for real, each object in its namespace (lb when it has none).
	apply := func(t *testing.T, manifests []byte) {
		t.Helper()
		kubectlApplyByNamespace(t, k, "lb", manifests)
	}
	// objects runs a kube source as the service account, reading the TLS Secrets of namespaces.
	objects := func(t *testing.T, sa, namespaces string) error {
		t.Helper()
		cfg := rest.CopyConfig(k.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:lb:" + sa}
		tlsNS, err := snapshot.ParseNamespaces(namespaces)
		if err != nil {
			t.Fatal(err)
		}
		src := &watcher.Kube{Client: kubernetes.NewForConfigOrDie(cfg), Namespace: "lb", ServicesConfigMap: "services",
			KeysSecret: "keys", TLSSecretNamespaces: tlsNS, Logger: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		go src.Run(ctx, func() {})
		_, err = src.Objects(ctx)
		return err
	}
	canEvents := func(t *testing.T, sa, ns string) bool {
		t.Helper()
		out, _ := exec.Command(k.KubectlPath, "--kubeconfig", k.Kubeconfig, "auth", "can-i", "create", "events", "-n", ns,
			"--as", "system:serviceaccount:lb:"+sa).Output()
		return strings.TrimSpace(string(out)) == "yes"
	}

	t.Run("the chart: a Role per namespace", func(t *testing.T) {
		out := run(t, helm, "template", "lb", "../charts/haproxy-sidecar", "--namespace", "lb", "--set", "sidecar.tlsSecretNamespaces={web}")
		if !strings.Contains(string(out), `{name: HAPROXY_SIDECAR_TLS_SECRET_NAMESPACES, value: "web"}`) {
			t.Errorf("the Deployment has no HAPROXY_SIDECAR_TLS_SECRET_NAMESPACES=web:\n%s", out)
		}
		apply(t, out)
		if err := objects(t, "lb", "web"); err != nil {
			t.Fatal(err)
		}
		if !canEvents(t, "lb", "web") {
			t.Error("the service account may not create Events in web")
		}
		err := objects(t, "lb", "web,shop")
		if err == nil || !strings.Contains(err.Error(), "through a Role in namespace shop") {
			t.Fatalf("shop, not granted: err = %v", err)
		}
	})
	t.Run("the chart: a ClusterRole for *", func(t *testing.T) {
		out := run(t, helm, "template", "every", "../charts/haproxy-sidecar", "--namespace", "lb", "--set", "sidecar.tlsSecretNamespaces={*}")
		apply(t, out)
		if err := objects(t, "every", "*"); err != nil {
			t.Fatal(err)
		}
		if !canEvents(t, "every", "shop") {
			t.Error("the service account may not create Events in shop")
		}
	})
	t.Run("examples/kubernetes/rbac-tls.yaml and rbac-tls-all.yaml", func(t *testing.T) {
		run(t, k.KubectlPath, "--kubeconfig", k.Kubeconfig, "apply", "-f", "../examples/kubernetes/rbac.yaml", "-f", "../examples/kubernetes/rbac-tls.yaml")
		if err := objects(t, "haproxy-sidecar", "web"); err != nil {
			t.Fatal(err)
		}
		if err := objects(t, "haproxy-sidecar", "*"); err == nil || !strings.Contains(err.Error(), "through a ClusterRole") {
			t.Fatalf("*, not granted: err = %v", err)
		}
		run(t, k.KubectlPath, "--kubeconfig", k.Kubeconfig, "apply", "-f", "../examples/kubernetes/rbac-tls-all.yaml")
		if err := objects(t, "haproxy-sidecar", "*"); err != nil {
			t.Fatal(err)
		}
		if !canEvents(t, "haproxy-sidecar", "web") || !canEvents(t, "haproxy-sidecar", "shop") {
			t.Error("the service account may not create Events where the TLS Secrets are")
		}
	})
}
