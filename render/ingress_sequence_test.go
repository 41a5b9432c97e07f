package render

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// ingressWorld is a cluster of Ingresses, Services and EndpointSlices, with certificates, and
// the Ingress example's template set rendering them, changed at random one step at a time.
// The Ingresses collide on purpose (shared hosts and paths, paths differing in case, backend
// names that two namespaces and Services spell alike), so that which Ingress wins a route,
// a backend or the default backend shows in what is rendered.
type ingressWorld struct {
	rng       *rand.Rand
	ingresses map[string]map[string]any // by namespace/name
	services  map[string]map[string]any
	slices    map[string]map[string]any
	certs     map[string]bool
	templates map[string]string
	next      int
	// noExact: the Ingresses' paths are Prefix or ImplementationSpecific, never Exact (the
	// example's routes.j2 merges its exact keys otherwise when no Ingress has one).
	noExact bool
}

func newIngressWorld(t *testing.T, seed uint64) *ingressWorld {
	w := &ingressWorld{rng: rand.New(rand.NewPCG(seed, 10)), ingresses: map[string]map[string]any{},
		services: map[string]map[string]any{}, slices: map[string]map[string]any{}, certs: map[string]bool{}}
	w.templates = loadConfigMapData(t, "../examples/templates/ingress.yaml")
	for _, svc := range []string{"a/web", "a/api", "a_b/c", "a/b_c", "b/web"} {
		w.addService(svc)
	}
	for range 25 {
		w.addIngress()
	}
	w.certs["a.tls-a"] = true
	return w
}

func (w *ingressWorld) pick(m map[string]map[string]any) string { return pickKey(w.rng, m) }

func (w *ingressWorld) addService(key string) {
	w.services[key], w.slices[key] = randomService(w.rng, key)
}

func (w *ingressWorld) newSlice(key string) map[string]any { return randomSlice(w.rng, key) }

// pickKey is one of m's keys drawn by rng, in their sorted order ("" when m is empty).
func pickKey(rng *rand.Rand, m map[string]map[string]any) string {
	if len(m) == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(m))
	return keys[rng.IntN(len(keys))]
}

// randomService is a Service "namespace/name" of one port (named http, or web one time in
// four) and its EndpointSlice (randomSlice), drawn by rng.
func randomService(rng *rand.Rand, key string) (svc, slice map[string]any) {
	ns, name, _ := strings.Cut(key, "/")
	port := map[string]any{"name": "http", "port": int64(80), "targetPort": int64(8080)}
	if rng.IntN(4) == 0 {
		port["name"] = "web"
	}
	svc = map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"ports": []any{port}}}
	return svc, randomSlice(rng, key)
}

// randomSlice is an EndpointSlice of the Service "namespace/name": up to two endpoints, most
// ready, at a port named http or web, drawn by rng.
func randomSlice(rng *rand.Rand, key string) map[string]any {
	ns, name, _ := strings.Cut(key, "/")
	var eps []any
	for i := range rng.IntN(3) {
		eps = append(eps, map[string]any{"addresses": []any{fmt.Sprintf("10.%d.%d.%d", len(name), rng.IntN(9), i+1)},
			"conditions": map[string]any{"ready": rng.IntN(5) > 0},
			"targetRef":  map[string]any{"kind": "Pod", "namespace": ns, "name": fmt.Sprintf("%s-%d", name, i)}})
	}
	return map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
		"metadata": map[string]any{"name": name + "-x", "namespace": ns, "labels": map[string]any{"kubernetes.io/service-name": name}},
		"ports":    []any{map[string]any{"name": []string{"http", "web"}[rng.IntN(2)], "port": int64(8080)}}, "endpoints": eps}
}

func (w *ingressWorld) backend() map[string]any {
	svcs := append(slices.Sorted(maps.Keys(w.services)), "a/missing")
	_, name, _ := strings.Cut(svcs[w.rng.IntN(len(svcs))], "/")
	var port map[string]any
	switch w.rng.IntN(5) {
	case 0:
		port = map[string]any{"name": "http"}
	case 1:
		port = map[string]any{"name": "web"}
	case 2:
		port = map[string]any{}
	default:
		port = map[string]any{"number": int64(80 + w.rng.IntN(2))}
	}
	return map[string]any{"service": map[string]any{"name": name, "port": port}}
}

