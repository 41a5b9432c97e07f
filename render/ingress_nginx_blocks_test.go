package render

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// nginxReference is the ingress-nginx example as it was before it read its Ingresses in
// blocks of 64 (one routes.j2 over every Ingress): the reference the example must render as,
// byte for byte, for every input.
const nginxReference = "testdata/ingress-nginx-before-blocks.yaml"

// nginxWorld is a cluster for the ingress-nginx example: Ingresses of the class and of
// others, primaries and canaries, with the annotations the example reads (valid, invalid,
// refused, unsupported), default backends and TLS, Services and EndpointSlices, certificates
// and PROXY_BODY_SIZE, changed at random one step at a time. The Ingresses collide on purpose
// across blocks of 64: shared hosts and paths (and paths, hosts and certificate names that
// differ in case only), backend names two namespaces spell alike (a_b/ing-1 and a/b_ing-1),
// several default backends, canaries whose primary is in another block or nowhere.
type nginxWorld struct {
	rng       *rand.Rand
	ingresses map[string]map[string]any // by namespace/name
	services  map[string]map[string]any
	slices    map[string]map[string]any
	certs     map[string]bool
	env       map[string]string
	next      int
	// noExact: the Ingresses' paths are Prefix or ImplementationSpecific, never Exact (the
	// example merges its exact keys otherwise then).
	noExact bool
}

func newNginxWorld(seed uint64, n int) *nginxWorld {
	w := &nginxWorld{rng: rand.New(rand.NewPCG(seed, 11)), ingresses: map[string]map[string]any{},
		services: map[string]map[string]any{}, slices: map[string]map[string]any{}, certs: map[string]bool{"a.tls-a": true},
		env: map[string]string{}}
	for _, svc := range nginxServices {
		w.addService(svc)
	}
	for range n {
		w.addIngress()
	}
	return w
}

var nginxServices = []string{"a/web", "a/api", "a_b/c", "a/b_c", "b/web"}

// nginxAnnotations are the annotations an Ingress draws from (without the prefix but for
// kubernetes.io/...), with the values each may take.
var nginxAnnotations = map[string][]string{
	"rewrite-target":          {"/$1", "/new", "/$2", "bad path!"},
	"use-regex":               {"true", "false"},
	"ssl-redirect":            {"false", "true"},
	"force-ssl-redirect":      {"true"},
	"backend-protocol":        {"HTTPS", "grpc", "GRPCS", "FCGI"},
	"whitelist-source-range":  {"10.0.0.0/8, 192.168.1.1", "everyone"},
	"allowlist-source-range":  {"2001:db8::/32,172.16.0.0/12", ""},
	"proxy-body-size":         {"8m", "0", "huge", "512k"},
	"proxy-connect-timeout":   {"3", "x"},
	"proxy-read-timeout":      {"120", "2m"},
	"proxy-send-timeout":      {"30"},
	"affinity":                {"cookie", "balanced"},
	"session-cookie-name":     {"route", "bad name"},
	"permanent-redirect":      {"https://example.org/new", "not a url"},
	"permanent-redirect-code": {"308", "999"},
	"temporal-redirect":       {"https://example.org/maintenance"},
	"enable-cors":             {"true", "true", "false"},
	"cors-allow-origin":       {"https://a.example.org, https://b.example.org", "*", "bad origin!"},
	"cors-allow-methods":      {"GET, POST"},
	"cors-allow-credentials":  {"false"},
	"cors-max-age":            {"100", "x"},
	"cors-expose-headers":     {"X-Total"},
	"limit-rps":               {"10", "x"},
	"limit-rpm":               {"60"},
	"limit-connections":       {"4", "y"},
	"limit-burst-multiplier":  {"1", "z"},
	"app-root":                {"/app", "bad"},
	"auth-url":                {"http://auth.example/check"},
	"server-snippet":          {"x;"},
	"mirror-target":           {"https://mirror/"},
	"canary-by-header":        {"X-Canary", "bad name"},
	"canary-by-header-value":  {"staging", "a b"},
	"canary-by-cookie":        {"canary"},
	"canary-weight":           {"20", "x"},
	"canary-weight-total":     {"50", "0"},
}

