// Package record is a compact, read-only JSON object for the values templates read: a pod as
// `kubectl get pod -o json` shows it, a service's pods by name.
//
// A Go map[string]any costs 336 bytes for up to 8 entries whatever it holds; a hundred thousand
// pods of four maps each are ~145 MB before any string. A Record is its values and a pointer
// to a sorted key list shared by every record with the same keys (all the pods' metadata,
// say): 16 bytes plus 16 per value. Records are never changed once made, so they can be shared
// between snapshots and read from any number of goroutines.
package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"iter"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"
	"weak"
)

// Keys is a sorted list of distinct keys. Make it with NewKeys or a Shapes; never change it.
type Keys struct {
	names []string
	lay   *layout // nil: the records hold every value, as an any
	// from: the record of these keys was made from another with a few keys changed (see
	// NewFrom); nil for most.
	from *derivation
}

// derivation is what a record was made from: the record before (weakly: a chain of versions
// is not kept alive by the newest) and the keys whose values may differ from its, sorted.
type derivation struct {
	base    *Keys // the list without the note, for other records (Keys, New)
	prev    weak.Pointer[Record]
	changed []string
}

// bare is k without a note of derivation: the list any other record of these keys takes.
func (k *Keys) bare() *Keys {
	if k != nil && k.from != nil {
		return k.from.base
	}
	return k
}

// MinDerived is how many keys a record must have to note what it was made from (NewFrom): in a
// smaller one a reader compares every key at little cost.
const MinDerived = 64

// layout is how the records of a key list hold their values (see Keys.Layout).
type layout struct {
	// fixed[i] is the value of key i in every record of this list when bit i of mask is set
	// (see Fixed and FixedAt): the records hold the other keys' values only, in key order.
	fixed []any
	mask  uint64
	// strs are the keys whose values the records hold as strings (see Layout), after their
	// other values; recs those held as record pointers, after the strings.
	strs, recs uint64
	// at is where each key's value is: its kind (slotFixed, ...) in the low bits, the byte
	// offset of its slot in the record's block above (one load for a read, not a count of
	// the masks' bits).
	at []uint32
}

// The kinds of a key's slot in a layout.
const (
	slotAny uint32 = iota
	slotString
	slotRecord
	slotFixed
	slotKindBits = 2
)

// Limits of Layout: a record of a list with strings holds at most MaxStrings of them and
// MaxValuesBesideStrings other values; one with record pointers at most MaxRecords of them,
// beside strings only.
const (
	MaxStrings             = 4
	MaxValuesBesideStrings = 8
	MaxRecords             = 4
)

// Fixed returns a key list of k's keys whose first len(vals) keys have the values vals in every
// record made with it (Make): an object's apiVersion and kind, the same in all objects of a
// type, held once instead of 32 bytes in each. At most k.Len() values (a programming error
// otherwise: it panics).
func (k *Keys) Fixed(vals ...any) *Keys {
	if len(vals) > len(k.names) || len(vals) > 64 {
		panic(fmt.Sprintf("record.Keys.Fixed: %d values for %d keys", len(vals), len(k.names)))
	}
	all := make([]any, len(k.names))
	copy(all, vals)
	return k.FixedAt(uint64(1)<<len(vals)-1, all)
}

// FixedAt returns a key list of k's keys where key i, for each bit i set in mask, has the
// value vals[i] in every record made with it (Make): the parts a pod shares with the other
// pods of its ReplicaSet (its labels, its conditions, its spec) held once by the list, not in
// each pod's records. vals has a value for each key (those of the keys not fixed are not
// kept); mask has no bit at or above k.Len() (a programming error otherwise: it panics). k's
// own fixed values are replaced.
func (k *Keys) FixedAt(mask uint64, vals []any) *Keys {
	return k.Layout(mask, vals, 0, 0)
}

