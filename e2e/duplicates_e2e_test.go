package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar"
)

// TestDuplicateManifestNewcomerIsHeld: `cp services.yaml a-copy.yaml` with one value changed
// (web's hostname): the copy sorts first, yet the original keeps serving; the copy is held and
// reported naming both files; an edit to the original goes live; deleting the copy ends the
// hold.
func TestDuplicateManifestNewcomerIsHeld(t *testing.T) {
	e := servingDemo(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	good := e.settled(t)

	orig, err := os.ReadFile(filepath.Join(e.dir, "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	copied := strings.Replace(string(orig), `"web.localhost"`, `"copy.localhost"`, 1)
	if copied == string(orig) {
		t.Fatal("the copy changes nothing")
	}
	copyPath := filepath.Join(e.dir, "a-copy.yaml")
	if err := os.WriteFile(copyPath, []byte(copied), 0o644); err != nil {
		t.Fatal(err)
	}
	var r readyz
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r = e.readyz(t)
		return heldInput(r, "file/a-copy.yaml") != ""
	}, "the copy is held")
	reason := heldInput(r, "file/a-copy.yaml")
	for _, want := range []string{"a-copy.yaml", "ConfigMap lb/services is defined twice", "services.yaml"} {
		if !strings.Contains(reason, want) {
			t.Errorf("the copy's reason %q does not say %q", reason, want)
		}
	}
	if heldInput(r, "file/services.yaml") != "" {
		t.Errorf("the original is held too: %q", heldInput(r, "file/services.yaml"))
	}
	if !r.Ready || r.LiveConfig != good.LiveConfig {
		t.Errorf("live %q (ready %v), want the original's %q", r.LiveConfig, r.Ready, good.LiveConfig)
	}
	e.waitServed(t, "web.localhost", "/", "web-")
	if code, _, _, _ := e.get("copy.localhost", "/"); code != 503 {
		t.Errorf("the copy's hostname answers %d, want 503 (the copy is not in use)", code)
	}

	e.editFile(t, "services.yaml", func(s string) string {
		return strings.Replace(s, "\ndata:\n", fmt.Sprintf("\ndata:\n  shop: |\n    {\"namespace\": \"demo\", \"selector\": \"app=api\", \"hostnames\": [\"shop.localhost\"], \"ports\": [%d]}\n", e.port), 1)
	})
	e.waitServed(t, "shop.localhost", "/", "api-1")
	e.waitServed(t, "web.localhost", "/", "web-")
	if _, r = e.readyz(t); heldInput(r, "file/a-copy.yaml") == "" {
		t.Error("the copy is no longer reported while it is still there")
	}

	if err := os.Remove(copyPath); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r = e.readyz(t)
		return len(r.Held) == 0 && r.Ready
	}, "the copy removed, nothing is held")
	e.waitServed(t, "shop.localhost", "/", "api-1")
}

// TestDuplicateInUseSurvivesARestart: the sidecar serves services.yaml's definition and holds
// a copy in a-copy.yaml (which sorts first); restarted, it still serves the original, still
// holds the copy and does not reload HAProxy; diff --live against it, and diff --base from
// the directory before the copy, predict just that: nothing changes, the copy is held.
func TestDuplicateInUseSurvivesARestart(t *testing.T) {
	e, stop := servingDemoStop(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	before := t.TempDir() // the directory before the copy, for diff --base
	if err := copyDir(e.dir, before); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(e.dir, "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "a-copy.yaml"), []byte(strings.Replace(string(orig), `"web.localhost"`, `"copy.localhost"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r := e.readyz(t)
		return heldInput(r, "file/a-copy.yaml") != ""
	}, "the copy is held")
	live := e.settled(t).LiveConfig
	reloads := e.haproxyReloads(t)
	stop()

	s := e.restarted(t)
	s.startSidecar(t)
	var r readyz
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r = s.readyz(t)
		return r.Ready && heldInput(r, "file/a-copy.yaml") != ""
	}, "the restarted sidecar ready, holding the copy")
	if r = s.settled(t); r.LiveConfig != live || heldInput(r, "file/services.yaml") != "" {
		t.Errorf("restarted: live %s (want the original's %s), services.yaml held: %q", r.LiveConfig, live, heldInput(r, "file/services.yaml"))
	}
	if got := s.haproxyReloads(t); got != reloads {
		t.Errorf("HAProxy reloaded %d times since the restart, want 0", got-reloads)
	}
	s.waitServed(t, "web.localhost", "/", "web-")
	if code, _, _, _ := s.get("copy.localhost", "/"); code != 503 {
		t.Errorf("the copy's hostname answers %d, want 503 (the copy is not in use)", code)
	}

	state := filepath.Join(filepath.Dir(e.cfgPath), ".haproxy-sidecar")
	for _, current := range [][]string{{"--live", state}, {"--base", before}} {
		rep, status := diffJSON(t, append(current, "--haproxy-config", e.cfgPath, "--dir", e.dir, "--env-allow", "HTTP_BIND,HTTPS_BIND,STATS_BIND")...)
		if rep.Current != rep.Proposed || rep.Action != "nothing" || len(rep.Held) != 1 || rep.Held[0].Input != "file/a-copy.yaml" || status != sidecar.DiffHeld {
			t.Errorf("diff %s: status %d, %+v; want nothing to change and the copy held", current[0], status, rep)
		}
		if current[0] == "--live" && rep.Current != live {
			t.Errorf("diff --live: current %s, want the live %s", rep.Current, live)
		}
	}
}

// heldInput is the reason /readyz gives for holding input id, "" when it is not held.
func heldInput(r readyz, id string) string {
	for _, h := range r.Held {
		if h.Input == id {
			return h.Object + ": " + h.Reason
		}
	}
	return ""
}