func (w *ingressWorld) newIngress(ns, name string) map[string]any {
	var rules []any
	for range w.rng.IntN(3) {
		var paths []any
		for range w.rng.IntN(4) {
			types := []string{"Prefix", "Exact", "ImplementationSpecific", "Prefix"}
			if w.noExact {
				types[1] = "Prefix"
			}
			p := map[string]any{"pathType": types[w.rng.IntN(4)], "backend": w.backend()}
			if v := []string{"/", "/api", "/api/", "/Api", "/v1/x", "/a b", "", "/q?x"}[w.rng.IntN(8)]; v != "" {
				p["path"] = v
			}
			paths = append(paths, p)
		}
		rule := map[string]any{}
		switch w.rng.IntN(4) {
		case 0:
		case 1:
			rule["host"] = "*.w.example.com"
		default:
			rule["host"] = []string{"shop.example.com", name + ".example.com"}[w.rng.IntN(2)]
		}
		if paths != nil || w.rng.IntN(3) > 0 {
			rule["http"] = map[string]any{"paths": paths}
		}
		rules = append(rules, rule)
	}
	spec := map[string]any{"rules": rules}
	meta := worldMeta(ns, name)
	switch w.rng.IntN(8) {
	case 0:
		spec["ingressClassName"] = "other"
	case 1:
		meta["annotations"] = map[string]any{"kubernetes.io/ingress.class": "haproxy-sidecar"}
	default:
		spec["ingressClassName"] = "haproxy-sidecar"
	}
	if w.rng.IntN(5) == 0 {
		spec["defaultBackend"] = w.backend()
	}
	if w.rng.IntN(4) == 0 {
		var tls []any
		for range w.rng.IntN(3) + 1 {
			tls = append(tls, map[string]any{"secretName": []string{"tls-a", "tls-b", ""}[w.rng.IntN(3)]})
		}
		spec["tls"] = tls
	}
	return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}
}

// worldMeta is the metadata of the Ingress ns/name of the random worlds: its uid random hex,
// as the API server gives, the same across its edits (the hash of its name), but for one
// Ingress in eight, which has none (a manifest from a file), and one in sixteen, whose uid is
// odd (a number, empty, or with the bars the examples' blocks are cut at).
func worldMeta(ns, name string) map[string]any {
	meta := map[string]any{"name": name, "namespace": ns}
	h := sha256.Sum256([]byte(ns + "/" + name))
	switch {
	case h[31]%8 == 0:
	case h[30]%16 == 0:
		meta["uid"] = []any{int64(h[29]), "", "00|c0", "|40"}[h[29]%4]
	default:
		meta["uid"] = fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	}
	return meta
}

func (w *ingressWorld) addIngress() {
	w.next++
	ns := []string{"a", "a", "b", "a_b"}[w.rng.IntN(4)]
	name := fmt.Sprintf("ing-%d", w.next)
	w.ingresses[ns+"/"+name] = w.newIngress(ns, name)
}

// ingressVariants are edits an operator makes to the example: each replaces one string.
var ingressVariants = [][3]string{
	{"template", "timeout client 50s", "timeout client 51s"},
	{"routes.j2", `{%- set notes = [] %}`, `{%- set notes = [] %}{# edited #}`},
	{"routes.map", "longest first", "the longest first"},
}

