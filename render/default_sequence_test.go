package render

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/templates"
)

// defaultWorld is services with pods rendered by the default template, changed at random one
// step at a time.
type defaultWorld struct {
	rng       *rand.Rand
	services  []map[string]any
	recs      map[unsafe.Pointer]*record.Record // each service's record, by its map (records)
	shapes    record.Shapes
	templates map[string]string // nil: the built-in ones
	env       map[string]string
	certs     bool
	next      int
}

// pod is a new ready pod of svc: its name, and the pod.
func (w *defaultWorld) pod(svc string) (string, any) {
	w.next++
	name := fmt.Sprintf("%s-%d", svc, w.next)
	return name, record.Of(&w.shapes, map[string]any{
		"metadata": map[string]any{"name": name, "namespace": "web"},
		"status":   map[string]any{"phase": "Running", "podIP": fmt.Sprintf("10.%d.%d.%d", w.next/62500%250, w.next/250%250, w.next%250)},
	})
}

func (w *defaultWorld) newService() map[string]any {
	w.next++
	name := fmt.Sprintf("svc%d", w.next)
	svc := map[string]any{"name": name, "namespace": "web", "ports": []any{int64(8080)}, "ssl": w.rng.IntN(2) == 0,
		"hostnames": []any{name + ".example.com"}}
	if w.rng.IntN(4) == 0 {
		svc["path"] = "^/api/"
	}
	pods := map[string]any{}
	for range w.rng.IntN(4) {
		n, p := w.pod(name)
		pods[n] = p
	}
	svc["pods"] = record.FromMap(nil, pods)
	return svc
}

// podsOf is a service's pods by name, to change.
func podsOf(svc map[string]any) map[string]any {
	return maps.Collect(svc["pods"].(*record.Record).All())
}

// step makes one change, at random; it says which kind.
func (w *defaultWorld) step() string {
	i := w.rng.IntN(len(w.services))
	svc := maps.Clone(w.services[i])
	pods := podsOf(svc)
	names := slices.Sorted(maps.Keys(pods))
	what := ""
	switch k := w.rng.IntN(20); {
	case k < 3:
		what = "pod added"
		n, p := w.pod(svc["name"].(string))
		pods[n] = p
	case k < 6 && len(names) > 0:
		what = "pod removed (or not ready)"
		delete(pods, names[w.rng.IntN(len(names))])
	case k < 9 && len(names) > 0:
		what = "pod address changed"
		n := names[w.rng.IntN(len(names))]
		w.next++
		pods[n] = record.Of(&w.shapes, map[string]any{"metadata": map[string]any{"name": n, "namespace": "web"},
			"status": map[string]any{"phase": "Running", "podIP": fmt.Sprintf("fd00::%x", w.next)}})
	case k < 10:
		what = "pod without an address"
		pods[fmt.Sprintf("%s-pending", svc["name"])] = record.Of(&w.shapes, map[string]any{"status": map[string]any{"phase": "Pending"}})
	case k < 11:
		what = "service added"
		w.services = slices.Insert(w.services, i, w.newService())
		return what
	case k < 12 && len(w.services) > 2:
		what = "service removed"
		w.services = slices.Delete(w.services, i, i+1)
		return what
	case k < 16:
		what = "service edited"
		switch w.rng.IntN(7) {
		case 0:
			svc["ssl"] = svc["ssl"] != true
		case 1:
			if _, ok := svc["path"]; ok {
				delete(svc, "path")
			} else {
				svc["path"] = "^/v2/"
			}
		case 2:
			hosts, _ := svc["hostnames"].([]any)
			svc["hostnames"] = append(slices.Clone(hosts), fmt.Sprintf("^alt%d\\.example\\.com$", w.next))
		case 3:
			svc["check_path"] = "/healthz"
		case 4:
			svc["ports"] = []any{int64(8080), int64(9090)}
		case 5:
			for j, o := range w.services {
				if o["default"] == true {
					o = maps.Clone(o)
					delete(o, "default")
					w.services[j] = o
				}
			}
			svc["default"] = true
		case 6:
			svc["hostnames"] = "single.example.com" // a string, not a list
		}
	case k < 17:
		what = "template edited"
		w.templates = maps.Clone(templates.Default)
		switch w.rng.IntN(3) {
		case 0:
			w.templates["rules.j2"] = strings.Replace(w.templates["rules.j2"], "use_backend be_", "use_backend be-", -1)
		case 1:
			w.templates[templates.DefaultKey] = strings.Replace(w.templates[templates.DefaultKey], " check\n", " check inter 3s\n", 1)
		case 2:
			w.templates = nil
		}
		return what
	case k < 18:
		what = "env changed"
		w.env = map[string]string{"MAXCONN": fmt.Sprint(1000 + w.rng.IntN(3))}
		return what
	case k < 19:
		what = "certificates toggled"
		w.certs = !w.certs
		return what
	default:
		what = "nothing changed"
		return what
	}
	svc["pods"] = record.FromMap(nil, pods)
	w.services[i] = svc
	return what
}