func (w *nginxWorld) pick(m map[string]map[string]any) string { return pickKey(w.rng, m) }

func (w *nginxWorld) oneOf(values ...string) string { return values[w.rng.IntN(len(values))] }

func (w *nginxWorld) addService(key string) {
	w.services[key], w.slices[key] = randomService(w.rng, key)
}

func (w *nginxWorld) backend() map[string]any {
	svcs := append(slices.Clone(nginxServices), "a/missing")
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

func (w *nginxWorld) annotations() map[string]any {
	a := map[string]any{}
	if w.rng.IntN(5) == 0 {
		a["nginx.ingress.kubernetes.io/canary"] = w.oneOf("true", "true", "false")
	}
	names := slices.Sorted(maps.Keys(nginxAnnotations))
	for range w.rng.IntN(4) {
		n := names[w.rng.IntN(len(names))]
		a["nginx.ingress.kubernetes.io/"+n] = w.oneOf(nginxAnnotations[n]...)
	}
	return a
}

func (w *nginxWorld) newIngress(ns, name string) map[string]any {
	var rules []any
	for range w.rng.IntN(3) {
		var paths []any
		for range w.rng.IntN(4) {
			p := map[string]any{"pathType": w.oneOf("Prefix", "Exact", "ImplementationSpecific", "Prefix"), "backend": w.backend()}
			if w.noExact && p["pathType"] == "Exact" {
				p["pathType"] = "Prefix"
			}
			if v := w.oneOf("/", "/api", "/api/", "/Api", "/v1/x", "/a b", "", "/q?x", "/api(/|$)(.*)", "/v[0-9]+/items", "/x y(.*)"); v != "" {
				p["path"] = v
			}
			paths = append(paths, p)
		}
		rule := map[string]any{}
		switch w.rng.IntN(5) {
		case 0:
		case 1:
			rule["host"] = "*.w.example.com"
		case 2:
			rule["host"] = "Shop.example.com"
		default:
			rule["host"] = w.oneOf("shop.example.com", name+".example.com")
		}
		if paths != nil || w.rng.IntN(3) > 0 {
			rule["http"] = map[string]any{"paths": paths}
		}
		rules = append(rules, rule)
	}
	spec := map[string]any{"rules": rules}
	meta := worldMeta(ns, name)
	if a := w.annotations(); len(a) > 0 || w.rng.IntN(2) == 0 {
		meta["annotations"] = a
	}
	switch w.rng.IntN(8) {
	case 0:
		spec["ingressClassName"] = "other"
	case 1:
		if meta["annotations"] == nil {
			meta["annotations"] = map[string]any{}
		}
		meta["annotations"].(map[string]any)["kubernetes.io/ingress.class"] = "nginx"
	default:
		spec["ingressClassName"] = "nginx"
	}
	if w.rng.IntN(6) == 0 {
		spec["defaultBackend"] = w.backend()
	}
	if w.rng.IntN(4) == 0 {
		var tls []any
		for range w.rng.IntN(3) + 1 {
			tls = append(tls, map[string]any{"secretName": w.oneOf("tls-a", "tls-b", "TLS-a", "")})
		}
		spec["tls"] = tls
	}
	return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}
}

// addIngress adds an Ingress; one in six is the twin of another (a_b/ing-N and a/b_ing-N:
// their backends are spelt alike).
func (w *nginxWorld) addIngress() {
	w.next++
	ns := w.oneOf("a", "a", "b", "a_b")
	name := fmt.Sprintf("ing-%d", w.next)
	if w.rng.IntN(6) == 0 {
		if key := w.pick(w.ingresses); strings.HasPrefix(key, "a_b/") {
			ns, name = "a", "b_"+strings.TrimPrefix(key, "a_b/")
		}
	}
	w.ingresses[ns+"/"+name] = w.newIngress(ns, name)
}

