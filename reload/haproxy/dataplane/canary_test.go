package dataplane

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/rollout"
)

// peerC is a third "machine" beside peerA and peerB.
const peerC = "127.0.5.4"

// freeOn returns a port that was free on every one of ips when it was chosen.
func freeOn(t *testing.T, ips ...string) int {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		port := haproxytest.FreePort(t)
		ok := true
		for _, ip := range ips {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", ips)
	return 0
}

// traffic sends requests to every address, one after the other, until stop (or the end of
// the test); the canary's counters need some. Stop it before the backends close: HAProxy
// pauses up to a second before each retry of a refused connection.
func traffic(t *testing.T, addrs ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, a := range addrs {
				if ctx.Err() == nil {
					haproxytest.Get(a)
				}
			}
		}
	}()
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// verdicts collects OnVerdict calls.
type verdicts struct {
	mu  sync.Mutex
	got []string // "endpoint verdict promoted"
}

func (v *verdicts) record(endpoint string, j rollout.Judgement, promoted bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.got = append(v.got, endpoint+" "+j.Verdict.String()+" "+strconv.FormatBool(promoted))
}

func (v *verdicts) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.got...)
}

// TestCanary: three hosts with a real HAProxy each. A configuration that answers 503 goes to
// the first host only, is seen failing there and rolled back, and never reaches the other
// two; a good one goes to the canary, holds for the window, and reaches all three.
func TestCanary(t *testing.T) {
	haproxytest.Binary(t)
	pt := t
	opts := dataplanetest.Options{Username: user, Password: pass, MasterRuntime: true}
	a, b, c := startHost(t, peerA, opts), startHost(t, peerB, opts), startHost(t, peerC, opts)
	v := &verdicts{}
	canary := &Canary{Thresholds: rollout.Thresholds{Max5xxRatio: 0.05, MaxConnErrorRatio: 0.05, MinRequests: 5}, OnVerdict: v.record}
	h := newHarness(t, Config{URLs: []string{a.URL, b.URL, c.URL}, Username: user, Password: pass, Canary: canary})
	port := freeOn(t, peerA, peerB, peerC)
	addr := func(peer string) string { return peer + ":" + strconv.Itoa(port) }
	ctx := t.Context()
	setWindow := func(d time.Duration) { h.r.cfg.Canary.Window = d } // between Reloads only

	t.Run("no host's configuration is known yet: no canary, every host at once", func(t *testing.T) {
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "v1")), nil)
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		for _, p := range []string{peerA, peerB, peerC} {
			mustServe(t, addr(p), "v1")
		}
		if !strings.Contains(h.logs.String(), "no canary: no host's current configuration is known") || len(v.all()) != 0 {
			t.Errorf("the first push was not said to go without a canary (verdicts %v)", v.all())
		}
	})
	defer traffic(t, addr(peerA), addr(peerB), addr(peerC))()

	t.Run("a configuration answering 503 is rolled back on the canary and never reaches the others", func(t *testing.T) {
		// A long window: the canary is rolled back as soon as its counters trip, not at the end.
		setWindow(10 * time.Minute)
		va, vb, vc := a.Version(), b.Version(), c.Version()
		nb, nc := len(b.Requests()), len(c.Requests())
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "v1"), "  http-request return status 503\n"), nil)
		err := h.r.Reload(ctx)
		var refused *rollout.Refused
		if !errors.As(err, &refused) {
			t.Fatalf("Reload = %v, want a *rollout.Refused", err)
		}
		if refused.Canary != a.URL || refused.Judgement.Counter != rollout.Counter5xx || !refused.RolledBack {
			t.Errorf("refused = %+v, want host A's 5xx, rolled back", refused)
		}
		if !strings.Contains(err.Error(), "5xx responses: 100.0%") || !strings.Contains(err.Error(), "on the other hosts") {
			t.Errorf("the error does not say what tripped against the others: %v", err)
		}
		mustServe(t, addr(peerA), "v1")
		if a.Version() != va+2 {
			t.Errorf("host A's version %d, want %d: the new configuration, then the last good one", a.Version(), va+2)
		}
		if b.Version() != vb || c.Version() != vc {
			t.Errorf("hosts B and C were written: versions %d, %d, want %d, %d", b.Version(), c.Version(), vb, vc)
		}
		for _, r := range append(requestsSince(b, nb), requestsSince(c, nc)...) {
			if !strings.HasPrefix(r, "GET ") {
				t.Errorf("a host beside the canary got %s", r)
			}
		}
		mustServe(t, addr(peerB), "v1")
		mustServe(t, addr(peerC), "v1")
		if got := v.all(); len(got) != 1 || got[0] != a.URL+" fail false" {
			t.Errorf("verdicts = %v, want host A's fail", got)
		}
	})

	t.Run("a good configuration holds on the canary for the window, then reaches all three", func(t *testing.T) {
		setWindow(2 * time.Second)
		va, vb := a.Version(), b.Version()
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "v2")), nil)
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		for _, p := range []string{peerA, peerB, peerC} {
			mustServe(t, addr(p), "v2")
		}
		if a.Version() != va+1 || b.Version() != vb+1 {
			t.Errorf("versions A %d, B %d: want one push each", a.Version(), b.Version())
		}
		if got := v.all(); len(got) != 2 || got[1] != a.URL+" pass true" {
			t.Errorf("verdicts = %v, want host A's pass", got)
		}
	})
	t.Run("the window does not hold up a stop: Reload returns when its context ends", func(t *testing.T) {
		setWindow(10 * time.Minute)
		vb, na := b.Version(), len(a.Requests())
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "v3")), nil)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- h.r.Reload(rctx) }()
		haproxytest.WaitFor(t, 20*time.Second, func() bool {
			return slices.ContainsFunc(requestsSince(a, na), func(r string) bool { return strings.HasPrefix(r, "GET /services/haproxy/stats/native") })
		}, "the canary has the new configuration and is being watched")
		cancel()
		var err error
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			select {
			case err = <-done:
				return true
			default:
				return false
			}
		}, "Reload returns once its context ends")
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "it keeps the new configuration") {
			t.Errorf("Reload = %v, want the watch stopped by the cancelled context", err)
		}
		if b.Version() != vb {
			t.Errorf("host B was written during a window that did not end")
		}
	})
}