// records is the services as records: the same record for a service whose map is the same
// as at the last call (a service that did not change is the snapshot's same record).
func (w *defaultWorld) records() []*record.Record {
	next := make(map[unsafe.Pointer]*record.Record, len(w.services))
	out := make([]*record.Record, len(w.services))
	for i, svc := range w.services {
		id := reflect.ValueOf(svc).UnsafePointer() // w.services holds the map: its address is its own
		r, ok := w.recs[id]
		if !ok {
			r = serviceRecord(svc)
		}
		next[id], out[i] = r, r
	}
	w.recs = next
	return out
}

// snapshot is the world as a snapshot: the services kept as they are, or, at random, every
// one a new record with a new pods record (as inputs/snapshot builds them at each sync).
func (w *defaultWorld) snapshot() *snapshot.Snapshot {
	s := &snapshot.Snapshot{Env: w.env, Services: w.records(),
		Stats: snapshot.Stats{Username: "stats", Password: "secret", PasswordSet: true}}
	if w.rng.IntN(2) == 0 {
		for i, svc := range s.Services {
			s.Services[i] = withPods(svc, record.FromMap(nil, maps.Collect(svc.Field("pods").(*record.Record).All())))
		}
	}
	if w.certs {
		s.Certificates = []snapshot.Certificate{{Name: "example", PEM: []byte("pem")}}
	}
	if w.templates != nil {
		s.Templates, s.TemplateKey = w.templates, templates.DefaultKey
		s.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
	}
	return s
}

// The default template renders every step of a random sequence of changes (pods added,
// removed, readiness and addresses changed; services added, removed and edited; the
// templates, the environment and the certificates changed) with one renderer, which keeps
// the loops' iterations, as a fresh renderer renders it; after a pod's change, every other
// service's rules and backend are reused.
func TestDefaultTemplateRandomChangesRenderAsAFreshRenderer(t *testing.T) {
	w := &defaultWorld{rng: rand.New(rand.NewPCG(7, 25)), certs: true}
	for range 40 {
		w.services = append(w.services, w.newService())
	}
	w.services[3]["default"] = true
	kept := New(Options{SSLDir: "/etc/haproxy/ssl"})
	steps := 400
	if testing.Short() {
		steps = 100
	}
	counts := map[string]int{}
	prev := ""
	for i := range steps {
		what := "start"
		if i > 0 {
			what = w.step()
		}
		counts[what]++
		snap := w.snapshot()
		before := kept.kept.BodiesReused()
		got, gotErr := kept.Render(context.Background(), snap)
		reused := kept.kept.BodiesReused() - before
		want, wantErr := renderFresh(Options{SSLDir: "/etc/haproxy/ssl"}, snap)
		if gotErr != nil || wantErr != nil {
			t.Fatalf("step %d (%s): the kept renderer: %v; a fresh one: %v", i, what, gotErr, wantErr)
		}
		if d := bundleDiff(got, want); d != "" {
			t.Fatalf("step %d (%s): the kept renderer renders otherwise than a fresh one: %s", i, what, d)
		}
		// A pod's change: every other service's backend, and its rules (once per frontend
		// that serves it), are reused.
		if strings.HasPrefix(what, "pod") && prev != "template edited" && reused < 2*(len(w.services)-1) {
			t.Errorf("step %d (%s): %d iterations reused, want at least %d", i, what, reused, 2*(len(w.services)-1))
		}
		prev = what
	}
	for _, what := range []string{"pod added", "pod removed (or not ready)", "pod address changed", "service added", "service removed", "service edited", "template edited"} {
		if counts[what] == 0 {
			t.Errorf("the sequence missed a kind of change (%s): %v", what, counts)
		}
	}
	t.Logf("%d steps %v", steps, counts)
}
