package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

// TestWebhookRefusesABadChangeAtApply: with the sidecar's admission webhook registered in a real
// kube-apiserver, `kubectl apply` of a services ConfigMap the sidecar would hold is refused
// with the key and reason; a good edit is accepted and goes live; with the sidecar down
// (failurePolicy Ignore), changes are accepted as before. The configuration registered is the
// chart's (rules, namespace selector, failure policy), pointed at the sidecar on loopback.
func TestWebhookRefusesABadChangeAtApply(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	applyExample(t, k, e)

	certDir := t.TempDir()
	crt, key := testcert.Pair(t, "127.0.0.1")
	for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(certDir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hook := fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
	stop := e.startSidecar(t, "--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb",
		"--webhook-addr", hook, "--webhook-cert-dir", certDir)
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "api.localhost", "/v1/x", "api-")

	registerChartWebhook(t, k, "https://"+hook+"/validate", crt)

	services := func(edit func(string) string) string {
		b, err := os.ReadFile(filepath.Join(e.dir, "services.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "services.yaml")
		if err := os.WriteFile(path, []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command(k.KubectlPath, append([]string{"--kubeconfig", k.Kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
	bad := services(func(s string) string { return strings.Replace(s, `"ports": [`, `"ports": [[`, 1) })

	// The API server picks the configuration up shortly after it is created.
	var out string
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		var err error
		out, err = kubectl("apply", "--dry-run=server", "-f", bad)
		return err != nil && strings.Contains(out, "denied the request")
	}, "the API server asks the webhook")

	// Not JSON, and JSON whose port haproxy -c refuses (found by bisection).
	for _, file := range []string{bad, services(func(s string) string { return strings.Replace(s, `"ports": [`, `"ports": [99999, `, 1) })} {
		out, err := kubectl("apply", "-f", file)
		if err == nil {
			t.Fatalf("kubectl apply of a bad services key succeeded:\n%s", out)
		}
		for _, want := range []string{`denied the request`, `ConfigMap lb/services key "web"`} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl says %q, without %q", out, want)
			}
		}
	}
	cm, err := k.Client.CoreV1().ConfigMaps("lb").Get(context.Background(), "services", metav1.GetOptions{})
	if err != nil || strings.Contains(cm.Data["web"], "[[") || strings.Contains(cm.Data["web"], "99999") {
		t.Fatalf("the refused change is stored (%v): %q", err, cm.Data["web"])
	}

	good := services(func(s string) string {
		return strings.Replace(s, `"hostnames": ["api.localhost"]`, `"hostnames": ["api.localhost", "api2.localhost"]`, 1)
	})
	if out, err := kubectl("apply", "-f", good); err != nil {
		t.Fatalf("kubectl apply of a good edit: %v\n%s", err, out)
	}
	e.waitServed(t, "api2.localhost", "/v1/x", "api-")

	// Pods come and go without a word from the webhook (it is not asked about them).
	if out, err := kubectl("delete", "pod", "-n", "demo", "web-7d9f-abcde"); err != nil {
		t.Fatalf("delete a pod: %v\n%s", err, out)
	}

	stop()
	if out, err := kubectl("apply", "-f", bad); err != nil {
		t.Fatalf("with the sidecar down, kubectl apply is refused (failurePolicy Ignore should let it through): %v\n%s", err, out)
	}
}

// registerChartWebhook creates the chart's ValidatingWebhookConfiguration (release lb in
// namespace lb) in the API server, its clientConfig the URL of the sidecar the test runs.
func registerChartWebhook(t *testing.T, k *kubetest.Env, url string, ca []byte) {
	t.Helper()
	objs := helmTemplate(t, helmBin(t), "lb", "lb", "--set", "webhook.enabled=true")
	found := find(objs, "ValidatingWebhookConfiguration", "")
	if len(found) != 1 {
		t.Fatalf("the chart makes %d ValidatingWebhookConfigurations with webhook.enabled", len(found))
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(found[0].Object, &cfg); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}
	}
	if _, err := k.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), &cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
