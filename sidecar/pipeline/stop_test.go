package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// closingSource is a source whose Run, once its context ends, takes until release to return,
// as the etcd source does while its client cancels its watches.
type closingSource struct {
	*inputs
	closing, release chan struct{}
	returned         atomic.Bool
}

func (s *closingSource) Run(ctx context.Context, changed func()) error {
	<-ctx.Done()
	close(s.closing)
	<-s.release
	s.returned.Store(true)
	return nil
}

// TestRunReturnsAfterTheSource: Run returns once the source's Run has, never while the source
// is still closing (its client logging and acting after the sidecar stopped: a test's log
// written after the test ended, a race).
func TestRunReturnsAfterTheSource(t *testing.T) {
	dir := t.TempDir()
	store, err := generation.Open(filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "certs"), "")
	if err != nil {
		t.Fatal(err)
	}
	in := &inputs{}
	in.set(cfgText("*:80", "a 10.0.0.1:80"))
	src := &closingSource{inputs: in, closing: make(chan struct{}), release: make(chan struct{})}
	hx := &startingHAProxy{path: filepath.Join(dir, "haproxy.cfg")}
	hx.start(1)
	var mu sync.Mutex
	syncs := 0
	p, err := New(Config{Source: src, Inputs: in, Renderer: in, Store: store, Checker: &checker{}, Reloader: hx,
		Logger: slog.New(slog.DiscardHandler), WaitMin: time.Millisecond, ProbeInterval: 10 * time.Millisecond,
		AfterSync: func() { mu.Lock(); syncs++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return syncs >= 1 })

	cancel()
	<-src.closing
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while the source's Run was still closing", err)
	default:
	}
	close(src.release)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !src.returned.Load() {
		t.Fatal("Run returned before the source's Run did")
	}
}

// stoppingRenderer is a renderer during whose render the sidecar is asked to stop.
type stoppingRenderer struct {
	tmplRenderer
	stop func()
}

func (r stoppingRenderer) Render(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	r.stop()
	<-ctx.Done()
	return nil, fmt.Errorf("render: %w", ctx.Err())
}

// TestASyncCutShortByAStopIsNoFailure: a sync the stop signal cuts short logs no error, counts
// no failure, holds nothing, marks nothing unhealthy and asks no retry: stopping is not an
// outage (every rollout would log one, and a test of the stop signals failed on it).
func TestASyncCutShortByAStopIsNoFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	r := newQRigWith(t, startCluster(), "", stoppingRenderer{stop: cancel}, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	res := r.p.Sync(ctx, "test")
	if res.Retry {
		t.Error("a sync cut short by the stop asks for a retry")
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged for a stop:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "the sidecar is stopping") {
		t.Errorf("the log does not say the sync was cut short by the stop:\n%s", logs.String())
	}
	for _, stage := range []string{failure.Read, failure.Staging, failure.Write} {
		if v := value(r.metrics.SyncFailures.WithLabelValues(stage)); v != 0 {
			t.Errorf("sync_failures_total{stage=%s} = %v, want 0", stage, v)
		}
	}
	if got := r.held(); got != "" {
		t.Errorf("held %q for a stop", got)
	}
	if since := r.health.FailingSince(); !since.IsZero() {
		t.Errorf("failing since %v for a stop", since)
	}
	if ev := r.events.all(); len(ev) != 0 {
		t.Errorf("events for a stop: %q", ev)
	}
}
