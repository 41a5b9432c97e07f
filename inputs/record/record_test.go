package record

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// names returns n sorted, distinct keys: k00, k02, k04, … (the odd ones are left free so that
// tests can ask for keys that fall between two present ones).
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("k%02d", 2*i)
	}
	return out
}

// valuesFor returns one distinct value per key: "value of <key>".
func valuesFor(keys []string) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = "value of " + k
	}
	return out
}

// reversed returns a reversed copy of l.
func reversed[T any](l []T) []T {
	out := slices.Clone(l)
	slices.Reverse(out)
	return out
}

// panicValue runs f and returns what it panicked with (nil if it returned).
func panicValue(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// collect returns the pairs All yields, in order.
func collect(r *Record) (keys []string, vals []any) {
	for k, v := range r.All() {
		keys = append(keys, k)
		vals = append(vals, v)
	}
	return keys, vals
}

// recordsOf returns v with every map in it (at any depth, in lists too) made a record, the way
// the package's users build them from decoded JSON.
func recordsOf(s *Shapes, v any) any {
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return (*Record)(nil)
		}
		keys := make([]string, 0, len(x))
		vals := make([]any, 0, len(x))
		for k, e := range x {
			keys = append(keys, k)
			vals = append(vals, recordsOf(s, e))
		}
		return FromPairs(s, keys, vals)
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = recordsOf(s, e)
		}
		return out
	}
	return v
}

func TestGet(t *testing.T) {
	tests := []struct {
		name string
		n    int
	}{
		{name: "one key", n: 1},
		{name: "five keys, scanned", n: 5},
		{name: "eight keys, the most that are scanned", n: 8},
		{name: "nine keys, the fewest that are binary searched", n: 9},
		{name: "forty keys, binary searched", n: 40},
	}
	for _, tc := range tests {
		keys := names(tc.n)
		vals := valuesFor(keys)
		// The same record made each way the package offers.
		made := map[string]*Record{
			"New":       New(NewKeys(keys...), vals),
			"FromPairs": FromPairs(nil, reversed(keys), reversed(vals)),
			"FromMap": FromMap(&Shapes{}, func() map[string]any {
				m := map[string]any{}
				for i, k := range keys {
					m[k] = vals[i]
				}
				return m
			}()),
		}
		for how, r := range made {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				if got := r.Len(); got != tc.n {
					t.Fatalf("Len() = %d, want %d", got, tc.n)
				}
				for i, k := range keys {
					got, ok := r.Get(k)
					if !ok || got != vals[i] {
						t.Errorf("Get(%q) = %v, %t; want %v, true", k, got, ok, vals[i])
					}
				}
				absent := []string{
					"",                         // before every key
					"a",                        // before every key
					"k",                        // a prefix of every key
					"k0",                       // a prefix of some keys
					keys[0] + "x",              // just after the first key
					keys[len(keys)-1] + "\x00", // just after the last key
					"z",                        // after every key
					"K00",                      // another letter case
				}
				for i := range tc.n - 1 {
					absent = append(absent, fmt.Sprintf("k%02d", 2*i+1)) // between two keys
				}
				for _, k := range absent {
					if got, ok := r.Get(k); ok || got != nil {
						t.Errorf("Get(%q) = %v, %t; want nil, false", k, got, ok)
					}
				}
			})
		}
	}
}

func TestGetNilValue(t *testing.T) {
	// A key whose value is null is present: Get tells it from an absent key by ok.
	r := FromPairs(nil, []string{"deletionTimestamp", "name"}, []any{nil, "web-0"})
	if v, ok := r.Get("deletionTimestamp"); !ok || v != nil {
		t.Errorf(`Get("deletionTimestamp") = %v, %t; want nil, true`, v, ok)
	}
	if v, ok := r.Get("namespace"); ok || v != nil {
		t.Errorf(`Get("namespace") = %v, %t; want nil, false`, v, ok)
	}
}

