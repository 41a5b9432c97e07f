package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// aheadRig runs a pipeline that renders ahead, with a quiet period far longer than a render,
// against a HAProxy that runs; liveConfigs is what went live, sync by sync.
type aheadRig struct {
	p     *Pipeline
	in    *inputs
	rd    *countingRenderer
	stall *stallingRenderer // rd, whose renders can be made to stall until cut short
	store *generation.Store
	m     *status.Metrics
	spans *tracetest.SpanRecorder
	mu    sync.Mutex
	lived []string
}

func newAheadRig(t *testing.T, ahead bool, first string) *aheadRig {
	return newAheadRigWaiting(t, ahead, first, 300*time.Millisecond)
}

func newAheadRigWaiting(t *testing.T, ahead bool, first string, waitMin time.Duration) *aheadRig {
	t.Helper()
	dir := t.TempDir()
	store, err := generation.Open(filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "certs"), "")
	if err != nil {
		t.Fatal(err)
	}
	r := &aheadRig{in: &inputs{}, store: store, m: status.NewMetrics(), spans: tracetest.NewSpanRecorder()}
	r.rd = &countingRenderer{inputs: r.in}
	r.stall = &stallingRenderer{countingRenderer: r.rd, stalled: make(chan struct{}, 8)}
	hx := &startingHAProxy{path: filepath.Join(dir, "haproxy.cfg")}
	hx.start(7)
	r.p, err = New(Config{Source: r.in, Inputs: r.in, Renderer: r.stall, Store: store, Checker: &checker{}, Reloader: hx,
		Metrics: r.m, Logger: slog.New(slog.DiscardHandler), WaitMin: waitMin, WaitMax: 30 * time.Second,
		RenderAhead: ahead, ProbeInterval: time.Hour, Tracing: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans)),
		AfterSync: func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if g := store.Live(); g != nil {
				r.lived = append(r.lived, readFile(t, g.ConfigFile()))
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	r.in.set(first)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, func() bool { return len(r.live()) == 1 && r.p.HAProxy().Runs != "" })
	return r
}

func (r *aheadRig) live() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lived...)
}

// liveOnceAs waits for the sync after the start and checks that it made want live, in one sync.
func (r *aheadRig) liveOnceAs(t *testing.T, want string) {
	t.Helper()
	waitFor(t, func() bool { return len(r.live()) >= 2 })
	if got := r.live(); len(got) != 2 || got[1] != want {
		t.Fatalf("went live, sync by sync: %q; want the start then\n%s", got, want)
	}
}

func (r *aheadRig) ahead(result string) float64 {
	return value(r.m.RendersAhead.WithLabelValues(result))
}

// TestRenderAheadGoesLive: a change is read and rendered during the quiet period; the sync
// after it takes that rendering (no render of its own) and makes it live.
func TestRenderAheadGoesLive(t *testing.T) {
	r := newAheadRig(t, true, cfgText("*:80", "a 10.0.0.1:80"))
	next := cfgText("*:80", "a 10.0.0.1:80", "b 10.0.0.2:80")
	r.in.set(next)
	r.p.Changed()
	waitFor(t, func() bool { return len(r.live()) == 2 })
	if got := r.live()[1]; got != next {
		t.Fatalf("live after the change:\n%s\nwant\n%s", got, next)
	}
	if used, discarded := r.ahead("used"), r.ahead("discarded"); used != 1 || discarded != 0 {
		t.Errorf("renders ahead used %v, discarded %v; want 1, 0", used, discarded)
	}
	if n := r.rd.renders(); n != 2 {
		t.Errorf("%d renders for the start and one change, want 2 (the sync rendered again)", n)
	}
	// The change's trace shows the render ahead below its sync, before the apply.
	var sync, render, apply sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		switch s.Name() {
		case "sync":
			sync = s
		case "render":
			render = s
		case "apply":
			apply = s
		}
	}
	switch {
	case sync == nil || render == nil || apply == nil:
		t.Fatalf("spans %v", r.spans.Ended())
	case render.Parent().SpanID() != sync.SpanContext().SpanID():
		t.Error("the render ahead is not below the change's sync")
	case render.EndTime().After(apply.StartTime()) || render.StartTime().Before(sync.StartTime()):
		t.Errorf("render ahead %v-%v, sync from %v, apply from %v", render.StartTime(), render.EndTime(), sync.StartTime(), apply.StartTime())
	}
	ahead := false
	for _, kv := range render.Attributes() {
		ahead = ahead || kv.Key == "render.ahead" && kv.Value.AsBool()
	}
	if !ahead {
		t.Error("the render span does not say it was made ahead")
	}
}

