package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// TestKubeStartRendersOnce: the kube source's informers give their initial lists to their
// handlers as change notifications, one per object; the first sync waits until they all have
// been made before it notes what asked for it and reads, so that they ask for no second render
// of everything at start (docs/performance.md, "The syncs after the first at start"). With the
// demo and 100 more pods, the sidecar renders once at start, HAProxy's start renders nothing,
// and a change after the start renders once more. A change made while the sidecar (started
// again) is starting is not missed.
func TestKubeStartRendersOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	applyExample(t, k, e)
	for i := range 100 {
		k.ApplyPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("idle-%d", i), Namespace: "demo", Labels: map[string]string{"app": "idle"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "idle"}}},
		})
	}
	// The change after the start is one write (the pod made ready): a pod created and made
	// ready in two writes could be seen in two syncs, the first finding it ready already and
	// the second nothing to render (an "unchanged" render that the start did not ask for).
	k.ApplyPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f-zzzzz", Namespace: "demo", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "demo-backend"}}},
	})
	args := []string{"--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb"}
	const (
		success   = `haproxy_sidecar_renders_total{result="success"}`
		unchanged = `haproxy_sidecar_renders_total{result="unchanged"}`
		failed    = `haproxy_sidecar_renders_total{result="error"}`
	)
	stop := e.startSidecar(t, args...)
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	if got := e.metric(t, success); got != 1 {
		t.Fatalf("%v renders went live at start, want 1", got)
	}

	// A change after the start: its sync comes after any the start asked for, so that once its
	// render is counted, every render the start asked for is too.
	k.SetPodReady(t, "demo", "web-7d9f-zzzzz", "127.0.0.13", true)
	e.waitServed(t, "web.localhost", "/", "web-3")
	haproxytest.WaitFor(t, 10*time.Second, func() bool { return e.metric(t, success) == 2 }, "the change's render counted")
	if u, f := e.metric(t, unchanged), e.metric(t, failed); u != 0 || f != 0 {
		t.Errorf("renders: %v unchanged, %v failed besides the start's and the change's: the start asked for more than one", u, f)
	}
	stop()

	// Started again, with a change made as it starts: whether the change is in the informers'
	// first lists, among their notifications, or after the first read, it goes live.
	s := e.restarted(t)
	s.startSidecar(t, args...)
	k.SetPodReady(t, "demo", "web-7d9f-zzzzz", "", false)
	s.waitReady(t)
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		for range 9 {
			if _, body, _, _ := s.get("web.localhost", "/"); strings.HasPrefix(body, "web-3") {
				return false
			}
		}
		return true
	}, "the pod made unready as the sidecar started gets no traffic")
}
