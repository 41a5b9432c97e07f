package jinja

import (
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Values are plain Go values standing for Python's:
//
//	nil                      None
//	bool, int64, float64     bool, int, float
//	*big.Int                 int beyond int64 (never one that fits in an int64)
//	string, Markup           str, markupsafe.Markup
//	*List, Tuple             list and tuple made by the template
//	*Dict                    dict made by the template (insertion order)
//	*Undefined               jinja2.Undefined
//
// Data given to the engine (the render context) is used as it is, read only: []any,
// []string, []map[string]any (lists), map[string]any, map[string]string and *record.Record
// (dicts, iterated in sorted key order). A template cannot change them: the same data renders
// the same way every time.
//
// A string from the data that holds a newline, a carriage return or a NUL is carried as a
// tainted value until it is printed, which is an error unless the template marks it |safe
// (see taint.go); so is a secret value and what is derived from it (Secret), whose printing
// is recorded.
//
// Here too: seq, the items of a value as a loop walks them, and the engine's own objects a
// template can hold (bound methods, cyclers, joiners, modules, groupby's groups, self). Those
// that refer to the evaluator's state (macros, loop objects, built-in functions) are with it,
// in eval.go. Nothing here refers to another file of the package.

// Markup is a string marked safe (|safe, |escape, ...).
type Markup string

// List is a list made by the template: literals, filters, .append().
type List struct {
	items []any
	owner *loan // what must know it changed: a kept module, a hash kept of it (reuse_loop.go)
}

// changing is called before l changes: a list of a kept module lent to the render no longer
// serves another (the render has it to itself from then on); the hash of what an import
// read, kept for the next imports, no longer holds.
func (l *List) changing() {
	if l.owner != nil {
		l.owner.spoil()
		l.owner = nil
	}
}

// NewList returns a list of the template's own (changeable by the template), for filters
// given to Compile.
func NewList(items []any) *List { return &List{items: items} }

// Tuple is a tuple.
type Tuple []any

// Undefined is Jinja2's Undefined: printed as nothing, false, empty when iterated; any other
// use fails with a message saying what was undefined.
type Undefined struct {
	hint   string
	obj    any
	hasObj bool
	name   any
	err    error // set: every use, printing included, fails with it
}

// NewUndefined returns an undefined value whose every use, printing included, fails with err,
// while `is defined`, |default and conditions see it as undefined. (The renderer gives it for
// a password that is not set.)
func NewUndefined(err error) *Undefined { return &Undefined{err: err} }

func undefinedName(name string) *Undefined { return &Undefined{name: name} }

func undefinedAttr(obj any, name any) *Undefined {
	return &Undefined{obj: obj, hasObj: true, name: name}
}

func undefinedHint(hint string) *Undefined { return &Undefined{hint: hint} }

// UndefinedError is the use of an undefined value (Jinja2's UndefinedError).
type UndefinedError struct {
	Msg string
	// Of is the value whose attribute or item Name was missing (nil when a variable is
	// undefined): the caller can tell which of its context's values it was.
	Of   any
	Name any
}

func (e *UndefinedError) Error() string { return e.Msg }

// strValue is the text of a str: a string, Markup or a tainted string.
func strValue(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case Markup:
		return string(x), true
	case *tainted:
		return x.s, true
	}
	return "", false
}

// tainted is a string with a mark: from the data and holding a forbidden character (src set:
// printing it is an error, see taint.go), or holding bytes derived from a secret value (secret:
// where it is printed is recorded, see Secret), or both.
type tainted struct {
	s      string // the value
	src    string // the data string it came from, to find where it came from; "" if none
	secret bool
	markup bool // the value is Markup (printed without escaping)
}

// mark is what t carries on to what is made of it.
func (t *tainted) mark() mark { return mark{src: t.src, secret: t.secret} }

// Secret is a secret value (the stats password, an environment value the operator marks
// secret) as the render context holds it: a str to templates, whose every derivation (|reverse,
// a slice, ~, .replace(), |upper, a {% set %} block printing it...) stays marked, and whose
// printing is recorded in the Output (Output.Secret), so that a line holding it is never
// quoted in a message.
func Secret(s string) any {
	t := &tainted{s: s, secret: true}
	if hasForbidden(s) {
		t.src = s
	}
	return t
}