// TestRenderAheadOfAChangeThatCameAfter: a change that comes after the rendering ahead was
// made (its read is older than the change) is not lost: that rendering never goes live, the
// one of the latest inputs does, in one sync.
func TestRenderAheadOfAChangeThatCameAfter(t *testing.T) {
	r := newAheadRig(t, true, cfgText("*:80", "a 10.0.0.1:80"))
	r.in.set(cfgText("*:80", "a 10.0.0.1:80", "b 10.0.0.2:80"))
	r.p.Changed()
	waitFor(t, func() bool { return r.rd.renders() == 2 }) // rendered ahead, within the quiet period
	latest := cfgText("*:80", "a 10.0.0.1:80", "c 10.0.0.3:80")
	r.in.set(latest)
	r.p.Changed()
	r.liveOnceAs(t, latest)
	if used := r.ahead("used"); used != 1 {
		t.Errorf("renders ahead used %v, want 1 (the latest inputs')", used)
	}
	if n := r.rd.renders(); n != 3 {
		t.Errorf("%d renders, want 3: the start, the stale one ahead, the latest ahead", n)
	}
}

// TestRenderAheadOff: --render-ahead=false renders in the sync, as before.
func TestRenderAheadOff(t *testing.T) {
	r := newAheadRig(t, false, cfgText("*:80", "a 10.0.0.1:80"))
	next := cfgText("*:80", "b 10.0.0.2:80")
	r.in.set(next)
	r.p.Changed()
	waitFor(t, func() bool { return len(r.live()) == 2 })
	if got := r.live()[1]; got != next {
		t.Fatalf("live after the change:\n%s\nwant\n%s", got, next)
	}
	if used, discarded := r.ahead("used"), r.ahead("discarded"); used != 0 || discarded != 0 {
		t.Errorf("renders ahead used %v, discarded %v with it off", used, discarded)
	}
}

// TestRenderAheadAtMostThreeABurst: a long burst (each change coming while the last rendering
// ahead is under way or done) renders ahead three times, then waits for the quiet period as
// without it; what goes live is the last change, in one sync.
func TestRenderAheadAtMostThreeABurst(t *testing.T) {
	// A quiet period far longer than the test's steps: the burst does not end between them.
	r := newAheadRigWaiting(t, true, cfgText("*:80", "a 10.0.0.1:80"), 3*time.Second)
	var last string
	for i := range 6 {
		last = cfgText("*:80", fmt.Sprintf("s%d 10.0.1.%d:80", i, i))
		r.in.set(last)
		r.p.Changed()
		if i < 3 {
			want := 2 + i
			waitFor(t, func() bool { return r.rd.renders() == want }) // this change's rendering ahead
		}
	}
	r.liveOnceAs(t, last)
	// The start, three ahead (all stale), the sync's own.
	if n := r.rd.renders(); n != 5 {
		t.Errorf("%d renders, want 5", n)
	}
	if used := r.ahead("used"); used != 0 {
		t.Errorf("renders ahead used %v: the last change came after the last of them", used)
	}
}

// stallingRenderer is a countingRenderer whose next renders, when told, stall until their
// context ends (a rendering ahead cut short), then fail as a render cut short does.
type stallingRenderer struct {
	*countingRenderer
	stalled chan struct{} // a render stalls
	mu      sync.Mutex
	stall   int // the next renders that stall
	cut     int // renders that stalled and were cut short
}

func (s *stallingRenderer) stallNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall = n
}

func (s *stallingRenderer) cuts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut
}

func (s *stallingRenderer) Render(ctx context.Context, snap *snapshot.Snapshot) (*render.Bundle, error) {
	s.mu.Lock()
	stall := s.stall > 0
	if stall {
		s.stall--
	}
	s.mu.Unlock()
	if stall {
		s.stalled <- struct{}{}
		select {
		case <-ctx.Done():
			s.mu.Lock()
			s.cut++
			s.mu.Unlock()
			s.count()
			return nil, fmt.Errorf("render stopped: %w", ctx.Err())
		case <-time.After(time.Minute): // never cut: render, late (the test fails on that)
		}
	}
	return s.countingRenderer.Render(ctx, snap)
}

// changeWhileStalled makes a change whose rendering ahead stalls until it is cut short, then
// another once it is under way, and checks that the latest went live in one sync and the stale
// one was cut short.
func (r *aheadRig) changeWhileStalled(t *testing.T) {
	t.Helper()
	r.stall.stallNext(1)
	r.in.set(cfgText("*:80", "a 10.0.0.1:80", "b 10.0.0.2:80"))
	r.p.Changed()
	<-r.stall.stalled // under way, and it stays so until cut short
	latest := cfgText("*:80", "a 10.0.0.1:80", "c 10.0.0.3:80")
	r.in.set(latest)
	r.p.Changed()
	r.liveOnceAs(t, latest)
	if cut := r.stall.cuts(); cut != 1 {
		t.Errorf("%d renders ahead cut short, want 1 (the stale one)", cut)
	}
}

