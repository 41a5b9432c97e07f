package jinja

import (
	"fmt"
	"testing"
)

// keptRenders renders a program again and again through one ModuleCache, as the sidecar does
// from one change to the next, each render checked against the one computed afresh.
type keptRenders struct {
	t      *testing.T
	render func(vars map[string]any, mods *Modules) string
	cache  ModuleCache
	// last is the data of the last render, held until the next as the sidecar holds its last
	// snapshot: a kept read notes the record it was found the same in weakly (identBox), and
	// a collection between two renders would otherwise take it, and with it the diff a test
	// counts.
	last map[string]any
}

// newKeptRenders renders with render (renderOf's, or one giving the secret spans too).
func newKeptRenders(t *testing.T, render func(vars map[string]any, mods *Modules) string) *keptRenders {
	return &keptRenders{t: t, render: render}
}

// step renders vars through the cache, fails the test unless that is what a render without
// modules gives (which step it was, from what, told by format and args, and both outputs),
// then sweeps the cache as the end of a render does; it gives the output.
func (k *keptRenders) step(vars map[string]any, format string, args ...any) string {
	k.t.Helper()
	got := k.render(vars, &Modules{Across: &k.cache})
	if want := k.render(vars, nil); got != want {
		k.t.Fatalf("%s: rendered\n%s\nafresh\n%s", fmt.Sprintf(format, args...), got, want)
	}
	k.cache.Sweep()
	k.last = vars
	return got
}
