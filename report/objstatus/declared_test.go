package objstatus

import (
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// routesConfig is a haproxy.cfg the way examples/templates/httproute.yaml prints one for
// routes HTTPRoutes to one Gateway: the declarations together in the defaults section, then
// per route a chain's lines and a backend. extra, when set, is one more route's declaration
// after the route numbered at; changed, when >= 0, is the route whose declaration says
// something else (its backend not found).
func routesConfig(routes, changed int, extra string, at int) []byte {
	var b strings.Builder
	b.WriteString("global\n  log stdout format raw local0 notice\n  hard-stop-after 30s\n\ndefaults gateway\n  mode http\n  timeout connect 5s\n")
	b.WriteString("# haproxy-sidecar: serves GatewayClass haproxy-sidecar generation=1\n")
	b.WriteString("# haproxy-sidecar: serves Gateway lb/gw generation=2 accepted programmed\n")
	attached := routes
	if extra != "" {
		attached++
	}
	fmt.Fprintf(&b, "# haproxy-sidecar: serves Gateway lb/gw generation=2 listener=http attached=%d kinds=\"HTTPRoute\"\n", attached)
	for i := range routes {
		if i == changed {
			fmt.Fprintf(&b, "# haproxy-sidecar: serves HTTPRoute ns-%d/route-%04d generation=3 parent=lb/gw accepted resolved=false resolved.reason=BackendNotFound resolved.message=\"rule 1: Service ns-%d/svc-%04d not found\"\n", i%50, i, i%50, i)
		} else {
			fmt.Fprintf(&b, "# haproxy-sidecar: serves HTTPRoute ns-%d/route-%04d generation=2 parent=lb/gw accepted resolved\n", i%50, i)
		}
		if i == at && extra != "" {
			b.WriteString("# haproxy-sidecar: serves " + extra + "\n")
		}
	}
	b.WriteString("\nfrontend http\n  bind :80\n")
	for i := range routes {
		fmt.Fprintf(&b, "  # c%d: host r%d.example.com\n  http-request set-var(txn.target) str(b%d) if { var(txn.target) -m str c%d } { path_beg /r%d }\n", i, i, i, i, i)
	}
	for i := range routes {
		fmt.Fprintf(&b, "\nbackend ns-%d_svc-%04d_80 from gateway\n  balance roundrobin\n  server-template srv 1-4 svc-%04d.ns-%d.svc:80 check resolvers dns init-addr none\n  server s0 10.0.%d.%d:8080 check\n", i%50, i, i, i%50, i/250, i%250)
	}
	return []byte(b.String())
}

// benchWriter is a Writer that reads declarations only (no object is written).
func benchWriter(b *testing.B) *Writer {
	w, err := New(Config{Client: fake.NewClientset(), Live: func() live.State { return live.State{} }, ControllerName: me,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkDeclaredRouteChange is what the status writer does with each rendering that goes
// live (Writer.declared: the declarations read, grouped by object, compared with the last
// rendering's), at 3,000 HTTPRoutes, where each rendering changes one route's declaration
// (changed) or adds a route in the middle (added: every declaration after it moves down a
// line, and the listener's attached= changes), as a route change does.
func BenchmarkDeclaredRouteChange(b *testing.B) {
	const routes = 3000
	base := routesConfig(routes, -1, "", -1)
	for _, bc := range []struct {
		name string
		next []byte
	}{
		{"changed", routesConfig(routes, routes/2, "", -1)},
		{"added", routesConfig(routes, -1, "HTTPRoute ns-7/added generation=1 parent=lb/gw accepted resolved", routes/2)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bundles := []*render.Bundle{{Config: base, Hash: "a"}, {Config: bc.next, Hash: "b"}}
			w := benchWriter(b)
			w.declared(bundles[0])
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				w.declared(bundles[i%2])
				if len(w.fresh) != 1 && len(w.fresh) != 2 {
					b.Fatalf("%d objects changed", len(w.fresh))
				}
			}
		})
	}
}

// BenchmarkTodoRouteChange is what the status writer does next with each rendering that goes
// live, at 3,000 HTTPRoutes of which one changed: which objects' status is not what is
// declared (Writer.todo, by each object's fingerprint).
func BenchmarkTodoRouteChange(b *testing.B) {
	const routes = 3000
	w := benchWriter(b)
	w.declared(&render.Bundle{Config: routesConfig(routes, -1, "", -1), Hash: "a"})
	for o := range w.wants {
		w.done[o] = w.fingerprint(o)
	}
	w.declared(&render.Bundle{Config: routesConfig(routes, routes/2, "", -1), Hash: "b"})
	b.ReportAllocs()
	for b.Loop() {
		if fresh, rest := w.todo(); len(fresh)+len(rest) != 1 {
			b.Fatalf("todo %v %v", fresh, rest)
		}
	}
}

// ingressConfig is a haproxy.cfg the way examples/templates/ingress.yaml prints one for n
// Ingresses: the declarations together in the frontend, then a backend per Ingress.
func ingressConfig(n int) []byte {
	var b strings.Builder
	b.WriteString("global\n  log stdout format raw local0 notice\n\nfrontend http\n  bind :80\n")
	for i := range n {
		fmt.Fprintf(&b, "    # haproxy-sidecar: serves Ingress bench/ing-%05d\n", i)
	}
	for i := range n {
		fmt.Fprintf(&b, "\nbackend bench_svc-%05d_80\n  balance roundrobin\n  server s0 10.0.%d.%d:8080 check\n", i, i/250, i%250)
	}
	return []byte(b.String())
}

// BenchmarkWriterHeldIngress10000: what a Writer holds between renderings at 10,000 Ingresses
// (held-MB: the heap it keeps, once collected, after it read a rendering and wrote every
// object's status), and what reading the next rendering (one Ingress more) costs.
func BenchmarkWriterHeldIngress10000(b *testing.B) {
	const n = 10000
	cfgs := [2][]byte{ingressConfig(n), ingressConfig(n + 1)}
	var ms runtime.MemStats
	heap := func() uint64 {
		runtime.GC()
		runtime.GC() // what sync.Pools hold survives one collection
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	w := benchWriter(b) // its client is not what it holds of the declarations
	before := heap()
	w.setAddrs(Addresses([]string{"203.0.113.7"}))
	w.cfg.PublishAddresses = []string{"203.0.113.7"}
	w.declared(&render.Bundle{Config: cfgs[0], Hash: "a"})
	for o := range w.wants {
		w.done[o] = w.fingerprint(o)
	}
	held := float64(heap()-before) / (1 << 20)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		w.declared(&render.Bundle{Config: cfgs[i%2], Hash: fmt.Sprint(i % 2)})
	}
	b.ReportMetric(held, "held-MB") // after the loop: b.Loop's first call resets the metrics
	runtime.KeepAlive(w)
}

// TestFirstRenderingAllFresh: the first rendering read makes every object fresh without a map
// of them all (fresh nil), and todo lists them all, sorted; the next rendering's fresh are
// those it changed.
func TestFirstRenderingAllFresh(t *testing.T) {
	w, err := New(Config{Client: fake.NewClientset(), Live: func() live.State { return live.State{} }, ControllerName: me,
		Logger: slog.New(slog.DiscardHandler), PublishAddresses: []string{"203.0.113.7"}})
	if err != nil {
		t.Fatal(err)
	}
	w.declared(&render.Bundle{Config: ingressConfig(50), Hash: "a"})
	if w.fresh != nil {
		t.Fatalf("fresh after the first rendering: %d objects, want nil (all)", len(w.fresh))
	}
	todo, rest := w.todo()
	if len(todo) != 50 || !slices.IsSortedFunc(todo, compareObjects) || len(rest) > 0 {
		t.Fatalf("todo %v, then %v: want the 50 Ingresses fresh, sorted", todo, rest)
	}
	for _, o := range todo {
		w.done[o] = w.fingerprint(o)
	}
	w.declared(&render.Bundle{Config: ingressConfig(51), Hash: "b"})
	added := Object{KindIngress, "bench", "ing-00050"}
	if fresh, rest := w.todo(); !reflect.DeepEqual(w.fresh, map[Object]bool{added: true}) || !reflect.DeepEqual(fresh, []Object{added}) || len(rest) > 0 {
		t.Fatalf("fresh %v, todo %v then %v: want %v", w.fresh, fresh, rest, added)
	}
}