// step makes one change at random and says which.
func (w *ingressWorld) step() string {
	switch n := w.rng.IntN(20); {
	case n < 5:
		w.addIngress()
		return "ingress added"
	case n < 10:
		if key := w.pick(w.ingresses); key != "" {
			ns, name, _ := strings.Cut(key, "/")
			w.ingresses[key] = w.newIngress(ns, name)
		}
		return "ingress edited"
	case n < 12:
		delete(w.ingresses, w.pick(w.ingresses))
		return "ingress deleted"
	case n < 15:
		if key := w.pick(w.slices); key != "" {
			w.slices[key] = w.newSlice(key)
		}
		return "endpoints changed"
	case n < 16:
		key := w.pick(w.services)
		delete(w.services, key)
		delete(w.slices, key)
		return "service deleted"
	case n < 17:
		w.addService([]string{"a/web", "a/api", "a_b/c", "a/b_c", "b/web", "a/missing"}[w.rng.IntN(6)])
		return "service added"
	case n < 19:
		name := []string{"a.tls-a", "a.tls-b", "b.tls-a"}[w.rng.IntN(3)]
		w.certs[name] = !w.certs[name]
		return "certificate toggled"
	default:
		v := ingressVariants[w.rng.IntN(len(ingressVariants))]
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

func (w *ingressWorld) snapshot(t *testing.T) *snapshot.Snapshot {
	list := func(m map[string]map[string]any) []map[string]any {
		var out []map[string]any
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[k])
		}
		return out
	}
	snap := assembleWatched(t, map[string][]map[string]any{"ingresses": list(w.ingresses),
		"services": list(w.services), "endpointslices": list(w.slices)}, ingressWatch...)
	return w.withInputs(snap)
}

// sourceSnapshot is the world's snapshot as the sidecar assembles it: through cache (its
// PodCache: the watched resources' lookups of the last snapshot kept or patched), from the
// objects as a source holds them (conv: an object that did not change is the one converted
// before, a changed one a new one; each list a new one, in name order).
func (w *ingressWorld) sourceSnapshot(t *testing.T, conv sourceObjects, cache *snapshot.PodCache) *snapshot.Snapshot {
	var specs watchspec.List
	for _, spec := range ingressWatch {
		if err := specs.Set(spec); err != nil {
			t.Fatal(err)
		}
	}
	objs := &snapshot.Objects{Resources: map[string][]*snapshot.Object{}}
	for res, m := range map[string]map[string]map[string]any{"ingresses": w.ingresses, "services": w.services, "endpointslices": w.slices} {
		objs.Resources[res] = conv.list(t, res, m)
	}
	snap, err := snapshot.Assemble(objs, snapshot.Options{Resources: specs, PodCache: cache}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w.withInputs(snap)
}

// sourceObjects are the objects a source converted, by resource and namespace/name, with the
// version (the world's map) each was converted from.
type sourceObjects map[string]sourceObject

type sourceObject struct {
	from map[string]any
	obj  *snapshot.Object
}

// list is the objects of resource res, the world's m, in name order: those whose version is
// the one converted before are the same objects.
func (c sourceObjects) list(t *testing.T, res string, m map[string]map[string]any) []*snapshot.Object {
	var conv snapshot.ObjectConverter
	out := make([]*snapshot.Object, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		id := res + " " + k
		if o, ok := c[id]; ok && reflect.ValueOf(o.from).UnsafePointer() == reflect.ValueOf(m[k]).UnsafePointer() {
			out = append(out, o.obj)
			continue
		}
		o, err := conv.FromUnstructured(m[k])
		if err != nil {
			t.Fatal(err)
		}
		c[id] = sourceObject{from: m[k], obj: o}
		out = append(out, o)
	}
	return out
}

// withInputs is snap with the world's certificates and templates.
func (w *ingressWorld) withInputs(snap *snapshot.Snapshot) *snapshot.Snapshot {
	for _, name := range slices.Sorted(maps.Keys(w.certs)) {
		if w.certs[name] {
			snap.Certificates = append(snap.Certificates, snapshot.Certificate{Name: name, PEM: []byte("PEM " + name)})
		}
	}
	snap.Templates, snap.TemplateKey = w.templates, "template"
	snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
	return snap
}

// TestIngressRandomChangesRenderAsAFreshRenderer: along a long random sequence of changes
// (Ingresses, Services, endpoints and certificates added, edited and deleted, the templates
// edited), the renderer the sidecar keeps from sync to sync renders the Ingress example at
// every step byte for byte as a renderer made for that step alone; the kept renderer renders
// the snapshot as the sidecar assembles it (through a PodCache: the watched resources'
// lookups of the last step kept or patched), the fresh one a snapshot assembled anew, so that
// a stale part kept in either shows in what is rendered. The digest logged covers
// every step's files: equal digests from two versions of the example or of the engine say they
// render the whole sequence alike.
func TestIngressRandomChangesRenderAsAFreshRenderer(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}
	kept := New(opts)
	w := newIngressWorld(t, 1)
	digest := sha256.New()
	steps := 300
	if testing.Short() {
		steps = 80
	}
	counts := map[string]int{}
	seen := map[string]bool{}
	source, cache := sourceObjects{}, &snapshot.PodCache{}
	for i := range steps {
		what := "start"
		if i > 0 {
			what = w.step()
		}
		counts[what]++
		got, gotErr := kept.Render(context.Background(), w.sourceSnapshot(t, source, cache))
		want := freshAgrees(t, opts, w.snapshot(t), got, gotErr, fmt.Sprintf("step %d (%s)", i, what))
		cfg, routes := string(want.Config), string(want.Maps["routes.map"])
		for s, ok := range map[string]bool{
			"a served Ingress":      strings.Contains(cfg, "# haproxy-sidecar: serves Ingress "),
			"a path not served":     strings.Contains(cfg, `not served (white space, ? or #, or no port)`),
			"a missing certificate": strings.Contains(cfg, ": no certificate "),
			"the HTTPS frontend":    strings.Contains(cfg, "\nfrontend https\n"),
			"a default backend":     strings.Contains(routes, "\ndefault? be_"),
			"an exact path":         strings.Contains(routes, "? be_"),
			"a wildcard host":       strings.Contains(routes, "*.w.example.com/"),
			"a missing port":        strings.Contains(cfg, " has no port "),
			"a server":              strings.Contains(cfg, "\n  server "),
		} {
			seen[s] = seen[s] || ok
		}
		addToDigest(digest, i, want)
	}
	for _, what := range []string{"ingress added", "ingress edited", "ingress deleted", "endpoints changed", "service deleted",
		"service added", "certificate toggled", "template edited"} {
		if counts[what] == 0 && !testing.Short() {
			t.Errorf("the sequence missed a kind of change (%s): %v", what, counts)
		}
	}
	for s, ok := range seen {
		if !ok {
			t.Errorf("no step rendered %s", s)
		}
	}
	t.Logf("%d steps %v, digest %x", steps, counts, digest.Sum(nil))
}

