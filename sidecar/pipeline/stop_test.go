package pipeline

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
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
