package render

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// cutContext is a render's context that ends at its n-th look (Err): a render cut short at a
// point chosen by the test, as a rendering ahead is by a change that comes while it runs.
type cutContext struct {
	context.Context
	mu     sync.Mutex
	n      int
	looked int
	done   chan struct{}
}

func cutAfter(n int) *cutContext {
	return &cutContext{Context: context.Background(), n: n, done: make(chan struct{})}
}

func (c *cutContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.looked++
	if c.looked < c.n {
		return nil
	}
	if c.looked == c.n {
		close(c.done)
	}
	return context.Canceled
}

func (c *cutContext) Done() <-chan struct{} { return c.done }

func (c *cutContext) Deadline() (time.Time, bool) { return time.Time{}, false }

// cutRender renders snap through kept with a context that ends at its n-th look, and says
// whether the render was cut short (false: it ended first).
func cutRender(t *testing.T, kept *Renderer, snap *snapshot.Snapshot, n int) bool {
	t.Helper()
	ctx := cutAfter(n)
	_, err := kept.Render(ctx, snap)
	if err == nil {
		return false
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a render cut short at look %d: %v, want an error that wraps context.Canceled", n, err)
	}
	return true
}

// looks is how many times a render of snap by a renderer like kept looks at its context.
func looks(t *testing.T, kept *Renderer, snap *snapshot.Snapshot) int {
	t.Helper()
	ctx := cutAfter(1 << 30)
	if _, err := kept.Render(ctx, snap); err != nil {
		t.Fatal(err)
	}
	return ctx.looked
}

// cutWorld is a world of one example changed at random, for the renders cut short.
type cutWorld struct {
	step     func() string
	snapshot func() *snapshot.Snapshot
}

// TestRendersCutShortLeaveNothingStale: along random sequences of changes to the Ingress
// example's, the HTTPRoute example's and the default template's worlds, renders made ahead
// and cut short at a random point (of the state of the step, or of a state a change later
// replaced) never show in what the kept renderer renders next: byte for byte what a fresh
// renderer renders.
func TestRendersCutShortLeaveNothingStale(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}
	worlds := map[string]func(t *testing.T) cutWorld{
		"ingress": func(t *testing.T) cutWorld {
			w := newIngressWorld(t, 3)
			for range 150 {
				w.addIngress()
			}
			return cutWorld{step: w.step, snapshot: func() *snapshot.Snapshot { return w.snapshot(t) }}
		},
		"httproute": func(t *testing.T) cutWorld {
			w := newRouteWorld(t, 3)
			return cutWorld{step: w.step, snapshot: func() *snapshot.Snapshot {
				snap := assembleWatched(t, w.raw(), sequenceWatch...)
				snap.Templates, snap.TemplateKey = w.templates, "template"
				snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
				return snap
			}}
		},
		"default": func(t *testing.T) cutWorld {
			w := &defaultWorld{rng: rand.New(rand.NewPCG(3, 25)), certs: true}
			for range 60 {
				w.services = append(w.services, w.newService())
			}
			return cutWorld{step: w.step, snapshot: w.snapshot}
		},
	}
	for name, newWorld := range worlds {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 5))
			w := newWorld(t)
			kept := New(opts)
			steps := 120
			if testing.Short() || raceDetector {
				steps = 30
			}
			cut := 0
			// Cut points drawn up to the looks of a fresh render of the start: the kept
			// renderer's renders look fewer times (what it reuses is not walked).
			n := looks(t, New(opts), w.snapshot())
			for i := range steps {
				what := "start"
				if i > 0 {
					what = w.step()
				}
				snap := w.snapshot()
				// One to three renders ahead cut short, of this state or of one a change
				// replaced before the render that goes live.
				for range 1 + rng.IntN(3) {
					if cutRender(t, kept, snap, 1+rng.IntN(n)) {
						cut++
					}
					if rng.IntN(2) == 0 {
						what += ", then " + w.step()
						snap = w.snapshot()
					}
				}
				got, gotErr := kept.Render(context.Background(), snap)
				freshAgrees(t, opts, snap, got, gotErr, fmt.Sprintf("step %d (%s)", i, what))
			}
			t.Logf("%d steps, %d renders cut short before them", steps, cut)
			if cut < steps/2 {
				t.Errorf("%d renders cut short in %d steps, want one in most steps", cut, steps)
			}
		})
	}
}

// TestRenderCutShortKeepsWhatItDidNotReach: renders cut short at any point (renderings
// ahead made stale by the next change) leave the kept parts of the Ingress example they did
// not reach to the next render: it computes no more of the Ingresses' blocks, and reuses as
// many of the template's loops' iterations, as a renderer whose renders were not cut; the
// parts they made that no render uses since are swept as that renderer's are.
func TestRenderCutShortKeepsWhatItDidNotReach(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}
	w := newIngressWorld(t, 5)
	for range 600 {
		w.addIngress()
	}
	start := w.snapshot(t)
	var states []*snapshot.Snapshot
	for range 3 {
		w.addIngress()
		states = append(states, w.snapshot(t))
	}
	w.addIngress()
	last := w.snapshot(t)
	// How many times a render of the first state after start looks at its context.
	warm := New(opts)
	if _, err := warm.Render(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	n := looks(t, warm, states[0])

	type counts struct{ blocks, bodies int }
	render := func(r *Renderer, snap *snapshot.Snapshot) counts {
		t.Helper()
		blocks, bodies := r.kept.LoopComputed("ingresses.j2"), r.kept.BodiesReused()
		got, err := r.Render(context.Background(), snap)
		freshAgrees(t, opts, snap, got, err, "the render after")
		return counts{r.kept.LoopComputed("ingresses.j2") - blocks, r.kept.BodiesReused() - bodies}
	}
	plain := New(opts)
	render(plain, start)
	want := render(plain, last)
	if want.bodies == 0 {
		t.Fatal("the render after four Ingresses added reused no loop iteration")
	}
	for cut := 1; cut < n; cut++ {
		kept := New(opts)
		render(kept, start)
		for _, snap := range states {
			if !cutRender(t, kept, snap, cut) {
				t.Fatalf("the render was not cut short at look %d of %d", cut, n)
			}
		}
		if got := render(kept, last); got.blocks > want.blocks || got.bodies < want.bodies {
			t.Errorf("after renders cut short at look %d of %d: %d blocks' parts computed, %d loop iterations reused; "+
				"a renderer whose renders were not cut: %d, %d", cut, n, got.blocks, got.bodies, want.blocks, want.bodies)
		}
		// Four Ingresses edited later (renders that import their blocks), what the renders
		// cut short made and no render used since is gone.
		for range 2 {
			w.addIngress()
			snap := w.snapshot(t)
			render(kept, snap)
			render(plain, snap)
		}
		if k, p := kept.kept.LoopKept(), plain.kept.LoopKept(); k != p {
			t.Errorf("renders cut short at look %d: %d modules kept in loops, %d by a renderer whose renders were not cut", cut, k, p)
		}
	}
}