// ingressByPosition is the Ingress example as it was with its Ingresses in blocks of 64 by
// position (the same output).
const ingressByPosition = "testdata/ingress-blocks-by-position.yaml"

// TestIngressBlocksRenderAsByPosition: along a random sequence of changes (Ingresses added
// among the others, edited and deleted, some without a uid or with an odd one; Services,
// endpoints, certificates and the templates changed), the Ingress example (its blocks begin
// at Ingresses of some uids) renders every step byte for byte as it did with its blocks by
// position (testdata, a fresh renderer), through the renderer kept from step to step and
// through a fresh one; with Exact paths and without any (the example merges its exact keys
// otherwise then).
func TestIngressBlocksRenderAsByPosition(t *testing.T) {
	for _, noExact := range []bool{false, true} {
		t.Run(fmt.Sprintf("noExact=%v", noExact), func(t *testing.T) {
			testIngressBlocksRenderAsByPosition(t, noExact)
		})
	}
}

func testIngressBlocksRenderAsByPosition(t *testing.T, noExact bool) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"}
	reference := loadConfigMapData(t, ingressByPosition)
	kept := New(opts)
	w := newIngressWorld(t, 3)
	w.noExact = noExact
	for range 275 {
		w.addIngress()
	}
	if w.templates["routes.j2"] == reference["routes.j2"] {
		t.Fatal("the example is the reference: nothing to compare")
	}
	steps := 150
	if testing.Short() || raceDetector {
		steps = 40
	}
	counts := map[string]int{}
	exact := 0
	for i := range steps {
		what := "start"
		if i > 0 {
			what = w.step()
		}
		counts[what]++
		step := fmt.Sprintf("step %d (%s, %d Ingresses)", i, what, len(w.ingresses))
		refSnap := w.snapshot(t)
		useReference(t, refSnap, reference)
		want, err := renderFresh(opts, refSnap)
		if err != nil {
			t.Fatalf("%s: the reference: %v", step, err)
		}
		snap := w.snapshot(t)
		got, err := kept.Render(context.Background(), snap)
		fresh := freshAgrees(t, opts, snap, got, err, step)
		if d := bundleDiff(fresh, want); d != "" {
			t.Fatalf("%s: the example renders otherwise than the reference: %s", step, d)
		}
		if strings.Contains(string(fresh.Maps["routes.map"]), "? be_") {
			exact++
		}
	}
	if exact == 0 {
		t.Error("no step rendered an exact key")
	}
	t.Logf("%d steps %v", steps, counts)
}

