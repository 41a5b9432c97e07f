package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/etcdtest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// helmBin finds the helm CLI (HELM, else the cache hack/helm.sh fills); like the other test
// binaries it is required under HAPROXY_SIDECAR_REQUIRE_TESTBINS=1 and skipped otherwise.
func helmBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("chart tests run helm and a real API server")
	}
	if p := os.Getenv("HELM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(etcdtest.DefaultAssetsDir()), "helm-*", "helm"))
	if len(matches) > 0 {
		return matches[len(matches)-1]
	}
	if os.Getenv(etcdtest.RequireEnv) == "1" {
		t.Fatal("helm not found: build it with hack/helm.sh (make test does)")
	}
	t.Skip("helm not found: build it with hack/helm.sh")
	return ""
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

func decodeDocs(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return objs
			}
			t.Fatalf("decode rendered manifests: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func kinds(objs []*unstructured.Unstructured) map[string]int {
	m := map[string]int{}
	for _, o := range objs {
		m[o.GetKind()]++
	}
	return m
}

// TestChartAndManifests lints and renders the Helm chart, checks what it grants, and has the
// real API server validate the chart's and examples/kubernetes' objects (server-side dry run).
func TestChartAndManifests(t *testing.T) {
	helm := helmBin(t)
	k := kubetest.Start(t)
	k.Namespace(t, "lb")
	dryRun := func(t *testing.T, manifests []byte) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "m.yaml")
		if err := os.WriteFile(f, manifests, 0o600); err != nil {
			t.Fatal(err)
		}
		run(t, k.KubectlPath, "--kubeconfig", k.Kubeconfig, "apply", "--dry-run=server", "-n", "lb", "-f", f)
	}

	t.Run("helm lint", func(t *testing.T) {
		run(t, helm, "lint", "--strict", "../charts/haproxy-sidecar")
	})

	t.Run("defaults: least privilege and probes and non-root", func(t *testing.T) {
		out := run(t, helm, "template", "lb", "../charts/haproxy-sidecar", "--namespace", "lb")
		objs := decodeDocs(t, out)
		got := kinds(objs)
		// Namespaced by default: pods and EndpointSlices in the release's namespace (a Role and
		// RoleBinding besides the ConfigMaps' and Secrets'), nothing cluster-wide.
		for kind, n := range map[string]int{"Deployment": 1, "Service": 1, "ServiceAccount": 1, "Role": 2, "RoleBinding": 2, "ClusterRole": 0, "ClusterRoleBinding": 0, "PodDisruptionBudget": 1} {
			if got[kind] != n {
				t.Errorf("%d %s, want %d (all: %v)", got[kind], kind, n, got)
			}
		}
		for _, o := range objs {
			if o.GetKind() == "Role" && strings.Contains(string(mustJSON(t, o)), "leases") {
				t.Error("the Role grants leases without leader election")
			}
			if o.GetKind() == "Deployment" {
				js := string(mustJSON(t, o))
				for _, want := range []string{`"/readyz"`, `"/healthz"`, `"runAsNonRoot":true`, `"readOnlyRootFilesystem":true`, `master.sock`} {
					if !strings.Contains(js, want) {
						t.Errorf("the Deployment lacks %s", want)
					}
				}
			}
		}
		dryRun(t, out)
	})

	t.Run("leader election and namespaced pod access and services and template", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "values.yaml")
		os.WriteFile(values, []byte(`leaderElection: {enabled: true}
rbac: {podNamespaces: [lb]}
services:
  shop: {namespace: lb, selector: {app: shop}, hostnames: [shop.example.com], ports: [8080]}
template: |
  global
    maxconn 100
`), 0o600)
		out := run(t, helm, "template", "lb", "../charts/haproxy-sidecar", "--namespace", "lb", "-f", values)
		objs := decodeDocs(t, out)
		got := kinds(objs)
		if got["ClusterRoleBinding"] != 0 || got["RoleBinding"] != 2 || got["ConfigMap"] != 2 {
			t.Errorf("kinds = %v, want 2 RoleBindings, no ClusterRoleBinding, 2 ConfigMaps", got)
		}
		var sawLeases, sawLeaderEnv bool
		for _, o := range objs {
			js := string(mustJSON(t, o))
			sawLeases = sawLeases || (o.GetKind() == "Role" && strings.Contains(js, "leases"))
			sawLeaderEnv = sawLeaderEnv || (o.GetKind() == "Deployment" && strings.Contains(js, "HAPROXY_SIDECAR_LEADER_ELECT"))
			if o.GetKind() == "ConfigMap" && o.GetName() == "lb-services" {
				data, _, _ := unstructured.NestedStringMap(o.Object, "data")
				if !strings.Contains(data["shop"], `"selector":{"app":"shop"}`) {
					t.Errorf("services ConfigMap shop = %q", data["shop"])
				}
			}
		}
		if !sawLeases || !sawLeaderEnv {
			t.Errorf("leader election: leases granted %v, HAPROXY_SIDECAR_LEADER_ELECT set %v", sawLeases, sawLeaderEnv)
		}
		dryRun(t, out)
	})

	t.Run("an invalid value is refused by the schema", func(t *testing.T) {
		cmd := exec.Command(helm, "template", "lb", "../charts/haproxy-sidecar", "--set", "sidecar.logFormat=xml")
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "logFormat") {
			t.Errorf("helm template accepted logFormat=xml: %v\n%s", err, out)
		}
	})

	t.Run("examples/kubernetes applies and its template renders and validates", func(t *testing.T) {
		var all []byte
		for _, f := range []string{"namespace.yaml", "rbac.yaml", "services.yaml", "config.yaml", "tls-secret.yaml", "deployment.yaml"} {
			b, err := os.ReadFile(filepath.Join("../examples/kubernetes", f))
			if err != nil {
				t.Fatal(err)
			}
			all = append(append(all, b...), []byte("\n---\n")...)
		}
		dryRun(t, all)

		objs, err := (&watcher.File{Dir: "../examples/kubernetes", DefaultNamespace: "lb"}).Objects(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		snap, err := snapshot.Build(objs, snapshot.Options{CertificateSelector: mustSelector(t, "haproxy-sidecar/certificate")})
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Certificates) != 1 {
			t.Errorf("certificates = %d, want the TLS Secret", len(snap.Certificates))
		}
		if _, err := render.New(render.Options{SSLDir: "/etc/haproxy/certs"}).Render(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
	})
}

// kubectlApplyByNamespace applies manifests to a real API server with kubectl, each object in its
// namespace (defaultNS when it names none): kubectl takes one namespace per apply.
func kubectlApplyByNamespace(t *testing.T, k *kubetest.Env, defaultNS string, manifests []byte) {
	t.Helper()
	byNS := map[string][]byte{}
	for _, o := range decodeDocs(t, manifests) {
		ns := o.GetNamespace()
		if ns == "" {
			ns = defaultNS
		}
		byNS[ns] = append(append(byNS[ns], mustJSON(t, o)...), '\n')
	}
	for ns, docs := range byNS {
		f := filepath.Join(t.TempDir(), ns+".json")
		if err := os.WriteFile(f, docs, 0o600); err != nil {
			t.Fatal(err)
		}
		run(t, k.KubectlPath, "--kubeconfig", k.Kubeconfig, "apply", "-n", ns, "-f", f)
	}
}

func mustJSON(t *testing.T, o *unstructured.Unstructured) []byte {
	t.Helper()
	b, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}
