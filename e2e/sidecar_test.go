package e2e

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// sidecarRun is a sidecar running in-process, as `haproxy-sidecar run` with its flags would.
type sidecarRun struct {
	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
	stopped bool
}

// runSidecar runs the sidecar in-process with exactly args, logging at debug level to the test
// and to logs (its own logger: redaction included). It is stopped when the test ends.
func runSidecar(t *testing.T, logs io.Writer, args ...string) *sidecarRun {
	t.Helper()
	cfg, err := config.ParseRun(args, "", os.Getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Log.Level = "debug"
	ctx, cancel := context.WithCancel(context.Background())
	r := &sidecarRun{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- sidecar.Run(ctx, cfg, sidecar.Env{Log: io.MultiWriter(testWriter{t}, logs)}) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop stops the sidecar and fails the test unless it stops cleanly within 10 s.
func (r *sidecarRun) stop(t *testing.T) {
	if !r.stopWithin(t, 10*time.Second) {
		t.Error("sidecar did not stop within 10s")
	}
}

// stopWithin stops the sidecar (once: later calls say how the first went): false when it did
// not return within bound; an error it returned fails the test.
func (r *sidecarRun) stopWithin(t *testing.T, bound time.Duration) bool {
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			r.stopped = true
			if err != nil {
				t.Errorf("sidecar stopped with %v", err)
			}
		case <-time.After(bound):
		}
	})
	return r.stopped
}

// renderOnce is `haproxy-sidecar render` (or `validate`, with validateOnly) with args.
func renderOnce(args []string, validateOnly bool) error {
	cmd := "render"
	if validateOnly {
		cmd = "validate"
	}
	cfg, err := config.ParseOnce(cmd, args, "", os.Getenv, io.Discard)
	if err != nil {
		return err
	}
	return sidecar.Once(context.Background(), cfg, io.Discard, sidecar.Env{Log: os.Stderr})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
