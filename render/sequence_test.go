package render

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// routeWorld is a cluster of HTTPRoutes, Services and EndpointSlices behind one Gateway, and
// the template set rendering them, changed at random one step at a time.
type routeWorld struct {
	rng       *rand.Rand
	routes    map[string]map[string]any
	services  map[string]map[string]any
	slices    map[string]map[string]any
	gateway   map[string]any
	ns        map[string]any // the namespace "other", whose labels a Selector listener reads
	grant     bool           // a ReferenceGrant in "other" lets routes of "bench" name its Services
	templates map[string]string
	base      map[string]string
	next      int
	srng      *rand.Rand // the status writes' (statusStep): the other steps' sequence as it was
	rv        int        // the last resourceVersion written
}

func newRouteWorld(t *testing.T, seed uint64) *routeWorld {
	w := &routeWorld{rng: rand.New(rand.NewPCG(seed, 25)), routes: map[string]map[string]any{},
		services: map[string]map[string]any{}, slices: map[string]map[string]any{}, srng: rand.New(rand.NewPCG(seed, 26))}
	w.base = loadConfigMapData(t, "../examples/templates/httproute.yaml")
	w.templates = w.base
	w.gateway = w.newGateway("Same", false)
	w.ns = w.newNamespace()
	for range 20 {
		w.addRoute()
	}
	return w
}

func (w *routeWorld) newGateway(from string, section bool) map[string]any {
	namespaces := map[string]any{"from": from}
	if from == "Selector" {
		namespaces["selector"] = map[string]any{"matchLabels": map[string]any{"team": "a"}}
	}
	listeners := []any{map[string]any{"name": "http", "protocol": "HTTP", "port": int64(80),
		"allowedRoutes": map[string]any{"namespaces": namespaces}}}
	if section {
		listeners = append(listeners, map[string]any{"name": "extra", "protocol": "HTTP", "port": int64(8080)})
	}
	return map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": "bench", "generation": int64(w.rng.IntN(5) + 1)},
		"spec":     map[string]any{"gatewayClassName": "haproxy-sidecar", "listeners": listeners}}
}

// newNamespace is the namespace "other", of team a or b.
func (w *routeWorld) newNamespace() map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "other", "labels": map[string]any{"team": []string{"a", "b"}[w.rng.IntN(2)]}}}
}

func (w *routeWorld) pick(m map[string]map[string]any) string { return pickKey(w.rng, m) }

// addRoute adds a Service, its EndpointSlice and a route to it (and to another Service).
func (w *routeWorld) addRoute() {
	w.next++
	svc := fmt.Sprintf("svc-%d", w.next)
	w.addService(svc)
	w.routes[fmt.Sprintf("route-%d", w.next)] = w.newRoute(fmt.Sprintf("route-%d", w.next))
}

func (w *routeWorld) addService(name string) {
	port := int64(80)
	if w.rng.IntN(8) == 0 {
		port = 81
	}
	w.services[name] = map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": name, "namespace": "bench"},
		"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": port, "targetPort": int64(8080)}}}}
	w.slices[name] = w.newSlice(name)
}

func (w *routeWorld) newSlice(svc string) map[string]any {
	var eps []any
	for i := range w.rng.IntN(4) {
		ep := map[string]any{"addresses": []any{fmt.Sprintf("10.%d.%d.%d", w.rng.IntN(3), w.next%250, i+1)},
			"conditions": map[string]any{"ready": w.rng.IntN(5) > 0}}
		if w.rng.IntN(3) > 0 {
			ep["targetRef"] = map[string]any{"kind": "Pod", "namespace": "bench", "name": fmt.Sprintf("%s-pod-%d", svc, i)}
		}
		eps = append(eps, ep)
	}
	return map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata":    map[string]any{"name": svc + "-abcde", "namespace": "bench", "labels": map[string]any{"kubernetes.io/service-name": svc}},
		"addressType": "IPv4",
		"ports":       []any{map[string]any{"name": "http", "port": int64(8080), "protocol": "TCP"}},
		"endpoints":   eps}
}

