package dataplane

import (
	"strconv"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// TestHostsHave: Reload succeeds once one host has the configuration; HostsHave says whether
// every host has it (what the status on the Kubernetes objects waits for), by the rendering's
// hash (content.Files.Hash), including a host that catches up in the background.
func TestHostsHave(t *testing.T) {
	haproxytest.Binary(t)
	pt := t
	a := startHost(t, peerA, dataplanetest.Options{})
	b := startHost(t, peerB, dataplanetest.Options{})
	h := newHarness(t, Config{URLs: []string{a.URL, b.URL}})
	port := peerPort(t)
	ctx := t.Context()
	hashOf := func(cfg string) string { return content.Files{Config: []byte(cfg)}.Hash() }

	first := httpConfig(port, haproxytest.Backend(pt, "backend A"))
	if h.r.HostsHave(hashOf(first)) {
		t.Fatal("HostsHave before any Reload")
	}
	h.live.set(t, first, nil)
	if err := h.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if !h.r.HostsHave(hashOf(first)) {
		t.Fatal("both hosts have the configuration, HostsHave says no")
	}

	b.Down()
	second := httpConfig(port, haproxytest.Backend(pt, "backend B"))
	h.live.set(t, second, nil)
	if err := h.r.Reload(ctx); err != nil {
		t.Fatalf("Reload with one host down: %v", err)
	}
	waitServes(t, peerA+":"+strconv.Itoa(port), "backend B")
	if h.r.HostsHave(hashOf(second)) || h.r.HostsHave(hashOf(first)) {
		t.Fatal("one host is down: HostsHave says every host has a configuration")
	}
	b.Up(t)
	haproxytest.WaitFor(t, 15*time.Second, func() bool { return h.r.HostsHave(hashOf(second)) }, "the host back up catches up, and HostsHave says so")
}