// step makes one change at random and says which.
func (w *nginxWorld) step() string {
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
	case n < 14:
		w.addService(nginxServices[w.rng.IntN(len(nginxServices))])
		return "service changed"
	case n < 15:
		key := w.pick(w.services)
		delete(w.services, key)
		delete(w.slices, key)
		return "service deleted"
	case n < 18:
		name := w.oneOf("a.tls-a", "a.tls-b", "b.tls-a", "a.TLS-a")
		w.certs[name] = !w.certs[name]
		return "certificate toggled"
	default:
		if v := w.oneOf("", "2m", "bogus"); v != "" {
			w.env["PROXY_BODY_SIZE"] = v
		} else {
			delete(w.env, "PROXY_BODY_SIZE")
		}
		return "env changed"
	}
}

func (w *nginxWorld) snapshot(t *testing.T, templates map[string]string) *snapshot.Snapshot {
	list := func(m map[string]map[string]any) []map[string]any {
		var out []map[string]any
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[k])
		}
		return out
	}
	snap := assembleWatched(t, map[string][]map[string]any{"ingresses": list(w.ingresses),
		"services": list(w.services), "endpointslices": list(w.slices)}, ingressWatch...)
	for _, name := range slices.Sorted(maps.Keys(w.certs)) {
		if w.certs[name] {
			snap.Certificates = append(snap.Certificates, snapshot.Certificate{Name: name, PEM: []byte("PEM " + name)})
		}
	}
	snap.Env = maps.Clone(w.env)
	snap.Templates, snap.TemplateKey = templates, "template"
	snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
	return snap
}

// TestIngressNginxBlocksRenderAsTheReference: along a random sequence of changes (Ingresses
// added, edited and deleted, colliding across blocks; Services, endpoints, certificates and
// PROXY_BODY_SIZE changed), the ingress-nginx example (its Ingresses in blocks) renders
// every step byte for byte as the example did before the blocks (testdata, a fresh renderer),
// both through the renderer kept from step to step and through a fresh one; with Exact paths
// and without any (the example merges its exact keys otherwise then: a shorter sequence).
func TestIngressNginxBlocksRenderAsTheReference(t *testing.T) {
	for _, noExact := range []bool{false, true} {
		t.Run(fmt.Sprintf("noExact=%v", noExact), func(t *testing.T) {
			testIngressNginxBlocksRenderAsTheReference(t, noExact)
		})
	}
}

func testIngressNginxBlocksRenderAsTheReference(t *testing.T, noExact bool) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}
	example := loadConfigMapData(t, "../examples/templates/ingress-nginx.yaml")
	reference := loadConfigMapData(t, nginxReference)
	if example["routes.j2"] == reference["routes.j2"] {
		t.Fatal("the example is the reference: nothing to compare")
	}
	kept := New(opts)
	w := newNginxWorld(2, 0)
	w.noExact = noExact
	for range 150 {
		w.addIngress()
	}
	digest := sha256.New()
	steps := 300
	if testing.Short() {
		steps = 60
	} else if raceDetector {
		steps = 120 // under -race, about ten times slower (make test)
	}
	if noExact {
		steps /= 2
	}
	counts := map[string]int{}
	seen := map[string]bool{}
	for i := range steps {
		what := "start"
		if i > 0 {
			what = w.step()
		}
		counts[what]++
		step := fmt.Sprintf("step %d (%s, %d Ingresses)", i, what, len(w.ingresses))
		want, err := renderFresh(opts, w.snapshot(t, reference))
		if err != nil {
			t.Fatalf("%s: the reference: %v", step, err)
		}
		snap := w.snapshot(t, example)
		got, err := kept.Render(context.Background(), snap)
		fresh := freshAgrees(t, opts, snap, got, err, step)
		if d := bundleDiff(fresh, want); d != "" {
			t.Fatalf("%s: the example renders otherwise than the reference: %s", step, d)
		}
		cfg, routes := string(want.Config), string(want.Maps["routes.map"])
		for s, ok := range map[string]bool{
			"a canary":                        strings.Contains(cfg, "use_backend be_") && strings.Contains(cfg, "-m str be_"),
			"a canary without a primary":      strings.Contains(cfg, "canary: no Ingress of the class serves"),
			"a refused Ingress":               strings.Contains(cfg, "is not served: refused"),
			"an unsupported annotation":       strings.Contains(cfg, "mirror-target: not supported"),
			"a missing certificate":           strings.Contains(cfg, ": no certificate "),
			"the HTTPS frontend":              strings.Contains(cfg, "\nfrontend https\n"),
			"an app root":                     strings.Contains(cfg, "code 302 if "),
			"a default backend":               strings.Contains(routes, "\ndefault? be_"),
			"an exact path":                   strings.Contains(routes, "? be_"),
			"an Exact path (none if noExact)": exactPathIn(w) != noExact,
			"a regular expression":            strings.Contains(string(want.Maps["regex.map"]), "(?i)^"),
			"a path not served":               strings.Contains(cfg, ", not served"),
			"a server":                        strings.Contains(cfg, "\n  server "),
		} {
			seen[s] = seen[s] || ok
		}
		addToDigest(digest, i, want)
	}
	for s, ok := range seen {
		if !ok {
			t.Errorf("no step rendered %s", s)
		}
	}
	t.Logf("%d steps %v, digest %x", steps, counts, digest.Sum(nil))
}