// newRoute is a route with what the example serves and what it does not: hostnames (none,
// wildcards, shared with other routes), Exact and PathPrefix paths, matches it does not serve,
// weighted refs, refs to missing Services, other namespaces and kinds, filters.
func (w *routeWorld) newRoute(name string) map[string]any {
	hosts := []any{}
	for range w.rng.IntN(3) {
		switch w.rng.IntN(4) {
		case 0:
			hosts = append(hosts, fmt.Sprintf("*.w%d.example.com", w.rng.IntN(4)))
		case 1:
			hosts = append(hosts, fmt.Sprintf("shared-%d.example.com", w.rng.IntN(3)))
		default:
			hosts = append(hosts, name+".example.com")
		}
	}
	var rules []any
	for range w.rng.IntN(3) + 1 {
		var matches []any
		for range w.rng.IntN(3) {
			m := map[string]any{"path": map[string]any{"type": []string{"PathPrefix", "Exact", "RegularExpression"}[w.rng.IntN(3)],
				"value": []string{"/", "/api", "/api/", "/v1/x", "/a b"}[w.rng.IntN(5)]}}
			if w.rng.IntN(6) == 0 {
				m["headers"] = []any{map[string]any{"name": "x", "value": "y"}}
			}
			matches = append(matches, m)
		}
		var refs []any
		for range w.rng.IntN(3) + 1 {
			ref := map[string]any{"name": w.pick(w.services), "port": int64(80)}
			switch w.rng.IntN(10) {
			case 0:
				ref["name"] = "missing"
			case 1:
				ref["namespace"] = "other"
			case 2:
				ref["kind"] = "Other"
			case 3:
				ref["weight"] = int64(w.rng.IntN(3))
			}
			refs = append(refs, ref)
		}
		rule := map[string]any{"backendRefs": refs}
		if matches != nil {
			rule["matches"] = matches
		}
		if w.rng.IntN(12) == 0 {
			rule["filters"] = []any{map[string]any{"type": "RequestHeaderModifier"}}
		}
		rules = append(rules, rule)
	}
	parent := map[string]any{"name": "gw"}
	switch w.rng.IntN(8) {
	case 0:
		parent["sectionName"] = "extra"
	case 1:
		parent["name"] = "nope"
	case 2:
		parent["port"] = int64(9999)
	}
	spec := map[string]any{"parentRefs": []any{parent}, "rules": rules}
	if len(hosts) > 0 {
		spec["hostnames"] = hosts
	}
	ns := "bench"
	if w.rng.IntN(10) == 0 {
		ns = "other"
	}
	return map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": name, "namespace": ns, "generation": int64(w.rng.IntN(9) + 1)}, "spec": spec}
}

// notNamingGateway is how many routes have no parentRef to the Gateway (bench/gw).
func (w *routeWorld) notNamingGateway() int {
	n := 0
	for _, r := range w.routes {
		ns := r["metadata"].(map[string]any)["namespace"]
		names := false
		for _, p := range r["spec"].(map[string]any)["parentRefs"].([]any) {
			p := p.(map[string]any)
			pns, ok := p["namespace"]
			if !ok {
				pns = ns
			}
			names = names || p["name"] == "gw" && pns == "bench"
		}
		if !names {
			n++
		}
	}
	return n
}

