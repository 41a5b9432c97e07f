package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// TestKubeSourcePodsFollowChanges: through a real kube-apiserver, after each of random pod
// adds, updates and deletes and EndpointSlice changes in two namespaces, the source's read
// comes to give the pods and EndpointSlices the API server lists, in name order, each at its
// resourceVersion: the lists it updates from the events it recorded miss none.
func TestKubeSourcePodsFollowChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	env := kubetest.Start(t)
	ctx := t.Context()
	env.Namespace(t, "lb")
	nss := []string{"web", "web-b"}
	for _, ns := range nss {
		env.Namespace(t, ns)
	}
	env.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"},
		Data: map[string]string{
			"a": `{"namespace": "web", "selector": {"app": "a"}}`,
			"b": `{"namespace": "web-b", "selector": {"app": "a"}}`,
		}})
	src := &Kube{Client: env.Client, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys", Logger: slog.New(slog.DiscardHandler)}
	runKube(t, src)
	if err := src.AwaitFirstLists(ctx); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	pods := map[string][]string{} // namespace -> names
	for step := range 40 {
		ns := nss[rng.IntN(len(nss))]
		switch op := rng.IntN(4); {
		case op == 0 || len(pods[ns]) == 0:
			name := fmt.Sprintf("p-%d", step)
			env.ApplyPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "a"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web"}}}})
			pods[ns] = append(pods[ns], name)
		case op == 1:
			env.SetPodReady(t, ns, pods[ns][rng.IntN(len(pods[ns]))], fmt.Sprintf("10.0.0.%d", step), rng.IntN(2) == 0)
		case op == 2:
			i := rng.IntN(len(pods[ns]))
			env.DeletePod(t, ns, pods[ns][i])
			pods[ns] = slices.Delete(pods[ns], i, i+1)
		default:
			env.ApplyEndpointSlice(t, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("k-%d", rng.IntN(3)), Namespace: ns,
				Labels: map[string]string{discoveryv1.LabelServiceName: "k"}},
				AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.1.0.%d", step)}}}})
		}
		var want, got string
		err := haproxytest.Poll(30*time.Second, func() bool {
			want = apiLists(ctx, t, env, nss)
			objs, err := src.Objects(ctx)
			if err != nil {
				return false
			}
			var b strings.Builder
			for _, p := range objs.Pods {
				fmt.Fprintf(&b, "pod %s/%s %s\n", p.Namespace, p.Name, p.ResourceVersion)
			}
			for _, s := range objs.EndpointSlices {
				fmt.Fprintf(&b, "slice %s/%s %s\n", s.Namespace, s.Name, s.ResourceVersion)
			}
			got = b.String()
			return got == want
		})
		if err != nil {
			t.Fatalf("step %d: the read's pods and EndpointSlices are not as the API server lists them: %v\nread:\n%s\nlisted:\n%s", step, err, got, want)
		}
	}
}

// apiLists are the pods and EndpointSlices of nss as the API server lists them, in name order.
func apiLists(ctx context.Context, t *testing.T, env *kubetest.Env, nss []string) string {
	type item struct {
		objName
		rv string
	}
	var pods, eps []item
	for _, ns := range nss {
		pl, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pl.Items {
			pods = append(pods, item{objName{p.Namespace, p.Name}, p.ResourceVersion})
		}
		sl, err := env.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sl.Items {
			eps = append(eps, item{objName{s.Namespace, s.Name}, s.ResourceVersion})
		}
	}
	// By namespace, then name: "web" before "web-b", though "web/" sorts after "web-".
	byName := func(a, b item) int { return a.compare(b.objName) }
	slices.SortFunc(pods, byName)
	slices.SortFunc(eps, byName)
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "pod %s/%s %s\n", p.ns, p.name, p.rv)
	}
	for _, s := range eps {
		fmt.Fprintf(&b, "slice %s/%s %s\n", s.ns, s.name, s.rv)
	}
	return b.String()
}