// hasForbidden reports whether s holds \n, \r or NUL.
func hasForbidden(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= '\r' && (c == '\n' || c == '\r' || c == 0) {
			return true
		}
	}
	return false
}

// fromData marks a string read from the data when it holds a forbidden character.
func fromData(v any) any {
	if s, ok := v.(string); ok && hasForbidden(s) {
		return &tainted{s: s, src: s}
	}
	return v
}

// Namespace is namespace(): attributes a {% set ns.attr = x %} can change from inside a loop.
type Namespace struct{ attrs *Dict }

// rangeVal is range(): lazy, so that range(10**9) costs nothing until iterated.
type rangeVal struct{ start, stop, step int64 }

func (r *rangeVal) len() int64 {
	switch {
	case r.step > 0 && r.start < r.stop:
		return (r.stop - r.start + r.step - 1) / r.step
	case r.step < 0 && r.start > r.stop:
		return (r.start - r.stop - r.step - 1) / -r.step
	}
	return 0
}

func (r *rangeVal) at(i int64) int64 { return r.start + i*r.step }

// generator is what select, map, reject, selectattr, rejectattr and batch... return in Jinja2:
// iterable once; printing it is an error (Python prints its address), |list makes a list.
type generator struct {
	items []any
	used  bool
}

func (g *generator) take() []any {
	if g.used {
		return nil
	}
	g.used = true
	return g.items
}

// dictView is d.items(), d.keys(), d.values().
type dictView struct {
	d    any
	kind byte
}

const (
	viewItems  = 'i'
	viewKeys   = 'k'
	viewValues = 'v'
)

// Dict is a dict made by the template: keys in insertion order.
type Dict struct {
	keys  []any
	vals  []any
	index *dictIndex // built once the dict grows past a few keys
	owner *loan      // what must know it changed (List.owner)
}

// changing is called before d changes (List.changing).
func (d *Dict) changing() {
	if d.owner != nil {
		d.owner.spoil()
		d.owner = nil
	}
}

// dictIndex finds a key's position in the dict's keys: string keys (most keys) in a hash
// table of positions of their own (4 bytes a slot and no pointer for the GC to scan, where
// a map[string]int held a copy of each key in 24-byte slots: the HTTPRoute model builds
// dicts of 3,000 keys per build), others in a map by hashKey.
type dictIndex struct {
	seed  maphash.Seed
	slots []int32 // 1 + the position of a string key, 0 for none: open addressing, linear probing
	n     int     // string keys in slots (at most half of them)
	other map[hashKey]int
}

func newDictIndex(keys int) *dictIndex {
	size := 16
	for size < 2*keys {
		size *= 2
	}
	return &dictIndex{seed: maphash.MakeSeed(), slots: make([]int32, size)}
}

// keyString is a string key's text (string, Markup and tainted keys are one key).
func keyString(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case Markup:
		return string(x)
	case *tainted:
		return x.s
	}
	return ""
}

// str finds the string key s among keys.
func (x *dictIndex) str(keys []any, s string) (int, bool) {
	i, _, found := x.probe(keys, s)
	return i, found
}

// probe finds the string key s among keys: its position i when found, else the free slot
// where it goes.
func (x *dictIndex) probe(keys []any, s string) (i int, slot uint64, found bool) {
	mask := uint64(len(x.slots) - 1)
	for h := maphash.String(x.seed, s) & mask; ; h = (h + 1) & mask {
		v := x.slots[h]
		if v == 0 {
			return 0, h, false
		}
		if keyString(keys[v-1]) == s {
			return int(v - 1), h, true
		}
	}
}

func (x *dictIndex) get(keys []any, k hashKey) (int, bool) {
	if k.kind == 's' {
		return x.str(keys, k.s)
	}
	i, ok := x.other[k]
	return i, ok
}