func TestEmptyRecords(t *testing.T) {
	tests := []struct {
		name     string
		r        *Record
		wantJSON string
	}{
		{name: "nil", r: nil, wantJSON: "null"},
		{name: "zero value", r: &Record{}, wantJSON: "{}"},
		{name: "no pairs", r: FromPairs(nil, nil, nil), wantJSON: "{}"},
		{name: "empty map", r: FromMap(&Shapes{}, map[string]any{}), wantJSON: "{}"},
		{name: "no keys", r: New(NewKeys(), nil), wantJSON: "{}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Len(); got != 0 {
				t.Errorf("Len() = %d, want 0", got)
			}
			for _, k := range []string{"", "name"} {
				if v, ok := tc.r.Get(k); ok || v != nil {
					t.Errorf("Get(%q) = %v, %t; want nil, false", k, v, ok)
				}
			}
			for k, v := range tc.r.All() {
				t.Errorf("All() yielded %q: %v, want nothing", k, v)
			}
			b, err := tc.r.MarshalJSON()
			if err != nil || string(b) != tc.wantJSON {
				t.Errorf("MarshalJSON() = %s, %v; want %s", b, err, tc.wantJSON)
			}
			if b, err := json.Marshal(tc.r); err != nil || string(b) != tc.wantJSON {
				t.Errorf("json.Marshal = %s, %v; want %s", b, err, tc.wantJSON)
			}
			if got := tc.r.String(); got != tc.wantJSON {
				t.Errorf("String() = %s, want %s", got, tc.wantJSON)
			}
			if m := tc.r.Map(); m == nil || len(m) != 0 {
				t.Errorf("Map() = %#v, want an empty map", m)
			}
			if tc.r.SameKeys(nil) || (*Record)(nil).SameKeys(tc.r) {
				t.Error("SameKeys with a nil record = true, want false")
			}
		})
	}
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name     string
		keys     []string
		vals     []any
		wantKeys []string
		wantVals []any
	}{
		{
			name:     "already sorted",
			keys:     []string{"a", "b", "c"},
			vals:     []any{1, 2, 3},
			wantKeys: []string{"a", "b", "c"},
			wantVals: []any{1, 2, 3},
		},
		{
			name:     "reversed",
			keys:     []string{"status", "spec", "metadata", "kind", "apiVersion"},
			vals:     []any{"st", "sp", "md", "k", "av"},
			wantKeys: []string{"apiVersion", "kind", "metadata", "spec", "status"},
			wantVals: []any{"av", "k", "md", "sp", "st"},
		},
		{
			name:     "byte order, as encoding/json sorts map keys",
			keys:     []string{"é", "a", "", "Z", "a\x00", "_"},
			vals:     []any{"é", "a", "empty", "Z", "a nul", "_"},
			wantKeys: []string{"", "Z", "_", "a", "a\x00", "é"},
			wantVals: []any{"empty", "Z", "_", "a", "a nul", "é"},
		},
		{
			name:     "shuffled, more than eight keys",
			keys:     []string{"k07", "k02", "k10", "k00", "k05", "k09", "k01", "k08", "k03", "k06", "k04"},
			vals:     []any{7, 2, 10, 0, 5, 9, 1, 8, 3, 6, 4},
			wantKeys: []string{"k00", "k01", "k02", "k03", "k04", "k05", "k06", "k07", "k08", "k09", "k10"},
			wantVals: []any{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
		},
		{
			name:     "a key given twice keeps the later value",
			keys:     []string{"name", "namespace", "name"},
			vals:     []any{"first", "default", "second"},
			wantKeys: []string{"name", "namespace"},
			wantVals: []any{"second", "default"},
		},
		{
			name:     "a key given three times, apart, keeps the last value",
			keys:     []string{"b", "a", "c", "a", "b", "a"},
			vals:     []any{"b1", "a1", "c1", "a2", "b2", "a3"},
			wantKeys: []string{"a", "b", "c"},
			wantVals: []any{"a3", "b2", "c1"},
		},
		{
			name:     "a later null still wins",
			keys:     []string{"x", "x"},
			vals:     []any{"set", nil},
			wantKeys: []string{"x"},
			wantVals: []any{nil},
		},
	}
	for _, tc := range tests {
		for _, shapes := range []*Shapes{nil, {}} {
			how := "own keys"
			if shapes != nil {
				how = "shared keys"
			}
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				r := FromPairs(shapes, tc.keys, tc.vals)
				if r.Len() != len(tc.wantKeys) {
					t.Fatalf("Len() = %d, want %d (%s)", r.Len(), len(tc.wantKeys), r)
				}
				for i := range r.Len() {
					if r.Key(i) != tc.wantKeys[i] || r.Value(i) != tc.wantVals[i] {
						t.Errorf("pair %d = %q: %v, want %q: %v", i, r.Key(i), r.Value(i), tc.wantKeys[i], tc.wantVals[i])
					}
				}
				gotKeys, gotVals := collect(r)
				if !slices.Equal(gotKeys, tc.wantKeys) || !slices.Equal(gotVals, tc.wantVals) {
					t.Errorf("All() = %q %v, want %q %v", gotKeys, gotVals, tc.wantKeys, tc.wantVals)
				}
				for i, k := range tc.wantKeys {
					if v, ok := r.Get(k); !ok || v != tc.wantVals[i] {
						t.Errorf("Get(%q) = %v, %t; want %v, true", k, v, ok, tc.wantVals[i])
					}
				}
			})
		}
	}

	t.Run("FromMap", func(t *testing.T) {
		m := map[string]any{}
		for i := range 50 { // enough keys that map iteration order is visibly random
			m[fmt.Sprintf("key-%02d", 49-i)] = i
		}
		r := FromMap(nil, m)
		gotKeys, gotVals := collect(r)
		if !slices.IsSorted(gotKeys) || len(gotKeys) != len(m) {
			t.Fatalf("All() keys = %q, want the %d keys sorted", gotKeys, len(m))
		}
		for i, k := range gotKeys {
			if gotVals[i] != m[k] || r.Key(i) != k || r.Value(i) != m[k] {
				t.Errorf("pair %d = %q: %v, want %q: %v", i, k, gotVals[i], k, m[k])
			}
		}
	})

	t.Run("All stops when the loop breaks", func(t *testing.T) {
		r := FromPairs(nil, []string{"c", "b", "a"}, []any{3, 2, 1})
		var seen []string
		for k := range r.All() {
			seen = append(seen, k)
			if k == "b" {
				break
			}
		}
		if want := []string{"a", "b"}; !slices.Equal(seen, want) {
			t.Errorf("saw %q, want %q", seen, want)
		}
	})

	t.Run("FromPairs does not change its arguments", func(t *testing.T) {
		keys := []string{"b", "a", "b"}
		vals := []any{1, 2, 3}
		FromPairs(&Shapes{}, keys, vals)
		if !slices.Equal(keys, []string{"b", "a", "b"}) || !slices.Equal(vals, []any{1, 2, 3}) {
			t.Errorf("arguments became %q %v", keys, vals)
		}
	})
}

