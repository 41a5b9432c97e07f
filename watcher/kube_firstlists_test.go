package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// firstListsSource is Kube and Clusters, as the pipeline uses them.
type firstListsSource interface {
	Run(context.Context, func()) error
	AwaitFirstLists(context.Context) error
	Objects(context.Context) (*snapshot.Objects, error)
}

// TestKubeFirstListsNotifiedBeforeAwaitReturns: through a real kube-apiserver, AwaitFirstLists
// returns once the handlers have made a change notification for every object of the initial
// lists (the ConfigMaps and, through the pod informers it starts, the pods of the namespace
// the services name; with several clusters a member's pods too), so that a sync noting what
// asked for it after that is not asked for again by what its read holds: the read makes no
// notification more. A pod created after that is notified and read.
func TestKubeFirstListsNotifiedBeforeAwaitReturns(t *testing.T) {
	env := kubetest.Start(t)
	ctx := t.Context()
	env.Namespace(t, "lb")
	env.Namespace(t, "web")
	env.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"},
		Data: map[string]string{"web": `{"namespace": "web", "selector": {"app": "web"}}`}})
	const pods = 30
	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "web", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web"}}}}
	}
	for i := range pods {
		env.ApplyPod(t, pod(i))
	}
	cms, err := env.Client.CoreV1().ConfigMaps("lb").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kube := func(cluster string, member bool) *Kube {
		return &Kube{Client: env.Client, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys",
			Cluster: cluster, Member: member, Logger: slog.New(slog.DiscardHandler)}
	}
	for _, tc := range []struct {
		name     string
		src      func() firstListsSource
		objects  int // notifications of the initial lists
		podsRead int
	}{
		{"one cluster", func() firstListsSource { return kube("", false) }, len(cms.Items) + pods, pods},
		{"several clusters", func() firstListsSource {
			return NewClusters(kube("home", false), []*Kube{kube("west", true)})
		}, len(cms.Items) + 2*pods, 2 * pods},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src()
			var calls atomic.Int64
			runCtx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() { _ = src.Run(runCtx, func() { calls.Add(1) }) })
			t.Cleanup(func() { cancel(); wg.Wait() })
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			defer wcancel()
			if err := src.AwaitFirstLists(wctx); err != nil {
				t.Fatal(err)
			}
			if got := calls.Load(); got != int64(tc.objects) {
				t.Fatalf("%d change notifications when AwaitFirstLists returned, want %d (one per object listed)", got, tc.objects)
			}
			objs, err := src.Objects(wctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(objs.Pods) + len(objs.ConvertedPods); got != tc.podsRead {
				t.Fatalf("read %d pods, want %d", got, tc.podsRead)
			}
			if got := calls.Load(); got != int64(tc.objects) {
				t.Errorf("%d change notifications after the read, want %d: the read asked for a sync", got, tc.objects)
			}
			// A pod created now is a change: notified, and read.
			env.ApplyPod(t, pod(pods+len(tc.name)))
			haproxytest.WaitFor(t, 30*time.Second, func() bool {
				objs, err := src.Objects(wctx)
				return calls.Load() > int64(tc.objects) && err == nil && len(objs.Pods)+len(objs.ConvertedPods) > tc.podsRead
			}, "the pod created after the first lists notified and read")
			env.DeletePod(t, "web", pod(pods+len(tc.name)).Name)
		})
	}
}
