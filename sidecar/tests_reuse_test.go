package sidecar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// twoWays renders each snapshot with one renderer shared by every render, as the sidecar's
// (the modules it keeps from render to render: a test in the config reuses the route parts of
// the configuration's render), and with a new renderer, and says where the two differ.
type twoWays struct {
	shared *render.Renderer
	opts   render.Options

	mu      sync.Mutex
	renders int
	apart   int   // renders apart (the tests')
	reused  []int // route parts reused, by render
	whole   []int // other modules reused (the model of the routes, taken whole), by render
	differ  []string
}

func (w *twoWays) Render(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	return w.compare(ctx, s, w.shared.Render)
}

func (w *twoWays) RenderApart(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	w.mu.Lock()
	w.apart++
	w.mu.Unlock()
	return w.compare(ctx, s, w.shared.RenderApart)
}

// compare renders s with the shared renderer (by) and with a new one.
func (w *twoWays) compare(ctx context.Context, s *snapshot.Snapshot, by func(context.Context, *snapshot.Snapshot) (*render.Bundle, error)) (*render.Bundle, error) {
	before, all := w.shared.Reused("route.j2"), w.shared.Reused()
	got, err := by(ctx, s)
	reused, whole := w.shared.Reused("route.j2")-before, w.shared.Reused()-all-(w.shared.Reused("route.j2")-before)
	want, wantErr := render.New(w.opts).Render(ctx, s)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.renders++
	w.reused = append(w.reused, reused)
	w.whole = append(w.whole, whole)
	switch {
	case (err == nil) != (wantErr == nil):
		w.differ = append(w.differ, fmt.Sprintf("render %d: error %v, a new renderer's %v", w.renders, err, wantErr))
	case err != nil:
	case !bytes.Equal(got.Config, want.Config) || !maps.EqualFunc(got.Maps, want.Maps, bytes.Equal) || got.Hash != want.Hash:
		w.differ = append(w.differ, fmt.Sprintf("render %d: the shared renderer's differs from a new renderer's:\n%s\n----\n%s", w.renders, got.Config, want.Config))
	}
	return got, err
}

// routesTests are tests in the config whose objects change what a route of the cluster's
// reads: a Service its backendRef names that the cluster lacks (the route's part computed
// again, its backend served), and the cluster's Gateway itself (every route's part computed
// again: they no longer attach); stale is a test that passes only if the route's part of the
// cluster were reused although its Service came.
const routesTests = `  tests.late-service.yaml: |
    objects:
    - {apiVersion: v1, kind: Service, metadata: {name: late, namespace: bench}, spec: {ports: [{port: 80}]}}
    expect:
    - file: maps/routes.map
      matches: '^fe_\S*80@late\.example\.com/ be_bench_late_80$'
    - contains: "serves HTTPRoute bench/late parent=bench/gw accepted resolved\n"
  tests.gateway-changed.yaml: |
    objects:
    - {apiVersion: gateway.networking.k8s.io/v1, kind: Gateway, metadata: {name: gw, namespace: bench}, spec: {gatewayClassName: haproxy-sidecar, listeners: [{name: http, port: 80, protocol: HTTP, hostname: "*.other.io"}]}}
    expect:
    - file: maps/routes.map
      notContains: "route-00001.example.com"
    - contains: "serves HTTPRoute bench/route-00001 parent=bench/gw accepted=false accepted.reason=NoMatchingListenerHostname "
    - deterministic: true
`

const staleTest = `  tests.stale.yaml: |
    objects:
    - {apiVersion: v1, kind: Service, metadata: {name: late, namespace: bench}, spec: {ports: [{port: 80}]}}
    expect:
    - contains: "serves HTTPRoute bench/late parent=bench/gw accepted resolved=false resolved.reason=BackendNotFound "
`