// put notes that keys[i] is k, a key not there yet.
func (x *dictIndex) put(keys []any, k hashKey, i int) {
	if k.kind != 's' {
		if x.other == nil {
			x.other = map[hashKey]int{}
		}
		x.other[k] = i
		return
	}
	if 2*(x.n+1) > len(x.slots) {
		x.grow(keys, i)
	}
	x.place(k.s, i)
}

func (x *dictIndex) place(s string, i int) {
	mask := uint64(len(x.slots) - 1)
	h := maphash.String(x.seed, s) & mask
	for x.slots[h] != 0 {
		h = (h + 1) & mask
	}
	x.slots[h] = int32(i + 1)
	x.n++
}

// grow doubles the table, with the string keys before position i in it again.
func (x *dictIndex) grow(keys []any, i int) { x.resize(keys, i, 2*len(x.slots)) }

// resize makes the table size slots (a power of two), with the string keys before position i
// in it again.
func (x *dictIndex) resize(keys []any, i, size int) {
	x.slots, x.n = make([]int32, size), 0
	for j, k := range keys[:i] {
		switch k.(type) {
		case string, Markup, *tainted:
			x.place(keyString(k), j)
		}
	}
}

// clone is the index of a copy of the dict (the same keys in the same places).
func (x *dictIndex) clone() *dictIndex {
	if x == nil {
		return nil
	}
	return &dictIndex{seed: x.seed, slots: slices.Clone(x.slots), n: x.n, other: maps.Clone(x.other)}
}

type hashKey struct {
	kind byte // 's' string, 'i' int (bools and integral floats too), 'f' float, 'n' None, 'b' big, 't' tuple
	s    string
	i    int64
	f    float64
}

// keyOf is the hash key of a Python value; lists and dicts cannot be keys.
func keyOf(v any) (hashKey, error) {
	switch x := v.(type) {
	case string:
		return hashKey{kind: 's', s: x}, nil
	case Markup:
		return hashKey{kind: 's', s: string(x)}, nil
	case *tainted:
		return hashKey{kind: 's', s: x.s}, nil
	case int64:
		return hashKey{kind: 'i', i: x}, nil
	case bool:
		if x {
			return hashKey{kind: 'i', i: 1}, nil
		}
		return hashKey{kind: 'i'}, nil
	case float64:
		if i, ok := floatAsInt(x); ok {
			return hashKey{kind: 'i', i: i}, nil
		}
		return hashKey{kind: 'f', f: x}, nil
	case *big.Int:
		return hashKey{kind: 'b', s: x.String()}, nil
	case nil:
		return hashKey{kind: 'n'}, nil
	case Tuple:
		var b strings.Builder
		for _, e := range x {
			k, err := keyOf(e)
			if err != nil {
				return hashKey{}, err
			}
			fmt.Fprintf(&b, "%c%q%d%v|", k.kind, k.s, k.i, k.f)
		}
		return hashKey{kind: 't', s: b.String()}, nil
	case *Undefined:
		return hashKey{kind: 'u'}, nil
	}
	switch v.(type) {
	case *List, []any, []string, []map[string]any:
		return hashKey{}, errors.New("unhashable type: 'list'")
	case *Dict, map[string]any, map[string]string, *record.Record:
		return hashKey{}, errors.New("unhashable type: 'dict'")
	}
	return hashKey{kind: 'p', s: fmt.Sprintf("%p", v)}, nil
}

func floatAsInt(f float64) (int64, bool) {
	if f == float64(int64(f)) && f > -9.2e18 && f < 9.2e18 {
		return int64(f), true
	}
	return 0, false
}

// newDict makes a dict with room for n keys (one for an empty one: {} is mostly made to be
// set a key, in loops).
func newDict(n int) *Dict {
	d, kv := allocDict(n)
	c := len(kv) / 2
	d.keys, d.vals = kv[:0:c], kv[c:c:2*c]
	return d
}

// dictOfLen makes a dict of n keys and values, all nil, to be filled in place (a copy).
func dictOfLen(n int) *Dict {
	d, kv := allocDict(n)
	c := len(kv) / 2
	d.keys, d.vals = kv[:n:c], kv[c:c+n:2*c]
	return d
}

