package render

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// perRouteReference is the HTTPRoute example as it was before model.j2 merged its routes'
// parts in blocks of 64 (block.j2): model.j2 imported route.j2 and merged its values route by
// route. The example must render byte for byte as it does.
const perRouteReference = "testdata/httproute-reference-per-route-loop.yaml"

// Along random changes of routes, Services, endpoints, the Gateway, the namespace's labels and
// the ReferenceGrant (and the status writer's), with more than two blocks of routes that share
// hostnames, wildcard hosts and Services (keys two blocks name), the example renders through a
// kept renderer as through a fresh one, and as the per-route reference does.
func TestHTTPRouteBlocksRenderAsThePerRouteLoop(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}
	ref := loadConfigMapData(t, perRouteReference)
	steps := 40
	if testing.Short() {
		steps = 12
	}
	for _, seed := range []uint64{3, 4} {
		w := newRouteWorld(t, seed)
		for range 130 {
			w.addRoute()
		}
		kept := New(opts)
		blocks, computed := 0, 0
		for i := range steps {
			what := "start"
			switch {
			case i > 0 && i%6 == 5:
				what = w.statusStep()
			case i > 0:
				templates := w.templates
				if what = w.step(); what == "template edited" {
					w.templates, what = templates, "nothing" // the reference is not edited alike
				}
			}
			step := fmt.Sprintf("seed %d step %d (%s, %d routes)", seed, i, what, len(w.routes))
			snap := assembleWatched(t, w.raw(), sequenceWatch...)
			snap.Templates, snap.TemplateKey = w.templates, "template"
			snap.TemplateRef.Kind, snap.TemplateRef.Namespace, snap.TemplateRef.Name = "ConfigMap", "lb", "config"
			blocksBefore, computedBefore, blocksComputed := kept.Reused("block.j2"), kept.Computed("route.j2"), kept.Computed("block.j2")
			got, gotErr := kept.Render(context.Background(), snap)
			want := freshAgrees(t, opts, snap, got, gotErr, step)
			if i > 0 {
				blocks += kept.Reused("block.j2") - blocksBefore
				computed += kept.Computed("route.j2") - computedBefore
			}
			// The status writer's writes change nothing a block reads (model.j2 gives it what
			// route.j2 reads of each route, not the route): every block is taken whole.
			if n := kept.Computed("block.j2") - blocksComputed; n > 0 && (strings.HasPrefix(what, "status") || what == "resourceVersion changed") {
				t.Errorf("%s: %d blocks computed, want none", step, n)
			}
			refSnap := *snap
			refSnap.Templates = ref
			refOut, err := renderFresh(opts, &refSnap)
			if err != nil {
				t.Fatalf("%s: the reference: %v", step, err)
			}
			if d := bundleDiff(want, refOut); d != "" {
				t.Fatalf("%s: the example renders otherwise than the per-route reference: %s", step, d)
			}
		}
		// Blocks were kept, and most routes' parts were neither computed nor taken.
		if blocks == 0 || computed > (steps-1)*len(w.routes)/4 {
			t.Errorf("seed %d: %d blocks reused, %d routes' parts computed in %d steps of about %d routes", seed, blocks, computed, steps, len(w.routes))
		}
		t.Logf("seed %d: %d blocks reused, %d routes' parts computed in %d steps, %d routes at the end", seed, blocks, computed, steps, len(w.routes))
	}
}

// When no scope is two blocks' and none has a chain (the routes of bench-routes), model.j2
// merges the blocks' map entries as the blocks made them (block.j2), rather than scope by
// scope: routes.map must still list them as the per-route reference does, prefixes of one
// length in the order of their scopes (case aside, then the routes' order), through a kept
// renderer as through a fresh one, as routes get creation times (the blocks' order), change,
// come and get hostnames that differ from another block's in case only.
func TestHTTPRouteBlocksEntriesRenderAsThePerRouteLoop(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"}
	ref := loadConfigMapData(t, perRouteReference)
	tpl := loadConfigMapData(t, "../examples/templates/httproute.yaml")
	raw := httprouteObjects(150)
	host := func(i int, h string) {
		raw["httproutes"][i]["spec"].(map[string]any)["hostnames"] = []any{h}
	}
	steps := []struct {
		what   string
		change func()
	}{
		{"start", func() {}},
		{"creation times", func() {
			// Some none (first, in their order), the others against the order of the names,
			// some alike (in their order).
			for i, r := range raw["httproutes"] {
				if i%3 != 0 {
					r["metadata"].(map[string]any)["creationTimestamp"] = fmt.Sprintf("2026-01-01T00:%02d:00Z", (150-i)/2%60)
				}
			}
		}},
		{"hosts differing in case only", func() {
			host(10, "Route-00100.example.com")
			host(70, "ROUTE-00003.example.com")
		}},
		{"a path changed", func() {
			raw["httproutes"][80]["spec"].(map[string]any)["rules"] = []any{benchRule("/", 80), benchRule("/b", 81)}
		}},
		{"a route added", func() {
			raw["httproutes"] = append(raw["httproutes"], benchRoute(150, benchRule("/", 3), benchRule("/API", 4)))
		}},
		{"a host in another case", func() { host(5, "route-00005.EXAMPLE.com") }},
		// A path without its leading / (no API server let it in, a test in the config may):
		// two scopes of two blocks name one key, which model.j2 makes once.
		{"a key two scopes name", func() {
			exact := func(p string, i int) any {
				r := benchRule(p, i).(map[string]any)
				r["matches"].([]any)[0].(map[string]any)["path"].(map[string]any)["type"] = "Exact"
				return r
			}
			// Route 9 has no creation time (the first block), route 32 the latest (the last).
			host(9, "h.example.com")
			raw["httproutes"][9]["spec"].(map[string]any)["rules"] = []any{exact("x/y", 9)}
			host(32, "h.example.comx")
			raw["httproutes"][32]["spec"].(map[string]any)["rules"] = []any{exact("/y", 32)}
		}},
	}
	kept := New(opts)
	for _, s := range steps {
		s.change()
		snap := assembleWatched(t, raw, httprouteWatch...)
		snap.Templates, snap.TemplateKey = tpl, "template"
		snap.TemplateRef.Kind, snap.TemplateRef.Namespace, snap.TemplateRef.Name = "ConfigMap", "lb", "config"
		got, gotErr := kept.Render(context.Background(), snap)
		want := freshAgrees(t, opts, snap, got, gotErr, s.what)
		refSnap := *snap
		refSnap.Templates = ref
		refOut, err := renderFresh(opts, &refSnap)
		if err != nil {
			t.Fatalf("%s: the reference: %v", s.what, err)
		}
		if d := bundleDiff(want, refOut); d != "" {
			t.Fatalf("%s: the example renders otherwise than the per-route reference: %s", s.what, d)
		}
	}
}
