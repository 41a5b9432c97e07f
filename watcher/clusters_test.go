package watcher

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// Each cluster's state is its own: source_up{cluster} follows it, and the overall state is
// down while any cluster is, naming each in name order; ForgetAfter counts from when a
// cluster went away, not from its latest report.
func TestClustersState(t *testing.T) {
	c := NewClusters(&Kube{Cluster: "home"}, []*Kube{{Cluster: "west", Member: true}, {Cluster: "east", Member: true}})
	up := map[string]bool{}
	var overall error
	var overallUp bool
	c.OnCluster = func(name string, u bool) { up[name] = u }
	c.OnState = func(u bool, why error) { overallUp, overall = u, why }
	c.ForgetAfter = time.Hour

	report := func(k *Kube, u bool, why error) { k.OnState(u, why) }
	home, west, east := c.Home, c.Members[0], c.Members[1]
	report(home, true, nil)
	report(west, false, errors.New("cannot reach the API server https://west"))
	report(east, false, errors.New("cannot reach the API server https://east"))
	if up["home"] != true || up["west"] || up["east"] {
		t.Errorf("per cluster: %v", up)
	}
	if overallUp || overall == nil {
		t.Fatal("overall up while two clusters are away")
	}
	msg := overall.Error()
	if i, j := strings.Index(msg, "cluster east: cannot reach the API server https://east"), strings.Index(msg, "cluster west: cannot reach"); i < 0 || j < 0 || i > j {
		t.Errorf("overall reason %q: want east then west, each named", msg)
	}
	if strings.Contains(msg, "home") {
		t.Errorf("overall reason %q names the home cluster, which is followed", msg)
	}
	if c.forgotten("west") {
		t.Error("west forgotten before ForgetAfter")
	}
	c.mu.Lock()
	c.away["west"] = awayCluster{since: time.Now().Add(-2 * time.Hour), why: c.away["west"].why}
	c.mu.Unlock()
	report(west, false, errors.New("a new reason")) // a new reason keeps the time it went away
	if !c.forgotten("west") || c.forgotten("east") || c.forgotten("home") {
		t.Error("forgotten: want west only (away two hours)")
	}
	report(west, true, nil)
	report(east, true, nil)
	if !overallUp || overall != nil || !up["west"] || !up["east"] {
		t.Errorf("all back: overall %v %v, per cluster %v", overallUp, overall, up)
	}
	if c.forgotten("west") {
		t.Error("west forgotten once back")
	}
	c.ForgetAfter = 0
	report(west, false, errors.New("away"))
	c.mu.Lock()
	c.away["west"] = awayCluster{since: time.Now().Add(-48 * time.Hour)}
	c.mu.Unlock()
	if c.forgotten("west") {
		t.Error("ForgetAfter 0: a cluster away is kept, however long")
	}
}

// Clusters merges the home cluster's objects with a member's: the ConfigMaps are the home
// cluster's alone, the pods of both carry their cluster and stay apart though their
// namespace and name are the same; a member's pods are those of the namespaces the home
// cluster's services name.
func TestClustersMerge(t *testing.T) {
	pod := func(name, ip, uid string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(uid), ResourceVersion: "1", Labels: map[string]string{"app": "web"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
	}
	services := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "services"},
		Data: map[string]string{"web": `{"namespace": "shop", "selector": {"app": "web"}}`}}
	memberCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "services"},
		Data: map[string]string{"not-read": `{"namespace": "other", "selector": {}}`}}
	home := &Kube{Client: fake.NewClientset(services, pod("web-0", "10.1.0.1", "a")), Namespace: "lb",
		ServicesConfigMap: "services", KeysSecret: "keys", Cluster: "east"}
	west := &Kube{Client: fake.NewClientset(memberCM, pod("web-0", "10.2.0.1", "b"), pod("web-1", "10.2.0.2", "c")),
		Namespace: "lb", ServicesConfigMap: "services", Cluster: "west", Member: true}
	c := NewClusters(home, []*Kube{west})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, func() {}) }()
	objs, err := c.Objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.ConfigMaps) != 1 || objs.ConfigMaps[0].Data["web"] == "" {
		t.Errorf("ConfigMaps %v: want the home cluster's services alone", objs.ConfigMaps)
	}
	if len(objs.Pods) != 0 {
		t.Errorf("%d typed pods: with several clusters every pod carries its cluster", len(objs.Pods))
	}
	var got []string
	for _, p := range objs.ConvertedPods {
		got = append(got, p.Cluster()+"/"+p.Namespace()+"/"+p.Name())
	}
	slices.Sort(got)
	if want := []string{"east/shop/web-0", "west/shop/web-0", "west/shop/web-1"}; !slices.Equal(got, want) {
		t.Errorf("pods %v, want %v", got, want)
	}
	if !strings.HasPrefix(objs.Revision, "east=") || !strings.Contains(objs.Revision, ",west=") {
		t.Errorf("revision %q: want each cluster's", objs.Revision)
	}
	snap, err := snapshot.Build(objs, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range snap.Services[0].Field("pods").(*record.Record).All() {
		keys = append(keys, k)
	}
	if want := []string{"east:web-0", "west:web-0", "west:web-1"}; !slices.Equal(keys, want) {
		t.Errorf("service pods %v, want %v", keys, want)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
}

// TestClustersMemberReadStandsIn: a member whose read does not end within MemberReadWait (here,
// it never started) does not hold the sync back: the home cluster's objects are read, and
// OnStoodIn counts the member whose last read stood in.
func TestClustersMemberReadStandsIn(t *testing.T) {
	services := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "services"},
		Data: map[string]string{"web": `{"namespace": "shop", "selector": {"app": "web"}}`}}
	home := &Kube{Client: fake.NewClientset(services), Namespace: "lb", ServicesConfigMap: "services", Cluster: "east"}
	west := &Kube{Client: fake.NewClientset(), Namespace: "lb", ServicesConfigMap: "services", Cluster: "west", Member: true}
	c := NewClusters(home, []*Kube{west})
	c.MemberReadWait = 50 * time.Millisecond
	var stoodIn []string
	c.OnStoodIn = func(cluster string) { stoodIn = append(stoodIn, cluster) }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- home.Run(ctx, func() {}) }() // west is never run: its read cannot end
	defer func() { cancel(); <-done }()
	for want := 1; want <= 2; want++ {
		objs, err := c.Objects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs.ConfigMaps) != 1 || strings.Contains(objs.Revision, "west=") {
			t.Errorf("read %d: ConfigMaps %d, revision %q: want the home cluster's alone", want, len(objs.ConfigMaps), objs.Revision)
		}
		if len(stoodIn) != want || stoodIn[want-1] != "west" {
			t.Errorf("read %d: stood in %v, want west once a read", want, stoodIn)
		}
	}
}