func TestNewKeys(t *testing.T) {
	tests := []struct {
		name      string
		names     []string
		wantPanic string // a part of the panic message; "" for no panic
	}{
		{name: "none", names: nil},
		{name: "one", names: []string{"a"}},
		{name: "the empty key", names: []string{""}},
		{name: "sorted", names: []string{"", "A", "a", "b", "ba", "é"}},
		{name: "unsorted", names: []string{"b", "a"}, wantPanic: `"b" before "a"`},
		{name: "unsorted at the end", names: []string{"a", "b", "c", "e", "d"}, wantPanic: `"e" before "d"`},
		{name: "duplicate", names: []string{"a", "b", "b", "c"}, wantPanic: `"b" before "b"`},
		{name: "duplicate empty key", names: []string{"", ""}, wantPanic: `"" before ""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var k *Keys
			p := panicValue(func() { k = NewKeys(tc.names...) })
			switch {
			case tc.wantPanic == "" && p != nil:
				t.Fatalf("NewKeys(%q) panicked: %v", tc.names, p)
			case tc.wantPanic == "":
				if k.Len() != len(tc.names) {
					t.Errorf("Len() = %d, want %d", k.Len(), len(tc.names))
				}
			case p == nil:
				t.Errorf("NewKeys(%q) returned, want a panic", tc.names)
			case !strings.Contains(fmt.Sprint(p), tc.wantPanic):
				t.Errorf("NewKeys(%q) panicked with %q, want it to name %s", tc.names, p, tc.wantPanic)
			}
		})
	}

	t.Run("copies the names", func(t *testing.T) {
		in := []string{"a", "b"}
		r := New(NewKeys(in...), []any{1, 2})
		in[0] = "z"
		if v, ok := r.Get("a"); !ok || v != 1 {
			t.Errorf(`after changing the caller's slice, Get("a") = %v, %t; want 1, true`, v, ok)
		}
	})
}

func TestNewPanicsOnLengths(t *testing.T) {
	tests := []struct {
		name    string
		keys    *Keys
		vals    []any
		wantMsg string
	}{
		{name: "fewer values", keys: NewKeys("a", "b"), vals: []any{1}, wantMsg: "2 keys and 1 values"},
		{name: "more values", keys: NewKeys("a"), vals: []any{1, 2}, wantMsg: "1 keys and 2 values"},
		{name: "values without keys", keys: NewKeys(), vals: []any{nil}, wantMsg: "0 keys and 1 values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := panicValue(func() { New(tc.keys, tc.vals) })
			if p == nil || !strings.Contains(fmt.Sprint(p), tc.wantMsg) {
				t.Errorf("New panicked with %v, want a panic saying %q", p, tc.wantMsg)
			}
		})
	}
}

func TestShapes(t *testing.T) {
	tests := []struct {
		name string
		a, b func(s *Shapes) *Record
		same bool
	}{
		{
			name: "same keys in the same order",
			a:    func(s *Shapes) *Record { return FromPairs(s, []string{"name", "uid"}, []any{"a", "1"}) },
			b:    func(s *Shapes) *Record { return FromPairs(s, []string{"name", "uid"}, []any{"b", "2"}) },
			same: true,
		},
		{
			name: "same keys in another order",
			a:    func(s *Shapes) *Record { return FromPairs(s, []string{"name", "uid"}, []any{"a", "1"}) },
			b:    func(s *Shapes) *Record { return FromPairs(s, []string{"uid", "name"}, []any{"2", "b"}) },
			same: true,
		},
		{
			name: "same keys, one given twice",
			a:    func(s *Shapes) *Record { return FromPairs(s, []string{"name", "uid"}, []any{"a", "1"}) },
			b:    func(s *Shapes) *Record { return FromPairs(s, []string{"uid", "name", "uid"}, []any{"0", "b", "2"}) },
			same: true,
		},
		{
			name: "FromPairs and FromMap",
			a:    func(s *Shapes) *Record { return FromPairs(s, []string{"uid", "name"}, []any{"1", "a"}) },
			b:    func(s *Shapes) *Record { return FromMap(s, map[string]any{"name": "b", "uid": "2"}) },
			same: true,
		},
		{
			name: "FromMap twice",
			a:    func(s *Shapes) *Record { return FromMap(s, map[string]any{"name": "a", "uid": "1"}) },
			b:    func(s *Shapes) *Record { return FromMap(s, map[string]any{"uid": "2", "name": "b"}) },
			same: true,
		},
		{
			name: "New with the Shapes' keys and FromPairs",
			a:    func(s *Shapes) *Record { return New(s.Keys([]string{"name", "uid"}), []any{"a", "1"}) },
			b:    func(s *Shapes) *Record { return FromPairs(s, []string{"uid", "name"}, []any{"2", "b"}) },
			same: true,
		},
		{
			name: "no keys",
			a:    func(s *Shapes) *Record { return FromPairs(s, nil, nil) },
			b:    func(s *Shapes) *Record { return FromMap(s, map[string]any{}) },
			same: true,
		},
		{
			name: "more than eight keys",
			a:    func(s *Shapes) *Record { k := names(12); return FromPairs(s, k, valuesFor(k)) },
			b:    func(s *Shapes) *Record { k := names(12); slices.Reverse(k); return FromPairs(s, k, valuesFor(k)) },
			same: true,
		},
		{
			name: "one key more",
			a:    func(s *Shapes) *Record { return FromPairs(s, []string{"name"}, []any{"a"}) },
			b:    func(s *Shapes) *Record { return FromPairs(s, []string{"name", "uid"}, []any{"b", "2"}) },
		},
		{
			name: "another key",
			a:    func(s *Shapes) *Record { return FromPairs(s, []string{"name", "uid"}, []any{"a", "1"}) },
			b:    func(s *Shapes) *Record { return FromPairs(s, []string{"name", "uuid"}, []any{"b", "2"}) },
		},
		{
			name: "the same bytes split into other keys",
			a:    func(s *Shapes) *Record { return FromPairs(s, []string{"ab", "c"}, []any{1, 2}) },
			b:    func(s *Shapes) *Record { return FromPairs(s, []string{"a", "bc"}, []any{1, 2}) },
		},
		{
			name: "with and without a record's own keys",
			a:    func(s *Shapes) *Record { return FromPairs(s, []string{"name", "uid"}, []any{"a", "1"}) },
			b:    func(*Shapes) *Record { return FromPairs(nil, []string{"name", "uid"}, []any{"b", "2"}) },
		},
		{
			name: "two records with their own keys",
			a:    func(*Shapes) *Record { return FromPairs(nil, []string{"name", "uid"}, []any{"a", "1"}) },
			b:    func(*Shapes) *Record { return FromMap(nil, map[string]any{"name": "b", "uid": "2"}) },
		},
		{
			name: "another Shapes",
			a:    func(s *Shapes) *Record { return FromPairs(s, []string{"name", "uid"}, []any{"a", "1"}) },
			b:    func(*Shapes) *Record { return FromPairs(&Shapes{}, []string{"name", "uid"}, []any{"b", "2"}) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Shapes // the zero value is ready
			a, b := tc.a(&s), tc.b(&s)
			if got := a.SameKeys(b); got != tc.same {
				t.Errorf("%s.SameKeys(%s) = %t, want %t", a, b, got, tc.same)
			}
			if got := b.SameKeys(a); got != tc.same {
				t.Errorf("%s.SameKeys(%s) = %t, want %t", b, a, got, tc.same)
			}
			if !a.SameKeys(a) {
				t.Errorf("%s.SameKeys(itself) = false, want true", a)
			}
			if tc.same {
				for i := range a.Len() {
					if a.Key(i) != b.Key(i) {
						t.Errorf("Key(%d) = %q and %q in records that share their keys", i, a.Key(i), b.Key(i))
					}
				}
			}
		})
	}

	t.Run("Keys does not keep the caller's slice", func(t *testing.T) {
		var s Shapes
		in := []string{"a", "b"}
		k := s.Keys(in)
		in[0] = "0"
		if got := s.Keys([]string{"a", "b"}); got != k {
			t.Error(`after changing the caller's slice, Keys("a", "b") made a new list`)
		}
		if got := s.Keys([]string{"0", "b"}); got == k {
			t.Error(`Keys("0", "b") returned the list of "a", "b"`)
		}
	})

	t.Run("unsorted keys panic as in NewKeys", func(t *testing.T) {
		var s Shapes
		if p := panicValue(func() { s.Keys([]string{"b", "a"}) }); p == nil {
			t.Error(`Keys("b", "a") returned, want a panic`)
		}
	})
}

