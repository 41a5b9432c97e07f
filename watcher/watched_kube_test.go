package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

var (
	crdGVR     = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crontabGVR = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
)

// installCronTabs creates the CronTab CustomResourceDefinition and waits until the API server
// serves it.
func installCronTabs(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "crontabs.stable.example.com"},
		"spec": map[string]any{
			"group": "stable.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	if _, err := dyn.Resource(crdGVR).Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		_, err := dyn.Resource(crontabGVR).Namespace("web").List(context.Background(), metav1.ListOptions{})
		return err == nil
	}, "the API server serves crontabs")
}

func cronTab(name, schedule string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]any{"name": name, "namespace": "web", "labels": map[string]any{"team": "a"}},
		"spec":     map[string]any{"cronSpec": schedule, "replicas": int64(2), "ratio": 0.5},
	}}
}

// applyNode creates the node (or updates it) and writes its status: addresses and Ready.
func applyNode(t *testing.T, c kubernetes.Interface, name, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"kubernetes.io/hostname": name}}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runKube starts a kube source; it stops when the test ends.
func runKube(t *testing.T, k *Kube) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = k.Run(ctx, func() {}) }()
	t.Cleanup(func() { cancel(); <-done })
}

// records is each watched object's JSON, by resource and key.
func records(objs *snapshot.Objects) map[string]string {
	out := map[string]string{}
	for name, list := range objs.Resources {
		for _, o := range list {
			out[name+" "+o.Key()] = o.Record().String()
		}
	}
	return out
}