// changedServices are the names of the Services added, deleted or edited from before to after.
func changedServices(before, after map[string]map[string]any) []string {
	var out []string
	for name, s := range after {
		if b, ok := before[name]; !ok || reflect.ValueOf(b).UnsafePointer() != reflect.ValueOf(s).UnsafePointer() {
			out = append(out, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

// naming is how many routes have a backendRef to the Service bench/svc (of any kind: each
// route's part looks up the Service of every backendRef).
func (w *routeWorld) naming(svc string) int {
	n := 0
	for _, r := range w.routes {
		ns := r["metadata"].(map[string]any)["namespace"]
		names := false
		for _, rule := range r["spec"].(map[string]any)["rules"].([]any) {
			for _, ref := range rule.(map[string]any)["backendRefs"].([]any) {
				ref := ref.(map[string]any)
				rns, ok := ref["namespace"]
				if !ok {
					rns = ns
				}
				names = names || ref["name"] == svc && rns == "bench"
			}
		}
		if names {
			n++
		}
	}
	return n
}

// templateVariants are edits an operator makes to the example: each replaces one string.
var templateVariants = [][3]string{
	{"template", "timeout client 50s", "timeout client 51s"},
	{"template", "  retries 3\n", "  retries 4\n"},
	{"model.j2", "{%- set backends = {} %}", "{%- set backends = {} %}{# edited #}"},
	{"route.j2", ": no such Service", ": no Service of that name"},
	{"scope.j2", `("any" if not host`, `("none" if not host`},
	{"routes.map", "PathPrefix paths, longest first", "PathPrefix paths (longest first)"},
}

// step makes one change at random and says which.
func (w *routeWorld) step() string {
	switch n := w.rng.IntN(20); {
	case n < 5:
		w.addRoute()
		return "route added"
	case n < 9:
		if name := w.pick(w.routes); name != "" {
			w.routes[name] = w.newRoute(name)
		}
		return "route edited"
	case n < 11:
		delete(w.routes, w.pick(w.routes))
		return "route deleted"
	case n < 14:
		if name := w.pick(w.slices); name != "" {
			w.slices[name] = w.newSlice(name)
		}
		return "endpoints changed"
	case n < 15:
		name := w.pick(w.services)
		delete(w.services, name)
		delete(w.slices, name)
		return "service deleted"
	case n < 16:
		w.next++
		w.addService(fmt.Sprintf("svc-%d", w.next))
		return "service added"
	case n < 18:
		w.gateway = w.newGateway([]string{"Same", "All", "Selector"}[w.rng.IntN(3)], w.rng.IntN(2) == 0)
		return "gateway edited"
	case n < 19:
		switch w.rng.IntN(3) {
		case 0:
			if name := w.pick(w.services); name != "" {
				svc := maps.Clone(w.services[name])
				port := svc["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)
				svc["spec"] = map[string]any{"ports": []any{map[string]any{"name": "http", "port": 161 - port["port"].(int64), "targetPort": int64(8080)}}}
				w.services[name] = svc
			}
			return "service edited"
		case 1:
			w.ns = w.newNamespace()
			return "namespace relabeled"
		default:
			w.grant = !w.grant
			return "grant toggled"
		}
	default:
		v := templateVariants[w.rng.IntN(len(templateVariants))]
		t := maps.Clone(w.templates)
		if strings.Contains(t[v[0]], v[1]) {
			t[v[0]] = strings.Replace(t[v[0]], v[1], v[2], 1)
		} else {
			t[v[0]] = strings.Replace(t[v[0]], v[2], v[1], 1)
		}
		w.templates = t
		return "template edited"
	}
}

// statusStep makes what the sidecar's status writer does: one route's status and
// resourceVersion written, or its resourceVersion only, or every route's status (its wave
// after a start); it says which.
func (w *routeWorld) statusStep() string {
	switch w.srng.IntN(3) {
	case 0:
		if name := w.pick(w.routes); name != "" {
			w.writeStatus(name, true)
		}
		return "status written"
	case 1:
		if name := w.pick(w.routes); name != "" {
			w.writeStatus(name, false)
		}
		return "resourceVersion changed"
	}
	for _, name := range slices.Sorted(maps.Keys(w.routes)) {
		w.writeStatus(name, true)
	}
	return "status wave"
}

// writeStatus gives route name a new resourceVersion and, when status, a new status: a new
// object, its spec and the rest of its metadata as they were.
func (w *routeWorld) writeStatus(name string, status bool) {
	r := maps.Clone(w.routes[name])
	md := maps.Clone(r["metadata"].(map[string]any))
	w.rv++
	md["resourceVersion"] = fmt.Sprint(w.rv)
	r["metadata"] = md
	if status {
		cond := map[string]any{"type": "Accepted", "status": []string{"True", "False"}[w.srng.IntN(2)],
			"observedGeneration": md["generation"], "lastTransitionTime": fmt.Sprintf("2026-01-01T00:%02d:00Z", w.rv%60)}
		r["status"] = map[string]any{"parents": []any{map[string]any{"controllerName": "haproxy-sidecar.io/gateway",
			"parentRef": map[string]any{"name": "gw"}, "conditions": []any{cond}}}}
	}
	w.routes[name] = r
}

func (w *routeWorld) raw() map[string][]map[string]any {
	list := func(m map[string]map[string]any) []map[string]any {
		var out []map[string]any
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[k])
		}
		return out
	}
	raw := map[string][]map[string]any{"gateways": {w.gateway}, "httproutes": list(w.routes),
		"services": list(w.services), "endpointslices": list(w.slices), "namespaces": {w.ns}}
	if w.grant {
		raw["referencegrants"] = []map[string]any{{"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
			"metadata": map[string]any{"name": "from-bench", "namespace": "other"},
			"spec": map[string]any{"from": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "bench"}},
				"to": []any{map[string]any{"group": "", "kind": "Service"}}}}}
	}
	return raw
}

// TestRandomChangesRenderAsAFreshRenderer: along a long random sequence of changes (routes,
// Services and endpoints added, edited and deleted, the Gateway and the templates edited),
// the renderer the sidecar keeps from sync to sync renders every step byte for byte as a
// renderer made for that step alone that computes everything for each file (the routes
// module too, which the files of one bundle share). What a renderer keeps between renders
// (compiled template sets, output sizes) and what the files of a bundle share must never show
// in what it renders. The digest logged covers every step's files: equal digests from two
// versions of the engine say they render the whole sequence alike.
func TestRandomChangesRenderAsAFreshRenderer(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}
	kept := New(opts)
	w := newRouteWorld(t, 1)
	digest := sha256.New()
	steps := 250
	if testing.Short() {
		steps = 60
	}
	counts := map[string]int{}
	seen := map[string]bool{}
	reusedOn := map[string]int{}   // kinds of change after which the routes module was reused
	partsOn := map[string]int{}    // routes' parts reused, by kind of change
	scopesOn := map[string]int{}   // scopes' map entries reused, by kind of change
	backendsOn := map[string]int{} // haproxy.cfg's backends written as they were, by kind of change
	prev := ""
	svcChanges := map[bool]int{} // Services changed, by whether a route names them
	for i := range steps {
		what, last := "start", prev
		gatewayBefore, specBefore := fmt.Sprint(w.gateway), fmt.Sprint(w.gateway["spec"])
		servicesBefore := maps.Clone(w.services)
		switch {
		case i > 0 && i%6 == 5:
			what = w.statusStep()
		case i > 0:
			what = w.step()
		}
		gatewayChanged := fmt.Sprint(w.gateway) != gatewayBefore
		changedSvcs := changedServices(servicesBefore, w.services)
		specChanged := fmt.Sprint(w.gateway["spec"]) != specBefore
		counts[what]++
		snap := assembleWatched(t, w.raw(), sequenceWatch...)
		snap.Templates, snap.TemplateKey = w.templates, "template"
		snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
		before, loopBefore, scopesBefore := kept.kept.Reused(), kept.Computed("route.j2"), kept.kept.LoopReused("scope.j2")
		backendsLine := lineOf(t, w.templates["template"], "{%- for name, be in m.backends|dictsort %}")
		bodiesBefore := kept.kept.BodiesReusedAt("template", backendsLine)
		got, gotErr := kept.Render(context.Background(), snap)
		if kept.kept.Reused() > before {
			reusedOn[what]++
		}
		// The routes' parts (route.j2, imported per route): after a route's change, every other
		// route's is reused; after a change of the Gateway's spec, none of the routes that name
		// it is (those that name none that exists are); after a change of its metadata only
		// (generation: the sidecar's own status writes change the object too), every one is.
		// Reused: not computed (route.j2 is imported in block.j2, per block of 64 routes: a block
		// taken whole imports none of its routes' parts); none when the module was reused.
		parts := len(w.routes) - (kept.Computed("route.j2") - loopBefore)
		if kept.kept.Reused() > before {
			parts = 0
		}
		partsOn[what] += parts
		scopesOn[what] += kept.kept.LoopReused("scope.j2") - scopesBefore
		if what == "route edited" && i > 0 && prev != "template edited" && parts < len(w.routes)-1 {
			t.Errorf("step %d (%s): %d of %d routes' parts reused, want all but the edited one", i, what, parts, len(w.routes))
		}
		if others := w.notNamingGateway(); what == "gateway edited" && specChanged && (parts > others || prev != "template edited" && parts != others) {
			t.Errorf("step %d (%s): %d routes' parts reused after a change of the Gateway, want those of the %d routes that do not name it", i, what, parts, others)
		}
		if what == "gateway edited" && gatewayChanged && !specChanged && prev != "template edited" && parts != len(w.routes) {
			t.Errorf("step %d (%s): %d of %d routes' parts reused after a change of the Gateway's generation only, want all", i, what, parts, len(w.routes))
		}
		// After the status writer's writes (a route's status, resourceVersion), which no part
		// reads (route.j2 reads attributes of its route's spec and metadata: docs/templates.md),
		// every part is reused.
		if strings.HasPrefix(what, "status") || what == "resourceVersion changed" {
			if prev != "template edited" && parts != len(w.routes) {
				t.Errorf("step %d (%s): %d of %d routes' parts reused, want all", i, what, parts, len(w.routes))
			}
		}
		// After a Service's change (edited, added, deleted), the parts of the routes that do not
		// name it are reused (route.j2 looks up the Services its backendRefs name: read by key),
		// and those of the routes that name it are not.
		if strings.HasPrefix(what, "service ") && len(changedSvcs) == 1 && prev != "template edited" {
			naming := w.naming(changedSvcs[0])
			svcChanges[naming > 0]++
			if parts != len(w.routes)-naming {
				t.Errorf("step %d (%s): %d of %d routes' parts reused after a change of Service %s, want those of the %d that do not name it",
					i, what, parts, len(w.routes), changedSvcs[0], len(w.routes)-naming)
			}
		}
		prev = what
		want := freshAgrees(t, opts, snap, got, gotErr, fmt.Sprintf("step %d (%s)", i, what))
		// haproxy.cfg's backends: after an endpoints change, those of the Services whose
		// EndpointSlices are the same are written as they were (kept loop iterations).
		if backends, reused := strings.Count(string(got.Config), "\nbackend be_")-2, kept.kept.BodiesReusedAt("template", backendsLine)-bodiesBefore; what == "endpoints changed" &&
			prev != "template edited" && reused < backends/2 {
			t.Errorf("step %d (%s): %d backends written as they were, want most of the %d", i, what, reused, backends)
		}
		backendsOn[what] += kept.kept.BodiesReusedAt("template", backendsLine) - bodiesBefore
		// After a route's change, the backends are written as they were but for the route's
		// own (its rules: up to three new backends): a backend's body reads the backend and, by
		// key, its Services and EndpointSlices (reuse_keyed.go), not the rest of the routes.
		if backends, reused := strings.Count(string(got.Config), "\nbackend be_")-2, kept.kept.BodiesReusedAt("template", backendsLine)-bodiesBefore; strings.HasPrefix(what, "route ") &&
			last != "template edited" && reused < backends-3 {
			t.Errorf("step %d (%s): %d backends written as they were, want all but the route's of the %d", i, what, reused, backends)
		}
		for _, s := range []string{" not served", " accepted=false", " resolved=false", " weight ", "\n  server ",
			"accepted.reason=NotAllowedByListeners", "resolved.reason=RefNotPermitted", "resolved.reason=BackendNotFound"} {
			seen[s] = seen[s] || strings.Contains(string(want.Config), s)
		}
		addToDigest(digest, i, want)
	}
	// The sequence exercises what the example does: routes served and not (notes), status
	// lines of both kinds, weights.
	for _, what := range []string{"template edited", "route deleted", "gateway edited", "service edited", "namespace relabeled", "grant toggled",
		"status written", "resourceVersion changed", "status wave"} {
		if counts[what] == 0 && !testing.Short() {
			t.Errorf("the sequence missed a kind of change (%s): %v", what, counts)
		}
	}
	if (svcChanges[false] == 0 || svcChanges[true] == 0) && !testing.Short() {
		t.Errorf("the sequence changed no Service that a route names, or none that no route names: %v", svcChanges)
	}
	if partsOn["route edited"] == 0 || partsOn["route added"] == 0 || partsOn["route deleted"] == 0 {
		t.Errorf("the routes' parts were not reused after routes' changes: %v", partsOn)
	}
	if backendsOn["endpoints changed"] == 0 || backendsOn["route edited"] == 0 {
		t.Errorf("haproxy.cfg's backends were not written as they were after endpoints' or routes' changes: %v", backendsOn)
	}
	if scopesOn["route edited"] == 0 {
		t.Errorf("the scopes' map entries were not reused after routes' changes: %v", scopesOn)
	}
	// Endpoints are not read by the routes module: it is reused after such a change, and
	// never after a change of what it reads (other kinds may change nothing it reads: a
	// template other than routes.j2 edited, the Gateway made again as it was).
	if reusedOn["endpoints changed"] == 0 {
		t.Errorf("the routes module was never reused after an endpoints change: %v", reusedOn)
	}
	for _, what := range []string{"route added", "service added"} {
		if reusedOn[what] > 0 {
			t.Errorf("the routes module was reused after a change it reads (%s): %v", what, reusedOn)
		}
	}
	for s, ok := range seen {
		if !ok {
			t.Errorf("no step rendered %q", s)
		}
	}
	t.Logf("%d steps %v, the routes module reused after %v, routes' parts reused %v, scopes' %v, backends %v, Services changed (named by a route: true) %v, digest %x", steps, counts, reusedOn, partsOn, scopesOn, backendsOn, svcChanges, digest.Sum(nil))
}