// allocDict allocates a dict and an array of 2*max(n, 1) for its keys and values, in one
// object up to 4 keys (dicts are made in loops, per item: one object, not two). Keys and
// values share the array, each half capped: one more key moves them to arrays of their own.
func allocDict(n int) (*Dict, []any) {
	switch {
	case n <= 1:
		p := new(struct {
			d  Dict
			kv [2]any
		})
		return &p.d, p.kv[:]
	case n == 2:
		p := new(struct {
			d  Dict
			kv [4]any
		})
		return &p.d, p.kv[:]
	case n == 3:
		p := new(struct {
			d  Dict
			kv [6]any
		})
		return &p.d, p.kv[:]
	case n == 4:
		p := new(struct {
			d  Dict
			kv [8]any
		})
		return &p.d, p.kv[:]
	}
	return &Dict{}, make([]any, 2*n)
}

// newList makes a list of n items (len n, cap n), in one object with its items up to 4; an
// empty one has room for one (an empty list is mostly made to be appended to, in loops:
// room for one saved more objects than it cost bytes, room for two did not).
func newList(n int) *List {
	var l *List
	var items []any
	switch n {
	case 0:
		p := new(struct {
			l List
			a [1]any
		})
		l, items = &p.l, p.a[:0]
	case 1:
		p := new(struct {
			l List
			a [1]any
		})
		l, items = &p.l, p.a[:]
	case 2:
		p := new(struct {
			l List
			a [2]any
		})
		l, items = &p.l, p.a[:]
	case 3:
		p := new(struct {
			l List
			a [3]any
		})
		l, items = &p.l, p.a[:]
	case 4:
		p := new(struct {
			l List
			a [4]any
		})
		l, items = &p.l, p.a[:]
	default:
		l, items = &List{}, make([]any, n)
	}
	l.items = items
	return l
}

const dictIndexAt = 8

func (d *Dict) find(k hashKey) int {
	if d.index != nil {
		if i, ok := d.index.get(d.keys, k); ok {
			return i
		}
		return -1
	}
	for i, key := range d.keys {
		if kk, _ := keyOf(key); kk == k {
			return i
		}
	}
	return -1
}

// get returns the value of key.
func (d *Dict) get(key any) (any, bool, error) {
	k, err := keyOf(key)
	if err != nil {
		return nil, false, err
	}
	if i := d.find(k); i >= 0 {
		return d.vals[i], true, nil
	}
	return nil, false, nil
}

// getStr is get with a string key (the common case: attributes).
func (d *Dict) getStr(key string) (any, bool) {
	if d.index != nil {
		if i, ok := d.index.str(d.keys, key); ok {
			return d.vals[i], true
		}
		return nil, false
	}
	for i, k := range d.keys {
		switch x := k.(type) {
		case string:
			if x == key {
				return d.vals[i], true
			}
		case Markup:
			if string(x) == key {
				return d.vals[i], true
			}
		case *tainted:
			if x.s == key {
				return d.vals[i], true
			}
		}
	}
	return nil, false
}

// setStr is set with a string key: an existing key is set without boxing the name (a
// namespace's attributes, set in loops).
func (d *Dict) setStr(key string, val any) error {
	d.changing()
	if d.index == nil {
		for i, k := range d.keys {
			if x, ok := k.(string); ok && x == key {
				d.vals[i] = val
				return nil
			}
		}
	}
	return d.set(key, val)
}

func (d *Dict) set(key, val any) error {
	d.changing()
	k, err := keyOf(key)
	if err != nil {
		return err
	}
	if k.kind == 's' && d.index != nil {
		return d.setIndexed(k.s, key, val)
	}
	if i := d.find(k); i >= 0 {
		d.vals[i] = val
		return nil
	}
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, val)
	if d.index != nil {
		d.index.put(d.keys, k, len(d.keys)-1)
	} else if len(d.keys) > dictIndexAt {
		d.reindex()
	}
	return nil
}

