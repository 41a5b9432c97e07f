package e2e

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// shutdownBound is how long the sidecar may take to stop once asked (SIGTERM cancels the
// context run gets): Kubernetes sends SIGKILL after the grace period.
const shutdownBound = 5 * time.Second

// TestStopsPromptlyInEveryState: the sidecar stops within shutdownBound while haproxy -c
// hangs, and while HAProxy's master socket accepts a reload and never answers.
func TestStopsPromptlyInEveryState(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	t.Run("validation hangs", func(t *testing.T) {
		e := newDemoEnv(t)
		dir := t.TempDir()
		hanging, started := filepath.Join(dir, "haproxy"), filepath.Join(dir, "started")
		// A haproxy -c that never ends (a huge configuration, a stuck disk).
		if err := os.WriteFile(hanging, []byte("#!/bin/sh\ntouch "+started+"\nexec sleep 600\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		stopsWithin(t, e, func() bool { _, err := os.Stat(started); return err == nil }, "--haproxy-bin", hanging)
	})
	t.Run("the master socket never answers", func(t *testing.T) {
		e := newDemoEnv(t)
		l, err := net.Listen("unix", e.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		accepted := make(chan struct{}, 16)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted <- struct{}{}
				go func() { _, _ = io.Copy(io.Discard, c) }() // reads, never answers
			}
		}()
		stopsWithin(t, e, func() bool { return len(accepted) > 0 }, "--reload-timeout", "10m", "--probe-interval", "10m")
	})
}

// stopsWithin starts the sidecar, waits for it to be in the state ready says, stops it and
// fails unless it returned within shutdownBound.
func stopsWithin(t *testing.T, e *demoEnv, ready func() bool, args ...string) {
	t.Helper()
	e.logs = &haproxytest.SyncBuffer{}
	r := runSidecar(t, e.logs, append([]string{
		"--source=file", "--dir", e.dir, "--haproxy-config", e.cfgPath, "--master-socket", e.sock,
		"--env-allow", "HTTP_BIND,HTTPS_BIND,STATS_BIND", "--wait", "50ms:500ms",
		"--health-addr", e.health, "--metrics-addr", e.metrics,
	}, args...)...)
	haproxytest.WaitFor(t, 10*time.Second, ready, "the sidecar is in the state under test")
	if !r.stopWithin(t, shutdownBound) {
		t.Fatalf("the sidecar did not stop within %v", shutdownBound)
	}
}
