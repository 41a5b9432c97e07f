package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// auxInputs renders the rig's configuration plus map files the test sets.
type auxInputs struct {
	*inputs
	mu   sync.Mutex
	maps map[string][]byte
}

func (a *auxInputs) setMap(name, content string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.maps = map[string][]byte{name: []byte(content)}
}

func (a *auxInputs) Render(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	b, err := a.inputs.Render(ctx, s)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b.Maps = a.maps
	var sig strings.Builder
	for n, c := range a.maps {
		fmt.Fprintf(&sig, "%s=%s;", n, c)
	}
	b.Hash += fmt.Sprintf("-m%x", hashString(sig.String()))
	return b, nil
}

// With an Updater that does not know the map directory (this rig's), a rendering that differs
// from what HAProxy loaded in a map file reloads (once), even where the runtime API could make
// the rest; the map goes live with its generation, and a server change alone still needs no
// reload. (With the directory, map contents change at runtime: TestMapUpdatesWithoutReload.)
func TestMapChangeReloads(t *testing.T) {
	ai := &auxInputs{}
	r := newRig(t, 0, func(cfg *Config) {
		ai.inputs = cfg.Inputs.(*inputs)
		cfg.Renderer = ai // renders the rig's configuration, with map files
	})
	ai.setMap("hosts.map", "a.example be_a\n")
	r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")
	if r.rl.count() != 1 {
		t.Fatalf("%d reloads, want 1", r.rl.count())
	}
	mapOnDisk := func() string {
		b, err := os.ReadFile(filepath.Join(r.store.MapsDir(), "hosts.map"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := mapOnDisk(); got != "a.example be_a\n" {
		t.Fatalf("map through the stable path: %q", got)
	}

	// A server change alone: runtime API, no reload; the map written with the generation.
	res := r.sync(t, cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80"), "applied")
	if res.Reloaded || r.rl.count() != 1 {
		t.Fatalf("server change: reloaded %v, %d reloads", res.Reloaded, r.rl.count())
	}
	r.p.writer.Drop() // wait for the background write, if any
	if got := mapOnDisk(); got != "a.example be_a\n" {
		t.Fatalf("map after the runtime change: %q", got)
	}

	// The map changes, nothing else: one reload, and the new map is live.
	ai.setMap("hosts.map", "a.example be_b\n")
	res = r.sync(t, cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80"), "applied")
	if !res.Reloaded || r.rl.count() != 2 {
		t.Fatalf("map change: reloaded %v, %d reloads, want one more reload", res.Reloaded, r.rl.count())
	}
	if got := mapOnDisk(); got != "a.example be_b\n" {
		t.Fatalf("map after its change: %q", got)
	}
	// Nothing changed since: nothing to do.
	r.sync(t, cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80"), "unchanged")
	if r.rl.count() != 2 {
		t.Fatalf("%d reloads after an unchanged sync", r.rl.count())
	}
	// The map and a server change together: one reload.
	ai.setMap("hosts.map", "a.example be_c\n")
	res = r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")
	if !res.Reloaded || r.rl.count() != 3 || mapOnDisk() != "a.example be_c\n" {
		t.Fatalf("map and server change: reloaded %v, %d reloads, map %q", res.Reloaded, r.rl.count(), mapOnDisk())
	}
}
