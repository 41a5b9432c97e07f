package record

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/allocs"
)

// laidOut is a random record of a key list with a layout (Keys.Layout) and the plain record
// of the same entries: values fixed at any place (strings, numbers, records, lists, null),
// strings and record pointers held as such.
type laidOut struct {
	keys  *Keys
	r     *Record
	plain *Record
	vals  []any
}

func randomLaidOut(rng *rand.Rand) laidOut {
	n := 1 + rng.IntN(12)
	if rng.IntN(20) == 0 {
		n = 64 + rng.IntN(8) // keys past the masks' 64 bits
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("k%03d", i)
	}
	vals := make([]any, n)
	for i := range vals {
		switch rng.IntN(6) {
		case 0:
			vals[i] = fmt.Sprintf("s%d", rng.IntN(1000))
		case 1:
			vals[i] = int64(rng.IntN(1000))
		case 2:
			vals[i] = FromMap(nil, map[string]any{"x": int64(rng.IntN(9))})
		case 3:
			vals[i] = []any{"l", int64(rng.IntN(9))}
		case 4:
			vals[i] = nil
		default:
			vals[i] = fmt.Sprintf("t%d", rng.IntN(1000))
		}
	}
	var mask, strs, recs uint64
	for i := range min(n, 64) {
		bit := uint64(1) << i
		_, isString := vals[i].(string)
		_, isRecord := vals[i].(*Record)
		switch {
		case rng.IntN(3) == 0:
			mask |= bit
		case isString && rng.IntN(2) == 0 && bits.OnesCount64(strs) < MaxStrings:
			strs |= bit
		case isRecord && rng.IntN(2) == 0 && bits.OnesCount64(recs) < MaxRecords:
			recs |= bit
		}
	}
	others := n - bits.OnesCount64(mask|strs|recs)
	if others > 0 {
		recs = 0 // record pointers beside strings only
		others = n - bits.OnesCount64(mask|strs)
	}
	if others > MaxValuesBesideStrings {
		strs = 0
	}
	keys := NewKeys(names...).Layout(mask, vals, strs, recs)
	r, slots := MakeLayout(keys)
	for i, v := range vals {
		switch bit := uint64(1) << i; {
		case i < 64 && mask&bit != 0:
		case i < 64 && strs&bit != 0:
			slots.Strings[0], slots.Strings = v.(string), slots.Strings[1:]
		case i < 64 && recs&bit != 0:
			slots.Records[0], slots.Records = v.(*Record), slots.Records[1:]
		default:
			slots.Values[0], slots.Values = v, slots.Values[1:]
		}
	}
	if len(slots.Values)+len(slots.Strings)+len(slots.Records) != 0 {
		panic("MakeLayout gave more slots than values")
	}
	return laidOut{keys: keys, r: r, plain: New(NewKeys(names...), vals), vals: vals}
}

// TestLayout: along random key lists with values fixed anywhere, strings and record pointers
// (Keys.Layout), a record reads exactly as the plain record of the same entries: its values
// by place and by key (the very same values: Same), its iteration, JSON, Map; a value read
// twice is one any (the same data word: no box per read); New with its values keeps the
// layout, New with another value for a fixed key, a number for a string or a string for a
// record gives the plain keys; Patched gives what the plain record's Patched gives.
func TestLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 25))
	for step := range 3000 {
		c := randomLaidOut(rng)
		r, plain := c.r, c.plain
		if r.Len() != plain.Len() {
			t.Fatalf("step %d: Len %d, want %d", step, r.Len(), plain.Len())
		}
		for i := range plain.Len() {
			k := plain.Key(i)
			v, ok := r.Get(k)
			if r.Key(i) != k || !ok || !Same(v, c.vals[i]) || !Same(r.Value(i), c.vals[i]) {
				t.Fatalf("step %d: key %d %q: %v (%v), Value %v, want %v", step, i, k, v, ok, r.Value(i), c.vals[i])
			}
			if a, b := r.Value(i), r.Value(i); dataWord(a) != dataWord(b) {
				t.Fatalf("step %d: two reads of %q are two values", step, k)
			}
		}
		if got, want := r.String(), plain.String(); got != want {
			t.Fatalf("step %d: JSON %s, want %s", step, got, want)
		}
		if !reflect.DeepEqual(r.Map(), plain.Map()) {
			t.Fatalf("step %d: Map %v, want %v", step, r.Map(), plain.Map())
		}
		var order []string
		for k, v := range r.All() {
			order = append(order, k)
			if w, _ := plain.Get(k); !Same(v, w) {
				t.Fatalf("step %d: All gave %q: %v, want %v", step, k, v, w)
			}
		}
		if len(order) != plain.Len() || !r.SameKeys(New(r.Keys(), c.vals)) {
			t.Fatalf("step %d: All gave %q", step, order)
		}
		if again := New(c.keys, append([]any(nil), c.vals...)); again.Keys() != c.keys || again.String() != plain.String() {
			t.Fatalf("step %d: New with the record's values: %s (layout kept %v)", step, again, again.Keys() == c.keys)
		}
		// One value replaced by one the layout cannot hold, or not the fixed one.
		i := rng.IntN(len(c.vals))
		other := append([]any(nil), c.vals...)
		other[i] = []any{"other"}
		if _, isString := c.vals[i].(string); isString && rng.IntN(2) == 0 {
			other[i] = int64(7)
		}
		o := New(c.keys, other)
		want := New(NewKeys(plain.Keys().names...), other)
		if o.String() != want.String() {
			t.Fatalf("step %d: New with %v at %d: %s, want %s", step, other[i], i, o, want)
		}
		if _, fixed := c.keys.FixedValue(i); (fixed || c.keys.HoldsString(i) || c.keys.HoldsRecord(i)) && o.Keys() == c.keys {
			t.Fatalf("step %d: New with %v at %d kept the layout", step, other[i], i)
		}
		changes := []Change{{Key: plain.Key(i), Value: "patched"}}
		if got, want := r.Patched(changes).String(), plain.Patched(changes).String(); got != want {
			t.Fatalf("step %d: Patched %s, want %s", step, got, want)
		}
	}
}