// setIndexed is set of a string key s (key, as given) in a dict with an index: one probe of
// the table finds the key or the slot a new key takes (the merges of the HTTPRoute example's
// model set thousands of new keys per render; a lookup, then an insertion, hashed each twice).
func (d *Dict) setIndexed(s string, key, val any) error {
	x := d.index
	i, slot, found := x.probe(d.keys, s)
	if found {
		d.vals[i] = val
		return nil
	}
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, val)
	i = len(d.keys) - 1
	if 2*(x.n+1) > len(x.slots) {
		x.grow(d.keys, i)
		x.place(s, i)
		return nil
	}
	x.slots[slot] = int32(i + 1)
	x.n++
	return nil
}

// reserve makes room in d for n more keys: its keys, its values and its index grown once, to
// at least twice their size, rather than step by step as the keys come (an update of a dict
// of thousands of keys with another's).
func (d *Dict) reserve(n int) {
	want := len(d.keys) + n
	if want <= dictIndexAt {
		return
	}
	if want > cap(d.keys) {
		d.keys = slices.Grow(d.keys, max(want, 2*cap(d.keys))-len(d.keys))
	}
	if want > cap(d.vals) {
		d.vals = slices.Grow(d.vals, max(want, 2*cap(d.vals))-len(d.vals))
	}
	if d.index == nil {
		return // made when the keys pass dictIndexAt, sized for them then
	}
	if x := d.index; 2*(x.n+n) > len(x.slots) {
		size := len(x.slots)
		for size < 2*(x.n+n) {
			size *= 2
		}
		x.resize(d.keys, len(d.keys), size)
	}
}

func (d *Dict) reindex() {
	d.index = newDictIndex(len(d.keys))
	for i, key := range d.keys {
		k, _ := keyOf(key)
		d.index.put(d.keys, k, i)
	}
}

func (d *Dict) del(key any) (any, bool, error) {
	d.changing()
	k, err := keyOf(key)
	if err != nil {
		return nil, false, err
	}
	i := d.find(k)
	if i < 0 {
		return nil, false, nil
	}
	v := d.vals[i]
	d.keys = append(d.keys[:i], d.keys[i+1:]...)
	d.vals = append(d.vals[:i], d.vals[i+1:]...)
	if d.index != nil {
		d.reindex()
	}
	return v, true, nil
}

func (d *Dict) len() int { return len(d.keys) }

func (d *Dict) copy() *Dict {
	c := &Dict{keys: append([]any(nil), d.keys...), vals: append([]any(nil), d.vals...)}
	if d.index != nil {
		c.reindex()
	}
	return c
}

// isMapping: a dict of any kind.
func isMapping(v any) bool {
	switch v.(type) {
	case *Dict, map[string]any, map[string]string, *record.Record:
		return true
	}
	return false
}

// mapLen is the number of keys of a dict of any kind.
func mapLen(v any) int {
	switch m := v.(type) {
	case *Dict:
		return m.len()
	case map[string]any:
		return len(m)
	case map[string]string:
		return len(m)
	case *record.Record:
		return m.Len()
	}
	return 0
}

// mapKeys lists the keys of a dict: insertion order for the template's, sorted for the
// data's (so that renders are deterministic).
func mapKeys(v any) []any {
	switch m := v.(type) {
	case *Dict:
		return append([]any(nil), m.keys...)
	case map[string]any:
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		out := make([]any, len(ks))
		for i, k := range ks {
			out[i] = fromData(k)
		}
		return out
	case map[string]string:
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		out := make([]any, len(ks))
		for i, k := range ks {
			out[i] = fromData(k)
		}
		return out
	case *record.Record:
		out := make([]any, m.Len())
		for i := range out {
			out[i] = fromData(m.Key(i))
		}
		return out
	}
	return nil
}

// mapGet looks key up in a dict of any kind.
func mapGet(m any, key any) (any, bool, error) {
	switch d := m.(type) {
	case *Dict:
		return d.get(key)
	}
	var s string
	switch k := key.(type) {
	case string:
		s = k
	case Markup:
		s = string(k)
	case *tainted:
		s = k.s
	default:
		if _, err := keyOf(key); err != nil {
			return nil, false, err
		}
		return nil, false, nil
	}
	return mapGetStr(m, s)
}

