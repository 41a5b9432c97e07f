package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// countingRenderer counts the renders of the fake inputs.
type countingRenderer struct {
	*inputs
	mu sync.Mutex
	n  int
}

func (c *countingRenderer) Render(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	c.count()
	return c.inputs.Render(ctx, s)
}

// count counts a render begun.
func (c *countingRenderer) count() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *countingRenderer) renders() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// startingHAProxy is a master socket that does not answer until start, then names its loads
// as a master does (the pid changes when HAProxy is started again).
type startingHAProxy struct {
	mu      sync.Mutex
	path    string
	pid     int // 0: not running
	reloads int
}

func (h *startingHAProxy) start(pid int) {
	h.mu.Lock()
	h.pid, h.reloads = pid, 0
	h.mu.Unlock()
}

func (h *startingHAProxy) Reload(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pid == 0 {
		return fmt.Errorf("reload: %w", reload.ErrNotRunning)
	}
	if _, err := os.ReadFile(h.path); err != nil {
		return err
	}
	h.reloads++
	return nil
}

func (h *startingHAProxy) LoadID(context.Context) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pid == 0 {
		return "", fmt.Errorf("load: %w", reload.ErrNotRunning)
	}
	return fmt.Sprintf("master %d reload %d", h.pid, h.reloads), nil
}

// TestHAProxyStartRendersNothing: the sidecar writes the first configuration while HAProxy does
// not run; HAProxy then starts on it, and the probe's notice of that start asks for a sync that
// renders nothing (it used to render everything again to find it unchanged: up to 1.4 s at
// 3,000 HTTPRoutes, docs/performance.md). So does a restart of HAProxy on the same files. A
// change of the inputs after that renders once.
func TestHAProxyStartRendersNothing(t *testing.T) {
	dir := t.TempDir()
	store, err := generation.Open(filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "certs"), "")
	if err != nil {
		t.Fatal(err)
	}
	in := &inputs{}
	rd := &countingRenderer{inputs: in}
	hx := &startingHAProxy{path: filepath.Join(dir, "haproxy.cfg")}
	var mu sync.Mutex
	syncs := 0
	p, err := New(Config{Source: in, Inputs: in, Renderer: rd, Store: store, Checker: &checker{}, Reloader: hx,
		Logger: slog.New(slog.DiscardHandler), WaitMin: time.Millisecond, ProbeInterval: 10 * time.Millisecond,
		AfterSync: func() { mu.Lock(); syncs++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	synced := func() int { mu.Lock(); defer mu.Unlock(); return syncs }
	first := cfgText("*:80", "a 10.0.0.1:80")
	in.set(first)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	waitFor(t, func() bool { return synced() == 1 })
	if got := p.HAProxy().LoadsAtStart; store.Live() == nil || got != store.Live().Hash {
		t.Fatalf("the first configuration is not written for HAProxy's start: loads at start %q", got)
	}
	hx.start(7)
	waitFor(t, func() bool { return synced() == 2 })
	if s := p.HAProxy(); s.Runs != store.Live().Hash || s.Load != "master 7 reload 0" {
		t.Fatalf("after HAProxy's start: runs %q load %q, want %q on master 7", s.Runs, s.Load, store.Live().Hash)
	}
	if n := rd.renders(); n != 1 {
		t.Fatalf("%d renders after HAProxy started on the first configuration, want 1", n)
	}

	// HAProxy restarted by someone, on the same files: noticed, nothing rendered or reloaded.
	hx.start(8)
	waitFor(t, func() bool { return synced() == 3 })
	if s := p.HAProxy(); s.Runs != store.Live().Hash || s.Load != "master 8 reload 0" {
		t.Fatalf("after HAProxy's restart: runs %q load %q", s.Runs, s.Load)
	}
	if n := rd.renders(); n != 1 {
		t.Fatalf("%d renders after HAProxy restarted on the live configuration, want 1", n)
	}

	in.set(cfgText("*:81", "a 10.0.0.1:80"))
	p.Changed()
	waitFor(t, func() bool { return synced() == 4 })
	if got := readFile(t, store.Live().ConfigFile()); got != cfgText("*:81", "a 10.0.0.1:80") || p.HAProxy().Runs != store.Live().Hash {
		t.Fatalf("the change is not live: %q, runs %q", got, p.HAProxy().Runs)
	}
	if n := rd.renders(); n != 2 {
		t.Fatalf("%d renders after one change, want 2", n)
	}
}
