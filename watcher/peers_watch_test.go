package watcher

import (
	"context"
	"log/slog"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// TestSourcesWatchThePeersNamespace: with PeersNamespace, the kube and etcd sources follow the pods of
// the replicas' namespace though no service names it, and the peers built from them are the
// running replicas (the default selector: the local pod's labels but pod-template-hash);
// without it, those pods are not watched.
func TestSourcesWatchThePeersNamespace(t *testing.T) {
	env := kubetest.Start(t)
	ctx := context.Background()
	env.Namespace(t, "lb")
	for i, hash := range []string{"old", "new"} {
		name := []string{"haproxy-a", "haproxy-b"}[i]
		pod, err := env.Client.CoreV1().Pods("lb").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lb", Labels: map[string]string{"app": "haproxy", "pod-template-hash": hash}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "haproxy", Image: "haproxy"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: []string{"10.0.0.1", "10.0.0.2"}[i],
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := env.Client.CoreV1().Pods("lb").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	opts := snapshot.PeersOptions{Enabled: true, Namespace: "lb", Local: "haproxy-b"}
	want := []snapshot.Peer{
		{Name: "haproxy-a", IP: "10.0.0.1", Port: snapshot.DefaultPeersPort, Ready: true},
		{Name: "haproxy-b", IP: "10.0.0.2", Port: snapshot.DefaultPeersPort, Ready: true, Local: true},
	}
	type source interface {
		Run(context.Context, func()) error
		Objects(context.Context) (*snapshot.Objects, error)
	}
	etcd := func(peersNS string) source {
		e, err := NewEtcd(EtcdConfig{Endpoints: []string{env.EtcdURL}, Prefix: env.EtcdPrefix, Namespace: "lb",
			PeersNamespace: peersNS, PodConverter: &snapshot.PodConverter{}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	kube := func(peersNS string) source {
		return &Kube{Client: env.Client, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys",
			PeersNamespace: peersNS, Logger: slog.New(slog.DiscardHandler)}
	}
	for name, newSource := range map[string]func(string) source{"kube": kube, "etcd": etcd} {
		t.Run(name, func(t *testing.T) {
			run := func(src source) {
				runCtx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); _ = src.Run(runCtx, func() {}) }()
				t.Cleanup(func() { cancel(); <-done })
			}
			src := newSource("lb")
			run(src)
			var got snapshot.Peers
			err := haproxytest.Poll(30*time.Second, func() bool {
				c, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				objs, err := src.Objects(c)
				if err != nil {
					return false
				}
				got = snapshot.BuildPeers(objs, opts)
				return reflect.DeepEqual(got.All, want)
			})
			if err != nil {
				t.Fatalf("peers %+v, want %+v", got.All, want)
			}
			without := newSource("")
			run(without)
			c, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			objs, err := without.Objects(c)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(objs.Pods) + len(objs.ConvertedPods); n != 0 {
				t.Errorf("without PeersNamespace, %d pods read, want none (no service names lb)", n)
			}
		})
	}
}