// dataWord is the data word of an any: where its value is.
func dataWord(v any) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] }

// TestLayoutHoldsOwnValuesOnly: a record of a list with fixed values, strings and record
// pointers is its two words and the values it holds, each in its own size: a pod's status
// with its conditions fixed and its IP a string, 48 bytes; its top-level record with its
// metadata and status as pointers, 32 bytes; the strings read are the record's own headers,
// kept alive by the record alone.
func TestLayoutHoldsOwnValuesOnly(t *testing.T) {
	conditions := []any{"Ready"}
	status := NewKeys("conditions", "podIP", "podIPs").Layout(0b001, []any{conditions, nil, nil}, 0b010, 0)
	r, slots := MakeLayout(status)
	if len(slots.Values) != 1 || len(slots.Strings) != 1 || len(slots.Records) != 0 {
		t.Fatalf("slots %d values, %d strings, %d records; want 1, 1, 0", len(slots.Values), len(slots.Strings), len(slots.Records))
	}
	slots.Strings[0] = string([]byte("10.0.0.1"))
	slots.Values[0] = []any{"10.0.0.1"}
	if size := allocs.PerRun(10000, func() { MakeLayout(status) }); size != 48 {
		t.Errorf("a status record is %d bytes, want 48", size)
	}
	top := NewKeys("metadata", "spec", "status").Layout(0b010, []any{nil, "spec", nil}, 0, 0b101)
	if size := allocs.PerRun(10000, func() { MakeLayout(top) }); size != 32 {
		t.Errorf("a top-level record is %d bytes, want 32", size)
	}
	pod, ps := MakeLayout(top)
	ps.Records[0], ps.Records[1] = FromMap(nil, map[string]any{"name": "p"}), r
	ip, _ := r.Get("podIP")
	runtime.GC()
	if got := pod.String(); got != `{"metadata":{"name":"p"},"spec":"spec","status":{"conditions":["Ready"],"podIP":"10.0.0.1","podIPs":["10.0.0.1"]}}` {
		t.Errorf("got %s", got)
	}
	if dataWord(ip) != unsafe.Pointer(&slots.Strings[0]) {
		t.Error("podIP is not read from the record's own string")
	}
	if v, _ := pod.Get("status"); v != any(r) {
		t.Errorf("status is %v, want the status record", v)
	}
}

// TestSame: one value is the same scalar, or the very same record, list or map; equal
// contents elsewhere are not the same, and values that are not comparable never panic.
func TestSame(t *testing.T) {
	r := FromMap(nil, map[string]any{"a": 1})
	l := []any{1}
	m := map[string]any{"a": 1}
	for _, c := range []struct {
		a, b any
		want bool
	}{
		{"x", "x", true}, {"x", "y", false}, {int64(1), int64(1), true}, {int64(1), 1, false},
		{nil, nil, true}, {nil, "x", false}, {"x", nil, false},
		{r, r, true}, {r, FromMap(nil, map[string]any{"a": 1}), false},
		{l, l, true}, {l, []any{1}, false}, {l[:0], []any{}, true} /* two empty lists: one value */, {[]any(nil), []any(nil), true}, {[]any(nil), []any{}, false},
		{m, m, true}, {m, map[string]any{"a": 1}, false},
		{[]string{"x"}, []string{"x"}, false}, {map[string]string{}, "x", false},
	} {
		if got := Same(c.a, c.b); got != c.want {
			t.Errorf("Same(%#v, %#v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
}