// TestCanaryHandsOverAndPromotesInconclusive: a canary host that cannot be reached hands the
// role to the next host; with no traffic the verdict is inconclusive, and
// --canary-inconclusive=promote lets the other hosts follow (the unreachable one is retried).
func TestCanaryHandsOverAndPromotesInconclusive(t *testing.T) {
	haproxytest.Binary(t)
	pt := t
	opts := dataplanetest.Options{MasterRuntime: true}
	a, b := startHost(t, peerA, opts), startHost(t, peerB, opts)
	v := &verdicts{}
	h := newHarness(t, Config{URLs: []string{a.URL, b.URL}, Canary: &Canary{Window: 200 * time.Millisecond,
		Thresholds: rollout.Thresholds{Max5xxRatio: 0.05, MaxConnErrorRatio: 0.05, MinRequests: 5}, PromoteInconclusive: true, OnVerdict: v.record}})
	port := peerPort(t)
	h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "v1")), nil)
	if err := h.r.Reload(t.Context()); err != nil {
		t.Fatalf("first Reload: %v", err)
	}
	a.Down()
	h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "v2")), nil)
	if err := h.r.Reload(t.Context()); err != nil {
		t.Fatalf("Reload with the first host down: %v", err)
	}
	mustServe(t, peerB+":"+strconv.Itoa(port), "v2")
	if got := v.all(); len(got) != 1 || got[0] != b.URL+" inconclusive true" {
		t.Errorf("verdicts = %v, want host B's inconclusive, promoted", got)
	}
	if !strings.Contains(h.logs.String(), "the next host is the canary") {
		t.Error("the hand-over is not logged")
	}
	a.Up(t)
	waitServes(t, peerA+":"+strconv.Itoa(port), "v2") // retried in the background
}
