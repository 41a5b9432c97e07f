package watcher

import (
	"log/slog"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// TestKubeSourceKeepsUnchangedServices: through a real kube-apiserver, the kube source and
// snapshot.Build with a PodCache, a pod's change makes a new map of its service only, an
// EndpointSlice's change of the Kubernetes Service's entry only; the other services are the
// last snapshot's very maps (the informers give the same objects for what did not change).
func TestKubeSourceKeepsUnchangedServices(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	env := kubetest.Start(t)
	ctx := t.Context()
	env.Namespace(t, "lb")
	env.Namespace(t, "web")
	env.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"},
		Data: map[string]string{
			"a": `{"namespace": "web", "selector": {"app": "a"}}`,
			"b": `{"namespace": "web", "selector": {"app": "b"}}`,
			"k": `{"namespace": "web", "service": "k"}`,
		}})
	for _, name := range []string{"a-1", "b-1"} {
		env.ApplyPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web", Labels: map[string]string{"app": name[:1]}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web"}}}})
	}
	env.SetPodReady(t, "web", "a-1", "10.0.0.1", true)
	env.SetPodReady(t, "web", "b-1", "10.0.0.2", true)
	slice := func(ip string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "k-1", Namespace: "web",
			Labels: map[string]string{discoveryv1.LabelServiceName: "k"}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}}}}
	}
	env.ApplyEndpointSlice(t, slice("10.1.0.1"))

	src := &Kube{Client: env.Client, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys", Logger: slog.New(slog.DiscardHandler)}
	runKube(t, src)
	if err := src.AwaitFirstLists(ctx); err != nil {
		t.Fatal(err)
	}
	opts := snapshot.Options{PodCache: &snapshot.PodCache{}}
	var snap *snapshot.Snapshot
	// build reads the source and builds until the snapshot shows want for svc's pods.
	build := func(what, svc string, want ...string) {
		t.Helper()
		haproxytest.WaitFor(t, 30*time.Second, func() bool {
			objs, err := src.Objects(ctx)
			if err != nil {
				return false
			}
			if snap, err = snapshot.Build(objs, opts); err != nil {
				t.Fatal(err)
			}
			return slices.Equal(podIPs(snap, svc), want)
		}, what)
	}
	build("the first lists", "k", "10.1.0.1")
	build("the first lists", "a", "10.0.0.1")
	for _, step := range []struct {
		name        string
		change      func()
		svc, wantIP string
		want        []string
	}{
		{"nothing changed", func() {}, "a", "10.0.0.1", nil},
		{"a pod's address changed", func() { env.SetPodReady(t, "web", "a-1", "10.0.0.9", true) }, "a", "10.0.0.9", []string{"a"}},
		{"the EndpointSlice changed", func() { env.ApplyEndpointSlice(t, slice("10.1.0.2")) }, "k", "10.1.0.2", []string{"k"}},
	} {
		prev := snap
		step.change()
		build(step.name, step.svc, step.wantIP)
		var got []string
		for i, svc := range snap.Services {
			if reflect.ValueOf(svc).UnsafePointer() != reflect.ValueOf(prev.Services[i]).UnsafePointer() {
				got = append(got, svc.Field("name").(string))
			}
		}
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: new maps for %v, want %v", step.name, got, step.want)
		}
	}
}

// podIPs are the status.podIP of svc's pods in snap.
func podIPs(snap *snapshot.Snapshot, svc string) []string {
	var ips []string
	for _, s := range snap.Services {
		if s.Field("name") != svc {
			continue
		}
		for _, p := range record.Plain(s.Field("pods")).(map[string]any) {
			ips = append(ips, p.(map[string]any)["status"].(map[string]any)["podIP"].(string))
		}
	}
	slices.Sort(ips)
	return ips
}
