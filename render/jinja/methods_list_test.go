package jinja

import (
	"slices"
	"testing"
)

// TestAppendDoubling: extend's append holds what append would, and grows a list's room by at
// least twice (a list extended block by block to thousands of items allocates about twice its
// size, not five times).
func TestAppendDoubling(t *testing.T) {
	var l []any
	allocated := 0
	for i := range 200 {
		block := []any{i, i, i, i, i, i, i, i, i, i}
		before := cap(l)
		want := append(slices.Clip(slices.Clone(l)), block...)
		l = appendDoubling(l, block, 0)
		if !slices.Equal(l, want) {
			t.Fatalf("block %d: %v, want %v", i, l, want)
		}
		if cap(l) != before {
			if cap(l) < 2*before {
				t.Fatalf("block %d: room %d from %d, want at least twice", i, cap(l), before)
			}
			allocated += cap(l)
		}
	}
	if allocated > 4*len(l) {
		t.Errorf("allocated room for %d items to hold %d", allocated, len(l))
	}
}
