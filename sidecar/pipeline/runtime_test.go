package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"
)

// checker rejects configurations that contain "invalid", as haproxy -c would. While gate is
// set, each check first waits for it to be closed; a configuration containing holdOn waits
// for holdGate too.
type checker struct {
	mu       sync.Mutex
	gate     chan struct{}
	holdOn   string
	holdGate chan struct{}
	done     int // checks finished
}

func (c *checker) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// holdMatching makes the checks of configurations containing s wait until releaseMatching.
func (c *checker) holdMatching(s string) {
	c.mu.Lock()
	c.holdOn, c.holdGate = s, make(chan struct{})
	c.mu.Unlock()
}

func (c *checker) releaseMatching() {
	c.mu.Lock()
	if c.holdGate != nil {
		close(c.holdGate)
		c.holdOn, c.holdGate = "", nil
	}
	c.mu.Unlock()
}

func (c *checker) hold() {
	c.mu.Lock()
	c.gate = make(chan struct{})
	c.mu.Unlock()
}

func (c *checker) release() {
	c.mu.Lock()
	if c.gate != nil {
		close(c.gate)
		c.gate = nil
	}
	c.mu.Unlock()
}

func (c *checker) Check(ctx context.Context, path string) error {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() {
		c.mu.Lock()
		c.done++
		c.mu.Unlock()
	}()
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	c.mu.Lock()
	holdOn, holdGate := c.holdOn, c.holdGate
	c.mu.Unlock()
	if holdGate != nil && strings.Contains(string(b), holdOn) {
		select {
		case <-holdGate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if strings.Contains(string(b), "invalid") {
		return &validate.CheckError{Output: "[ALERT] invalid", Alerts: []string{"invalid"}}
	}
	return nil
}

// inputs is a fake source and renderer: the test sets the configuration the next render gives.
type inputs struct {
	mu     sync.Mutex
	config string
	err    error // what every render fails with, when set
}

func (in *inputs) set(cfg string) {
	in.mu.Lock()
	in.config, in.err = cfg, nil
	in.mu.Unlock()
}

// fail makes every render fail with err until set is called.
func (in *inputs) fail(err error) {
	in.mu.Lock()
	in.err = err
	in.mu.Unlock()
}

func (in *inputs) Run(ctx context.Context, changed func()) error { <-ctx.Done(); return nil }
func (in *inputs) Objects(context.Context) (*snapshot.Objects, error) {
	return &snapshot.Objects{}, nil
}

func (in *inputs) Decode(*snapshot.Objects) snapshot.Inputs { return snapshot.Inputs{} }
func (in *inputs) Assemble(*snapshot.Objects, []snapshot.Input) (*snapshot.Snapshot, error) {
	return &snapshot.Snapshot{}, nil
}

func (in *inputs) Render(context.Context, *snapshot.Snapshot) (*render.Bundle, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err != nil {
		return nil, in.err
	}
	return &render.Bundle{Config: []byte(in.config), Hash: fmt.Sprintf("h%x", hashString(in.config))}, nil
}

func hashString(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// reloader counts reloads and remembers the configuration live at each.
type reloader struct {
	mu      sync.Mutex
	path    string
	loaded  []string
	failErr error
}

func (r *reloader) Reload(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failErr != nil {
		return r.failErr
	}
	b, err := os.ReadFile(r.path)
	if err != nil {
		return err
	}
	r.loaded = append(r.loaded, string(b))
	return nil
}

// LoadID names the load as HAProxy's master would: it moves with every reload.
func (r *reloader) LoadID(context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("master 1 reload %d", len(r.loaded)), nil
}

func (r *reloader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.loaded)
}

func (r *reloader) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loaded[len(r.loaded)-1]
}

// cli answers every runtime API command with its success answer, or fails those that contain
// failOn.
type cli struct {
	mu     sync.Mutex
	sent   []string
	failOn string
	down   bool // HAProxy does not run: nothing answers
	tried  int  // commands asked while down
}

func (c *cli) Command(_ context.Context, line string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		c.tried++
		return "", errors.New("dial unix /run/haproxy/admin.sock: connect: no such file or directory")
	}
	if line == "show info" {
		return "Name: HAProxy\nPid: 42\n", nil
	}
	var out strings.Builder
	for _, cmd := range strings.Split(line, "; ") {
		c.sent = append(c.sent, cmd)
		switch {
		case c.failOn != "" && strings.Contains(cmd, c.failOn):
			out.WriteString("No such backend.\n")
		case strings.HasPrefix(cmd, "add server"):
			out.WriteString("New server registered.\n")
		case strings.HasPrefix(cmd, "del server"):
			out.WriteString("Server deleted.\n")
		default:
			out.WriteString("\n")
		}
	}
	return out.String(), nil
}