// TestTestsInTheConfigReuseTheRoutesExactly: the HTTPRoute example's tests in the config, and
// tests whose objects change what a route of the cluster reads (a Service it names, its
// Gateway), render with the sidecar's renderer (the route parts kept from the configuration's
// render) exactly what a new renderer renders, every one of them; the example's six reuse
// every route part of the cluster's (a route's part reads the Gateways its parentRefs name,
// not the tests' Gateway); a test that holds only if a route's part were reused although the
// Service it reads came still fails, and holds the template set.
func TestTestsInTheConfigReuseTheRoutesExactly(t *testing.T) {
	const n = 40
	example, err := os.ReadFile("../examples/templates/httproute.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withTests := func(tests string) []byte {
		const at = "  tests.backends.yaml: |\n"
		if !bytes.Contains(example, []byte(at)) {
			t.Fatalf("the example has no %q", at)
		}
		return bytes.Replace(example, []byte(at), []byte(tests+at), 1)
	}
	// A route of the cluster to a Service the cluster lacks.
	late := map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "late", "namespace": "bench"},
		"spec": map[string]any{"parentRefs": []any{map[string]any{"name": "gw"}}, "hostnames": []any{"late.example.com"},
			"rules": []any{map[string]any{"backendRefs": []any{map[string]any{"name": "late", "port": 80}}}}}}
	cfg := routesConfig(t)
	dirs, err := onceDirs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := cfg.Render.Options(dirs.SSLDir)
	opts.MapsDir, opts.FilesDir = dirs.MapsDir, dirs.FilesDir
	// run makes the first sync's candidate with tests added to the example; again makes the
	// next sync's (the same objects: the tests passed already, they do not run again).
	run := func(t *testing.T, tests string) (w *twoWays, made candidate.Made, again func() candidate.Made) {
		t.Helper()
		w = &twoWays{shared: render.New(opts), opts: opts}
		build, cleanup, err := stagingBuilderWith(cfg.Inputs, snapshot.PeersOptions{}, cfg.Render, dirs, w)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cleanup)
		t.Cleanup(func() {
			for _, d := range w.differ {
				t.Error(d)
			}
		})
		objs := routesObjects(t, cfg.Inputs, n, withTests(tests), late)
		make := func() candidate.Made {
			return build.Make(context.Background(), objs, build.Decode(objs), &quarantine.State{}, nil, true)
		}
		return w, make(), make
	}

	t.Run("pass", func(t *testing.T) {
		w, made, again := run(t, routesTests)
		if made.Err != nil || len(made.Held) > 0 {
			t.Fatalf("%v %v", made.Err, made.Held)
		}
		var names []string
		for _, r := range made.Candidate.Tests {
			names = append(names, r.Name)
			if r.Err != nil {
				t.Errorf("test %s: %v", r.Name, r.Err)
			}
		}
		if want := []string{"backends", "filters", "gateway-changed", "hostnames", "late-service", "listeners", "matching", "namespaces"}; !slices.Equal(names, want) {
			t.Errorf("tests run: %v, want %v", names, want)
		}
		// The configuration itself, without the tests' objects: the route to a Service that is
		// not there does not resolve.
		if cfgText := string(made.Candidate.Bundle.Config); !strings.Contains(cfgText, "serves HTTPRoute bench/late parent=bench/gw accepted resolved=false resolved.reason=BackendNotFound ") {
			t.Errorf("the route late resolves in the cluster's configuration:\n%s", cfgText)
		}
		// 1 configuration, 8 tests, 2 of them deterministic: 11 renders compared. The example's
		// six tests and late-service reuse the n routes of the cluster (late-service not the
		// route late, whose Service it adds; gateway-changed none).
		if w.renders != 11 || w.apart != 10 {
			t.Errorf("%d renders, %d of them apart, want 11 and 10", w.renders, w.apart)
		}
		// They render apart: gateway-changed's render leaves the others the parts of the
		// configuration's render, and its second (deterministic) takes those of its first. Of
		// the cluster's n routes, the configuration's render computes each part and so does
		// gateway-changed's (its Gateway is read by every route's); the other tests compute their
		// own routes' parts only (14), taking the cluster's, or their blocks of 64 whole, from
		// the configuration's render. Without that reuse they would compute 9 x n more.
		if got, most := w.shared.Computed("route.j2"), 2*n+20; got > most {
			t.Errorf("the renders computed %d route parts, want at most %d (the configuration's and gateway-changed's %d each, and the tests' own routes)", got, most, n)
		}
		// The next sync takes the model of the first configuration whole (no route's part
		// computed), whatever the tests' renders computed meanwhile.
		first := w.renders
		if next := again(); next.Err != nil || next.Candidate.Bundle.Hash != made.Candidate.Bundle.Hash {
			t.Errorf("the next sync: %v, the same rendering: %v", next.Err, next.Err == nil && next.Candidate.Bundle.Hash == made.Candidate.Bundle.Hash)
		}
		if w.reused[first] != 0 || w.whole[first] == 0 {
			t.Errorf("the next sync reused %d route parts and %d modules whole, want the model whole", w.reused[first], w.whole[first])
		}
	})

	t.Run("stale fails", func(t *testing.T) {
		_, made, _ := run(t, routesTests+staleTest)
		var all []error
		all = append(all, made.Err)
		for _, h := range made.Held {
			all = append(all, h.Err)
		}
		err := errors.Join(all...)
		if err == nil || !strings.Contains(err.Error(), "test stale") || !strings.Contains(err.Error(), "does not contain") {
			t.Errorf("a test that holds only with a stale route part: %v, want it to fail", err)
		}
		if made.Candidate != nil && strings.Contains(string(made.Candidate.Bundle.Config), "serves HTTPRoute") {
			t.Error("a candidate of the template set whose test failed was made")
		}
	})
}