// TestIngressNginxBlocksKeptAcrossChanges: with 600 Ingresses (blocks of up to 128), an
// Ingress edited computes its block's part of the ingress-nginx example only, one added or
// deleted few blocks' (assertBlocksKept): the other blocks' parts are the kept ones (and the
// output is a fresh renderer's).
func TestIngressNginxBlocksKeptAcrossChanges(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}
	example := loadConfigMapData(t, "../examples/templates/ingress-nginx.yaml")
	kept := New(opts)
	w := newNginxWorld(7, 600)
	steps := 80
	if testing.Short() {
		steps = 30
	}
	assertBlocksKept(t, opts, kept, steps, w.step, func() *snapshot.Snapshot { return w.snapshot(t, example) })
}

// exactPathIn says whether an Ingress of w has an Exact path.
func exactPathIn(w *nginxWorld) bool {
	for _, ing := range w.ingresses {
		rules, _ := ing["spec"].(map[string]any)["rules"].([]any)
		for _, r := range rules {
			http, _ := r.(map[string]any)["http"].(map[string]any)
			paths, _ := http["paths"].([]any)
			for _, p := range paths {
				if p.(map[string]any)["pathType"] == "Exact" {
					return true
				}
			}
		}
	}
	return false
}

// nginxAsReference renders w's snapshot with the ingress-nginx example and with the
// reference (fresh renderers), fails t when they differ, and returns the example's bundle.
func nginxAsReference(t *testing.T, w *nginxWorld) *Bundle {
	t.Helper()
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}
	want, err := renderFresh(opts, w.snapshot(t, loadConfigMapData(t, nginxReference)))
	if err != nil {
		t.Fatalf("the reference: %v", err)
	}
	got, err := renderFresh(opts, w.snapshot(t, loadConfigMapData(t, "../examples/templates/ingress-nginx.yaml")))
	if err != nil {
		t.Fatalf("the example: %v", err)
	}
	if d := bundleDiff(got, want); d != "" {
		t.Fatalf("the example renders otherwise than the reference: %s", d)
	}
	return got
}

// nginxIngress is the Ingress a/name of class nginx for host h.example.com with paths
// ([PATH, PATH TYPE] to Service web, port 80), its uid given.
func nginxIngress(name, uid string, paths ...[2]string) map[string]any {
	var ps []any
	for _, p := range paths {
		ps = append(ps, map[string]any{"path": p[0], "pathType": p[1], "backend": map[string]any{
			"service": map[string]any{"name": "web", "port": map[string]any{"number": int64(80)}}}})
	}
	return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"name": name, "namespace": "a", "uid": uid},
		"spec": map[string]any{"ingressClassName": "nginx", "rules": []any{map[string]any{
			"host": "h.example.com", "http": map[string]any{"paths": ps}}}}}
}