// TestRenderAheadCutShortByAChange: a change that comes while a rendering ahead is under way
// cuts it short (it does not run to its end, stale); the next change's rendering ahead is
// the one that goes live, in one sync.
func TestRenderAheadCutShortByAChange(t *testing.T) {
	r := newAheadRig(t, true, cfgText("*:80", "a 10.0.0.1:80"))
	r.changeWhileStalled(t)
	if used, discarded := r.ahead("used"), r.ahead("discarded"); used != 1 || discarded != 1 {
		t.Errorf("renders ahead used %v, discarded %v; want 1, 1", used, discarded)
	}
	if n := r.rd.renders(); n != 3 {
		t.Errorf("%d renders, want 3: the start, the one cut short, the latest ahead", n)
	}
}

// TestAheadUnderWayWhenTheQuietPeriodEnds: when the quiet period ends, the sync takes the
// rendering ahead under way once it is made, if nothing was notified since its read; a change
// notified while the sync waits for it cuts it short (it is stale: not waited for) and is
// counted as the sync's, since the sync reads after it; with none under way, a notification
// is left for the next sync.
func TestAheadUnderWayWhenTheQuietPeriodEnds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		underWay  bool
		notified  bool // a change notified while the sync waits
		wantAhead bool // the rendering ahead taken
		wantNotes int  // notifications the sync carries
		wantLeft  bool // the notification left for the next sync
		discarded float64
	}{
		{name: "under way, nothing notified: taken once made", underWay: true, wantAhead: true},
		{name: "under way, a change notified: cut short, the change the sync's", underWay: true, notified: true, wantNotes: 1, discarded: 1},
		{name: "none under way, a change notified: left for the next sync", notified: true, wantLeft: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Pipeline{cfg: Config{Metrics: status.NewMetrics()}}
			trigger := make(chan struct{}, 1)
			run := &aheadRun{p: p, settle: time.NewTimer(time.Hour)}
			made := &ahead{notes: p.notes.Load()}
			finish := make(chan struct{})
			if tc.underWay {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan *ahead, 1)
				run.done, run.cancel = done, cancel
				go func() {
					select {
					case <-ctx.Done():
						done <- nil // cut short
					case <-finish:
						done <- made
					}
				}()
			}
			if tc.notified {
				p.notes.Add(1)
				trigger <- struct{}{}
			} else {
				close(finish)
			}
			type result struct {
				a     *ahead
				notes int
			}
			got := make(chan result, 1)
			go func() {
				a, n := run.result(trigger)
				got <- result{a, n}
			}()
			var res result
			select {
			case res = <-got:
			case <-time.After(10 * time.Second):
				close(finish)
				t.Fatal("the sync waited for a rendering ahead made stale by a change")
			}
			if (res.a != nil) != tc.wantAhead || res.notes != tc.wantNotes {
				t.Errorf("took a rendering ahead: %v, notifications carried %d; want %v, %d", res.a != nil, res.notes, tc.wantAhead, tc.wantNotes)
			}
			if left := len(trigger) == 1; left != tc.wantLeft {
				t.Errorf("notification left for the next sync: %v, want %v", left, tc.wantLeft)
			}
			if d := value(p.cfg.Metrics.RendersAhead.WithLabelValues("discarded")); d != tc.discarded {
				t.Errorf("renders ahead discarded %v, want %v", d, tc.discarded)
			}
		})
	}
}

// TestRenderAheadOutlastingTheQuietPeriod: a rendering ahead still under way when the quiet
// period ends, and a change notified then: the stale rendering is cut short, not waited for,
// and the change goes live in that very sync, rendered by it.
func TestRenderAheadOutlastingTheQuietPeriod(t *testing.T) {
	r := newAheadRigWaiting(t, true, cfgText("*:80", "a 10.0.0.1:80"), time.Millisecond)
	r.changeWhileStalled(t)
	// The sync that made it live carried both notifications: none is left to ask for another.
	var reason string
	for _, s := range r.spans.Ended() {
		for _, kv := range s.Attributes() {
			if s.Name() == "sync" && kv.Key == "sync.reason" {
				reason = kv.Value.AsString()
			}
		}
	}
	if reason != "2 change notification(s)" {
		t.Errorf("the last sync's reason %q, want it to carry both changes' notifications", reason)
	}
}
