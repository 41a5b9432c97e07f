package watcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

func watchList(t *testing.T, values ...string) watchspec.List {
	t.Helper()
	var l watchspec.List
	for _, v := range values {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// keys lists the objects of each watched resource as "name: ns/obj ns/obj".
func watchedKeys(objs *snapshot.Objects) string {
	var out []string
	for name, list := range objs.Resources {
		var keys []string
		for _, o := range list {
			keys = append(keys, o.Key())
		}
		sort.Strings(keys)
		out = append(out, name+": "+strings.Join(keys, " "))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

const watchedManifests = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: web
  labels: {team: a}
spec:
  rules:
  - host: shop.example.com
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: other-team
  namespace: web
  labels: {team: b}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: no-namespace
  labels: {team: a}
---
apiVersion: v1
kind: Node
metadata:
  name: node-1
status:
  addresses:
  - {type: InternalIP, address: 192.168.0.1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: shop-abc
  namespace: web
  labels: {kubernetes.io/service-name: shop}
addressType: IPv4
endpoints:
- addresses: [10.0.0.1]
  nodeName: node-1
---
apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: nightly
  namespace: web
spec:
  cronSpec: "0 3 * * *"
  replicas: 2
---
apiVersion: stable.example.com/v1
kind: Unwatched
metadata:
  name: ignored
`

func TestFileWatchedResources(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(watchedManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, conv := range []bool{false, true} {
		f := &File{Dir: dir, DefaultNamespace: "lb", Watch: watchList(t,
			"ingresses.v1.networking.k8s.io;selector=team=a",
			"ingresses.v1.networking.k8s.io;namespace=web;as=web_ingresses",
			"nodes.v1",
			"endpointslices.v1.discovery.k8s.io",
			"crontabs.v1.stable.example.com",
		)}
		if conv {
			f.PodConverter = &snapshot.PodConverter{}
		}
		objs, err := f.Objects(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := "crontabs: web/nightly; endpointslices: web/shop-abc; ingresses: lb/no-namespace web/shop; nodes: node-1; web_ingresses: web/other-team web/shop"
		if got := watchedKeys(objs); got != want {
			t.Errorf("watched objects:\n got  %s\n want %s", got, want)
		}
		if len(objs.EndpointSlices) != 1 {
			t.Errorf("the watched EndpointSlice is not also an input: %d", len(objs.EndpointSlices))
		}
		cron := objs.Resources["crontabs"][0]
		if cron.Kind() != "CronTab" || cron.Record().String() !=
			`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"nightly","namespace":"web"},"spec":{"cronSpec":"0 3 * * *","replicas":2}}` {
			t.Errorf("the custom resource is %s", cron.Record())
		}
		node := objs.Resources["nodes"][0]
		if node.Namespace() != "" {
			t.Errorf("a Node got namespace %q", node.Namespace())
		}
		// Again: read from the cache (no file changed), the same.
		again, err := f.Objects(context.Background())
		if err != nil || watchedKeys(again) != want {
			t.Errorf("second read: %v %s", err, watchedKeys(again))
		}
	}
}

// TestFileStatusSeen: the file source leaves out what ;status= hides of an object's status, a
// custom resource's (as JSON) and a built-in one's (converted) alike; an object two watched
// resources take shows what either sees.
func TestFileStatusSeen(t *testing.T) {
	dir := t.TempDir()
	const manifests = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: web}
spec: {gatewayClassName: haproxy}
status:
  addresses: [{value: 10.0.0.1}]
  conditions: [{type: Programmed}]
  listeners: [{name: http}]
---
apiVersion: v1
kind: Node
metadata: {name: node-1}
status:
  addresses: [{type: InternalIP, address: 192.168.0.1}]
  conditions: [{type: Ready, status: "True"}]
`
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	status := func(o *snapshot.Object) string {
		st, ok := o.Record().Get("status")
		if !ok {
			return "none"
		}
		r, ok := st.(*record.Record)
		if !ok {
			return fmt.Sprintf("%T", st)
		}
		var keys []string
		for k := range r.All() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return strings.Join(keys, ",")
	}
	cases := []struct {
		watch         []string
		gateway, node string
	}{
		{[]string{"gateways.v1.gateway.networking.k8s.io;status=addresses", "nodes.v1;status=conditions"},
			"addresses", "conditions"},
		{[]string{"gateways.v1.gateway.networking.k8s.io;status=off", "nodes.v1;status=off"}, "none", "none"},
		{[]string{"gateways.v1.gateway.networking.k8s.io;status=off", "gateways.v1.gateway.networking.k8s.io;as=gw;status=listeners",
			"nodes.v1;status=conditions", "nodes.v1;as=machines"},
			"listeners", "addresses,conditions,daemonEndpoints,nodeInfo"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.watch, " "), func(t *testing.T) {
			f := &File{Dir: dir, DefaultNamespace: "lb", Watch: watchList(t, c.watch...)}
			objs, err := f.Objects(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if gws := objs.Resources["gateways"]; len(gws) != 1 || status(gws[0]) != c.gateway {
				t.Errorf("the Gateway's status: %v, want %s", gws, c.gateway)
			}
			if nodes := objs.Resources["nodes"]; len(nodes) != 1 || status(nodes[0]) != c.node {
				t.Errorf("the Node's status: %s, want %s", status(nodes[0]), c.node)
			}
		})
	}
}

func TestFileWatchedCustomKind(t *testing.T) {
	dir := t.TempDir()
	manifest := `apiVersion: example.com/v1
kind: Policy
metadata: {name: p, namespace: web}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g, namespace: web}
`
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	// The plural of Policy is derived (policies); Gadget's resource is named otherwise here,
	// so only ;kind= finds it.
	f := &File{Dir: dir, Watch: watchList(t, "policies.v1.example.com", "widgets.v1.example.com;kind=Gadget", "gizmos.v1.example.com")}
	objs, err := f.Objects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := watchedKeys(objs); got != "policies: web/p; widgets: web/g" {
		t.Errorf("got %s", got)
	}
}

func TestFileWatchedBadObjects(t *testing.T) {
	for _, c := range []struct {
		name, manifest, want string
	}{
		{"unknown field of a built-in", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: x}\nspec: {colour: red}\n", `unknown field "spec.colour"`},
		{"no name", "apiVersion: v1\nkind: Node\nmetadata: {labels: {a: b}}\n", "has no metadata.name"},
		{"a custom resource without a name", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {}\n", "no metadata.name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(c.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			f := &File{Dir: dir, Watch: watchList(t, "ingresses.v1.networking.k8s.io", "nodes.v1", "crontabs.v1.stable.example.com")}
			_, err := f.Objects(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.yaml line 1") {
				t.Errorf("err = %v, want one naming bad.yaml line 1 and %q", err, c.want)
			}
		})
	}
	t.Run("a kind that is not the built-in's", func(t *testing.T) {
		f := &File{Dir: t.TempDir(), Watch: watchList(t, "nodes.v1;kind=Machine")}
		if _, err := f.Objects(context.Background()); err == nil || !strings.Contains(err.Error(), "of kind Node, not Machine") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestWatchedResolve(t *testing.T) {
	for _, c := range []struct {
		watch, kind, etcd string
		builtin, cluster  bool
	}{
		{"ingresses.v1.networking.k8s.io", "Ingress", "ingress", true, false},
		{"endpointslices.v1.discovery.k8s.io", "EndpointSlice", "endpointslices", true, false},
		{"nodes.v1", "Node", "minions", true, true},
		{"services.v1", "Service", "services/specs", true, false},
		{"endpoints.v1", "Endpoints", "services/endpoints", true, false},
		{"events.v1.events.k8s.io", "Event", "events", true, false},
		{"ingressclasses.v1.networking.k8s.io", "IngressClass", "ingressclasses", true, true},
		{"deployments.v1.apps", "Deployment", "deployments", true, false},
		{"httproutes.v1.gateway.networking.k8s.io", "", "gateway.networking.k8s.io/httproutes", false, false},
		{"crontabs.v1.stable.example.com;kind=CronTab", "CronTab", "stable.example.com/crontabs", false, false},
	} {
		ws, err := resolve(watchList(t, c.watch))
		if err != nil {
			t.Fatal(err)
		}
		w := ws[0]
		if w.kind != c.kind || w.builtin != c.builtin || w.clusterScoped != c.cluster || w.etcdPath() != c.etcd {
			t.Errorf("%s: kind %q builtin %v cluster %v etcd %q; want %q %v %v %q", c.watch, w.kind, w.builtin, w.clusterScoped, w.etcdPath(),
				c.kind, c.builtin, c.cluster, c.etcd)
		}
	}
}
