package jinja

import (
	"context"
	"fmt"
	"testing"
)

// An item whose value flaps between two versions (a pod added, then deleted) finds the kept
// iteration of two renders ago by its reads' hash: that one was not in the last render's run,
// so the hints are not indexed (a map of the whole run) to realign the next iterations, and
// those still find theirs in place.
func TestLoopBodiesOlderEntryDoesNotIndexHints(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{% for s in items %}{{ s|string }};{% endfor %}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := renderOf(t, p)
	var cache ModuleCache
	for round := range 6 {
		items := make([]any, 40)
		for i := range items {
			items[i] = fmt.Sprint("s", i)
		}
		items[0] = fmt.Sprint("v", round%2)
		vars := map[string]any{"items": items}
		before := cache.BodiesReused()
		got := render(vars, &Modules{Across: &cache})
		cache.Sweep()
		want, err := p.Render(context.Background(), vars, Limits{}, nil)
		if err != nil || got != string(want) {
			t.Fatalf("render %d: %q, afresh %q (%v)", round, got, want, err)
		}
		if n, want := cache.BodiesReused()-before, map[bool]int{true: 40, false: 39}[round >= 2]; round > 0 && n != want {
			t.Errorf("render %d: reused %d, want %d", round, n, want)
		}
	}
	if n := cache.bodies.hintsIndexed; n != 0 {
		t.Errorf("hints indexed %d times, want 0", n)
	}
}