// useReference gives snap the reference's routes.j2 and ingresses.j2 (what the parts export
// is theirs) and the world's other templates (their edits show alike), routes.map reading
// the reference's exact keys as it did (a dict, sorted there).
func useReference(t *testing.T, snap *snapshot.Snapshot, reference map[string]string) {
	t.Helper()
	snap.Templates = maps.Clone(snap.Templates)
	for _, name := range []string{"routes.j2", "ingresses.j2"} {
		snap.Templates[name] = reference[name]
	}
	const loop, refLoop = "{%- for key, backend in r.exact %}", "{%- for key, backend in r.exact|dictsort %}"
	if !strings.Contains(snap.Templates["routes.map"], loop) || !strings.Contains(reference["routes.map"], refLoop) {
		t.Fatalf("routes.map reads the exact keys otherwise: %q", snap.Templates["routes.map"])
	}
	snap.Templates["routes.map"] = strings.Replace(snap.Templates["routes.map"], loop, refLoop, 1)
}

// renderAsReference renders w with the example and with the reference (useReference), fails
// t when they differ, and returns the example's bundle.
func renderAsReference(t *testing.T, opts Options, w *ingressWorld, reference map[string]string) *Bundle {
	t.Helper()
	refSnap := w.snapshot(t)
	useReference(t, refSnap, reference)
	want, err := renderFresh(opts, refSnap)
	if err != nil {
		t.Fatalf("the reference: %v", err)
	}
	got, err := renderFresh(opts, w.snapshot(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := bundleDiff(got, want); d != "" {
		t.Fatalf("the example renders otherwise than the reference: %s", d)
	}
	return got
}

// TestIngressBlocksKeptAcrossChanges: with a thousand Ingresses (blocks of up to 128), the
// Ingress example renders every step of a random sequence as a fresh renderer does; an Ingress
// edited computes its block's part only, and one added or deleted (among the others: the
// world's names sort anywhere) the parts of its block and of few others (assertBlocksKept).
func TestIngressBlocksKeptAcrossChanges(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}
	kept := New(opts)
	w := newIngressWorld(t, 7)
	for range 1000 {
		w.addIngress()
	}
	steps := 120
	if testing.Short() {
		steps = 40
	}
	assertBlocksKept(t, opts, kept, steps, w.step, func() *snapshot.Snapshot { return w.snapshot(t) })
}

// assertBlocksKept renders steps of a random sequence (step makes a change and names it;
// snapshot is the world after it) through kept, each as a fresh renderer does, and checks
// what parts of ingresses.j2 were computed again: after an Ingress edited, its block's only;
// after one added or deleted, 3 blocks' at most on average (its block's, and those after it
// in the run of Ingresses it is in: the blocks begin at Ingresses of some uids, not at
// positions). Blocks of 64 by position would compute the blocks after it (8 on average, an
// Ingress of 1,000 added or deleted). The routes' merged lists are then sorted and deduped
// by patching what the last render's sort and unique computed (reuse_sort.go), after most
// Ingresses edited.
func assertBlocksKept(t *testing.T, opts Options, kept *Renderer, steps int, step func() string, snapshot func() *snapshot.Snapshot) {
	t.Helper()
	edits, moves, moved, patchedEdits := 0, 0, 0, 0
	for i := range steps {
		what := "start"
		if i > 0 {
			what = step()
		}
		snap := snapshot()
		reusedBefore, computedBefore := kept.kept.LoopReused("ingresses.j2"), kept.kept.LoopComputed("ingresses.j2")
		wholeBefore, patchedBefore := kept.kept.Reused(), kept.kept.SeqPatched()
		got, gotErr := kept.Render(context.Background(), snap)
		freshAgrees(t, opts, snap, got, gotErr, fmt.Sprintf("step %d (%s)", i, what))
		reused := kept.kept.LoopReused("ingresses.j2") - reusedBefore
		computed := kept.kept.LoopComputed("ingresses.j2") - computedBefore
		if reused+computed == 0 && kept.kept.Reused() > wholeBefore {
			continue // the Ingresses are the same: the routes are the kept ones
		}
		switch what {
		case "ingress edited":
			edits++
			if kept.kept.SeqPatched() > patchedBefore {
				patchedEdits++
			}
			if computed > 1 {
				t.Errorf("step %d: an Ingress edited: %d of %d blocks' parts computed, want 1", i, computed, reused+computed)
			}
		case "ingress added", "ingress deleted":
			moves++
			moved += computed
		}
	}
	if edits == 0 || moves == 0 {
		t.Fatalf("%d Ingresses edited, %d added or deleted", edits, moves)
	}
	if patchedEdits < edits/2 {
		t.Errorf("%d of %d Ingresses edited sorted the routes by patching the last sort's output, want most", patchedEdits, edits)
	}
	if moved > 3*moves {
		t.Errorf("%d Ingresses added or deleted computed %d blocks' parts, more than 3 each on average", moves, moved)
	}
	t.Logf("%d Ingresses edited; %d added or deleted computed %d blocks' parts", edits, moves, moved)
}

// TestIngressExactKeysOrderAsReference: exact keys that differ only in case are written in
// the order the reference writes them (dictsort: case-insensitive, then the order the
// Ingresses name them), with and without an Exact path among the Ingresses (the example
// merges its exact keys otherwise without one).
func TestIngressExactKeysOrderAsReference(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"}
	reference := loadConfigMapData(t, ingressByPosition)
	path := func(p, pathType string) any {
		return map[string]any{"path": p, "pathType": pathType, "backend": map[string]any{
			"service": map[string]any{"name": "web", "port": map[string]any{"name": "http"}}}}
	}
	ing := func(name string, paths ...any) map[string]any {
		return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": worldMeta("a", name),
			"spec": map[string]any{"ingressClassName": "haproxy-sidecar", "rules": []any{map[string]any{
				"host": "h.example.com", "http": map[string]any{"paths": paths}}}}}
	}
	for name, exact := range map[string]string{"without Exact": "Prefix", "with Exact": "Exact"} {
		t.Run(name, func(t *testing.T) {
			w := newIngressWorld(t, 1)
			w.ingresses = map[string]map[string]any{
				"a/i1": ing("i1", path("/b/", "Prefix"), path("/x", exact)),
				"a/i2": ing("i2", path("/B", "Prefix"), path("/a", "Prefix")),
				"a/i3": ing("i3", path("/A/", "Prefix")),
			}
			got := renderAsReference(t, opts, w, reference)
			routes := string(got.Maps["routes.map"])
			if !strings.Contains(routes, "h.example.com/b? be_a_web_http\nh.example.com/B? be_a_web_http\n") {
				t.Errorf("the exact keys not in the Ingresses' order:\n%s", routes)
			}
		})
	}
}