// sequenceWatch is the example's watch list as the sequence needs it: namespaces (a
// Selector listener reads their labels) and ReferenceGrants too.
var sequenceWatch = append(slices.Clone(httprouteWatch), "namespaces.v1", "referencegrants.v1beta1.gateway.networking.k8s.io")

// renderFresh renders snap with a renderer made for it alone, which shares nothing kept and
// computes everything for each file: what a kept renderer is compared with.
func renderFresh(opts Options, snap *snapshot.Snapshot) (*Bundle, error) {
	fresh := New(opts)
	fresh.unshared = true
	return fresh.Render(context.Background(), snap)
}

// freshAgrees renders snap with a renderer made for it alone, which computes everything for
// each file, and fails t (at step) unless that gives got and gotErr byte for byte; it returns
// that rendering.
func freshAgrees(t *testing.T, opts Options, snap *snapshot.Snapshot, got *Bundle, gotErr error, step string) *Bundle {
	t.Helper()
	want, wantErr := renderFresh(opts, snap)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%s: the kept renderer: %v; a fresh one: %v", step, gotErr, wantErr)
	}
	if wantErr != nil {
		t.Fatalf("%s: %v", step, wantErr)
	}
	if d := bundleDiff(got, want); d != "" {
		t.Fatalf("%s: the kept renderer renders otherwise than a fresh one: %s", step, d)
	}
	return want
}