// TestWatchedResourcesFromTheAPIServerAndEtcd: Ingresses, EndpointSlices, Nodes and a custom
// resource created through a real kube-apiserver are read by the kube source (dynamic
// informers) and the etcd source (the keys kube-apiserver writes, decoded whatever their type)
// as the same objects; changes are followed; a resource the API server does not serve, or
// that RBAC forbids, is an error naming it, not a wait.
func TestWatchedResourcesFromTheAPIServerAndEtcd(t *testing.T) {
	env := kubetest.Start(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env.Namespace(t, "web")
	env.Namespace(t, "other")
	prefix := networkingv1.PathTypePrefix
	for _, ns := range []string{"web", "other"} {
		_, err := env.Client.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns, Labels: map[string]string{"team": "a"}},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "shop.example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "shop", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	yes := true
	node1 := "node-1"
	env.ApplyEndpointSlice(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "shop-abc", Namespace: "web", Labels: map[string]string{discoveryv1.LabelServiceName: "shop"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.10"}, NodeName: &node1, Conditions: discoveryv1.EndpointConditions{Ready: &yes}}},
	})
	applyNode(t, env.Client, "node-1", "192.0.2.1", true)
	installCronTabs(t, dyn)
	if _, err := dyn.Resource(crontabGVR).Namespace("web").Create(ctx, cronTab("nightly", "0 3 * * *"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	watch := watchList(t,
		"ingresses.v1.networking.k8s.io;selector=team=a",
		"ingresses.v1.networking.k8s.io;namespace=web;as=web_ingresses",
		"endpointslices.v1.discovery.k8s.io",
		"nodes.v1",
		"crontabs.v1.stable.example.com",
	)
	want := []string{
		"crontabs web/nightly", "endpointslices web/shop-abc", "ingresses other/shop", "ingresses web/shop",
		"nodes node-1", "web_ingresses web/shop",
	}

	t.Run("kube-apiserver keeps them where the etcd source looks", func(t *testing.T) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{env.EtcdURL}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ws, err := resolve(watch)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			p := env.EtcdPrefix + "/" + w.etcdPath() + "/"
			resp, err := cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) == 0 {
				t.Errorf("%s: nothing under %s", w.spec.Qualified(), p)
			}
		}
		// The prefixes that are not the plural.
		for _, key := range []string{"/registry/ingress/web/shop", "/registry/minions/node-1", "/registry/stable.example.com/crontabs/web/nightly"} {
			if resp, err := cli.Get(ctx, key, clientv3.WithKeysOnly()); err != nil || len(resp.Kvs) != 1 {
				t.Errorf("no key %s (%v)", key, err)
			}
		}
	})

	kube := &Kube{Client: env.Client, Dynamic: dyn, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys", Watch: watch}
	runKube(t, kube)
	etcd := runEtcd(t, EtcdConfig{Endpoints: []string{env.EtcdURL}, Prefix: env.EtcdPrefix, Watch: watch})
	waitKube := func(t *testing.T, what string, ok func(*snapshot.Objects) bool) *snapshot.Objects {
		t.Helper()
		var (
			objs *snapshot.Objects
			err  error
		)
		if haproxytest.Poll(30*time.Second, func() bool {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			objs, err = kube.Objects(c)
			return err == nil && ok(objs)
		}) != nil {
			t.Fatalf("waited for %s: %v, %v", what, err, func() any {
				if objs == nil {
					return nil
				}
				return records(objs)
			}())
		}
		return objs
	}
	// Every object of want (and the API server's own EndpointSlice default/kubernetes).
	hasAll := func(o *snapshot.Objects) bool {
		r := records(o)
		for _, k := range want {
			if r[k] == "" {
				return false
			}
		}
		return len(r) == len(want)+1 && r["endpointslices default/kubernetes"] != ""
	}

	t.Run("both sources see the same objects", func(t *testing.T) {
		fromKube := waitKube(t, "every watched object through the API", hasAll)
		fromEtcd := etcd.waitFor("every watched object in etcd", func(o *snapshot.Objects, err error) bool { return err == nil && hasAll(o) })
		k, e := records(fromKube), records(fromEtcd)
		for _, key := range want {
			if k[key] != e[key] {
				t.Errorf("%s differs:\n kube %s\n etcd %s", key, k[key], e[key])
			}
		}
		if !strings.Contains(k["crontabs web/nightly"], `"ratio":0.5,"replicas":2`) || !strings.Contains(k["nodes node-1"], `"address":"192.0.2.1"`) {
			t.Errorf("objects: %v", k)
		}
		if strings.Contains(k["ingresses web/shop"], "managedFields") || !strings.Contains(k["ingresses web/shop"], `"resourceVersion"`) {
			t.Errorf("the ingress as kubectl shows it, without managedFields: %s", k["ingresses web/shop"])
		}
	})

	t.Run("Events find each object by its uid", func(t *testing.T) {
		// A second source whose services name the namespace web: its pods and EndpointSlices.
		env.Namespace(t, "edge")
		env.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "edge"},
			Data: map[string]string{"shop": `{"namespace": "web", "service": "shop"}`}})
		env.ApplyPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shop-1", Namespace: "web"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "shop"}}}})
		edge := &Kube{Client: env.Client, Namespace: "edge", ServicesConfigMap: "services", KeysSecret: "keys", Logger: slog.New(slog.DiscardHandler)}
		runKube(t, edge)
		haproxytest.WaitFor(t, 30*time.Second, func() bool {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			objs, err := edge.Objects(c)
			return err == nil && len(objs.Pods) == 1 && len(objs.EndpointSlices) == 1
		}, "the second source sees the pod and the EndpointSlice")

		get := func(gvr schema.GroupVersionResource, ns, name string) func() (*unstructured.Unstructured, error) {
			return func() (*unstructured.Unstructured, error) {
				return dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			}
		}
		for _, c := range []struct {
			source *Kube
			ref    snapshot.Ref
			get    func() (*unstructured.Unstructured, error)
		}{
			{kube, snapshot.Ref{Kind: "Ingress", Namespace: "web", Name: "shop"}, get(schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}, "web", "shop")},
			{kube, snapshot.Ref{Kind: "EndpointSlice", Namespace: "web", Name: "shop-abc"}, get(schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, "web", "shop-abc")},
			{kube, snapshot.Ref{Kind: "Node", Name: "node-1"}, get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "node-1")},
			{kube, snapshot.Ref{Kind: "CronTab", Namespace: "web", Name: "nightly"}, get(crontabGVR, "web", "nightly")},
			{edge, snapshot.Ref{Kind: "Pod", Namespace: "web", Name: "shop-1"}, get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "web", "shop-1")},
			{edge, snapshot.Ref{Kind: "EndpointSlice", Namespace: "web", Name: "shop-abc"}, get(schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, "web", "shop-abc")},
		} {
			want, err := c.get()
			if err != nil {
				t.Fatal(err)
			}
			obj := c.source.Lookup(c.ref)
			if obj == nil {
				t.Errorf("%s: not found", c.ref)
				continue
			}
			got, err := reference.GetReference(scheme.Scheme, obj)
			if err != nil {
				t.Errorf("%s: %v", c.ref, err)
				continue
			}
			if got.UID != want.GetUID() || got.UID == "" || got.Kind != c.ref.Kind || got.APIVersion != want.GetAPIVersion() ||
				got.Namespace != c.ref.Namespace || got.Name != c.ref.Name {
				t.Errorf("%s: the Event would name %+v, want uid %s", c.ref, got, want.GetUID())
			}
		}
		if obj := kube.Lookup(snapshot.Ref{Kind: "Ingress", Namespace: "web", Name: "nightly"}); obj != nil {
			t.Errorf("an object of another kind under the same name was taken for it: %v", obj)
		}
	})

	t.Run("changes are followed", func(t *testing.T) {
		applyNode(t, env.Client, "node-1", "192.0.2.1", false)
		applyNode(t, env.Client, "node-2", "192.0.2.2", true)
		cr, err := dyn.Resource(crontabGVR).Namespace("web").Get(ctx, "nightly", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cr.Object["spec"].(map[string]any)["cronSpec"] = "0 4 * * *"
		if _, err := dyn.Resource(crontabGVR).Namespace("web").Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.NetworkingV1().Ingresses("other").Delete(ctx, "shop", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		changed := func(o *snapshot.Objects) bool {
			r := records(o)
			_, gone := r["ingresses other/shop"]
			return strings.Contains(r["nodes node-1"], `"status":"False"`) && r["nodes node-2"] != "" &&
				strings.Contains(r["crontabs web/nightly"], "0 4 * * *") && !gone
		}
		k := records(waitKube(t, "the changes through the API", changed))
		e := records(etcd.waitFor("the changes in etcd", func(o *snapshot.Objects, err error) bool { return err == nil && changed(o) }))
		for key, v := range k {
			if e[key] != v {
				t.Errorf("%s differs:\n kube %s\n etcd %s", key, v, e[key])
			}
		}
	})

	t.Run("a resource the API server does not serve is an error, not a wait", func(t *testing.T) {
		k := &Kube{Client: env.Client, Dynamic: dyn, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys",
			Watch: watchList(t, "widgets.v1.example.com"), Logger: slog.New(slog.DiscardHandler)}
		runKube(t, k)
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		start := time.Now()
		_, err := k.Objects(c)
		if err == nil || !strings.Contains(err.Error(), "does not serve widgets.v1.example.com") {
			t.Fatalf("err = %v", err)
		}
		if c.Err() != nil {
			t.Errorf("Objects waited %s, until its deadline", time.Since(start))
		}
	})

	t.Run("a resource RBAC forbids is an error naming what to grant", func(t *testing.T) {
		// The user may read the load balancer's ConfigMaps and Secrets, not Nodes.
		env.Namespace(t, "lb")
		if _, err := env.Client.RbacV1().Roles("lb").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "inputs"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Client.RbacV1().RoleBindings("lb").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "inputs"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "inputs"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "nobody"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
		client := kubernetes.NewForConfigOrDie(cfg)
		k := &Kube{Client: client, Dynamic: dynamic.NewForConfigOrDie(cfg), Namespace: "lb", ServicesConfigMap: "services",
			Watch: watchList(t, "nodes.v1"), Logger: slog.New(slog.DiscardHandler)}
		runKube(t, k)
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_, err := k.Objects(c)
		if err == nil || !strings.Contains(err.Error(), `get, list and watch on resource "nodes" of API group ""`) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestStatusOffAsksNoSyncForAStatusWrite: a resource watched with ;status=off is seen without
// its status, and a write of its status alone (the sidecar's own, above all) asks for no
// sync; a change of anything else does. The kube source and the etcd source alike.
func TestStatusOffAsksNoSyncForAStatusWrite(t *testing.T) {
	testStatusWrites(t, "ingresses.v1.networking.k8s.io;status=off", func(ctx context.Context, env *kubetest.Env) statusObject {
		ing, err := env.Client.NetworkingV1().Ingresses("web").Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "web"},
			Spec:       networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "shop", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		api := env.Client.NetworkingV1().Ingresses("web")
		return statusObject{
			resource: "ingresses",
			relabel: func(team string) (string, error) {
				ing.Labels = map[string]string{"team": team}
				var err error
				ing, err = api.Update(ctx, ing, metav1.UpdateOptions{})
				return ing.GetResourceVersion(), err
			},
			hiddenWrite: func() (string, error) {
				ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}}
				var err error
				ing, err = api.UpdateStatus(ctx, ing, metav1.UpdateOptions{})
				return ing.GetResourceVersion(), err
			},
		}
	})
}

// TestStatusFieldsAskASyncForTheirWritesAlone: a resource watched with ;status=FIELD is seen
// with that field of its status alone; a write of another field asks for no sync (the
// sidecar's own write of a Gateway's attachedRoutes, with ;status=addresses), a write of the
// field does, and is seen. The kube source (the status trimmed as JSON) and the etcd source
// (a built-in resource: the converted object trimmed) alike.
func TestStatusFieldsAskASyncForTheirWritesAlone(t *testing.T) {
	testStatusWrites(t, "services.v1;namespace=web;status=conditions", func(ctx context.Context, env *kubetest.Env) statusObject {
		api := env.Client.CoreV1().Services("web")
		svc, err := api.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status := func(change func(*corev1.ServiceStatus)) (string, error) {
			change(&svc.Status)
			var err error
			svc, err = api.UpdateStatus(ctx, svc, metav1.UpdateOptions{})
			return svc.GetResourceVersion(), err
		}
		return statusObject{
			resource: "services",
			relabel: func(team string) (string, error) {
				svc.Labels = map[string]string{"team": team}
				var err error
				svc, err = api.Update(ctx, svc, metav1.UpdateOptions{})
				return svc.GetResourceVersion(), err
			},
			hiddenWrite: func() (string, error) {
				return status(func(st *corev1.ServiceStatus) {
					st.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
				})
			},
			seenWrite: func() (string, error) {
				return status(func(st *corev1.ServiceStatus) {
					st.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Up", LastTransitionTime: metav1.Now()}}
				})
			},
			seen: func(o *snapshot.Object) string {
				st, _ := o.Record().Get("status")
				r, _ := st.(*record.Record)
				if r == nil {
					return ""
				}
				var keys []string
				for k := range r.All() {
					keys = append(keys, k)
				}
				return strings.Join(keys, ",")
			},
			seenBefore: "",
			seenAfter:  "conditions",
		}
	})
}

// statusObject is the object of a status test and what it does to it; each function returns
// the object's new resourceVersion.
type statusObject struct {
	resource    string // its name in Resources
	relabel     func(team string) (string, error)
	hiddenWrite func() (string, error) // a status write templates do not see
	seenWrite   func() (string, error) // a status write they see (nil: none)
	// seen tells the status fields templates see; seenBefore and seenAfter, before and
	// after seenWrite ("": none).
	seen                  func(*snapshot.Object) string
	seenBefore, seenAfter string
}

// testStatusWrites watches a resource with both sources and checks that a status write
// templates do not see asks for no sync, and is read as the echo of the version before
// (snapshot.Echo); and, when there is one, that a status write they see asks for exactly one.
func testStatusWrites(t *testing.T, watchValue string, create func(context.Context, *kubetest.Env) statusObject) {
	env := kubetest.Start(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env.Namespace(t, "web")
	obj := create(ctx, env)
	if obj.seen == nil {
		obj.seen = func(o *snapshot.Object) string {
			if _, ok := o.Record().Get("status"); ok {
				return "status"
			}
			return ""
		}
	}
	watch := watchList(t, watchValue)
	k := &Kube{Client: env.Client, Dynamic: dyn, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys",
		Watch: watch, Logger: slog.New(slog.DiscardHandler)}
	e, err := NewEtcd(EtcdConfig{Endpoints: []string{env.EtcdURL}, Prefix: env.EtcdPrefix, Watch: watch, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sources := []struct {
		name string
		src  interface {
			Run(context.Context, func()) error
			Objects(context.Context) (*snapshot.Objects, error)
		}
		calls atomic.Int64
	}{{name: "kube", src: k}, {name: "etcd", src: e}}
	for i := range sources {
		s := &sources[i]
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = s.src.Run(runCtx, func() { s.calls.Add(1) }) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	// seen waits until source i reads the object at resourceVersion rv ("": any).
	seen := func(i int, rv string) *snapshot.Object {
		var o *snapshot.Object
		haproxytest.WaitFor(t, 30*time.Second, func() bool {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			objs, err := sources[i].src.Objects(c)
			if err != nil || len(objs.Resources[obj.resource]) != 1 {
				return false
			}
			o = objs.Resources[obj.resource][0]
			return rv == "" || o.ResourceVersion() == rv
		}, fmt.Sprintf("%s: the %s seen at resourceVersion %q", sources[i].name, obj.resource, rv))
		return o
	}
	for i := range sources {
		if got := obj.seen(seen(i, "")); got != obj.seenBefore {
			t.Fatalf("%s: the status seen is %q, want %q", sources[i].name, got, obj.seenBefore)
		}
	}
	// Settled first: a label change that asks each source for exactly one sync, so that what
	// the start asks for late (another informer's first list, handed over after the object
	// was seen) is not counted below.
	var (
		before [2]int64
		held   [2]*snapshot.Object
	)
	for round := 0; ; round++ {
		if round == 10 {
			t.Fatal("no label change asked each source for exactly one sync in 10 rounds")
		}
		for i := range sources {
			before[i] = sources[i].calls.Load()
		}
		rv, err := obj.relabel(fmt.Sprintf("settle-%d", round))
		if err != nil {
			t.Fatal(err)
		}
		settled := true
		for i := range sources {
			held[i] = seen(i, rv)
			haproxytest.WaitFor(t, 10*time.Second, func() bool { return sources[i].calls.Load() > before[i] }, "the label change asks for a sync")
			settled = settled && sources[i].calls.Load()-before[i] == 1
		}
		if settled {
			break
		}
	}
	for i := range sources {
		before[i] = sources[i].calls.Load()
	}
	// The converters forget the parts they shared (as after thousands of conversions at
	// scale): the echo's spec can only be the held version's through snapshot.Echo.
	for range 2 {
		k.objConv.NextRound()
		e.objConv.NextRound()
	}
	rv, err := obj.hiddenWrite()
	if err != nil {
		t.Fatal(err)
	}
	// The echo is read with its resourceVersion and the values of the version before it, the
	// very same records (snapshot.Echo): what the renderer kept from them is found again.
	for i := range sources {
		echo := seen(i, rv)
		spec, _ := echo.Record().Get("spec")
		was, _ := held[i].Record().Get("spec")
		if spec == nil || spec != was {
			t.Errorf("%s: the echo's spec is not the record of the version before (resourceVersion %s, then %s)", sources[i].name, held[i].ResourceVersion(), echo.ResourceVersion())
		}
	}
	// A label after it, as a barrier: the informer delivers the events in order.
	if rv, err = obj.relabel("a"); err != nil {
		t.Fatal(err)
	}
	for i := range sources {
		seen(i, rv)
		haproxytest.WaitFor(t, 10*time.Second, func() bool { return sources[i].calls.Load() > before[i] }, "the label change asks for a sync")
		if got := sources[i].calls.Load() - before[i]; got != 1 {
			t.Errorf("%s: %d syncs asked for a status write and a label change, want 1 (the label's)", sources[i].name, got)
		}
		before[i] = sources[i].calls.Load()
	}
	if obj.seenWrite == nil {
		return
	}
	if rv, err = obj.seenWrite(); err != nil {
		t.Fatal(err)
	}
	for i := range sources {
		if got := obj.seen(seen(i, rv)); got != obj.seenAfter {
			t.Errorf("%s: after the status write templates see, the status seen is %q, want %q", sources[i].name, got, obj.seenAfter)
		}
		haproxytest.WaitFor(t, 10*time.Second, func() bool { return sources[i].calls.Load() > before[i] }, sources[i].name+": the status write templates see asks for a sync")
	}
}

// TestAnnotationsAloneAskNoSync: an update of the services ConfigMap that changes only its
// annotations (the live-config annotations the sidecar writes after each change) asks for no
// sync; a change of its data does.
func TestAnnotationsAloneAskNoSync(t *testing.T) {
	env := kubetest.Start(t)
	ctx := context.Background()
	env.Namespace(t, "lb")
	cm, err := env.Client.CoreV1().ConfigMaps("lb").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"},
		Data: map[string]string{"web": `{"namespace": "web", "selector": {"app": "web"}}`}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	k := &Kube{Client: env.Client, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys", Logger: slog.New(slog.DiscardHandler)}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = k.Run(runCtx, func() { calls.Add(1) }) }()
	t.Cleanup(func() { cancel(); <-done })
	read := func(key string) string {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		objs, err := k.Objects(c)
		if err != nil {
			return ""
		}
		for _, m := range objs.ConfigMaps {
			if m.Name == "services" {
				return m.Data[key]
			}
		}
		return ""
	}
	data := func() string { return read("web") }
	haproxytest.WaitFor(t, 30*time.Second, func() bool { return data() != "" }, "the services ConfigMap read")
	// Settled first: a data change that asks for exactly one sync, so that what the start asks
	// for late (another informer's first list, handed over after the ConfigMap was read) is
	// not counted below.
	var before int64
	for round := 0; ; round++ {
		if round == 10 {
			t.Fatal("no data change asked for exactly one sync in 10 rounds")
		}
		before = calls.Load()
		cm.Data["settle"] = fmt.Sprint(round)
		if cm, err = env.Client.CoreV1().ConfigMaps("lb").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		haproxytest.WaitFor(t, 10*time.Second, func() bool { return read("settle") == cm.Data["settle"] && calls.Load() > before },
			"the settling change seen")
		if calls.Load()-before == 1 {
			break
		}
	}
	before = calls.Load()
	cm.Annotations = map[string]string{"haproxy-sidecar.io/live-config": "abc"}
	if cm, err = env.Client.CoreV1().ConfigMaps("lb").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm.Data["web"] = `{"namespace": "web", "selector": {"app": "web2"}}`
	if _, err := env.Client.CoreV1().ConfigMaps("lb").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 10*time.Second, func() bool { return strings.Contains(data(), "web2") && calls.Load() > before }, "the data change seen")
	if got := calls.Load() - before; got != 1 {
		t.Errorf("%d syncs asked for an annotation and a data change, want 1 (the data's)", got)
	}
}
