package apply

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/decide"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// TestCountedBeforeRecordedLive: whoever sees a rendering live in what HAProxy runs (/readyz
// reads it) sees it counted already: the metrics and the health are told of a reload, a
// runtime API change and the revert of one before it is recorded live, never after (a probe
// in between saw 20 reloads live and 19 counted).
func TestCountedBeforeRecordedLive(t *testing.T) {
	ctx := context.Background()
	r := newApplierRig(t)

	good := r.stage(t, "global\n# good\n")
	if res := r.apply(ctx, decide.DoReload, good); res.Outcome != Applied || !res.Reloaded {
		t.Fatalf("reload: %+v, want applied by a reload", res)
	}
	r.wantTold(t, "reload "+good.Bundle.Hash, "health applied "+good.Bundle.Hash)

	fine := r.stage(t, "global\n# fine\n")
	fine.Gen = nil // the runtime API makes it live, the writer validates it after
	if res := r.apply(ctx, decide.DoRuntime, fine); res.Outcome != Applied || res.Reloaded {
		t.Fatalf("runtime change: %+v, want applied with no reload", res)
	}
	r.wantTold(t, "runtime "+fine.Bundle.Hash, "health applied "+fine.Bundle.Hash)

	// haproxy -c refuses what the runtime API made live: taken back through the runtime API,
	// or, when the runtime API cannot, by a reload of the last good files.
	for _, back := range []*runtimeapi.Plan{{}, runtimeapi.ReloadPlan("a backend removed")} {
		r.runtime.revert = back
		reloads := r.reloads
		bad := r.stage(t, "global\n# refused by haproxy -c\n")
		bad.Gen = nil
		if res := r.apply(ctx, decide.DoRuntime, bad); res.Outcome != Rejected {
			t.Fatalf("runtime change refused by haproxy -c: %+v, want rejected", res)
		}
		r.wantTold(t, "runtime "+bad.Bundle.Hash, "live again "+fine.Bundle.Hash, "health applied "+fine.Bundle.Hash)
		if runs := r.owner.State().Runs; runs != fine.Bundle.Hash {
			t.Fatalf("HAProxy runs %.12s after the revert (reload: %q), want the last good %.12s", runs, back.Reload(), fine.Bundle.Hash)
		}
		if byReload := back.Reload() != ""; (r.reloads > reloads) != byReload {
			t.Errorf("%d reloads to take the change back, want one only when the runtime API cannot (%q)", r.reloads-reloads, back.Reload())
		}
	}
}

// applierRig is an Applier on a real generation store in a temporary directory, with a
// reloader, runtime API, metrics and health that note what HAProxy was recorded to run when
// they were told.
type applierRig struct {
	store   *generation.Store
	owner   *live.Owner
	applier *Applier
	runtime *fakeRuntime
	told    []told
	reloads int
}

// told is what the metrics or the health were told, about which rendering, and what HAProxy
// was recorded to run at that moment.
type told struct {
	what, hash, runs string
}

func newApplierRig(t *testing.T) *applierRig {
	t.Helper()
	dir := t.TempDir()
	store, err := generation.Open(filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "ssl"), filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	r := &applierRig{store: store, runtime: &fakeRuntime{revert: &runtimeapi.Plan{}}}
	r.owner = live.NewOwner(live.Start(store.Live(), generation.Loaded{}), store.BeginLoaded, func(err error) { t.Errorf("record: %v", err) })
	refused := errors.New("haproxy -c: refused")
	check := func(_ context.Context, g *generation.Generation) error {
		if b, _ := os.ReadFile(g.ConfigFile()); strings.Contains(string(b), "refused") {
			return refused
		}
		return nil
	}
	writer := generation.NewWriter(store, check, func(err error) bool { return errors.Is(err, refused) },
		func(w generation.Written) { r.applier.Written(w) }, time.Second)
	r.applier = New(Config{HAProxy: r.owner, Writer: writer, Store: store, Reloader: reloaderFunc(func(context.Context) error { r.reloads++; return nil }),
		Runtime: r.runtime, Endpoint: "master", Metrics: &notingMetrics{r}, Health: &notingHealth{r}, Report: failingReporter{t},
		Changed: func() {}, Logger: slog.New(slog.DiscardHandler)})
	return r
}

// staged is a rendering and its generation.
type staged struct {
	Bundle *render.Bundle
	Gen    *generation.Generation
}