// TestIngressBlocksCutAtEachUidPrefix: Ingresses whose uids begin with each of the prefixes
// that begin a block (00, 40, 80, c0, and one after the other: 0040, c0c0) render as the
// reference renders them: each block's Ingresses counted right at each of the splits that
// cut the uids.
func TestIngressBlocksCutAtEachUidPrefix(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"}
	reference := loadConfigMapData(t, ingressByPosition)
	w := newIngressWorld(t, 5)
	prefixes := []string{"ab", "00", "40", "80", "c0", "0040", "c0c0", "4080", "ff", "c0", "c0", "80"}
	w.ingresses = map[string]map[string]any{}
	for i := range 300 {
		name := fmt.Sprintf("ing-%03d", i)
		ing := w.newIngress("a", name)
		ing["metadata"].(map[string]any)["uid"] = fmt.Sprintf("%s%04x-e0", prefixes[i*7%len(prefixes)], i)
		w.ingresses["a/"+name] = ing
	}
	got := renderAsReference(t, opts, w, reference)
	if n := strings.Count(string(got.Config), "# haproxy-sidecar: serves Ingress "); n < 100 {
		t.Fatalf("%d Ingresses served: the world serves too few to tell", n)
	}
}

// TestIngressHashSeesEachChange: through the sidecar's path (a snapshot assembled through a
// PodCache from a source's objects, the renderer kept from sync to sync), each kind of change
// gives the rendered files another hash (the hash the sidecar decides "nothing changed" by),
// and a sync without a change the same one: an Ingress's field, an Ingress added and deleted,
// an endpoint's address, a Service deleted, a key of the template ConfigMap (the main template,
// a map's template), a certificate. Each hash is the files' hash (Content().Hash()).
func TestIngressHashSeesEachChange(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}
	kept := New(opts)
	w := newIngressWorld(t, 7)
	served := func(host, path, svc string) map[string]any {
		ns, name, _ := strings.Cut(svc, "/")
		return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": map[string]any{"name": "hashed", "namespace": ns},
			"spec": map[string]any{"ingressClassName": "haproxy-sidecar", "rules": []any{map[string]any{"host": host, "http": map[string]any{"paths": []any{
				map[string]any{"path": path, "pathType": "Prefix", "backend": map[string]any{"service": map[string]any{"name": name, "port": map[string]any{"name": "http"}}}}}}}}}}
	}
	w.services["a/hashed"] = map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "hashed", "namespace": "a"},
		"spec": map[string]any{"ports": []any{map[string]any{"name": "http", "port": int64(80), "targetPort": int64(8080)}}}}
	slice := func(addr string) map[string]any {
		return map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
			"metadata":  map[string]any{"name": "hashed-x", "namespace": "a", "labels": map[string]any{"kubernetes.io/service-name": "hashed"}},
			"ports":     []any{map[string]any{"name": "http", "port": int64(8080)}},
			"endpoints": []any{map[string]any{"addresses": []any{addr}, "conditions": map[string]any{"ready": true}}}}
	}
	w.slices["a/hashed"] = slice("10.7.0.1")
	w.ingresses["a/hashed"] = served("hashed.example.com", "/", "a/hashed")
	edit := func(key, from, to string) {
		tpl := maps.Clone(w.templates)
		if !strings.Contains(tpl[key], from) {
			t.Fatalf("template key %s has no %q", key, from)
		}
		tpl[key] = strings.Replace(tpl[key], from, to, 1)
		w.templates = tpl
	}
	source, cache := sourceObjects{}, &snapshot.PodCache{}
	sync := func() *Bundle {
		b, err := kept.Render(context.Background(), w.sourceSnapshot(t, source, cache))
		if err != nil {
			t.Fatal(err)
		}
		if b.Hash != b.Content().Hash() {
			t.Fatalf("the bundle's hash %s is not its files' %s", b.Hash, b.Content().Hash())
		}
		return b
	}
	last := sync()
	for _, c := range []struct {
		what   string
		change func()
	}{
		{"nothing", func() {}},
		{"an Ingress's path", func() { w.ingresses["a/hashed"] = served("hashed.example.com", "/v2", "a/hashed") }},
		{"an Ingress's host", func() { w.ingresses["a/hashed"] = served("hashed2.example.com", "/v2", "a/hashed") }},
		{"an Ingress added", func() {
			ing := served("added.example.com", "/", "a/hashed")
			ing["metadata"] = map[string]any{"name": "added", "namespace": "a"}
			w.ingresses["a/added"] = ing
		}},
		{"an endpoint's address", func() { w.slices["a/hashed"] = slice("10.7.0.2") }},
		{"an Ingress deleted", func() { delete(w.ingresses, "a/added") }},
		{"nothing, again", func() {}},
		{"the main template", func() { edit("template", "timeout client 50s", "timeout client 51s") }},
		{"a map's template", func() { edit("routes.map", "longest first", "the longest first") }},
		{"a certificate", func() { w.certs["a.tls-b"] = !w.certs["a.tls-b"] }},
		{"a Service deleted", func() { delete(w.services, "a/hashed"); delete(w.slices, "a/hashed") }},
	} {
		c.change()
		b := sync()
		if same := b.Hash == last.Hash; same != strings.HasPrefix(c.what, "nothing") {
			t.Errorf("%s: hash %s, before %s", c.what, b.Hash, last.Hash)
		}
		if d := bundleDiff(b, last); (d == "") != (b.Hash == last.Hash) {
			t.Errorf("%s: the files differ (%q) but not their hashes, or the other way round", c.what, d)
		}
		last = b
	}
}