func (c *cli) commands() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent...)
}

type rig struct {
	checker *checker
	p       *Pipeline
	in      *inputs
	rl      *reloader
	cli     *cli
	store   *generation.Store
	metrics *status.Metrics
}

func newRig(t *testing.T, minInterval time.Duration, opts ...func(*Config)) *rig {
	t.Helper()
	dir := t.TempDir()
	store, err := generation.Open(filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "certs"), "")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{checker: &checker{}, in: &inputs{}, rl: &reloader{path: filepath.Join(dir, "haproxy.cfg")}, cli: &cli{}, store: store, metrics: status.NewMetrics()}
	log := slog.New(slog.DiscardHandler)
	cfg := Config{
		Source:            r.in,
		Inputs:            r.in,
		Renderer:          r.in,
		Store:             store,
		Checker:           r.checker,
		Reloader:          r.rl,
		Metrics:           r.metrics,
		Logger:            log,
		Runtime:           runtimeapi.New(runtimeapi.Options{Client: r.cli, Logger: log}),
		MinReloadInterval: minInterval,
		WaitMin:           time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	r.p, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// cfgText is an HAProxy configuration of one frontend bound to bind and one backend of servers.
func cfgText(bind string, servers ...string) string {
	s := "frontend fe\n    bind " + bind + "\n    default_backend be\nbackend be\n"
	for _, srv := range servers {
		s += "    server " + srv + "\n"
	}
	return s
}

func (r *rig) sync(t *testing.T, cfg, wantOutcome string) apply.Result {
	t.Helper()
	r.in.set(cfg)
	res := r.p.Sync(context.Background(), "test")
	if res.Outcome.String() != wantOutcome {
		t.Fatalf("outcome %q (%v), want %q", res.Outcome, res.Err, wantOutcome)
	}
	return res
}

// running is the pipeline of a rig run in the background (Run).
type running struct {
	cancel context.CancelFunc
	done   chan error
}

// run starts Run on cfg; it is stopped when the test ends.
func (r *rig) run(t *testing.T, cfg string) *running {
	t.Helper()
	r.in.set(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	x := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { x.done <- r.p.Run(ctx) }()
	t.Cleanup(func() { x.stop() })
	return x
}

// stop cancels Run and reports whether it returned within 10 s.
func (x *running) stop() bool {
	x.cancel()
	select {
	case <-x.done:
		x.done <- nil // for a later stop
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

func (r *rig) liveConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(r.store.Live().ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRuntimeUpdates(t *testing.T) {
	t.Run("server changes go live without a reload, and are written", func(t *testing.T) {
		r := newRig(t, 0)
		r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")
		next := cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80")
		res := r.sync(t, next, "applied")
		if res.Reloaded || r.rl.count() != 1 {
			t.Fatalf("reloaded %v, %d reloads, want 1", res.Reloaded, r.rl.count())
		}
		if got := r.cli.commands(); len(got) != 2 || got[0] != "add server be/b 10.0.0.2:80" {
			t.Fatalf("commands %q", got)
		}
		if r.liveConfig(t) != next {
			t.Fatal("the new generation is not live on disk")
		}
		if v := value(r.metrics.ReloadsAvoided); v != 1 {
			t.Errorf("reloads avoided %v", v)
		}
		if v := value(r.metrics.RuntimeUpdates.WithLabelValues(runtimeapi.KindServerAdded)); v != 1 {
			t.Errorf("runtime updates server_added %v", v)
		}
		r.sync(t, next, "unchanged")
	})
	t.Run("a frontend change reloads once", func(t *testing.T) {
		r := newRig(t, 0)
		r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")
		res := r.sync(t, cfgText(":81", "a 10.0.0.1:80"), "applied")
		if !res.Reloaded || r.rl.count() != 2 {
			t.Fatalf("reloaded %v, %d reloads", res.Reloaded, r.rl.count())
		}
	})
	t.Run("a failed runtime command falls back to a reload", func(t *testing.T) {
		r := newRig(t, 0)
		r.cli.failOn = "add server"
		r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")
		res := r.sync(t, cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80"), "applied")
		if !res.Reloaded || r.rl.count() != 2 || value(r.metrics.RuntimeFallbacks) != 1 {
			t.Fatalf("reloaded %v, %d reloads, %v fallbacks", res.Reloaded, r.rl.count(), value(r.metrics.RuntimeFallbacks))
		}
		// After the reload the runtime API is used again.
		r.cli.failOn = ""
		if res := r.sync(t, cfgText(":80", "b 10.0.0.2:80"), "applied"); res.Reloaded {
			t.Fatal("reloaded after the fallback")
		}
	})
	t.Run("a runtime change that does not validate is taken back", func(t *testing.T) {
		r := newRig(t, 0)
		first := cfgText(":80", "a 10.0.0.1:80")
		r.sync(t, first, "applied")
		r.sync(t, cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80 maxconn 10", "invalid 10.0.0.3:80"), "rejected")
		got := r.cli.commands()
		want := []string{"add server be/b 10.0.0.2:80 maxconn 10", "enable server be/b", "add server be/invalid 10.0.0.3:80", "enable server be/invalid",
			"set server be/b state maint", "set server be/invalid state maint", "del server be/b", "del server be/invalid"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("commands\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if r.rl.count() != 1 || r.liveConfig(t) != first {
			t.Fatalf("%d reloads, live config %q", r.rl.count(), r.liveConfig(t))
		}
		// HAProxy runs the first configuration again: a valid change goes through the runtime API.
		if res := r.sync(t, cfgText(":80", "a 10.0.0.1:80", "c 10.0.0.4:80"), "applied"); res.Reloaded {
			t.Fatal("reloaded")
		}
	})
	t.Run("a runtime change whose files cannot be written is a failed sync, reported by the writer's outcome, and written once they can", func(t *testing.T) {
		r := newRig(t, 0)
		r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")
		if err := os.RemoveAll(r.store.StateDir()); err != nil {
			t.Fatal(err)
		}
		next := cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80")
		res := r.sync(t, next, "error")
		if !res.Retry || r.rl.count() != 1 {
			t.Errorf("retry %v, %d reloads", res.Retry, r.rl.count())
		}
		if v := value(r.metrics.SyncFailures.WithLabelValues(failure.Write)); v != 1 {
			t.Errorf("sync_failures_total{stage=write} = %v, want 1", v)
		}
		if err := os.MkdirAll(r.store.StateDir(), 0o755); err != nil {
			t.Fatal(err)
		}
		r.sync(t, next, "unchanged") // HAProxy runs it: the files are written again
		if r.liveConfig(t) != next {
			t.Errorf("live on disk:\n%s", r.liveConfig(t))
		}
	})
	t.Run("a reload whose outcome is unknown makes the next change reload", func(t *testing.T) {
		r := newRig(t, 0)
		r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")
		r.rl.failErr = errors.New("timeout")
		r.sync(t, cfgText(":81", "a 10.0.0.1:80"), "error")
		r.rl.failErr = nil
		if res := r.sync(t, cfgText(":81", "a 10.0.0.1:80", "b 10.0.0.2:80"), "applied"); !res.Reloaded {
			t.Fatal("no reload after a reload of unknown outcome")
		}
	})
}

// TestMinReloadInterval: a reload asked within the interval waits; server changes are made at
// runtime meanwhile; the reload then loads the latest rendering.
func TestMinReloadInterval(t *testing.T) {
	t.Run("latest wins", func(t *testing.T) {
		r := newRig(t, time.Hour)
		r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")
		if res := r.sync(t, cfgText(":81", "a 10.0.0.1:80"), "deferred"); res.ReloadIn <= 0 || res.ReloadIn > time.Hour {
			t.Fatalf("reload in %v", res.ReloadIn)
		}
		latest := cfgText(":82", "a 10.0.0.1:80", "b 10.0.0.2:80")
		r.sync(t, latest, "deferred")
		if got := r.cli.commands(); len(got) == 0 || got[0] != "add server be/b 10.0.0.2:80" {
			t.Fatalf("server change not made while the reload waits: %q", got)
		}
		if r.rl.count() != 1 {
			t.Fatalf("%d reloads, want 1", r.rl.count())
		}
		r.p.haproxy.Record(reloadedAt{time.Now().Add(-2 * time.Hour)}) // the interval is over
		if res := r.sync(t, latest, "applied"); !res.Reloaded || r.rl.count() != 2 || r.rl.last() != latest {
			t.Fatalf("reloaded %v, %d reloads, last %q", res.Reloaded, r.rl.count(), r.rl.last())
		}
	})
	t.Run("a change reverted while the reload waits needs no reload", func(t *testing.T) {
		r := newRig(t, time.Hour)
		first := cfgText(":80", "a 10.0.0.1:80")
		r.sync(t, first, "applied")
		r.sync(t, cfgText(":81", "a 10.0.0.1:80", "b 10.0.0.2:80"), "deferred")
		res := r.sync(t, first, "applied") // b was added at runtime: it must go again
		if res.Reloaded || r.rl.count() != 1 {
			t.Fatalf("reloaded %v, %d reloads", res.Reloaded, r.rl.count())
		}
		got := r.cli.commands()
		if got[len(got)-1] != "del server be/b" {
			t.Fatalf("commands %q", got)
		}
		r.sync(t, first, "unchanged")
	})
	t.Run("the deferred reload happens by itself", func(t *testing.T) {
		r := newRig(t, 100*time.Millisecond)
		r.run(t, cfgText(":80", "a 10.0.0.1:80"))
		waitFor(t, func() bool { return r.rl.count() == 1 })
		r.in.set(cfgText(":81", "a 10.0.0.1:80"))
		r.p.Changed()
		waitFor(t, func() bool { return r.rl.count() == 2 })
		if !strings.Contains(r.rl.last(), ":81") {
			t.Fatalf("loaded %q", r.rl.last())
		}
	})
}

// reloadedAt is a last reload At.
type reloadedAt struct{ At time.Time }

func (e reloadedAt) After(s live.State) live.State {
	s.LastReload = e.At
	return s
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	haproxytest.WaitFor(t, 10*time.Second, cond, "condition")
}

func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	return d.GetCounter().GetValue()
}

// TestBackgroundWriter runs the pipeline: runtime changes are written by the writer after the
// runtime API made them live; one haproxy -c rejects is taken back at the next sync; a change
// that reloads waits for the writer, so the files reloaded are the latest.
func TestBackgroundWriter(t *testing.T) {
	r := newRig(t, 0)
	first := cfgText(":80", "a 10.0.0.1:80")
	r.run(t, first)
	waitFor(t, func() bool { return r.rl.count() == 1 })
	liveIs := func(cfg string) func() bool {
		return func() bool {
			g := r.store.Live()
			if g == nil {
				return false
			}
			b, _ := os.ReadFile(g.ConfigFile())
			return string(b) == cfg
		}
	}
	t.Run("runtime changes are written", func(t *testing.T) {
		for i := 2; i <= 6; i++ {
			var servers []string
			for j := 1; j <= i; j++ {
				servers = append(servers, fmt.Sprintf("s%d 10.0.0.%d:80", j, j))
			}
			r.in.set(cfgText(":80", servers...))
			r.p.Changed()
		}
		waitFor(t, liveIs(cfgText(":80", "s1 10.0.0.1:80", "s2 10.0.0.2:80", "s3 10.0.0.3:80", "s4 10.0.0.4:80", "s5 10.0.0.5:80", "s6 10.0.0.6:80")))
		if r.rl.count() != 1 {
			t.Fatalf("%d reloads", r.rl.count())
		}
	})
	t.Run("a rejected runtime change is taken back", func(t *testing.T) {
		before := len(r.cli.commands())
		r.in.set(cfgText(":80", "s1 10.0.0.1:80", "invalid 10.0.0.9:80"))
		r.p.Changed()
		waitFor(t, func() bool {
			got := r.cli.commands()[before:]
			return len(got) > 0 && got[len(got)-1] == "del server be/invalid"
		})
		waitFor(t, func() bool { return value(r.metrics.Rejected.WithLabelValues("validate")) == 1 })
		if r.rl.count() != 1 {
			t.Fatalf("%d reloads", r.rl.count())
		}
	})
	t.Run("a rendering equal to the files on disk is not taken as unchanged while the writer is behind", func(t *testing.T) {
		r.checker.hold()
		defer r.checker.release()
		written := cfgText(":80", "s1 10.0.0.1:80", "s2 10.0.0.2:80", "s3 10.0.0.3:80", "s4 10.0.0.4:80", "s5 10.0.0.5:80", "s6 10.0.0.6:80")
		waitFor(t, liveIs(written))
		before := len(r.cli.commands())
		r.in.set(cfgText(":80", "s1 10.0.0.1:80"))
		r.p.Changed()
		waitFor(t, func() bool { return len(r.cli.commands()) > before })
		r.in.set(written) // what the disk holds, not what HAProxy runs
		r.p.Changed()
		waitFor(t, func() bool {
			got := r.cli.commands()
			return got[len(got)-1] == "enable server be/s6"
		})
	})
	t.Run("a reload loads the latest files", func(t *testing.T) {
		r.in.set(cfgText(":80", "s1 10.0.0.1:80", "s2 10.0.0.2:80"))
		r.p.Changed()
		latest := cfgText(":81", "s1 10.0.0.1:80", "s2 10.0.0.2:80", "s3 10.0.0.3:80")
		r.in.set(latest)
		r.p.Changed()
		waitFor(t, func() bool { return r.rl.count() == 2 })
		if r.rl.last() != latest {
			t.Fatalf("reloaded %q", r.rl.last())
		}
		waitFor(t, liveIs(latest))
	})
}

// TestRejectedLiveWithoutRendering: when haproxy -c rejects, behind the runtime API, what HAProxy
// runs, and the next sync can render nothing (bad input no held input stands for), HAProxy is
// taken back to the last good rendering (at runtime, no reload) and the rendering's failure is
// what the sync reports: the revert comes first, so the failure is not cleared by it.
func TestRejectedLiveWithoutRendering(t *testing.T) {
	r := newRig(t, 0)
	r.run(t, cfgText(":80", "a 10.0.0.1:80"))
	waitFor(t, func() bool { return r.rl.count() == 1 })

	r.checker.hold() // the background writer checks the runtime change once told
	before := len(r.cli.commands())
	r.in.set(cfgText(":80", "a 10.0.0.1:80", "invalid 10.0.0.9:80"))
	r.p.Changed()
	waitFor(t, func() bool { return slices.Contains(r.cli.commands()[before:], "add server be/invalid 10.0.0.9:80") })
	r.in.fail(&snapshot.InputError{Stage: snapshot.StageRender, Err: errors.New("the template fails")})
	r.checker.release()

	waitFor(t, func() bool {
		got := r.cli.commands()
		return got[len(got)-1] == "del server be/invalid"
	})
	waitFor(t, func() bool { return value(r.metrics.Rejected.WithLabelValues(snapshot.StageRender)) == 1 })
	if r.rl.count() != 1 {
		t.Errorf("%d reloads, want 1 (taken back at runtime)", r.rl.count())
	}
	if r.p.cfg.Health.FailingSince().IsZero() {
		t.Error("the rendering's failure is not reported (cleared by the revert?)")
	}
	if runs, good := r.p.HAProxy().Runs, r.p.HAProxy().Good.Hash(); runs == "" || runs != good {
		t.Errorf("HAProxy runs %q, want the last good rendering %q", runs, good)
	}
}

// TestAfterSync: the hook runs after each sync, once what the sync made live is live.
func TestAfterSync(t *testing.T) {
	r := newRig(t, 0)
	var (
		mu    sync.Mutex
		calls []int // reloads done when the hook ran
	)
	r.p.cfg.AfterSync = func() {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.rl.count())
	}
	got := func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
	r.run(t, cfgText(":80", "a 10.0.0.1:80"))
	waitFor(t, func() bool { return len(got()) == 1 })
	r.in.set(cfgText(":81", "a 10.0.0.1:80"))
	r.p.Changed()
	waitFor(t, func() bool { return len(got()) == 2 })
	if c := got(); c[0] != 1 || c[1] != 2 {
		t.Errorf("the hook saw %v reloads done, want [1 2] (after each sync's reload)", c)
	}
}

// hookLog notes the pipeline's hooks as they run (on the pipeline's goroutine), for the test
// to read on its own.
type hookLog struct {
	mu     sync.Mutex
	events []string
}

// note is a hook that notes e.
func (h *hookLog) note(e string) func() {
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, e)
	}
}

func (h *hookLog) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// TestIdleAfterSync: Started runs once, before the first sync; Idle runs once the pipeline
// has waited IdleAfter after a sync, on the pipeline's goroutine (never while a sync runs),
// and once per sync: after the next sync it runs again.
func TestIdleAfterSync(t *testing.T) {
	var h hookLog
	r := newRig(t, 0, func(c *Config) {
		c.Started, c.AfterSync, c.Idle, c.IdleAfter = h.note("started"), h.note("sync"), h.note("idle"), time.Millisecond
	})
	r.run(t, cfgText(":80", "a 10.0.0.1:80"))
	waitFor(t, func() bool { return len(h.got()) == 3 })
	r.in.set(cfgText(":81", "a 10.0.0.1:80"))
	r.p.Changed()
	waitFor(t, func() bool { return len(h.got()) == 5 })
	if e := h.got(); !slices.Equal(e[:5], []string{"started", "sync", "idle", "sync", "idle"}) {
		t.Errorf("hooks ran in the order %v, want started, sync, idle, sync, idle", e)
	}
}

// TestQuietWhileNoChangeComes: after Idle, Quiet runs every IdleAfter for as long as no change
// comes, on the pipeline's goroutine; a sync starts the round again (Idle first).
func TestQuietWhileNoChangeComes(t *testing.T) {
	var h hookLog
	// got are the hooks that ran, the Quiet ones in a row counted as one, and how many Quiet
	// ones there were.
	got := func() ([]string, int) {
		var out []string
		quiet := 0
		for _, e := range h.got() {
			if e == "quiet" {
				quiet++
				if len(out) > 0 && out[len(out)-1] == "quiet" {
					continue
				}
			}
			out = append(out, e)
		}
		return out, quiet
	}
	r := newRig(t, 0, func(c *Config) {
		c.AfterSync, c.Idle, c.Quiet, c.IdleAfter = h.note("sync"), h.note("idle"), h.note("quiet"), time.Millisecond
	})
	r.run(t, cfgText(":80", "a 10.0.0.1:80"))
	waitFor(t, func() bool { _, n := got(); return n >= 3 })
	r.in.set(cfgText(":81", "a 10.0.0.1:80"))
	r.p.Changed()
	waitFor(t, func() bool { e, _ := got(); return len(e) >= 6 })
	if e, _ := got(); !slices.Equal(e[:6], []string{"sync", "idle", "quiet", "sync", "idle", "quiet"}) {
		t.Errorf("hooks ran in the order %v, want sync, idle, quiet (repeated), sync, idle, quiet", e)
	}
}

// TestWriterFinishesWhenStopping: the renderings the runtime API made live are on disk when
// Run returns, even those still waiting for the writer when the sidecar was stopped.
func TestWriterFinishesWhenStopping(t *testing.T) {
	r := newRig(t, 0)
	x := r.run(t, cfgText(":80", "a 10.0.0.1:80"))
	waitFor(t, func() bool { return r.rl.count() == 1 })

	r.checker.hold() // the writer stays busy with the first change
	r.in.set(cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80"))
	r.p.Changed()
	waitFor(t, func() bool { return len(r.cli.commands()) > 0 })
	last := cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80", "c 10.0.0.3:80")
	before := len(r.cli.commands())
	r.in.set(last)
	r.p.Changed()
	waitFor(t, func() bool { return len(r.cli.commands()) > before }) // live in HAProxy, waiting for the writer

	x.cancel()
	r.checker.release()
	if !x.stop() {
		t.Fatal("Run did not return")
	}
	b, err := os.ReadFile(r.store.Live().ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != last {
		t.Errorf("live files after stopping:\n%s\nwant the last runtime change:\n%s", b, last)
	}
	if r.rl.count() != 1 {
		t.Errorf("%d reloads, want 1", r.rl.count())
	}
}

// TestLoadRecord: the record of what HAProxy runs (for a restarted sidecar, see adopt) never
// names a rendering HAProxy does not run: not one the writer finishes after a newer runtime
// change went live, and not while runtime changes wait for a deferred reload.
func TestLoadRecord(t *testing.T) {
	loaded := func(r *rig) generation.Loaded {
		l, _ := r.store.Loaded()
		return l
	}
	t.Run("the writer does not record a rendering a newer runtime change replaced", func(t *testing.T) {
		r := newRig(t, 0)
		r.run(t, cfgText(":80", "a 10.0.0.1:80"))
		// The record is written once the reload returns, after the reloader counted it.
		waitFor(t, func() bool { l := loaded(r); return l.LoadID == "master 1 reload 1" && l.Hash != "" })

		r.checker.hold() // the writer stays in the check of b
		b := cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80")
		r.in.set(b)
		r.p.Changed()
		waitFor(t, func() bool { return len(r.cli.commands()) > 0 })
		c := cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80", "c 10.0.0.3:80")
		before := len(r.cli.commands())
		r.in.set(c)
		r.p.Changed()
		waitFor(t, func() bool { return len(r.cli.commands()) > before }) // c is live in HAProxy
		r.checker.holdMatching("c 10.0.0.3")
		checked := r.checker.count()
		r.checker.release() // b's check ends; c's waits
		waitFor(t, func() bool { return r.checker.count() > checked })
		// b is not made live on disk: c, newer, is queued (HAProxy runs it already).
		if live := r.liveConfig(t); live != cfgText(":80", "a 10.0.0.1:80") {
			t.Errorf("with c queued, the files went to\n%s", live)
		}
		if l := loaded(r); l != (generation.Loaded{}) {
			t.Errorf("with c live in HAProxy and not on disk yet, the record is %+v, want none", l)
		}
		r.checker.releaseMatching()
		waitFor(t, func() bool { return r.liveConfig(t) == c })
		waitFor(t, func() bool { return loaded(r).LoadID == "master 1 reload 1" })
		if r.rl.count() != 1 {
			t.Errorf("%d reloads, want 1", r.rl.count())
		}
	})
	t.Run("runtime changes made while a reload waits clear the record", func(t *testing.T) {
		r := newRig(t, time.Hour)
		r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")
		if l := loaded(r); l.LoadID == "" {
			t.Fatalf("after a reload the record is %+v", l)
		}
		r.sync(t, cfgText(":81", "a 10.0.0.1:80", "b 10.0.0.2:80"), "deferred")
		if got := r.cli.commands(); len(got) == 0 {
			t.Fatal("no runtime change while the reload waits")
		}
		if l := loaded(r); l != (generation.Loaded{}) {
			t.Errorf("with b added at runtime, the record is %+v, want none", l)
		}
	})
}

// TestWriterStopIsBounded: a write that hangs (haproxy -c that never ends) does not keep Run
// from returning once the sidecar stops.
func TestWriterStopIsBounded(t *testing.T) {
	r := newRig(t, 0, func(c *Config) { c.ShutdownWriteTimeout = 100 * time.Millisecond })
	x := r.run(t, cfgText(":80", "a 10.0.0.1:80"))
	waitFor(t, func() bool { return r.rl.count() == 1 })
	r.checker.hold() // never released: the write of b hangs
	defer r.checker.release()
	r.in.set(cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80"))
	r.p.Changed()
	waitFor(t, func() bool { return len(r.cli.commands()) > 0 })
	if !x.stop() {
		t.Fatal("Run did not return with a write hanging")
	}
}

// TestStartedBeforeHAProxy: a sidecar that starts before HAProxy writes the files HAProxy
// will load; the same rendering again is nothing to do (not a runtime API attempt, not a
// reload), a new one is written too.
func TestStartedBeforeHAProxy(t *testing.T) {
	r := newRig(t, 0)
	r.rl.failErr = fmt.Errorf("reload: %w", reload.ErrNotRunning)
	r.cli.down = true
	a := cfgText(":80", "a 10.0.0.1:80")
	r.sync(t, a, "written")
	r.sync(t, a, "unchanged")
	if r.cli.tried != 0 {
		t.Errorf("%d runtime API commands tried for the rendering already written", r.cli.tried)
	}
	b := cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80")
	r.sync(t, b, "written")
	if live := r.liveConfig(t); live != b {
		t.Errorf("the files HAProxy will load:\n%s\nwant\n%s", live, b)
	}
	r.sync(t, b, "unchanged")
	if r.rl.count() != 0 {
		t.Errorf("%d reloads, want none", r.rl.count())
	}
}
