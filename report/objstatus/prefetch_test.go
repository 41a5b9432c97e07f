package objstatus

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
)

// requestLog records the requests a client makes, as "METHOD PATH".
type requestLog struct {
	mu   sync.Mutex
	reqs []string
	// before, when set, runs before each request is sent (a test's interference).
	before func(r *http.Request)
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if l.before != nil {
			l.before(r)
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// count is how many requests were METHOD PATH, PATH ending with suffix.
func (l *requestLog) count(method, suffix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.reqs {
		if m, p, _ := strings.Cut(r, " "); m == method && strings.HasSuffix(p, suffix) {
			n++
		}
	}
	return n
}

// TestManyStatusesOneRequestEach: against a real kube-apiserver, the status of 40 HTTPRoutes
// and 40 Ingresses of one namespace is written with one list of each kind (5 pages of 8, each
// listed when the round reaches it: no more than a page of each kind is held) and one write per
// object (no read of each first: at --kube-qps that halves the time the status of every
// route takes at start); a route changed by someone else between the list and its write is
// read again and written all the same; what is written is what the reads of each would have
// written (managedFields left as they were, the other controller's parent kept).
func TestManyStatusesOneRequestEach(t *testing.T) {
	env := kubetest.Start(t)
	ctx := context.Background()
	out, err := exec.Command(env.KubectlPath, "--kubeconfig", env.Kubeconfig, "--cache-dir", t.TempDir(),
		"apply", "--server-side", "-f", "../../e2e/testdata/gateway-api/httproutes.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("install the HTTPRoute CRD: %v: %s", err, out)
	}
	if out, err := exec.Command(env.KubectlPath, "--kubeconfig", env.Kubeconfig, "wait", "--for", "condition=Established",
		"--timeout", "60s", "crd/httproutes.gateway.networking.k8s.io").CombinedOutput(); err != nil {
		t.Fatalf("wait for the HTTPRoute CRD: %v: %s", err, out)
	}
	env.Namespace(t, "web")
	admin, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	decls := []string{}
	for i := range n {
		name := fmt.Sprintf("r%02d", i)
		route := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"namespace": "web", "name": name},
			"spec":     map[string]any{"parentRefs": []any{map[string]any{"name": "gw", "namespace": "lb"}, map[string]any{"name": "nginx", "namespace": "lb"}}},
		}}
		created, err := admin.Resource(resources[KindHTTPRoute]).Namespace("web").Create(ctx, route, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Another controller's parent, which the write keeps.
		created.Object["status"] = map[string]any{"parents": []any{map[string]any{
			"parentRef": map[string]any{"name": "nginx", "namespace": "lb"}, "controllerName": "example.com/nginx",
			"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"}},
		}}}
		if _, err := admin.Resource(resources[KindHTTPRoute]).Namespace("web").UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "nginx"}); err != nil {
			t.Fatal(err)
		}
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: fmt.Sprintf("i%02d", i)},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "s", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
		if _, err := env.Client.NetworkingV1().Ingresses("web").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		decls = append(decls, "haproxy-sidecar: serves HTTPRoute web/"+name+" generation=1 parent=lb/gw accepted resolved",
			fmt.Sprintf("haproxy-sidecar: serves Ingress web/i%02d", i))
	}

	reqs := &requestLog{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(reqs.wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Route r07 changes between the list and its write: the write conflicts.
	routes := "/apis/gateway.networking.k8s.io/v1/namespaces/web/httproutes"
	var once sync.Once
	var w *Writer
	held := 0 // the most listed objects kept at a write
	reqs.before = func(r *http.Request) {
		if r.Method == http.MethodPut && w != nil {
			held = max(held, w.pre.held())
		}
		if r.Method == http.MethodPut && r.URL.Path == routes+"/r07/status" {
			once.Do(func() {
				u, err := admin.Resource(resources[KindHTTPRoute]).Namespace("web").Get(ctx, "r07", metav1.GetOptions{})
				if err == nil {
					u.SetLabels(map[string]string{"edited": "meanwhile"})
					_, err = admin.Resource(resources[KindHTTPRoute]).Namespace("web").Update(ctx, u, metav1.UpdateOptions{})
				}
				if err != nil {
					t.Errorf("edit r07: %v", err)
				}
			})
		}
	}
	bundle := bundleOf(decls...)
	w, err = New(Config{Client: cs, Dynamic: dyn, ControllerName: me, PublishAddresses: []string{"203.0.113.7"},
		Live: func() live.State {
			return live.State{Runs: bundle.Hash, Live: bundle.Hash, Good: live.Good{Bundle: bundle}}
		},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	const page = 8
	w.page = page
	w.Tick(ctx)

	if got := reqs.count(http.MethodGet, routes); got != n/page {
		t.Errorf("%d lists of the routes, want %d", got, n/page)
	}
	if got := reqs.count(http.MethodGet, "/apis/networking.k8s.io/v1/namespaces/web/ingresses"); got != n/page {
		t.Errorf("%d lists of the Ingresses, want %d", got, n/page)
	}
	if held > 2*page {
		t.Errorf("%d listed objects held at a write, want at most a page of each kind (%d)", held, 2*page)
	}
	if got := reqs.count(http.MethodPut, "/status"); got != 2*n+1 {
		t.Errorf("%d status writes, want %d (one per object, and r07's again after its conflict)", got, 2*n+1)
	}
	reqs.mu.Lock()
	var reads []string
	for _, r := range reqs.reqs {
		if m, p, _ := strings.Cut(r, " "); m == http.MethodGet && strings.Count(p, "/") > strings.Count(routes, "/") {
			reads = append(reads, p)
		}
	}
	reqs.mu.Unlock()
	if !slices.Equal(reads, []string{routes + "/r07"}) {
		t.Errorf("objects read one by one: %v, want only r07 (after its conflict)", reads)
	}

	// A new rendering changes r20's declaration, and every object is read again (the full
	// round): r20 is written first, read alone (not reached by listing 3 pages, which the rest
	// would list again), then the rest listed from the first page, none read one by one.
	decls2 := slices.Clone(decls)
	decls2[40] = strings.Replace(decls2[40], "generation=1", "generation=12", 1)
	bundle = bundleOf(decls2...)
	w.full = time.Time{}
	reqs.mu.Lock()
	reqs.reqs = nil
	reqs.mu.Unlock()
	w.Tick(ctx)
	if got := reqs.count(http.MethodGet, routes); got != n/page {
		t.Errorf("%d lists of the routes in the full round, want %d", got, n/page)
	}
	reqs.mu.Lock()
	reads = nil
	for _, r := range reqs.reqs {
		if m, p, _ := strings.Cut(r, " "); m == http.MethodGet && strings.Count(p, "/") > strings.Count(routes, "/") {
			reads = append(reads, p)
		}
	}
	reqs.mu.Unlock()
	if !slices.Equal(reads, []string{routes + "/r20"}) {
		t.Errorf("objects read one by one in the full round: %v, want only r20 (the changed one)", reads)
	}

	for i := range n {
		u, err := admin.Resource(resources[KindHTTPRoute]).Namespace("web").Get(ctx, fmt.Sprintf("r%02d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
		if len(parents) != 2 || parents[0].(map[string]any)["controllerName"] != "example.com/nginx" || parents[1].(map[string]any)["controllerName"] != me {
			t.Errorf("route %s: parents %v", u.GetName(), parents)
		}
		var managers []string
		for _, m := range u.GetManagedFields() {
			managers = append(managers, m.Manager)
		}
		if !slices.Contains(managers, "nginx") || !slices.Contains(managers, FieldManager) {
			t.Errorf("route %s: field managers %v, want nginx's kept beside ours", u.GetName(), managers)
		}
		ing, err := env.Client.NetworkingV1().Ingresses("web").Get(ctx, fmt.Sprintf("i%02d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if lb := ing.Status.LoadBalancer.Ingress; len(lb) != 1 || lb[0].IP != "203.0.113.7" {
			t.Errorf("Ingress %s: addresses %+v", ing.Name, lb)
		}
	}
}