func mapGetStr(m any, s string) (any, bool, error) {
	switch d := m.(type) {
	case *Dict:
		v, ok := d.getStr(s)
		return v, ok, nil
	case map[string]any:
		v, ok := d[s]
		return fromData(v), ok, nil
	case map[string]string:
		v, ok := d[s]
		if !ok {
			return nil, false, nil
		}
		return fromData(v), true, nil
	case *record.Record:
		v, ok := d.Get(s)
		return fromData(v), ok, nil
	}
	return nil, false, nil
}

// seq is what a for loop walks: the items of a list, a dict (its keys), a dict view, a range
// or a string, read in place (the data is not copied).
type seq struct {
	live *List // a list of the template, walked live (as Python does: appending extends the loop)
	list []any // tuples, materialized values
	data []any // a list from the data
	strs []string
	maps []map[string]any
	rec  *record.Record
	keys []string // the sorted keys of a Go map from the data
	dk   []any    // the keys of a template dict (dictSeq), dv its values
	dv   []any
	m    any  // that map
	view byte // with rec or keys: viewKeys, viewValues or viewItems
	rng  *rangeVal
	n    int
}

// count is the number of items (a live list may grow while walked).
func (s *seq) count() int {
	if s.live != nil {
		return len(s.live.items)
	}
	return s.n
}

func (s *seq) at(i int) any {
	switch {
	case s.live != nil:
		return s.live.items[i]
	case s.list != nil:
		return s.list[i]
	case s.data != nil:
		return fromData(s.data[i])
	case s.strs != nil:
		return fromData(s.strs[i])
	case s.maps != nil:
		return s.maps[i]
	case s.rec != nil:
		switch s.view {
		case viewValues:
			return fromData(s.rec.Value(i))
		case viewItems:
			return Tuple{fromData(s.rec.Key(i)), fromData(s.rec.Value(i))}
		}
		return fromData(s.rec.Key(i))
	case s.keys != nil:
		k := s.keys[i]
		switch s.view {
		case viewValues:
			v, _, _ := mapGetStr(s.m, k)
			return v
		case viewItems:
			v, _, _ := mapGetStr(s.m, k)
			return Tuple{fromData(k), v}
		}
		return fromData(k)
	case s.dk != nil:
		switch s.view {
		case viewValues:
			return s.dv[i]
		case viewItems:
			return Tuple{s.dk[i], s.dv[i]}
		}
		return s.dk[i]
	case s.rng != nil:
		return s.rng.at(int64(i))
	}
	return nil
}

// pair is the key and value of item i of an items() view, without making a tuple.
func (s *seq) pair(i int) (k, v any, ok bool) {
	if s.view != viewItems {
		return nil, nil, false
	}
	switch {
	case s.rec != nil:
		return fromData(s.rec.Key(i)), fromData(s.rec.Value(i)), true
	case s.keys != nil:
		v, _, _ := mapGetStr(s.m, s.keys[i])
		return fromData(s.keys[i]), v, true
	case s.dk != nil:
		return s.dk[i], s.dv[i], true
	}
	return nil, nil, false
}

// boundMethod is obj.method not called at once.
type boundMethod struct {
	obj  any
	name string
}

type cycler struct {
	items []any
	pos   int
}

type joiner struct {
	sep  string
	used bool
}

// module is an imported template: its macros and top-level variables, and its output.
type module struct {
	name   string
	vars   *Dict
	output string
	secret bool   // its output holds bytes derived from a secret value
	frame  *frame // its top level, which its macros see (their closure)
	// objects: the dicts, lists, namespaces and macros a copy of it made (copyModule sizes the
	// next copy's map by it)
	objects int
}

// group is what groupby gives: a (grouper, list) named tuple.
type group struct {
	grouper any
	list    *List
}

// selfRef is `self` in a template with blocks; blockRef is self.name.
type selfRef struct{}

type blockRef struct{ name string }