func (r *applierRig) stage(t *testing.T, config string) staged {
	t.Helper()
	b := &render.Bundle{Config: []byte(config)}
	b.Hash = b.Content().Hash()
	g, err := r.store.StageContent(b.Content(), b.Hash)
	if err != nil {
		t.Fatal(err)
	}
	return staged{Bundle: b, Gen: g}
}

func (r *applierRig) apply(ctx context.Context, action decide.Action, s staged) Result {
	r.told = nil
	plan := &runtimeapi.Plan{}
	if action != decide.DoRuntime {
		plan = runtimeapi.ReloadPlan("test")
	}
	return r.applier.Apply(ctx, Job{Decision: decide.Decision{Action: action, Why: "test"}, Bundle: s.Bundle, Gen: s.Gen, Plan: plan, Reason: "test"})
}

// note notes what was told about hash, and what HAProxy was recorded to run then.
func (r *applierRig) note(what, hash string) {
	r.told = append(r.told, told{what: what + " " + hash, hash: hash, runs: r.owner.State().Runs})
}

// wantTold fails unless each of want was told since the last apply, first while HAProxy was
// not yet recorded to run what it was about (the health may be told again after: the Events'
// turn).
func (r *applierRig) wantTold(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		i := slices.IndexFunc(r.told, func(s told) bool { return s.what == w })
		switch {
		case i < 0:
			t.Errorf("%q never told; told: %+v", w, r.told)
		case r.told[i].runs == r.told[i].hash:
			t.Errorf("%q told after HAProxy was recorded to run %.12s: a probe in between sees it live and not counted", w, r.told[i].hash)
		}
	}
}

type notingMetrics struct{ r *applierRig }

func (m *notingMetrics) Rendered(string)            {}
func (m *notingMetrics) Valid()                     {}
func (m *notingMetrics) SyncFailed(string)          {}
func (m *notingMetrics) ReloadEnded(string, string) {}
func (m *notingMetrics) ReloadSucceeded(_ string, _ time.Duration, hash string) {
	m.r.note("reload", hash)
}
func (m *notingMetrics) RuntimeApplied(hash string)          { m.r.note("runtime", hash) }
func (m *notingMetrics) RuntimeUpdated(map[string]int)       {}
func (m *notingMetrics) RuntimeFellBack()                    {}
func (m *notingMetrics) LiveAgain(hash string)               { m.r.note("live again", hash) }
func (m *notingMetrics) ObserveLive(context.Context, string) {}

// notingHealth notes Applied as about the rendering the last count was about: the health's
// Applied comes before the record too (/readyz reads both).
type notingHealth struct{ r *applierRig }

func (h *notingHealth) Applied() {
	hash := ""
	if n := len(h.r.told); n > 0 {
		hash = h.r.told[n-1].hash
	}
	h.r.note("health applied", hash)
}
func (h *notingHealth) Written()     {}
func (h *notingHealth) Standby()     {}
func (h *notingHealth) Failed(error) {}

type failingReporter struct{ t *testing.T }

func (f failingReporter) Failure(_ context.Context, stage string, err error) Result {
	f.t.Errorf("failure at %s: %v", stage, err)
	return Result{Outcome: Failed, Err: err}
}

func (f failingReporter) Rejection(_ context.Context, err error) Result {
	return Result{Outcome: Rejected, Err: err}
}

type reloaderFunc func(context.Context) error

func (f reloaderFunc) Reload(ctx context.Context) error { return f(ctx) }

// fakeRuntime applies any plan; the plan it makes (only a revert asks it for one) is revert.
type fakeRuntime struct {
	revert *runtimeapi.Plan
}

func (f *fakeRuntime) Plan(*runtimeapi.Model, []byte, map[string][]byte, map[string][]byte) *runtimeapi.Plan {
	return f.revert
}

func (f *fakeRuntime) Apply(context.Context, *runtimeapi.Plan, *runtimeapi.Model) (*runtimeapi.Model, error) {
	return &runtimeapi.Model{}, nil
}

func (f *fakeRuntime) Tidy(_ context.Context, m *runtimeapi.Model) (*runtimeapi.Model, int) {
	return m, 0
}

func (f *fakeRuntime) Learn(_ context.Context, m *runtimeapi.Model) *runtimeapi.Model { return m }