// TestIngressNginxExactKeysOrderAsReference: exact keys that differ only in case are written
// in the order the Ingresses name them (as dictsort orders a dict of them), with an Exact path
// and without any (the example sorts the merged exact parts of Prefix paths as they are then);
// prefix keys likewise.
func TestIngressNginxExactKeysOrderAsReference(t *testing.T) {
	for name, exact := range map[string]string{"without Exact": "Prefix", "with Exact": "Exact"} {
		t.Run(name, func(t *testing.T) {
			w := newNginxWorld(1, 0)
			w.ingresses = map[string]map[string]any{
				"a/i1": nginxIngress("i1", "40e1", [2]string{"/b/", "Prefix"}, [2]string{"/x", exact}),
				"a/i2": nginxIngress("i2", "00e2", [2]string{"/B", "Prefix"}, [2]string{"/a", "Prefix"}),
				"a/i3": nginxIngress("i3", "c0e3", [2]string{"/A/", "Prefix"}, [2]string{"/b/", "Prefix"}),
			}
			routes := string(nginxAsReference(t, w).Maps["routes.map"])
			for _, want := range []string{"h.example.com/b? be_a_i1_0\nh.example.com/B? be_a_i2_0\n",
				"h.example.com/b/ be_a_i1_0\nh.example.com/B/ be_a_i2_0\n"} {
				if !strings.Contains(routes, want) {
					t.Errorf("routes.map has no %q (the keys not in the Ingresses' order):\n%s", want, routes)
				}
			}
		})
	}
}

// TestIngressNginxBlocksCutAtEachUidPrefix: Ingresses whose uids begin with each of the
// prefixes that begin a block (00, 40, 80, c0, and one after the other: 0040, c0c0) render as
// the reference renders them: each block's Ingresses counted right at each of the splits
// that cut the uids (an Ingress counted twice or left out would show).
func TestIngressNginxBlocksCutAtEachUidPrefix(t *testing.T) {
	w := newNginxWorld(5, 0)
	prefixes := []string{"ab", "00", "40", "80", "c0", "0040", "c0c0", "4080", "ff", "c0", "c0", "80"}
	for i := range 300 {
		name := fmt.Sprintf("ing-%03d", i)
		ing := w.newIngress("a", name)
		ing["metadata"].(map[string]any)["uid"] = fmt.Sprintf("%s%04x-e0", prefixes[i*7%len(prefixes)], i)
		w.ingresses["a/"+name] = ing
	}
	got := nginxAsReference(t, w)
	if n := strings.Count(string(got.Config), "# haproxy-sidecar: serves Ingress "); n < 100 {
		t.Fatalf("%d Ingresses served: the world serves too few to tell", n)
	}
}

// TestIngressNginxLastIngressMakesBackend: two Ingresses whose backends are spelt alike
// (a_b/ing-1 and a/b_ing-1: be_a_b_ing-1_0), in blocks apart and in one block, are written
// as the reference writes them: the backend of the last to name it (by namespace and name).
func TestIngressNginxLastIngressMakesBackend(t *testing.T) {
	for name, uids := range map[string][2]string{"blocks apart": {"00e9", "80e3"}, "one block": {"abe9", "abe3"}} {
		t.Run(name, func(t *testing.T) {
			w := newNginxWorld(1, 0)
			twin := func(ns, name, uid, svc string) map[string]any {
				ing := nginxIngress(name, uid, [2]string{"/", "Prefix"})
				ing["metadata"].(map[string]any)["namespace"] = ns
				rule := ing["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)
				rule["host"] = ns + "." + name + ".example.com"
				rule["http"].(map[string]any)["paths"].([]any)[0].(map[string]any)["backend"].(map[string]any)["service"].(map[string]any)["name"] = svc
				return ing
			}
			w.ingresses = map[string]map[string]any{
				"a/b_ing-1": twin("a", "b_ing-1", "40e1", "web"),
				"a/other":   twin("a", "other", uids[0], "api"),
				"a_b/ing-1": twin("a_b", "ing-1", uids[1], "api"),
			}
			cfg := string(nginxAsReference(t, w).Config)
			if !strings.Contains(cfg, "backend be_a_b_ing-1_0\n  # Ingress a_b/ing-1 ") {
				t.Errorf("be_a_b_ing-1_0 is not a_b/ing-1's:\n%s", cfg)
			}
		})
	}
}
