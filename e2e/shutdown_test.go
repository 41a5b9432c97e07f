package e2e

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// processArgs are run's flags on the demo environment e.
func (e *demoEnv) processArgs() []string {
	return []string{
		"--source=file", "--dir", e.dir, "--haproxy-config", e.cfgPath, "--master-socket", e.sock,
		"--env-allow", "HTTP_BIND,HTTPS_BIND,STATS_BIND", "--wait", "50ms:500ms",
		"--health-addr", e.health, "--metrics-addr", e.metrics,
	}
}

// stopsWithin starts the sidecar, waits for it to be in the state ready says, stops it and
// fails unless it returned within shutdownBound.
func stopsWithin(t *testing.T, e *demoEnv, ready func() bool, args ...string) {
	t.Helper()
	e.logs = &haproxytest.SyncBuffer{}
	r := runSidecar(t, e.logs, append(e.processArgs(), args...)...)
	haproxytest.WaitFor(t, 10*time.Second, ready, "the sidecar is in the state under test")
	if !r.stopWithin(t, shutdownBound) {
		t.Fatalf("the sidecar did not stop within %v", shutdownBound)
	}
}

// TestStopSignals: `run` stops promptly and cleanly (exit status 0) on each signal that asks it
// to: SIGTERM (Kubernetes, the Dockerfile's STOPSIGNAL), SIGINT (a terminal) and SIGUSR1 (the
// STOPSIGNAL of HAProxy's image, which the sidecar's image is built from).
func TestStopSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	bin := sidecarBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			e := newDemoEnv(t)
			p := startSidecarProcess(t, bin, nil, e.processArgs()...)
			e.startHAProxy(t)
			e.waitReady(t)
			p.signal(t, sig)
			if !p.exitedWithin(shutdownBound) {
				t.Fatalf("still running %v after %v", shutdownBound, sig)
			}
			if !p.cmd.ProcessState.Success() {
				t.Errorf("exit %v after %v, want 0", p.cmd.ProcessState, sig)
			}
			if strings.Contains(p.logs.String(), "level=ERROR") {
				t.Errorf("errors logged while stopping:\n%s", p.logs)
			}
		})
	}
}

// TestShutdownDelayDrains: with --shutdown-delay, the stop signal turns /readyz to 503 at once
// (saying it stops) while the sidecar and HAProxy keep going; a second signal stops it at once.
func TestShutdownDelayDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	e := newDemoEnv(t)
	p := startSidecarProcess(t, sidecarBinary(t), nil, append(e.processArgs(), "--shutdown-delay", "10m")...)
	e.startHAProxy(t)
	e.waitReady(t)
	p.signal(t, syscall.SIGTERM)
	var r readyz
	var code int
	haproxytest.WaitFor(t, shutdownBound, func() bool {
		code, r = e.readyz(t)
		return code == http.StatusServiceUnavailable
	}, "/readyz answers 503 once asked to stop")
	if !strings.HasPrefix(r.Reason, "stopping") || r.LiveConfig == "" {
		t.Errorf("draining /readyz: reason %q, live %q; want it to say it stops, with the live configuration", r.Reason, r.LiveConfig)
	}
	if resp, err := http.Get("http://" + e.health + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz while draining: %v %v, want 200 (the kubelet must not restart it)", resp, err)
	} else {
		resp.Body.Close()
	}
	e.waitServed(t, "web.localhost", "/", "web-")
	if p.exited() {
		t.Fatal("the sidecar stopped before --shutdown-delay")
	}
	p.signal(t, syscall.SIGTERM)
	if !p.exitedWithin(shutdownBound) {
		t.Fatalf("a second SIGTERM did not stop it within %v", shutdownBound)
	}
}
