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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// TestKubeSourceWatchedFollowChanges: through a real kube-apiserver, after each of random
// creates, updates and deletes of a watched resource's objects (ConfigMaps, in namespaces that
// are each other's prefixes), the source's read comes to give the objects the API server
// lists, in name order, each at its resourceVersion: the list it keeps sorted from the events
// it recorded misses none.
func TestKubeSourceWatchedFollowChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	env := kubetest.Start(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	nss := []string{"web", "web-b"}
	for _, ns := range append([]string{"lb"}, nss...) {
		env.Namespace(t, ns)
	}
	src := &Kube{Client: env.Client, Dynamic: dyn, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys",
		Watch: watchList(t, "configmaps.v1.;namespace=web;as=web", "configmaps.v1."), Logger: slog.New(slog.DiscardHandler)}
	runKube(t, src)
	rng := rand.New(rand.NewPCG(7, 8))
	names := map[string][]string{} // namespace -> names
	for step := range 40 {
		ns := nss[rng.IntN(len(nss))]
		switch op := rng.IntN(3); {
		case op == 0 || len(names[ns]) == 0:
			name := fmt.Sprintf("c-%d", step)
			env.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"v": "0"}})
			names[ns] = append(names[ns], name)
		case op == 1:
			env.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names[ns][rng.IntN(len(names[ns]))], Namespace: ns},
				Data: map[string]string{"v": fmt.Sprint(step)}})
		default:
			i := rng.IntN(len(names[ns]))
			if err := env.Client.CoreV1().ConfigMaps(ns).Delete(ctx, names[ns][i], metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			names[ns] = slices.Delete(names[ns], i, i+1)
		}
		var want, got string
		err := haproxytest.Poll(30*time.Second, func() bool {
			want = apiConfigMaps(ctx, t, env, "web") + apiConfigMaps(ctx, t, env, "")
			objs, err := src.Objects(ctx)
			if err != nil {
				return false
			}
			var b strings.Builder
			for _, res := range []string{"web", "configmaps"} {
				for _, o := range objs.Resources[res] {
					fmt.Fprintf(&b, "%s %s\n", o.Key(), o.ResourceVersion())
				}
			}
			got = b.String()
			return got == want
		})
		if err != nil {
			t.Fatalf("step %d: the read's watched objects are not as the API server lists them: %v\nread:\n%s\nlisted:\n%s", step, err, got, want)
		}
	}
}

// apiConfigMaps are the ConfigMaps of ns (every namespace: "") as the API server lists them, in
// name order.
func apiConfigMaps(ctx context.Context, t *testing.T, env *kubetest.Env, ns string) string {
	l, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// By namespace, then name: "web" before "web-b", though "web/" sorts after "web-".
	slices.SortFunc(l.Items, func(a, b corev1.ConfigMap) int {
		return objName{a.Namespace, a.Name}.compare(objName{b.Namespace, b.Name})
	})
	var b strings.Builder
	for _, cm := range l.Items {
		fmt.Fprintf(&b, "%s/%s %s\n", cm.Namespace, cm.Name, cm.ResourceVersion)
	}
	return b.String()
}