// addToDigest adds step i's files to digest: equal digests of a sequence say two versions
// render it alike.
func addToDigest(digest io.Writer, i int, b *Bundle) {
	for _, f := range bundleFiles(b) {
		fmt.Fprintf(digest, "%d %s %d\n", i, f[0], len(f[1]))
		io.WriteString(digest, f[1])
	}
}

// bundleFiles are a bundle's files as name, content pairs in name order.
func bundleFiles(b *Bundle) [][2]string {
	out := [][2]string{{"haproxy.cfg", string(b.Config)}}
	for _, group := range []struct {
		dir string
		m   map[string][]byte
	}{{"certs/", b.Certificates}, {"maps/", b.Maps}, {"files/", b.Files}} {
		for _, k := range slices.Sorted(maps.Keys(group.m)) {
			out = append(out, [2]string{group.dir + k, string(group.m[k])})
		}
	}
	return out
}

// bundleDiff says how two bundles differ ("" when they do not): the first file that differs,
// and where.
func bundleDiff(a, b *Bundle) string {
	fa, fb := bundleFiles(a), bundleFiles(b)
	for i := range max(len(fa), len(fb)) {
		if i >= len(fa) || i >= len(fb) || fa[i][0] != fb[i][0] {
			return fmt.Sprintf("files %v against %v", fa, fb)
		}
		if fa[i][1] != fb[i][1] {
			x, y := []byte(fa[i][1]), []byte(fb[i][1])
			n := 0
			for n < len(x) && n < len(y) && x[n] == y[n] {
				n++
			}
			return fmt.Sprintf("%s differs at byte %d: %q against %q", fa[i][0], n, tail(x[n:]), tail(y[n:]))
		}
	}
	if a.Hash != b.Hash {
		return fmt.Sprintf("hash %s against %s", a.Hash, b.Hash)
	}
	return ""
}

func tail(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

// lineOf is the line of text where s starts (1 for the first).
func lineOf(t *testing.T, text, s string) int {
	t.Helper()
	i := strings.Index(text, s)
	if i < 0 {
		t.Fatalf("no %q in the template", s)
	}
	return strings.Count(text[:i], "\n") + 1
}
