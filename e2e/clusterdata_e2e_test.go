package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// TestBadPodAnnotationNeverFreezes: through the real kube-apiserver, a ready pod whose
// annotation the template prints as its server's weight, beyond what HAProxy takes (300 > 256),
// is left out and reported on itself (a Warning Event that `kubectl describe pod` shows,
// /readyz, held_inputs) while the sidecar stays ready and another pod's change goes live;
// patching the annotation serves the pod.
func TestBadPodAnnotationNeverFreezes(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "check inter 2s\n", "check inter 2s weight {{ (pod.metadata.annotations or {}).get('lb/weight', 100) }}\n", 1)
	})
	applyExample(t, k, e)
	e.startSidecar(t, "--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb")
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")

	const name = "web-7d9f-heavy" // served, it answers web-3
	pod := k.ApplyPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"lb/weight": "300"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "demo-backend"}}},
	})
	k.SetPodReady(t, "demo", name, "127.0.0.13", true)

	heldPod := func(r readyz) bool {
		for _, h := range r.Held {
			if h.Input == "pod/demo/"+name && h.Object == "Pod demo/"+name && strings.Contains(h.Reason, "weight") && !h.Kept {
				return true
			}
		}
		return false
	}
	var r readyz
	haproxytest.WaitFor(t, 15*time.Second, func() bool {
		var code int
		code, r = e.readyz(t)
		return code == 200 && heldPod(r)
	}, "the pod is held, listed by /readyz, and the sidecar stays ready")
	if got := e.metric(t, `haproxy_sidecar_held_inputs{kind="pod"}`); got != 1 {
		t.Errorf("held_inputs{kind=pod} = %v, want 1", got)
	}
	// On the pod itself, as `kubectl describe pod` finds Events: by kind, name and uid.
	var msg string
	haproxytest.WaitFor(t, 15*time.Second, func() bool {
		evs, err := k.Client.CoreV1().Events("demo").List(context.Background(), metav1.ListOptions{FieldSelector: fmt.Sprintf(
			"involvedObject.kind=Pod,involvedObject.name=%s,involvedObject.uid=%s,type=Warning,reason=Rejected", name, pod.UID)})
		if err != nil || len(evs.Items) == 0 {
			return false
		}
		msg = evs.Items[len(evs.Items)-1].Message
		return true
	}, "a Warning Event on the pod")
	if !strings.Contains(msg, "Pod demo/"+name+" is left out") || !strings.Contains(msg, "weight") {
		t.Errorf("the Event %q does not say the pod is left out and HAProxy's reason", msg)
	}

	// Another pod becomes ready meanwhile: served.
	k.SetPodReady(t, "demo", "api-5c6b-pqrst", "", true)
	e.waitServed(t, "api.localhost", "/v1/x", "api-2")
	e.settled(t)
	if code, r := e.readyz(t); code != 200 || !heldPod(r) {
		t.Errorf("after the other change: /readyz %d, held %+v", code, r.Held)
	}
	if cfg := readFile(t, e.cfgPath); strings.Contains(cfg, name) {
		t.Errorf("the held pod is in the live configuration:\n%s", cfg)
	}

	// Fixed: served with its weight.
	if _, err := k.Client.CoreV1().Pods("demo").Patch(context.Background(), name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"lb/weight":"50"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 15*time.Second, func() bool {
		var code int
		code, r = e.readyz(t)
		return code == 200 && len(r.Held) == 0
	}, "nothing held once the annotation is fixed")
	e.waitServed(t, "web.localhost", "/", "web-3")
	e.settled(t)
	if cfg, want := readFile(t, e.cfgPath), fmt.Sprintf("server %s-%d 127.0.0.13:%d check inter 2s weight 50\n", name, e.port, e.port); !strings.Contains(cfg, want) {
		t.Errorf("the live configuration lacks %q:\n%s", want, cfg)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