// TestShapesHashCollision pins down key lists whose hashes are equal: each keeps its own
// Keys, however many share the hash. The hash is forced; the lists would also have collided
// under a hash that only separated keys with a NUL byte.
func TestShapesHashCollision(t *testing.T) {
	lists := [][]string{
		{"a", "b", "c"},
		{"a\x00b", "c"},
		{"a", "b\x00c"},
		{"a\x00b\x00c"},
	}
	var s Shapes
	got := make([]*Keys, len(lists))
	for i, l := range lists {
		if p := panicValue(func() { got[i] = s.keysHashed(42, l) }); p != nil {
			t.Fatalf("Keys(%q) panicked: %v", l, p)
		}
		if !slices.Equal(got[i].names, l) {
			t.Errorf("Keys(%q) = %q", l, got[i].names)
		}
	}
	for i, l := range lists {
		if again := s.keysHashed(42, slices.Clone(l)); again != got[i] {
			t.Errorf("Keys(%q) the second time made a new list", l)
		}
	}
	t.Run("lists that differ only in where keys split hash apart", func(t *testing.T) {
		var s Shapes
		for _, l := range lists {
			s.Keys(l)
		}
		n := 0
		s.m.Range(func(_, _ any) bool { n++; return true })
		if n != len(lists) {
			t.Errorf("%d hashes for %d lists", n, len(lists))
		}
	})
}

func TestShapesConcurrent(t *testing.T) {
	// Many goroutines ask one Shapes for the same few key lists at once, each its own way; every
	// key list must come back as one *Keys. Run with -race.
	sets := [][]string{
		nil,
		{"name"},
		{"name", "namespace"},
		{"apiVersion", "kind", "metadata", "spec", "status"},
		names(9),
		names(30),
		{"a", "b"},
		{"ab"},
	}
	const goroutines = 64
	var shapes Shapes
	got := make([][]*Keys, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		got[g] = make([]*Keys, len(sets))
		wg.Go(func() {
			<-start
			for j := range sets {
				i := (g + j) % len(sets) // each goroutine starts with another set
				keys := sets[i]
				switch g % 3 {
				case 0:
					got[g][i] = shapes.Keys(slices.Clone(keys))
				case 1:
					rev := slices.Clone(keys)
					slices.Reverse(rev)
					got[g][i] = FromPairs(&shapes, rev, valuesFor(rev)).keys
				case 2:
					m := map[string]any{}
					for _, k := range keys {
						m[k] = g
					}
					got[g][i] = FromMap(&shapes, m).keys
				}
			}
		})
	}
	close(start)
	wg.Wait()

	seen := map[*Keys]int{}
	for i, keys := range sets {
		first := got[0][i]
		if !slices.Equal(first.names, keys) {
			t.Errorf("set %d: got keys %q, want %q", i, first.names, keys)
		}
		for g := range goroutines {
			if got[g][i] != first {
				t.Errorf("set %d %q: goroutine %d got another *Keys than goroutine 0", i, keys, g)
			}
		}
		if j, dup := seen[first]; dup {
			t.Errorf("sets %d and %d got one *Keys", j, i)
		}
		seen[first] = i
	}
}