// Layout is FixedAt, with the values of the keys in strs (not fixed) held as strings and
// those in recs as record pointers: a record of the list holds a string's header (16 bytes)
// where it would hold an any pointing at a header elsewhere (a pod's name, uid and IP: 16
// bytes each less), and a *Record (8 bytes) where it would hold an any (a pod's metadata and
// status). Its records are made with MakeLayout; New gives a record of the plain keys when a
// value of one of strs is not a string, or one of recs not a *Record. At most MaxStrings keys
// in strs and MaxValuesBesideStrings others not fixed, and with recs at most MaxRecords of
// them, beside strings only (a programming error otherwise, as are masks that overlap: it
// panics).
func (k *Keys) Layout(mask uint64, vals []any, strs, recs uint64) *Keys {
	n := len(k.names)
	if len(vals) != n || (n < 64 && (mask|strs|recs)>>n != 0) || mask&strs != 0 || (mask|strs)&recs != 0 {
		panic(fmt.Sprintf("record.Keys.Layout: %d values, masks %#x, %#x, %#x for %d keys", len(vals), mask, strs, recs, n))
	}
	others := n - bits.OnesCount64(mask|strs|recs)
	if bits.OnesCount64(strs) > MaxStrings || (strs|recs != 0 && others > MaxValuesBesideStrings) ||
		bits.OnesCount64(recs) > MaxRecords || (recs != 0 && others > 0) {
		panic(fmt.Sprintf("record.Keys.Layout: %d strings and %d records beside %d values", bits.OnesCount64(strs), bits.OnesCount64(recs), others))
	}
	if mask|strs|recs == 0 {
		return &Keys{names: k.names}
	}
	lay := &layout{mask: mask, strs: strs, recs: recs, at: make([]uint32, n)}
	if mask != 0 {
		lay.fixed = make([]any, bits.Len64(mask))
		for i := range lay.fixed {
			if mask>>i&1 != 0 {
				lay.fixed[i] = vals[i]
			}
		}
	}
	// The block: the values held as anys, then the strings, then the record pointers.
	const word = uint32(unsafe.Sizeof(uintptr(0)))
	nAny, nStr := uint32(others), uint32(bits.OnesCount64(strs))
	var nextAny, nextStr, nextRec uint32
	for i := range lay.at {
		bit := uint64(1) << i // 0 past 64 keys: a value held as an any
		switch {
		case mask&bit != 0:
			lay.at[i] = slotFixed
		case strs&bit != 0:
			lay.at[i] = (2*word*(nAny+nextStr))<<slotKindBits | slotString
			nextStr++
		case recs&bit != 0:
			lay.at[i] = (2*word*(nAny+nStr)+word*nextRec)<<slotKindBits | slotRecord
			nextRec++
		default:
			lay.at[i] = (2*word*nextAny)<<slotKindBits | slotAny
			nextAny++
		}
	}
	return &Keys{names: k.names, lay: lay}
}

// Plain reports whether the records of the list hold every value, as an any: no value
// fixed, no strings (see Layout).
func (k *Keys) Plain() bool { return k.lay == nil }

// HoldsString reports whether the records of the list hold key i's value as a string (see
// Layout).
func (k *Keys) HoldsString(i int) bool { return k.lay != nil && i < 64 && k.lay.strs>>i&1 != 0 }

// HoldsRecord reports whether the records of the list hold key i's value as a record pointer
// (see Layout).
func (k *Keys) HoldsRecord(i int) bool { return k.lay != nil && i < 64 && k.lay.recs>>i&1 != 0 }

// FixedValue is the value key i has in every record of the list, when it is fixed.
func (k *Keys) FixedValue(i int) (any, bool) {
	if k.lay == nil || k.lay.mask>>i&1 == 0 || i >= 64 {
		return nil, false
	}
	return k.lay.fixed[i], true
}

// SameNames reports whether k and o are lists of the very same names (one list, with fixed
// values or not): index i means the same key in both.
func (k *Keys) SameNames(o *Keys) bool {
	if k == o {
		return true
	}
	if k == nil || o == nil || len(k.names) != len(o.names) {
		return false
	}
	return len(k.names) == 0 || &k.names[0] == &o.names[0]
}

// own is the number of values a record of k holds as anys: its keys not fixed, not strings,
// not record pointers.
func (k *Keys) own() int {
	if k.lay == nil {
		return len(k.names)
	}
	return len(k.names) - bits.OnesCount64(k.lay.mask|k.lay.strs|k.lay.recs)
}

// plain is the list of k's keys without fixed values or strings.
func (k *Keys) plain() *Keys {
	if k.lay == nil {
		return k
	}
	return &Keys{names: k.names}
}

// NewKeys returns the key list for names, which must be sorted and distinct (a programming
// error otherwise: it panics). names is copied.
func NewKeys(names ...string) *Keys {
	return TakeKeys(slices.Clone(names))
}

