package jinja

import (
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Records compared as data (sameData for what a kept module or part read, bodySame for a
// loop's iterations) are the same when they hold the same keys and values, whether they
// share their keys (one shape) or not; a key or a value that differs at one place, however
// deep, makes them differ.
func TestSameRecordsByPlace(t *testing.T) {
	var shapes record.Shapes
	rec := func(shared bool, m map[string]any) *record.Record {
		if shared {
			return record.FromMap(&shapes, m)
		}
		return record.FromMap(nil, m)
	}
	inner := func(v int64) *record.Record { return rec(false, map[string]any{"x": v}) }
	for _, shared := range []bool{true, false} {
		base := rec(shared, map[string]any{"a": int64(1), "b": "v", "c": inner(1)})
		for _, tc := range []struct {
			name string
			o    *record.Record
			same bool
		}{
			{"equal", rec(shared, map[string]any{"a": int64(1), "b": "v", "c": inner(1)}), true},
			{"another key", rec(shared, map[string]any{"a": int64(1), "bb": "v", "c": inner(1)}), false},
			{"another value", rec(shared, map[string]any{"a": int64(1), "b": "w", "c": inner(1)}), false},
			{"a value deeper", rec(shared, map[string]any{"a": int64(1), "b": "v", "c": inner(2)}), false},
			{"one key more", rec(shared, map[string]any{"a": int64(1), "b": "v", "c": inner(1), "d": nil}), false},
		} {
			if got := sameData(base, tc.o); got != tc.same {
				t.Errorf("shared keys %v, %s: sameData %v, want %v", shared, tc.name, got, tc.same)
			}
			if got := bodySame(base, tc.o); got != tc.same {
				t.Errorf("shared keys %v, %s: bodySame %v, want %v", shared, tc.name, got, tc.same)
			}
		}
	}
}
