package e2e

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// TestWatchRBAC: the Helm chart derives get, list and watch rules from its watch value (a
// Role where the resource is watched in one namespace, a ClusterRole otherwise), passes the
// values as WATCH, and with what it grants (applied to a real API server) the sidecar's service
// account can watch exactly those resources; examples/kubernetes/rbac-watch.yaml does the
// same for the NodePort example.
func TestWatchRBAC(t *testing.T) {
	helm := helmBin(t)
	k := kubetest.Start(t)
	k.Namespace(t, "lb")
	k.Namespace(t, "web")
	watch := []string{
		"endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name",
		"nodes.v1",
		"ingresses.v1.networking.k8s.io;namespace=web;selector=team=a,tier!=db",
	}
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("watch:\n- '"+strings.Join(watch, "'\n- '")+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := run(t, helm, "template", "lb", "../charts/haproxy-sidecar", "--namespace", "lb", "-f", values)
	var sawEnv bool
	for _, o := range decodeDocs(t, out) {
		js := string(mustJSON(t, o))
		switch {
		case o.GetKind() == "ClusterRole" && strings.HasSuffix(o.GetName(), "-watch"):
			if !strings.Contains(js, `"resources":["nodes"]`) || !strings.Contains(js, `"resources":["endpointslices"]`) || strings.Contains(js, "ingresses") {
				t.Errorf("the cluster-wide watch rules: %s", js)
			}
		case o.GetKind() == "Role" && o.GetNamespace() == "web":
			if !strings.Contains(js, `"apiGroups":["networking.k8s.io"],"resources":["ingresses"]`) {
				t.Errorf("the Role in web: %s", js)
			}
		case o.GetKind() == "Deployment":
			sawEnv = strings.Contains(js, `{"name":"HAPROXY_SIDECAR_WATCH","value":"`+strings.Join(watch, ",")+`"}`)
		}
	}
	if !sawEnv {
		t.Error("the Deployment has no HAPROXY_SIDECAR_WATCH with the watch values")
	}
	kubectlApplyByNamespace(t, k, "lb", out) // applied for real

	// objects runs a kube source as the service account with the watch values.
	objects := func(t *testing.T, sa string, values []string) error {
		cfg := rest.CopyConfig(k.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:lb:" + sa}
		var l watchspec.List
		for _, v := range values {
			if err := l.Set(v); err != nil {
				t.Fatal(err)
			}
		}
		src := &watcher.Kube{Client: kubernetes.NewForConfigOrDie(cfg), Dynamic: dynamic.NewForConfigOrDie(cfg),
			Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys", Watch: l, Logger: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		go src.Run(ctx, func() {})
		_, err := src.Objects(ctx)
		return err
	}
	t.Run("the chart's grants are enough", func(t *testing.T) {
		if err := objects(t, "lb", watch); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("and no more", func(t *testing.T) {
		err := objects(t, "lb", []string{"ingresses.v1.networking.k8s.io"}) // every namespace: not granted
		if err == nil || !strings.Contains(err.Error(), `get, list and watch on resource "ingresses" of API group "networking.k8s.io"`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("examples/kubernetes/rbac-watch.yaml is what the NodePort example needs", func(t *testing.T) {
		for _, m := range []string{"rbac.yaml", "rbac-watch.yaml"} {
			run(t, k.KubectlPath, "--kubeconfig", k.Kubeconfig, "apply", "-f", filepath.Join("../examples/kubernetes", m))
		}
		var flags []string
		args := exampleWatchFlags(t, "../examples/templates/nodeport.yaml")
		for i := 1; i < len(args); i += 2 {
			flags = append(flags, args[i])
		}
		if err := objects(t, "haproxy-sidecar", flags); err != nil {
			t.Fatal(err)
		}
	})
}