// TakeKeys is NewKeys without the copy: it keeps names, which the caller must not change
// afterwards (a list made for it: the 10,000 keys of a lookup patched, copied twice before).
func TakeKeys(names []string) *Keys {
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			panic(fmt.Sprintf("record keys not sorted and distinct: %q before %q", names[i-1], names[i]))
		}
	}
	return &Keys{names: slices.Clip(names)}
}

// Len is the number of keys.
func (k *Keys) Len() int { return len(k.names) }

// At is the i-th key.
func (k *Keys) At(i int) string { return k.names[i] }

// index returns the position of name, or -1.
func (k *Keys) index(name string) int {
	names := k.names
	if len(names) <= 8 {
		// A short scan beats a binary search for the few keys of most records.
		for i, n := range names {
			if n == name {
				return i
			}
		}
		return -1
	}
	if i, ok := slices.BinarySearch(names, name); ok {
		return i
	}
	return -1
}

// Record is a JSON object: values by key, iterated in sorted key order. The zero value and a
// nil *Record are empty.
//
// vals points at the first of the values of the keys that are not fixed (see Keys.FixedAt):
// their count is the key list's, so a record is two words, not four (16 bytes less for each
// of a pod's four records). A record of a list with strings or record pointers (see
// Keys.Layout) is followed by its block of values in the same allocation (see MakeLayout):
// vals is its first any, nil when it has none (never a pointer to what is not an any).
// A copy of a Record would read its block at the copy's address: noCopy makes go vet
// report one.
type Record struct {
	_    noCopy
	keys *Keys
	vals *any
}

// noCopy is a field go vet's copylocks check reports copies of (it has Lock and Unlock);
// it takes no room.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// own is the record's values of the keys that are not fixed (nil for none).
func (r *Record) own() []any {
	if r.vals == nil {
		return nil
	}
	return unsafe.Slice(r.vals, r.keys.own())
}

// values is the value of each key, the fixed ones too: the record's own list when none is
// fixed, else a list made for the caller.
func (r *Record) values() []any {
	if r.keys.lay == nil {
		return r.own()
	}
	out := make([]any, len(r.keys.names))
	for i := range out {
		out[i] = r.Value(i)
	}
	return out
}

// with returns a record of keys holding vals, the values of its keys that are not fixed.
func with(keys *Keys, vals []any) Record {
	if len(vals) == 0 {
		return Record{keys: keys}
	}
	return Record{keys: keys, vals: &vals[0]}
}

// New returns the record with keys and vals (vals[i] is the value of the i-th key). It keeps
// vals, which the caller must not change afterwards. With fixed keys (Keys.Fixed), vals holds
// their values too: when they are not the fixed ones, the record gets a list without them.
func New(keys *Keys, vals []any) *Record {
	if keys.Len() != len(vals) {
		panic(fmt.Sprintf("record.New: %d keys and %d values", keys.Len(), len(vals)))
	}
	keys = keys.bare()
	if keys.lay != nil {
		if r, ok := keys.build(vals); ok {
			return r
		}
		keys = keys.plain()
	}
	r := with(keys, vals)
	return &r
}

// build is the record of k with vals (a value for each key), false when a fixed key's value
// is not the fixed one (see Same) or a value k holds as a string is not one.
func (k *Keys) build(vals []any) (*Record, bool) {
	lay := k.lay
	for i, f := range lay.fixed {
		if lay.mask>>i&1 != 0 && !Same(f, vals[i]) {
			return nil, false
		}
	}
	if lay.strs|lay.recs == 0 && lay.mask&(lay.mask+1) == 0 {
		r := with(k, vals[len(lay.fixed):]) // the fixed keys are the first ones: vals kept
		return &r, true
	}
	for i, v := range vals {
		_, isString := v.(string)
		_, isRecord := v.(*Record)
		if k.HoldsString(i) && !isString || k.HoldsRecord(i) && !isRecord {
			return nil, false
		}
	}
	r, slots := MakeLayout(k)
	for i, v := range vals {
		switch {
		case i < 64 && lay.mask>>i&1 != 0:
		case k.HoldsString(i):
			slots.Strings[0], slots.Strings = v.(string), slots.Strings[1:]
		case k.HoldsRecord(i):
			slots.Records[0], slots.Records = v.(*Record), slots.Records[1:]
		default:
			slots.Values[0], slots.Values = v, slots.Values[1:]
		}
	}
	return r, true
}