func TestMarshalJSON(t *testing.T) {
	tests := []struct {
		name  string
		plain map[string]any // the record as encoding/json's own values
	}{
		{name: "empty", plain: map[string]any{}},
		{
			name: "strings needing escapes",
			plain: map[string]any{
				"quote":      `say "hi"`,
				"backslash":  `C:\path\`,
				"controls":   "line\nbreak\ttab\rreturn\x00nul\x1funit",
				"html":       "<script>a && b</script>",
				"separators": "\u2028 and \u2029",
				"invalid":    "bad \xff\xfe utf-8",
				"unicode":    "héllo 世界 🚀",
				"empty":      "",
			},
		},
		{
			name: "keys needing escapes",
			plain: map[string]any{
				`"quoted"`:   1.0,
				`back\slash`: 2.0,
				"<tag>&":     3.0,
				"new\nline":  4.0,
				"":           5.0,
				"é":          6.0,
				"Z":          7.0,
				"a\x00":      8.0,
				"bad\xff":    9.0,
			},
		},
		{
			name: "numbers",
			plain: map[string]any{
				"zero":       0,
				"negative":   -1,
				"int64":      int64(math.MaxInt64),
				"uint64":     uint64(math.MaxUint64),
				"uint8":      uint8(255),
				"float":      3.14,
				"big float":  1e21,
				"tiny float": 1e-7,
				"float32":    float32(0.1),
				"minus zero": math.Copysign(0, -1),
				"number":     json.Number("12.50"),
			},
		},
		{name: "bools and null", plain: map[string]any{"yes": true, "no": false, "nothing": nil}},
		{
			name: "a pod",
			plain: map[string]any{
				"apiVersion": "v1",
				"kind":       "Pod",
				"metadata": map[string]any{
					"name":      "web-0",
					"namespace": "default",
					"labels":    map[string]any{"app": "web", "app.kubernetes.io/part-of": "shop"},
					"ownerReferences": []any{
						map[string]any{"kind": "StatefulSet", "name": "web", "controller": true},
					},
					"deletionTimestamp": nil,
				},
				"spec": map[string]any{
					"containers": []any{
						map[string]any{
							"name":  "web",
							"ports": []any{map[string]any{"containerPort": 8080.0, "protocol": "TCP"}},
						},
						map[string]any{"name": "sidecar", "args": []any{"--v=2", "--addr=<none>"}},
					},
				},
				"status": map[string]any{"podIP": "10.0.0.7", "conditions": []any{}},
			},
		},
		{
			name: "deeply nested",
			plain: map[string]any{
				"a": []any{[]any{map[string]any{"b": []any{map[string]any{"c": map[string]any{"d": "deep"}}}}}},
			},
		},
		{
			name:  "null values that were maps and lists",
			plain: map[string]any{"map": map[string]any(nil), "list": []any(nil)},
		},
		{
			name: "more than eight keys",
			plain: func() map[string]any {
				m := map[string]any{}
				for i, k := range names(20) {
					m[k] = map[string]any{"i": float64(i)}
				}
				return m
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.plain)
			if err != nil {
				t.Fatal(err)
			}
			r := recordsOf(&Shapes{}, tc.plain).(*Record)
			got, err := r.MarshalJSON()
			if err != nil || string(got) != string(want) {
				t.Errorf("MarshalJSON() = %s, %v\n                   want %s", got, err, want)
			}
			if got, err := json.Marshal(r); err != nil || string(got) != string(want) {
				t.Errorf("json.Marshal(record) = %s, %v\n                   want %s", got, err, want)
			}
			if got := r.String(); got != string(want) {
				t.Errorf("String() = %s\n    want %s", got, want)
			}
			// In a list and in a map as well.
			wantList, _ := json.Marshal([]any{tc.plain, map[string]any{"x": tc.plain}})
			if got, err := json.Marshal([]any{r, map[string]any{"x": r}}); err != nil || string(got) != string(wantList) {
				t.Errorf("json.Marshal(list of the record) = %s, %v\n                   want %s", got, err, wantList)
			}
			// And back: Map gives the plain map again.
			if m := r.Map(); !reflect.DeepEqual(m, tc.plain) {
				t.Errorf("Map() = %#v\n  want %#v", m, tc.plain)
			}
		})
	}

	t.Run("a value JSON cannot hold", func(t *testing.T) {
		tests := []struct {
			name string
			r    *Record
		}{
			{name: "NaN", r: FromPairs(nil, []string{"ok", "weight"}, []any{1, math.NaN()})},
			{name: "channel", r: FromPairs(nil, []string{"weight"}, []any{make(chan int)})},
			{name: "in a nested record", r: FromPairs(nil, []string{"weight"}, []any{FromPairs(nil, []string{"x"}, []any{math.Inf(1)})})},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				b, err := tc.r.MarshalJSON()
				if err == nil || !strings.Contains(err.Error(), `key "weight"`) {
					t.Errorf("MarshalJSON() = %s, %v; want an error naming key \"weight\"", b, err)
				}
				if _, err := json.Marshal(tc.r.Map()); err == nil {
					t.Error("json.Marshal(Map()) succeeded; the test value should fail there too")
				}
				if s := tc.r.String(); !strings.HasPrefix(s, "<record: ") {
					t.Errorf("String() = %s, want <record: error>", s)
				}
			})
		}
	})
}

func TestPlain(t *testing.T) {
	rec := func(kv ...any) *Record {
		var keys []string
		var vals []any
		for i := 0; i < len(kv); i += 2 {
			keys = append(keys, kv[i].(string))
			vals = append(vals, kv[i+1])
		}
		return FromPairs(nil, keys, vals)
	}

	// Values with records in them become new values of maps.
	changed := []struct {
		name string
		in   func() any // called twice: once for Plain, once to check Plain did not change it
		want any
	}{
		{
			name: "a record",
			in:   func() any { return rec("b", 2.0, "a", "x") },
			want: map[string]any{"a": "x", "b": 2.0},
		},
		{
			name: "a nil record",
			in:   func() any { return (*Record)(nil) },
			want: map[string]any(nil),
		},
		{
			name: "records in a record",
			in:   func() any { return rec("meta", rec("name", "web-0", "labels", rec("app", "web"))) },
			want: map[string]any{"meta": map[string]any{"name": "web-0", "labels": map[string]any{"app": "web"}}},
		},
		{
			name: "a list of records",
			in:   func() any { return []any{rec("port", 80.0), "not a record", rec("port", 443.0)} },
			want: []any{map[string]any{"port": 80.0}, "not a record", map[string]any{"port": 443.0}},
		},
		{
			name: "a record in a map",
			in:   func() any { return map[string]any{"pod": rec("name", "web-0"), "n": 1.0} },
			want: map[string]any{"pod": map[string]any{"name": "web-0"}, "n": 1.0},
		},
		{
			name: "a record deep in lists and maps",
			in: func() any {
				return map[string]any{"a": []any{[]any{map[string]any{"b": []any{nil, rec("c", rec("d", []any{rec()}))}}}}}
			},
			want: map[string]any{"a": []any{[]any{map[string]any{"b": []any{nil, map[string]any{"c": map[string]any{"d": []any{map[string]any{}}}}}}}}},
		},
		{
			name: "lists and maps in a record",
			in: func() any {
				return rec("ports", []any{rec("port", 80.0)}, "labels", map[string]any{"app": rec("v", 1.0)})
			},
			want: map[string]any{
				"ports":  []any{map[string]any{"port": 80.0}},
				"labels": map[string]any{"app": map[string]any{"v": 1.0}},
			},
		},
		{
			name: "a nil record in a list",
			in:   func() any { return []any{(*Record)(nil)} },
			want: []any{map[string]any(nil)},
		},
	}
	for _, tc := range changed {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			got := Plain(in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plain(%v) = %#v\n             want %#v", in, got, tc.want)
			}
			// Compared as JSON: a record's fields are pointers (reflect.DeepEqual compares
			// their addresses, not the values behind them).
			if before, after := mustJSON(t, tc.in()), mustJSON(t, in); before != after {
				t.Errorf("Plain changed its argument to %s, was %s", after, before)
			}
			if sameValue(got, in) {
				t.Errorf("Plain(%v) returned its argument; want a new value without records", in)
			}
		})
	}

	// Values without records come back as they are: the same list, the same map.
	unchanged := []struct {
		name string
		in   any
	}{
		{name: "a string", in: "web-0"},
		{name: "a number", in: 8080.0},
		{name: "a bool", in: true},
		{name: "nil", in: nil},
		{name: "a list of scalars", in: []any{"a", 1.0, false, nil}},
		{name: "a list of lists and maps", in: []any{[]any{"a"}, map[string]any{"b": []any{map[string]any{}}}}},
		{name: "a map of scalars", in: map[string]any{"a": "x", "b": 1.0, "c": nil}},
		{name: "a map of lists and maps", in: map[string]any{"a": []any{map[string]any{"b": []any{1.0}}}, "c": map[string]any{}}},
		{name: "an empty map", in: map[string]any{}},
	}
	for _, tc := range unchanged {
		t.Run(tc.name, func(t *testing.T) {
			got := Plain(tc.in)
			if !sameValue(got, tc.in) {
				t.Errorf("Plain(%#v) = %#v, want the very same value", tc.in, got)
			}
		})
	}

	t.Run("a list without records inside a list with one", func(t *testing.T) {
		inner := []any{"x", "y"}
		got := Plain([]any{rec("a", 1.0), inner}).([]any)
		if !sameValue(got[1], inner) {
			t.Error("the list without records was copied")
		}
	})

	t.Run("Map gives a map of the caller's own", func(t *testing.T) {
		r := rec("a", 1.0)
		m := r.Map()
		m["a"] = 2.0
		m["b"] = 3.0
		if v, _ := r.Get("a"); v != 1.0 || r.Len() != 1 {
			t.Errorf("changing Map()'s result changed the record to %s", r)
		}
	})
}

// sameValue reports whether a and b are the very same value: for a list, the same backing array
// (by the address of the first element); for a map, the same map.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		return len(x) == 0 || &x[0] == &y[0]
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || (x == nil) != (y == nil) {
			return false
		}
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	case *Record:
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

// podKeys are the keys of the 5-key record the benchmarks use: the top of a Kubernetes object.
var podKeys = []string{"apiVersion", "kind", "metadata", "spec", "status"}

func BenchmarkGet(b *testing.B) {
	vals := valuesFor(podKeys)
	r := FromPairs(&Shapes{}, podKeys, vals)
	m := map[string]any{}
	for i, k := range podKeys {
		m[k] = vals[i]
	}
	// Ask for every key in turn, so that neither the scan nor the map gets the first key only.
	hits := slices.Clone(podKeys)
	misses := []string{"", "annotations", "labels", "uid", "zzz"}

	var sink any
	var found bool
	for _, lookup := range []struct {
		name string
		keys []string
	}{{"hit", hits}, {"miss", misses}} {
		b.Run("record/"+lookup.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				sink, found = r.Get(lookup.keys[i%len(lookup.keys)])
				i++
			}
		})
		b.Run("map/"+lookup.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				sink, found = m[lookup.keys[i%len(lookup.keys)]]
				i++
			}
		})
	}
	runtime.KeepAlive(sink)
	runtime.KeepAlive(found)
}

// BenchmarkMemory reports the heap a 5-key record takes against a map[string]any holding the
// same values (B/record; the time it reports is that of making them and is of no interest).
// The keys and values are made once and shared, so only the containers are counted.
func BenchmarkMemory(b *testing.B) {
	const n = 10000
	vals := valuesFor(podKeys) // boxed once: storing them allocates nothing
	keys := NewKeys(podKeys...)

	measure := func(b *testing.B, build func() any) {
		kept := make([]any, n)
		var total uint64
		var rounds int
		var before, after runtime.MemStats
		for b.Loop() {
			clear(kept)
			runtime.GC()
			runtime.ReadMemStats(&before)
			for i := range kept {
				kept[i] = build()
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(kept)
			total += after.HeapAlloc - before.HeapAlloc
			rounds++
		}
		b.ReportMetric(float64(total)/float64(rounds*n), "B/record")
		b.ReportMetric(0, "ns/op")
	}

	b.Run("record", func(b *testing.B) {
		measure(b, func() any {
			v := make([]any, len(vals))
			copy(v, vals)
			return New(keys, v)
		})
	})
	b.Run("map", func(b *testing.B) {
		measure(b, func() any {
			m := make(map[string]any, len(podKeys))
			for i, k := range podKeys {
				m[k] = vals[i]
			}
			return m
		})
	})
}

func TestMake(t *testing.T) {
	// Every size Make has a one-allocation form for, and the sizes on either side.
	for n := 0; n <= 18; n++ {
		t.Run(fmt.Sprintf("%d keys", n), func(t *testing.T) {
			keys := NewKeys(names(n)...)
			r, vals := Make(keys)
			if len(vals) != n || r.Len() != n {
				t.Fatalf("Make gave %d values and a record of %d, want %d", len(vals), r.Len(), n)
			}
			for i := range vals {
				vals[i] = i
			}
			for i, name := range names(n) {
				if v, ok := r.Get(name); !ok || v != i {
					t.Errorf("Get(%q) = %v, %v; want %d", name, v, ok, i)
				}
			}
			if n > 0 && n <= 16 {
				if allocs := testing.AllocsPerRun(10, func() { Make(keys) }); allocs != 1 {
					t.Errorf("Make allocated %v times, want 1", allocs)
				}
			}
		})
	}
}

// TestTakeKeys: TakeKeys keeps the list it is given (no copy) and refuses one not sorted and
// distinct, as NewKeys does.
func TestTakeKeys(t *testing.T) {
	names := []string{"a", "b", "c"}
	k := TakeKeys(names)
	if k.Len() != 3 || &k.names[0] != &names[0] {
		t.Errorf("TakeKeys copied its list: %q", k.names)
	}
	r := New(k, []any{1, 2, 3})
	if r.Keys() != k || New(r.Keys(), []any{4, 5, 6}).Key(2) != "c" {
		t.Errorf("Keys is not the record's key list")
	}
	defer func() {
		if recover() == nil {
			t.Error("TakeKeys took keys not sorted")
		}
	}()
	TakeKeys([]string{"b", "a"})
}

// TestRecordIsTwoWords: a record is its key list and a pointer to its values (their count is
// the key list's): 16 bytes, so that a record of five values and the record are 96 bytes, a
// size class (112 with a slice of values).
func TestRecordIsTwoWords(t *testing.T) {
	if n := unsafe.Sizeof(Record{}); n != 16 {
		t.Errorf("a Record is %d bytes, want 16", n)
	}
	r, vals := Make(NewKeys("a", "b", "c", "d", "e"))
	copy(vals, []any{1, 2, 3, 4, 5})
	if r.Len() != 5 || r.Value(4) != 5 {
		t.Errorf("got %v", r)
	}
}

// TestFixedKeys: a record of a key list with fixed values (Keys.Fixed) reads as one holding
// them: the values, the lookups, the iteration, JSON; it holds only the other values, and
// New with other values for the fixed keys gives a record that has them.
func TestFixedKeys(t *testing.T) {
	plain := NewKeys("apiVersion", "kind", "metadata", "spec")
	keys := plain.Fixed("v1", "Pod")
	r, vals := Make(keys)
	if len(vals) != 2 {
		t.Fatalf("Make gave %d values, want the 2 not fixed", len(vals))
	}
	vals[0], vals[1] = "m", []any{"s"}
	want := `{"apiVersion":"v1","kind":"Pod","metadata":"m","spec":["s"]}`
	if got := r.String(); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if v, ok := r.Get("kind"); !ok || v != "Pod" || r.Value(0) != "v1" || r.Value(2) != "m" || r.Len() != 4 {
		t.Errorf("kind %v %v, values %v %v, Len %d", v, ok, r.Value(0), r.Value(2), r.Len())
	}
	if m := r.Map(); m["apiVersion"] != "v1" || m["metadata"] != "m" {
		t.Errorf("Map: %v", m)
	}
	same := New(keys, []any{"v1", "Pod", "m", []any{"s"}})
	other := New(keys, []any{"v2", "Pod", "m", []any{"s"}})
	if same.String() != want || !same.SameKeys(r) {
		t.Errorf("New with the fixed values: %s (same keys %v)", same, same.SameKeys(r))
	}
	if other.String() != `{"apiVersion":"v2","kind":"Pod","metadata":"m","spec":["s"]}` || other.Keys() == r.Keys() {
		t.Errorf("New with other values: %s (fixed keys kept %v)", other, other.Keys() == r.Keys())
	}
}

// TestPatched: along random records and changes (values replaced, keys added, keys taken out,
// keys not there taken out), Patched is the record made anew from the entries changed, r is
// left as it was, and the key list is r's exactly when no key comes or goes; PatchedKeys is
// Patched's key list.
func TestPatched(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 10))
	key := func() string { return fmt.Sprintf("k%02d", rng.IntN(40)) }
	for step := range 2000 {
		m := map[string]any{}
		for range rng.IntN(30) {
			m[key()] = rng.IntN(100)
		}
		var r *Record
		if len(m) > 0 || rng.IntN(2) == 0 {
			r = FromMap(nil, m)
		}
		before := r.Map()
		want := maps.Clone(m)
		byKey := map[string]Change{}
		for range rng.IntN(6) {
			c := Change{Key: key(), Value: 1000 + rng.IntN(100)}
			c.Remove = rng.IntN(3) == 0
			byKey[c.Key] = c
		}
		var changes []Change
		keysMove := false
		for _, k := range slices.Sorted(maps.Keys(byKey)) {
			c := byKey[k]
			changes = append(changes, c)
			_, had := m[k]
			if c.Remove {
				delete(want, k)
				keysMove = keysMove || had
			} else {
				want[k] = c.Value
				keysMove = keysMove || !had
			}
		}
		got := r.Patched(changes)
		if !reflect.DeepEqual(got.Map(), want) {
			t.Fatalf("step %d: %v patched with %v: %v, want %v", step, before, changes, got.Map(), want)
		}
		if !slices.IsSorted(got.Keys().names) || got.Len() != len(want) {
			t.Fatalf("step %d: keys %q", step, got.Keys().names)
		}
		if !reflect.DeepEqual(r.Map(), before) {
			t.Fatalf("step %d: r changed: %v, was %v", step, r.Map(), before)
		}
		if k := r.PatchedKeys(changes); !reflect.DeepEqual(k, got.Keys()) || (k == r.Keys()) != (got.Keys() == r.Keys()) {
			t.Fatalf("step %d: PatchedKeys %q, Patched's keys %q", step, k.names, got.Keys().names)
		}
		if shared := got.Keys() == r.Keys(); r.Len() > 0 && shared == keysMove {
			t.Fatalf("step %d: key list shared %v though keys move %v", step, shared, keysMove)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Patched took changes not sorted")
		}
	}()
	FromMap(nil, map[string]any{"a": 1}).Patched([]Change{{Key: "b"}, {Key: "a"}})
}

// TestPatchedNotesWhatChanged: a large record patched tells a reader which keys changed since
// the record it was made from, or since one a few patches back (the union); not since any other
// record, and not for a small record. Its key list stays its own: a record made from Keys() or
// PatchedKeys() claims nothing.
func TestPatchedNotesWhatChanged(t *testing.T) {
	keys := names(50) // k00 ... k98: more than MinDerived with the odd keys added below
	keys = append(keys, slices.Collect(func(yield func(string) bool) {
		for i := range 30 {
			yield(fmt.Sprintf("m%02d", i))
		}
	})...)
	r0 := New(NewKeys(keys...), valuesFor(keys))
	r1 := r0.Patched([]Change{{Key: "k04", Value: 1}, {Key: "k05", Value: 2}})
	r2 := r1.Patched([]Change{{Key: "k02", Remove: true}, {Key: "k04", Value: 3}})
	r3 := r2.Patched([]Change{{Key: "k10", Value: 4}}) // the same keys as r2: a value replaced

	for _, tc := range []struct {
		name     string
		cur, old *Record
		want     []string
		known    bool
	}{
		{"one patch", r1, r0, []string{"k04", "k05"}, true},
		{"keys taken out", r2, r1, []string{"k02", "k04"}, true},
		{"a value replaced", r3, r2, []string{"k10"}, true},
		{"three patches back", r3, r0, []string{"k02", "k04", "k05", "k10"}, true},
		{"the same record", r1, r1, nil, false},
		{"forward", r0, r1, nil, false},
		{"another record", r1, New(NewKeys(keys...), valuesFor(keys)), nil, false},
		{"no record", r1, nil, nil, false},
	} {
		got, ok := tc.cur.ChangedSince(tc.old)
		if ok != tc.known || !slices.Equal(got, tc.want) {
			t.Errorf("%s: ChangedSince = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.known)
		}
	}
	if v, _ := r3.Get("k10"); v != 4 || r3.Len() != 80 {
		t.Errorf("r3: k10 = %v, %d keys", v, r3.Len())
	}
	if !r3.SameKeys(r2) {
		t.Error("a value replaced: r3 does not share r2's key names")
	}
	for name, k := range map[string]*Keys{"Keys": r3.Keys(), "PatchedKeys": r2.PatchedKeys([]Change{{Key: "k10", Value: 5}})} {
		other := New(k, valuesFor(k.names))
		if _, ok := other.ChangedSince(r2); ok {
			t.Errorf("a record made with %s() of a patched record claims it was made from r2", name)
		}
	}

	small := New(NewKeys(names(10)...), valuesFor(names(10)))
	if _, ok := small.Patched([]Change{{Key: "k00", Value: 1}}).ChangedSince(small); ok {
		t.Error("a record of 10 keys notes what it was made from")
	}
}

// TestPatchedFixedKeys: a record whose first keys are fixed (Keys.Fixed) is patched as any
// other: a fixed key's value replaced by another makes a record of a plain key list.
func TestPatchedFixedKeys(t *testing.T) {
	keys := NewKeys("apiVersion", "kind", "metadata", "spec").Fixed("v1", "Pod")
	r, vals := Make(keys)
	copy(vals, []any{"m", "s"})
	got := r.Patched([]Change{{Key: "spec", Value: "t"}})
	if want := `{"apiVersion":"v1","kind":"Pod","metadata":"m","spec":"t"}`; got.String() != want || !got.SameKeys(r) {
		t.Errorf("a value patched: %s (same keys %v), want %s", got, got.SameKeys(r), want)
	}
	got = r.Patched([]Change{{Key: "kind", Value: "Node"}, {Key: "status", Value: "x"}})
	if want := `{"apiVersion":"v1","kind":"Node","metadata":"m","spec":"s","status":"x"}`; got.String() != want {
		t.Errorf("a fixed value patched, a key added: %s, want %s", got, want)
	}
	got = r.Patched([]Change{{Key: "kind", Value: "Node"}})
	if want := `{"apiVersion":"v1","kind":"Node","metadata":"m","spec":"s"}`; got.String() != want || got.Keys() == r.Keys() {
		t.Errorf("a fixed value patched: %s (fixed keys kept %v), want %s", got, got.Keys() == r.Keys(), want)
	}
	if r.String() != `{"apiVersion":"v1","kind":"Pod","metadata":"m","spec":"s"}` {
		t.Errorf("r changed: %s", r)
	}
}

// mustJSON is v as JSON (records as objects).
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