// Same reports whether a and b are one value: equal scalars, or the very same record, list or
// map (not compared by content: the parts shared between records are one value).
func Same(a, b any) bool {
	switch x := a.(type) {
	case *Record:
		y, ok := b.(*Record)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && (x == nil) == (y == nil) && (len(x) == 0 || &x[0] == &y[0])
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	if a == nil || b == nil {
		return a == b
	}
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// Make returns a record with keys and its value slice, in one allocation (a record read
// through needs one cache line less). The caller fills vals before the record is used by
// anyone else, and never changes them afterwards. vals are the values of the keys that are
// not fixed (see Keys.FixedAt), in key order.
func Make(keys *Keys) (r *Record, vals []any) {
	if keys.lay != nil && keys.lay.strs|keys.lay.recs != 0 {
		panic("record.Make: a key list with strings or record pointers (see MakeLayout)")
	}
	switch keys.own() {
	case 0:
		return &Record{keys: keys}, nil
	case 1:
		return makeSized(keys, func(v *[1]any) []any { return v[:] })
	case 2:
		return makeSized(keys, func(v *[2]any) []any { return v[:] })
	case 3:
		return makeSized(keys, func(v *[3]any) []any { return v[:] })
	case 4:
		return makeSized(keys, func(v *[4]any) []any { return v[:] })
	case 5:
		return makeSized(keys, func(v *[5]any) []any { return v[:] })
	case 6:
		return makeSized(keys, func(v *[6]any) []any { return v[:] })
	case 7:
		return makeSized(keys, func(v *[7]any) []any { return v[:] })
	case 8:
		return makeSized(keys, func(v *[8]any) []any { return v[:] })
	case 9:
		return makeSized(keys, func(v *[9]any) []any { return v[:] })
	case 10:
		return makeSized(keys, func(v *[10]any) []any { return v[:] })
	case 11:
		return makeSized(keys, func(v *[11]any) []any { return v[:] })
	case 12:
		return makeSized(keys, func(v *[12]any) []any { return v[:] })
	case 13:
		return makeSized(keys, func(v *[13]any) []any { return v[:] })
	case 14:
		return makeSized(keys, func(v *[14]any) []any { return v[:] })
	case 15:
		return makeSized(keys, func(v *[15]any) []any { return v[:] })
	case 16:
		return makeSized(keys, func(v *[16]any) []any { return v[:] })
	}
	vals = make([]any, keys.own())
	rec := with(keys, vals)
	return &rec, vals
}

// Slots are the places of a record's values (see MakeLayout), each in key order.
type Slots struct {
	Values  []any     // of the keys neither fixed, nor strings, nor record pointers
	Strings []string  // of the keys held as strings
	Records []*Record // of the keys held as record pointers
}

// MakeLayout is Make for any key list (see Keys.Layout): the caller fills the slots.
func MakeLayout(keys *Keys) (*Record, Slots) {
	var strs, recs uint64
	if keys.lay != nil {
		strs, recs = keys.lay.strs, keys.lay.recs
	}
	if recs != 0 {
		return makeWithRecords(keys, bits.OnesCount64(strs))
	}
	switch bits.OnesCount64(strs) {
	case 0:
		r, vals := Make(keys)
		return r, Slots{Values: vals}
	case 1:
		return makeWithStrings(keys, func(s *[1]string) []string { return s[:] })
	case 2:
		return makeWithStrings(keys, func(s *[2]string) []string { return s[:] })
	case 3:
		return makeWithStrings(keys, func(s *[3]string) []string { return s[:] })
	case 4:
		return makeWithStrings(keys, func(s *[4]string) []string { return s[:] })
	}
	panic(fmt.Sprintf("record.MakeLayout: %d strings", bits.OnesCount64(strs)))
}

// makeWithStrings is MakeLayout for strings in an array of type S (see Make's cases).
func makeWithStrings[S any](keys *Keys, strs func(*S) []string) (*Record, Slots) {
	switch keys.own() {
	case 0:
		return makeLaidOut(keys, func(v *[0]any) []any { return v[:] }, strs)
	case 1:
		return makeLaidOut(keys, func(v *[1]any) []any { return v[:] }, strs)
	case 2:
		return makeLaidOut(keys, func(v *[2]any) []any { return v[:] }, strs)
	case 3:
		return makeLaidOut(keys, func(v *[3]any) []any { return v[:] }, strs)
	case 4:
		return makeLaidOut(keys, func(v *[4]any) []any { return v[:] }, strs)
	case 5:
		return makeLaidOut(keys, func(v *[5]any) []any { return v[:] }, strs)
	case 6:
		return makeLaidOut(keys, func(v *[6]any) []any { return v[:] }, strs)
	case 7:
		return makeLaidOut(keys, func(v *[7]any) []any { return v[:] }, strs)
	case 8:
		return makeLaidOut(keys, func(v *[8]any) []any { return v[:] }, strs)
	}
	panic(fmt.Sprintf("record.MakeLayout: %d values beside strings", keys.own()))
}

// makeLaidOut allocates a record with its values (an array of type A) and its strings (S)
// right after them, where Value finds them.
func makeLaidOut[A, S any](keys *Keys, all func(*A) []any, strs func(*S) []string) (*Record, Slots) {
	b := new(struct {
		r Record
		v A
		s S
	})
	vals := all(&b.v)
	b.r = Record{keys: keys}
	if len(vals) > 0 {
		b.r.vals = &vals[0]
	}
	return &b.r, Slots{Values: vals, Strings: strs(&b.s)}
}

// makeWithRecords is MakeLayout for record pointers beside n strings.
func makeWithRecords(keys *Keys, n int) (*Record, Slots) {
	switch bits.OnesCount64(keys.lay.recs) {
	case 1:
		return recordsBeside(keys, n, func(p *[1]*Record) []*Record { return p[:] })
	case 2:
		return recordsBeside(keys, n, func(p *[2]*Record) []*Record { return p[:] })
	case 3:
		return recordsBeside(keys, n, func(p *[3]*Record) []*Record { return p[:] })
	case 4:
		return recordsBeside(keys, n, func(p *[4]*Record) []*Record { return p[:] })
	}
	panic(fmt.Sprintf("record.MakeLayout: %d record pointers", bits.OnesCount64(keys.lay.recs)))
}

func recordsBeside[P any](keys *Keys, n int, recs func(*P) []*Record) (*Record, Slots) {
	switch n {
	case 0:
		return makeRecords(keys, func(s *[0]string) []string { return s[:] }, recs)
	case 1:
		return makeRecords(keys, func(s *[1]string) []string { return s[:] }, recs)
	case 2:
		return makeRecords(keys, func(s *[2]string) []string { return s[:] }, recs)
	case 3:
		return makeRecords(keys, func(s *[3]string) []string { return s[:] }, recs)
	case 4:
		return makeRecords(keys, func(s *[4]string) []string { return s[:] }, recs)
	}
	panic(fmt.Sprintf("record.MakeLayout: %d strings", n))
}

// makeRecords allocates a record with its strings (an array of type S) and its record
// pointers (P) right after them, where Value finds them.
func makeRecords[S, P any](keys *Keys, strs func(*S) []string, recs func(*P) []*Record) (*Record, Slots) {
	b := new(struct {
		r Record
		s S
		p P
	})
	b.r = Record{keys: keys}
	return &b.r, Slots{Strings: strs(&b.s), Records: recs(&b.p)}
}

// makeSized allocates a record together with its values, an array of type A (one case of
// Make: the array's length is part of its type); all slices the whole array.
func makeSized[A any](keys *Keys, all func(*A) []any) (*Record, []any) {
	b := new(struct {
		r Record
		v A
	})
	vals := all(&b.v)
	b.r = with(keys, vals)
	return &b.r, vals
}

// FromPairs returns the record holding the given keys and values, which may come in any
// order; when a key is given twice, the later value wins. shapes shares the key list with
// other records (nil: the record gets its own).
func FromPairs(shapes *Shapes, keys []string, vals []any) *Record {
	if len(keys) != len(vals) {
		panic(fmt.Sprintf("record.FromPairs: %d keys and %d values", len(keys), len(vals)))
	}
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	names := make([]string, 0, len(keys))
	out := make([]any, 0, len(keys))
	for _, i := range idx {
		if n := len(names); n > 0 && names[n-1] == keys[i] {
			out[n-1] = vals[i]
			continue
		}
		names = append(names, keys[i])
		out = append(out, vals[i])
	}
	k := &Keys{names: names}
	if shapes != nil {
		k = shapes.Keys(names)
	}
	r, vals := Make(k)
	copy(vals, out)
	return r
}

// FromMap returns m as a record (values as they are).
func FromMap(shapes *Shapes, m map[string]any) *Record {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	k := &Keys{names: keys}
	if shapes != nil {
		k = shapes.Keys(keys)
	}
	r, vals := Make(k)
	for i, name := range keys {
		vals[i] = m[name]
	}
	return r
}

// Change is one entry of a Patched record: Key set to Value, or taken out when Remove.
type Change struct {
	Key    string
	Value  any
	Remove bool
}

// Patched is r with changes made (sorted by key, each key once: a programming error
// otherwise, it panics), its other entries kept. Each change's place is found by a binary
// search and the entries between are copied in blocks, so a few changes to a record of
// 10,000 keys cost two copies of its slices, not a comparison of every key (issue 25). The
// result shares r's key list when no key comes or goes; otherwise its list is its own (in
// order by construction: r's are, and each change goes in its place). r is not changed.
func (r *Record) Patched(changes []Change) *Record {
	names, vals, p := r.plan(changes)
	if p.sameKeys && len(names) > 0 {
		out := slices.Clone(vals)
		for i, c := range changes {
			if p.found[i] {
				out[p.at[i]] = c.Value
			}
		}
		return NewFrom(r.keys, out, r, changedKeys(changes))
	}
	return NewFrom(&Keys{names: splice(names, p, changes, changeKey)}, splice(vals, p, changes, changeValue), r, changedKeys(changes))
}

// changedKeys is the keys of changes, in their order.
func changedKeys(changes []Change) []string {
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = c.Key
	}
	return out
}

// NewFrom is New(keys, vals) for a record made from prev with the keys changed (sorted,
// distinct) set, added or taken out, every other key holding the very value it has in prev
// (the caller's promise). A large record notes it (see ChangedSince): a reader comparing it
// with prev reads the keys changed, not every key (issue 25: 10,000 services' by_name walked
// at each change). changed is kept.
func NewFrom(keys *Keys, vals []any, prev *Record, changed []string) *Record {
	if prev == nil || keys.lay != nil || keys.Len() < MinDerived {
		return New(keys, vals)
	}
	if keys.Len() != len(vals) {
		panic(fmt.Sprintf("record.NewFrom: %d keys and %d values", keys.Len(), len(vals)))
	}
	// The note is the key list's: a list of the same names, shared, for this record alone.
	noted := &Keys{names: keys.names, from: &derivation{base: keys.bare(), prev: weak.Make(prev), changed: changed}}
	r := with(noted, vals)
	return &r
}

// maxDerivedSteps is how many records back ChangedSince follows a chain of NewFrom.
const maxDerivedSteps = 8

// ChangedSince returns the keys whose values may differ between old and r (sorted, distinct;
// a superset: a key set to the value it had is among them) when r was made from old by NewFrom,
// directly or through at most a few records between; false when that is not known (compare
// the records).
func (r *Record) ChangedSince(old *Record) ([]string, bool) {
	if r == nil || old == nil {
		return nil, false
	}
	var changed []string
	cur := r
	for range maxDerivedSteps {
		d := cur.keys.from
		if d == nil {
			return nil, false
		}
		if changed == nil {
			changed = d.changed
		} else {
			changed = mergeSorted(changed, d.changed)
		}
		if d.prev == weak.Make(old) {
			return changed, true
		}
		if cur = d.prev.Value(); cur == nil {
			return nil, false
		}
	}
	return nil, false
}

// mergeSorted is the sorted union of two sorted lists of distinct strings (a new list).
func mergeSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// PatchedKeys is the key list of r.Patched(changes), without its values (for values held
// elsewhere in the same order): r's own when no key comes or goes.
func (r *Record) PatchedKeys(changes []Change) *Keys {
	names, _, p := r.plan(changes)
	if p.sameKeys && len(names) > 0 {
		return r.keys.bare()
	}
	return &Keys{names: splice(names, p, changes, changeKey)}
}

func changeKey(c Change) string { return c.Key }
func changeValue(c Change) any  { return c.Value }

// patchPlan is where changes go in a record's entries: each change's place (at) and whether
// its key is there (found); sameKeys when no key comes or goes.
type patchPlan struct {
	at       []int
	found    []bool
	sameKeys bool
}

// plan is r's keys and values and where changes go in them (see Patched).
func (r *Record) plan(changes []Change) (names []string, vals []any, p patchPlan) {
	for i := 1; i < len(changes); i++ {
		if changes[i-1].Key >= changes[i].Key {
			panic(fmt.Sprintf("record.Patched: changes not sorted and distinct: %q before %q", changes[i-1].Key, changes[i].Key))
		}
	}
	if r != nil && r.keys != nil {
		names, vals = r.keys.names, r.values()
	}
	p = patchPlan{at: make([]int, len(changes)), found: make([]bool, len(changes)), sameKeys: true}
	for i, c := range changes {
		lo := 0
		if i > 0 {
			lo = p.at[i-1]
		}
		at, ok := slices.BinarySearch(names[lo:], c.Key)
		p.at[i], p.found[i] = lo+at, ok
		p.sameKeys = p.sameKeys && ok != c.Remove // a value replaced, or a key not there taken out
	}
	return names, vals, p
}

// splice is old (a record's keys or values) with changes made where p places them, in blocks:
// what each change puts in is val(change).
func splice[T any](old []T, p patchPlan, changes []Change, val func(Change) T) []T {
	out := make([]T, 0, len(old)+len(changes))
	prev := 0
	for i, c := range changes {
		out = append(out, old[prev:p.at[i]]...)
		prev = p.at[i]
		if p.found[i] {
			prev++ // replaced or taken out
		}
		if !c.Remove {
			out = append(out, val(c))
		}
	}
	return slices.Clip(append(out, old[prev:]...))
}

// Len is the number of keys.
func (r *Record) Len() int {
	if r == nil || r.keys == nil {
		return 0
	}
	return len(r.keys.names)
}

// Key is the i-th key in sorted order.
func (r *Record) Key(i int) string { return r.keys.names[i] }

// Value is the value of the i-th key.
func (r *Record) Value(i int) any {
	if r.keys.lay != nil {
		return r.laidOut(i)
	}
	return unsafe.Slice(r.vals, len(r.keys.names))[i]
}

// laidOut is Value for a list with fixed values or strings: key i's fixed value, or its
// place among the record's values or strings.
func (r *Record) laidOut(i int) any {
	lay := r.keys.lay
	at := lay.at[i]
	if at&(1<<slotKindBits-1) == slotFixed {
		return lay.fixed[i]
	}
	block := unsafe.Pointer(r.vals)
	if lay.strs|lay.recs != 0 {
		block = unsafe.Add(unsafe.Pointer(r), unsafe.Sizeof(Record{})) // right after r (see Record)
	}
	p := unsafe.Add(block, at>>slotKindBits) // within the record's block
	switch at & (1<<slotKindBits - 1) {
	case slotString:
		return stringAt((*string)(p))
	case slotRecord:
		return *(**Record)(p)
	}
	return *(*any)(p)
}

// stringAt returns the string *p as an any whose data is p itself: what boxing *p would give,
// without a box of its own. *p never changes: a record's strings are set before it is used.
func stringAt(p *string) any {
	var typed any = ""
	e := *(*[2]unsafe.Pointer)(unsafe.Pointer(&typed))
	e[1] = unsafe.Pointer(p)
	return *(*any)(unsafe.Pointer(&e))
}

// Get returns the value of key and whether the record has it.
func (r *Record) Get(key string) (any, bool) {
	if r == nil || r.keys == nil {
		return nil, false
	}
	if i := r.keys.index(key); i >= 0 {
		return r.Value(i), true
	}
	return nil, false
}

// Field is the value of key, nil when the record has none (or is nil): Get for the callers
// that read a field they know is there, or treat a missing one as null.
func (r *Record) Field(key string) any {
	v, _ := r.Get(key)
	return v
}

// ValuesAre reports whether r's values are l itself (the same slice, not equal values): a
// record made with New(keys, l).
func (r *Record) ValuesAre(l []any) bool {
	return r.Len() == len(l) && r.keys.lay == nil && (len(l) == 0 || r.vals == &l[0])
}

// Keys is the record's key list (nil for the nil record), to make another record of the same
// keys (New).
func (r *Record) Keys() *Keys {
	if r == nil {
		return nil
	}
	return r.keys.bare()
}

// SameKeys reports whether r and o share their list of key names (so that index i means the
// same key in both), with the same values fixed or not (see Keys.SameNames).
func (r *Record) SameKeys(o *Record) bool { return r != nil && o != nil && r.keys.SameNames(o.keys) }

// All iterates over the keys and values in sorted key order.
func (r *Record) All() iter.Seq2[string, any] {
	return func(yield func(string, any) bool) {
		for i := range r.Len() {
			if !yield(r.keys.names[i], r.Value(i)) {
				return
			}
		}
	}
}

// Map returns r as a map of its own, with records inside (at any depth, in lists too)
// turned into maps as well: for code that only knows plain JSON values.
func (r *Record) Map() map[string]any {
	m := make(map[string]any, r.Len())
	for i := range r.Len() {
		m[r.keys.names[i]] = Plain(r.Value(i))
	}
	return m
}

// Plain returns v with every record in it turned into a map (see Record.Map). Values without
// records are returned as they are, not copied.
func Plain(v any) any {
	switch x := v.(type) {
	case *Record:
		if x == nil {
			return map[string]any(nil)
		}
		return x.Map()
	case []any:
		if !hasRecord(x) {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Plain(e)
		}
		return out
	case map[string]any:
		if !hasRecordMap(x) {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Plain(e)
		}
		return out
	}
	return v
}

func hasRecord(l []any) bool {
	for _, e := range l {
		if holdsRecord(e) {
			return true
		}
	}
	return false
}

func hasRecordMap(m map[string]any) bool {
	for _, e := range m {
		if holdsRecord(e) {
			return true
		}
	}
	return false
}

func holdsRecord(v any) bool {
	switch x := v.(type) {
	case *Record:
		return true
	case []any:
		return hasRecord(x)
	case map[string]any:
		return hasRecordMap(x)
	}
	return false
}

// MarshalJSON writes the object with its keys in sorted order, as encoding/json writes a map.
func (r *Record) MarshalJSON() ([]byte, error) {
	if r == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range r.Len() {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(r.keys.names[i])
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(r.Value(i))
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", r.keys.names[i], err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// String prints the record as JSON, for logs and test failures.
func (r *Record) String() string {
	b, err := r.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("<record: %v>", err)
	}
	return string(b)
}

// Shapes shares key lists: every record made through the same Shapes with the same keys points
// at one Keys. Safe for concurrent use; the zero value is ready. Key lists are never
// forgotten, so use it for keys that come from a schema (the fields of a pod), not for keys
// that are data (pod names).
type Shapes struct {
	m sync.Map // hash of the names -> *Keys, or *[]*Keys when several lists have the hash
}

var shapeSeed = maphash.MakeSeed()

// Keys returns the shared key list equal to names (sorted and distinct; see NewKeys), making
// it the first time. names is not kept.
func (s *Shapes) Keys(names []string) *Keys {
	var h maphash.Hash
	h.SetSeed(shapeSeed)
	for _, n := range names {
		maphash.WriteComparable(&h, len(n))
		h.WriteString(n)
	}
	return s.keysHashed(h.Sum64(), names)
}

// keysHashed is Keys with the hash of names given (tests give colliding ones).
func (s *Shapes) keysHashed(sum uint64, names []string) *Keys {
	if v, ok := s.m.Load(sum); ok {
		if k := matchKeys(v, names); k != nil {
			return k
		}
	}
	k := NewKeys(names...)
	for {
		v, loaded := s.m.LoadOrStore(sum, k)
		if !loaded {
			return k
		}
		if found := matchKeys(v, names); found != nil {
			return found
		}
		// Another list has this hash: keep both.
		var next []*Keys
		switch x := v.(type) {
		case *Keys:
			next = []*Keys{x, k}
		case *[]*Keys:
			next = append(slices.Clone(*x), k)
		}
		if s.m.CompareAndSwap(sum, v, &next) {
			return k
		}
	}
}

func matchKeys(v any, names []string) *Keys {
	switch x := v.(type) {
	case *Keys:
		if slices.Equal(x.names, names) {
			return x
		}
	case *[]*Keys:
		for _, k := range *x {
			if slices.Equal(k.names, names) {
				return k
			}
		}
	}
	return nil
}

// Of returns v with every map[string]any in it (at any depth, in lists too) turned into a
// record: the inverse of Plain. shapes shares the key lists (nil: each record has its own).
func Of(shapes *Shapes, v any) any {
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return nil // as JSON has it: null, not an empty object
		}
		r := FromMap(shapes, x)
		vals := r.own() // FromMap's keys have none fixed
		for i, e := range vals {
			vals[i] = Of(shapes, e)
		}
		return r
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Of(shapes, e)
		}
		return out
	}
	return v
}
