package snapshot

import (
	"encoding/base64"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// This file converts typed objects into the JSON objects templates see. The result holds
// exactly what runtime.DefaultUnstructuredConverter.ToUnstructured gives (the tests compare
// the two over randomly filled pods), computed from a plan made once per Go type instead of
// reflection decisions per value, as records (see package record) instead of maps: a struct's
// record shares its sorted key list with every other record of that type with the same fields
// set. ToUnstructured's maps are allocated with room for every field of the struct: about
// 9.6 KB per small pod, against ~0.6 KB here after sharing.
//
// With an interner, parts that are equal in many pods (labels, container lists, conditions,
// container statuses, owner references) are built once and shared: a Snapshot is read-only.

// errUnsupported: a type the plan cannot convert exactly; the caller uses ToUnstructured.
var errUnsupported = errors.New("type not supported by the fast converter")

// hashSeed is fixed for the process so that plans can carry the hashes of field names.
var hashSeed = maphash.MakeSeed()

// kv is a key and its converted value, collected before the map is made.
type kv struct {
	k  string
	hk uint64 // hash of k
	v  any
	hv uint64
	// own is 1 + the index in convState.own of the object's own string that v stands for (v is
	// nil until placeOwn), 0 for none.
	own int
	// canon: v is a scalar or a shared node (see convFunc), hashed by hv: in a record of the
	// object's own, its value may be fixed by the key list (see convState.template).
	canon bool
}

// convState is the scratch of one conversion; not safe for concurrent use.
type convState struct {
	pairs []kv  // stack of the maps being built
	elems []any // stack of the slices being built
	in    *interner
	// own are the object's own strings (its name, uid, IP, ...: strings of records never
	// shared), placed together once the object is converted (see placeOwn).
	own  []ownString
	uniq []ownHome // placeOwn's scratch
	// last is the last string not shared that was boxed into an any (one of a shared record:
	// a container's name): the same string next (its status's name) shares the box.
	last    string
	lastBox any
	// object: the value ObjectConverter converts is a Kubernetes object (its metadata and
	// status its own, its managedFields dropped), not a plain JSON value.
	object bool
	// fresh are the data words of the shared nodes this conversion added to the interner's
	// table: no other object has them (yet), so a key list fixing one would be this object's
	// alone (see template).
	fresh []unsafe.Pointer
}

// noteAdded notes v as fresh when the interner added it (see convState.fresh).
func (st *convState) noteAdded(v any, added bool) any {
	if added {
		st.fresh = append(st.fresh, dataWord(v))
	}
	return v
}

// dataWord is the data word of an any: the identity of a shared node.
func dataWord(v any) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] }

// box returns s in an any: shared through the interner for strings many pods have (intern),
// else shared with the string boxed just before when they are equal.
func (st *convState) box(s string, h uint64, intern bool) any {
	if intern && st.in != nil {
		return st.noteAdded(st.in.strAdded(s, h))
	}
	if st.lastBox != nil && st.last == s {
		return st.lastBox
	}
	var b any = s
	st.last, st.lastBox = s, b
	return b
}

// ownString is one of an object's own strings and the value that holds it: a string of a
// record (str; see record.Keys.Layout) or an any (slot); neither when its pair was dropped (a
// later one with the key, an extra entry).
type ownString struct {
	s    string
	slot *any
	str  *string
	home int // its distinct value's index in convState.uniq, set by placeOwn
}

// ownHome is a distinct own string of the object: the header an any holding it points at
// (at: one of a record's strings holding it, else one of a list made for them).
type ownHome struct {
	s     string
	at    *string
	boxed bool // an any holds it
}

// addOwn pushes the pair of key f holding s, an object's own string, onto st.pairs: its value
// is set by placeOwn.
func (st *convState) addOwn(f *field, s string, h uint64) {
	st.own = append(st.own, ownString{s: s})
	st.pairs = append(st.pairs, kv{k: f.name, hk: f.hk, hv: h, own: len(st.own)})
}

// placeOwn gives the object's own strings their values: the strings of the records that hold
// them as strings (see convState.template), and anys pointing at one of those (one header for
// equal strings: status.podIP and status.podIPs[0].ip) or at a list of headers made for the
// others, instead of a box each; with place.copy, their bytes are one string too. The
// records holding them are unshared (never in the interner) and not yet given to anyone:
// setting their values is safe.
func (st *convState) placeOwn(place *ownPlace) {
	defer func() {
		clear(st.own)
		st.own = st.own[:0]
		clear(st.uniq)
		st.uniq = st.uniq[:0]
	}()
	size, headers := 0, 0
	for i := range st.own {
		o := &st.own[i]
		if o.slot == nil && o.str == nil {
			continue
		}
		j := slices.IndexFunc(st.uniq, func(u ownHome) bool { return u.s == o.s })
		if j < 0 {
			j = len(st.uniq)
			st.uniq = append(st.uniq, ownHome{s: o.s})
			size += len(o.s)
		}
		o.home = j
		u := &st.uniq[j]
		if o.str != nil && u.at == nil {
			if u.boxed {
				headers-- // counted below: held by a record after all
			}
			u.at = o.str
		}
		if o.slot != nil && !u.boxed {
			u.boxed = true
			if u.at == nil {
				headers++
			}
		}
	}
	if len(st.uniq) == 0 {
		return
	}
	if place != nil && place.copy {
		var b strings.Builder
		b.Grow(size)
		for _, u := range st.uniq {
			b.WriteString(u.s)
		}
		all, off := b.String(), 0
		for i := range st.uniq {
			n := len(st.uniq[i].s)
			st.uniq[i].s = all[off : off+n]
			off += n
		}
	}
	if headers > 0 {
		list := make([]string, 0, headers)
		for i := range st.uniq {
			if u := &st.uniq[i]; u.boxed && u.at == nil {
				list = append(list, u.s)
				u.at = &list[len(list)-1]
			}
		}
	}
	for _, o := range st.own {
		if o.str != nil {
			*o.str = st.uniq[o.home].s
		}
		if o.slot != nil {
			*o.slot = stringAt(st.uniq[o.home].at)
		}
	}
}

// ownPlace says where an object's own strings go (see placeOwn); nil: the strings kept as
// they are.
type ownPlace struct {
	// copy: the caller does not keep the object: the strings are copied into one (what the
	// records hold would keep each of the object's strings otherwise).
	copy bool
}

// stringAt returns the string *p as an any whose data is p itself: what boxing *p would give,
// without a box of its own (16 bytes and an allocation for each string). *p must never change.
func stringAt(p *string) any {
	var typed any = ""
	e := *(*[2]unsafe.Pointer)(unsafe.Pointer(&typed))
	e[1] = unsafe.Pointer(p)
	return *(*any)(unsafe.Pointer(&e))
}

// convFunc converts v. canon reports that the result is a scalar or a shared (interned)
// node, so that a parent made of canonical values can be shared too; h hashes the content
// and is meaningful only when canon is set.
type convFunc func(st *convState, v reflect.Value) (out any, h uint64, canon bool, err error)

type plan struct {
	conv convFunc
	err  error // set when the type cannot be converted exactly
}

var plans sync.Map // reflect.Type -> *plan

var planMu sync.Mutex // serializes plan building (recursive types see their own entry)

// planFor returns the plan of t, building it (and the plans of the types it holds) once.
func planFor(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	planMu.Lock()
	defer planMu.Unlock()
	building := map[reflect.Type]*plan{}
	p := buildPlan(t, building)
	for bt, bp := range building {
		plans.LoadOrStore(bt, bp)
	}
	return p
}

// uniqueStrings are the string fields of the notShared types whose values are (nearly) one
// pod's own: sharing them would only fill the interner's table.
var uniqueStrings = map[string]bool{"name": true, "uid": true, "resourceVersion": true, "selfLink": true, "podIP": true, "ip": true}

// notShared are types whose maps are (nearly) always unique to one pod (they hold its name
// or IP): looking them up for sharing would only fill the table.
var notShared = map[reflect.Type]bool{
	reflect.TypeFor[corev1.Pod]():        true,
	reflect.TypeFor[metav1.ObjectMeta](): true,
	reflect.TypeFor[corev1.PodStatus]():  true,
	reflect.TypeFor[corev1.PodIP]():      true,
}

const (
	tagNil uint64 = iota + 0x9e3779b97f4a7c15
	tagTrue
	tagFalse
	tagInt
	tagFloat
	tagString
	tagMap
	tagSlice
	tagTemplate
	tagKeys
)

// mix is a 64-bit finalizer (murmur3's fmix64).
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func hashString(s string) uint64 { return maphash.String(hashSeed, s) ^ tagString }

// hashScalar hashes the scalars a conversion yields; ok is false for anything else.
func hashScalar(v any) (uint64, bool) {
	switch x := v.(type) {
	case nil:
		return tagNil, true
	case string:
		return hashString(x), true
	case bool:
		if x {
			return tagTrue, true
		}
		return tagFalse, true
	case int64:
		return mix(uint64(x) ^ tagInt), true
	case float64:
		return mix(math.Float64bits(x) ^ tagFloat), true
	}
	return 0, false
}

// pairHash is an entry's share of a map's hash; a map's hash is the sum over its entries, so
// that the order of the entries does not matter.
func pairHash(hk, hv uint64) uint64 { return mix(hk*0x9e3779b97f4a7c15 + hv) }

func mapHash(sum uint64, n int) uint64 { return mix(sum ^ uint64(n) ^ tagMap) }

func buildPlan(t reflect.Type, building map[reflect.Type]*plan) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	if p, ok := building[t]; ok {
		return p // recursive type: filled in below by the outer call
	}
	p := &plan{}
	building[t] = p
	// Same order of checks as ToUnstructured: a custom converter first, then the kind.
	if value.TypeReflectEntryOf(t).CanConvertToUnstructured() {
		p.conv = customConv(t)
		return p
	}
	switch t.Kind() {
	case reflect.String:
		p.conv = func(_ *convState, v reflect.Value) (any, uint64, bool, error) {
			s := v.String()
			return s, hashString(s), true, nil
		}
	case reflect.Bool:
		p.conv = func(_ *convState, v reflect.Value) (any, uint64, bool, error) {
			b := v.Bool()
			h, _ := hashScalar(b)
			return b, h, true, nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.conv = func(_ *convState, v reflect.Value) (any, uint64, bool, error) {
			i := v.Int()
			return i, mix(uint64(i) ^ tagInt), true, nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		p.conv = func(_ *convState, v reflect.Value) (any, uint64, bool, error) {
			u := v.Uint()
			if u > math.MaxInt64 {
				return nil, 0, false, fmt.Errorf("unsigned value %d does not fit into int64 (overflow)", u)
			}
			return int64(u), mix(u ^ tagInt), true, nil
		}
	case reflect.Float32, reflect.Float64:
		p.conv = func(_ *convState, v reflect.Value) (any, uint64, bool, error) {
			f := v.Float()
			return f, mix(math.Float64bits(f) ^ tagFloat), true, nil
		}
	case reflect.Pointer:
		elem := buildPlan(t.Elem(), building)
		p.conv = func(st *convState, v reflect.Value) (any, uint64, bool, error) {
			if v.IsNil() {
				return nil, tagNil, true, nil
			}
			return elem.convert(st, v.Elem())
		}
	case reflect.Interface:
		p.conv = func(st *convState, v reflect.Value) (any, uint64, bool, error) {
			if v.IsNil() {
				return nil, tagNil, true, nil
			}
			e := v.Elem()
			return planFor(e.Type()).convert(st, e)
		}
	case reflect.Slice:
		p.conv = sliceConv(t, building)
	case reflect.Map:
		p.conv = mapConv(t, building)
	case reflect.Struct:
		p.conv, p.err = structConv(t, building)
	default:
		p.err = fmt.Errorf("%w: %v", errUnsupported, t)
	}
	return p
}

func (p *plan) convert(st *convState, v reflect.Value) (any, uint64, bool, error) {
	if p.err != nil {
		return nil, 0, false, p.err
	}
	return p.conv(st, v)
}

// customConv is ToUnstructured's own path for types with a custom conversion (Time,
// Quantity, IntOrString, ...): the same call, so the same result.
func customConv(t reflect.Type) convFunc {
	entry := value.TypeReflectEntryOf(t)
	return func(_ *convState, v reflect.Value) (any, uint64, bool, error) {
		out, err := entry.ToUnstructured(v)
		if err != nil {
			return nil, 0, false, err
		}
		h, ok := hashScalar(out)
		return out, h, ok, nil
	}
}

func sliceConv(t reflect.Type, building map[reflect.Type]*plan) convFunc {
	if t.Elem().Kind() == reflect.Uint8 {
		// As JSON has it: base64.
		return func(_ *convState, v reflect.Value) (any, uint64, bool, error) {
			if v.IsNil() {
				return nil, tagNil, true, nil
			}
			s := base64.StdEncoding.EncodeToString(v.Bytes())
			return s, hashString(s), true, nil
		}
	}
	elem := buildPlan(t.Elem(), building)
	return func(st *convState, v reflect.Value) (any, uint64, bool, error) {
		if v.IsNil() {
			return nil, tagNil, true, nil
		}
		n := v.Len()
		base := len(st.elems)
		h, canon := tagSlice, true
		for i := range n {
			e, he, c, err := elem.convert(st, v.Index(i))
			if err != nil {
				st.elems = st.elems[:base]
				return nil, 0, false, err
			}
			st.elems = append(st.elems, e)
			h = mix(h*0x100000001b3 + he)
			canon = canon && c
		}
		h = mix(h ^ uint64(n))
		out := st.noteAdded(st.in.sliceAdded(st.elems[base:], h, canon))
		clear(st.elems[base:])
		st.elems = st.elems[:base]
		return out, h, canon && st.in != nil, nil
	}
}

func mapConv(t reflect.Type, building map[reflect.Type]*plan) convFunc {
	if t.Key().Kind() != reflect.String {
		err := fmt.Errorf("%w: map with %v keys", errUnsupported, t.Key())
		return func(*convState, reflect.Value) (any, uint64, bool, error) { return nil, 0, false, err }
	}
	elem := buildPlan(t.Elem(), building)
	plainStrings := t == reflect.TypeFor[map[string]string]()
	return func(st *convState, v reflect.Value) (any, uint64, bool, error) {
		if v.IsNil() {
			return nil, tagNil, true, nil
		}
		base := len(st.pairs)
		var sum uint64
		canon := true
		if plainStrings && v.CanInterface() {
			for k, s := range v.Interface().(map[string]string) {
				hk, hv := hashString(k), hashString(s)
				st.pairs = append(st.pairs, kv{k: k, hk: hk, v: s, hv: hv})
				sum += pairHash(hk, hv)
			}
		} else {
			it := v.MapRange()
			for it.Next() {
				e, hv, c, err := elem.convert(st, it.Value())
				if err != nil {
					st.pairs = st.pairs[:base]
					return nil, 0, false, err
				}
				k := it.Key().String()
				hk := hashString(k)
				st.pairs = append(st.pairs, kv{k: k, hk: hk, v: e, hv: hv})
				sum += pairHash(hk, hv)
				canon = canon && c
			}
		}
		n := len(st.pairs) - base
		h := mapHash(sum, n)
		// A map's keys are data (label names): its record gets a key list of its own.
		out, added := st.in.mapOfAdded(st.pairs[base:], h, canon, nil)
		st.noteAdded(out, added)
		clear(st.pairs[base:])
		st.pairs = st.pairs[:base]
		return out, h, canon && st.in != nil, nil
	}
}

// field is one struct field as ToUnstructured treats it (see fieldInfoFromField and
// structToUnstructured in k8s.io/apimachinery/pkg/runtime/converter.go).
type field struct {
	index     int
	name      string // "" for an inlined (embedded) struct
	hk        uint64
	omitempty bool
	omitzero  func(reflect.Value) bool
	scalar    reflect.Kind // string, bool, int, uint or float kinds are stored directly
	// internStr: a string field of a pod's own part (not shared whole) whose values repeat
	// from pod to pod (namespace, phase, hostIP, ...): its values are shared.
	internStr bool
	plan      *plan       // otherwise
	inline    *structPlan // for inlined fields
	inlinePtr bool
}

type structPlan struct {
	fields []field
	shared bool
	shapes record.Shapes // the key lists of this type's records, one per set of fields present
	// fixed are the key lists of top-level records with the values of their extra entries
	// fixed (see topKeys): fixedKey -> *record.Keys.
	fixed sync.Map
}

func structConv(t reflect.Type, building map[reflect.Type]*plan) (convFunc, error) {
	sp, err := buildStructPlan(t, building)
	if err != nil {
		return nil, err
	}
	return func(st *convState, v reflect.Value) (any, uint64, bool, error) {
		base := len(st.pairs)
		sum, canon, err := sp.collect(st, v, !sp.shared)
		if err != nil {
			st.pairs = st.pairs[:base]
			return nil, 0, false, err
		}
		n := len(st.pairs) - base
		h := mapHash(sum, n)
		canon = canon && sp.shared
		var out *record.Record
		if canon {
			var added bool
			out, added = st.in.mapOfAdded(st.pairs[base:], h, true, &sp.shapes)
			st.noteAdded(out, added)
		} else {
			out = st.newRecord(sortPairs(st.pairs[base:]), &sp.shapes)
		}
		clear(st.pairs[base:])
		st.pairs = st.pairs[:base]
		return out, h, canon && st.in != nil, nil
	}, nil
}

func buildStructPlan(t reflect.Type, building map[reflect.Type]*plan) (*structPlan, error) {
	sp := &structPlan{shared: !notShared[t] && !holdsUniqueField(t)}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			return nil, fmt.Errorf("%w: unexported field %s of %v", errUnsupported, sf.Name, t)
		}
		f := field{index: i}
		tag, hasTag := sf.Tag.Lookup("json")
		if !hasTag || tag == "" {
			if !sf.Anonymous {
				f.name = sf.Name
			}
		} else {
			items := strings.Split(tag, ",")
			f.name = items[0]
			if f.name == "" && !sf.Anonymous {
				f.name = sf.Name
			}
			for _, it := range items[1:] {
				switch it {
				case "omitempty":
					f.omitempty = true
				case "omitzero":
					f.omitzero = value.OmitZeroFunc(sf.Type)
				case "embed":
					return nil, fmt.Errorf("%w: json embed directive on %s of %v", errUnsupported, sf.Name, t)
				}
			}
		}
		if f.name == "-" {
			continue
		}
		f.hk = hashString(f.name)
		if f.name == "" {
			// Inlined: its fields go into this map (a struct, or a pointer to one, without a
			// custom conversion; anything else ToUnstructured handles in ways not worth copying).
			it := sf.Type
			if it.Kind() == reflect.Pointer {
				f.inlinePtr = true
				it = it.Elem()
			}
			if it.Kind() != reflect.Struct || value.TypeReflectEntryOf(sf.Type).CanConvertToUnstructured() ||
				value.TypeReflectEntryOf(it).CanConvertToUnstructured() {
				return nil, fmt.Errorf("%w: inlined %v in %v", errUnsupported, sf.Type, t)
			}
			in, err := buildStructPlan(it, building)
			if err != nil {
				return nil, err
			}
			f.inline = in
			sp.fields = append(sp.fields, f)
			continue
		}
		if sf.Type.Kind() == reflect.String && !sp.shared && !uniqueStrings[f.name] {
			f.internStr = true
		}
		switch k := sf.Type.Kind(); k {
		case reflect.Slice:
			if uniqueKeys[f.name] && sf.Type.Elem().Kind() != reflect.Uint8 {
				// A list of one object's own values (addresses): never looked up.
				f.plan = &plan{conv: unshared(buildPlan(sf.Type, building))}
			} else {
				f.plan = buildPlan(sf.Type, building)
			}
		case reflect.String, reflect.Bool,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			f.scalar = k // stored directly, even with a custom conversion, as ToUnstructured does
		default:
			f.plan = buildPlan(sf.Type, building)
		}
		sp.fields = append(sp.fields, f)
	}
	return sp, nil
}

// holdsUniqueField reports whether a struct has a field whose value is (nearly) always one
// object's own (see uniqueKeys): its records are never looked up for sharing.
func holdsUniqueField(t reflect.Type) bool {
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if uniqueKeys[name] {
			return true
		}
	}
	return false
}

// unshared converts as p does, without sharing the result.
func unshared(p *plan) convFunc {
	return func(st *convState, v reflect.Value) (any, uint64, bool, error) {
		in := st.in
		st.in = nil
		defer func() { st.in = in }()
		out, h, _, err := p.convert(st, v)
		return out, h, false, err
	}
}

// isEmpty is omitempty as ToUnstructured reads it.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Map, reflect.Slice:
		return v.IsNil() || v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// collect pushes the fields of v onto st.pairs and returns the sum of their pair hashes. own
// says that the record they go to is never shared: its strings that are not shared are the
// object's own (see placeOwn).
func (sp *structPlan) collect(st *convState, v reflect.Value, own bool) (sum uint64, canon bool, err error) {
	canon = true
	for i := range sp.fields {
		f := &sp.fields[i]
		fv := v.Field(f.index)
		if f.omitempty && isEmpty(fv) {
			continue
		}
		if f.omitzero != nil && f.omitzero(fv) {
			continue
		}
		if f.inline != nil {
			if f.inlinePtr {
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			s, c, err := f.inline.collect(st, fv, own)
			if err != nil {
				return 0, false, err
			}
			sum += s
			canon = canon && c
			continue
		}
		var (
			out any
			h   uint64
			c   = true
		)
		switch f.scalar {
		case reflect.String:
			s := fv.String()
			h = hashString(s)
			if own && !f.internStr && s != "" {
				st.addOwn(f, s, h)
				sum += pairHash(f.hk, h)
				continue
			}
			out = st.box(s, h, f.internStr)
		case reflect.Bool:
			out, h = fv.Bool(), tagFalse
			if fv.Bool() {
				h = tagTrue
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			i := fv.Int()
			out, h = i, mix(uint64(i)^tagInt)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			u := fv.Uint()
			if u > math.MaxInt64 {
				return 0, false, fmt.Errorf("unsigned value %d does not fit into int64 (overflow)", u)
			}
			out, h = int64(u), mix(u^tagInt)
		case reflect.Float32, reflect.Float64:
			fl := fv.Float()
			out, h = fl, mix(math.Float64bits(fl)^tagFloat)
		default:
			out, h, c, err = f.plan.convert(st, fv)
			if err != nil {
				return 0, false, err
			}
			if s, ok := out.(string); ok && own && s != "" {
				// A string of a custom conversion (a time: creationTimestamp, startTime):
				// the object's own too.
				st.addOwn(f, s, h)
				sum += pairHash(f.hk, h)
				continue
			}
		}
		st.pairs = append(st.pairs, kv{k: f.name, hk: f.hk, v: out, hv: h, canon: c && (f.internStr || f.scalar != reflect.String)})
		sum += pairHash(f.hk, h)
		canon = canon && c
	}
	return sum, canon, nil
}

// sortPairs sorts pairs by key in place and returns them without repeated keys (the later
// of two pairs with one key wins, as when a map is filled in order). Insertion sort: records
// have few keys.
func sortPairs(pairs []kv) []kv {
	for i := 1; i < len(pairs); i++ {
		for j := i; j > 0 && pairs[j].k < pairs[j-1].k; j-- {
			pairs[j], pairs[j-1] = pairs[j-1], pairs[j]
		}
	}
	out := pairs[:0]
	for _, p := range pairs {
		if n := len(out); n > 0 && out[n-1].k == p.k {
			out[n-1] = p
			continue
		}
		out = append(out, p)
	}
	return out
}

// newRecord is newRecord for an object being converted: the values of its own strings are
// noted for placeOwn.
func (st *convState) newRecord(pairs []kv, shapes *record.Shapes) *record.Record {
	return st.withKeys(keysOf(pairs, shapes), pairs)
}

// withKeys makes the record of pairs with keys (theirs; with fixed values maybe), the values
// it shares with others fixed by its key list (see template), noting the values of own
// strings for placeOwn.
func (st *convState) withKeys(keys *record.Keys, pairs []kv) *record.Record {
	return fill(st.template(keys, pairs), pairs, st)
}

// template returns keys (a list without fixed values) with the values of pairs that are
// shared (labels, conditions, container statuses, a phase, the spec) fixed, a list shared
// through the interner by every record with those values (the pods of a ReplicaSet): such a
// record holds only its own values (16 bytes a value less; BenchmarkConvertedPodHeap). keys
// as it is without an interner, or when no value is shared.
func (st *convState) template(keys *record.Keys, pairs []kv) *record.Keys {
	if st.in == nil || len(pairs) > 64 || keys.Len() != len(pairs) {
		return keys
	}
	var mask, strs, recs uint64
	for i, p := range pairs {
		switch r, isRecord := p.v.(*record.Record); {
		case p.canon && p.own == 0 && !slices.Contains(st.fresh, dataWord(p.v)):
			// Shared with other objects already: a list fixing it has other records. (One
			// this object alone has, fixed, would make a list of its own: 100 bytes or more
			// for the 16 of its value; an Ingress's spec, say.)
			mask |= 1 << i
		case p.own > 0:
			strs |= 1 << i
		case isRecord && r != nil:
			recs |= 1 << i // one of the object's own records (its metadata, its status)
		}
	}
	nStr, nRec := bits.OnesCount64(strs), bits.OnesCount64(recs)
	others := len(pairs) - bits.OnesCount64(mask) - nStr - nRec
	if nStr > record.MaxStrings || others+nRec > record.MaxValuesBesideStrings {
		strs, others = 0, others+nStr // held by anys, each pointing at a header (see placeOwn)
	}
	if nRec > record.MaxRecords || others > 0 {
		recs = 0
	}
	if mask|strs|recs == 0 {
		return keys
	}
	h := tagTemplate
	for i, p := range pairs {
		switch bit := uint64(1) << i; {
		case mask&bit != 0:
			h += pairHash(p.hk, p.hv)
		case strs&bit != 0:
			h += mix(p.hk ^ tagString)
		case recs&bit != 0:
			h += mix(p.hk ^ tagMap)
		default:
			h += mix(p.hk ^ tagTemplate)
		}
	}
	return st.in.template(keys, pairs, mask, strs, recs, mix(h^uint64(len(pairs))))
}

// newRecord makes the record of pairs, sorted and without repeated keys (see sortPairs),
// with its key list from shapes (nil: a list of its own).
func newRecord(pairs []kv, shapes *record.Shapes) *record.Record {
	return withKeys(keysOf(pairs, shapes), pairs)
}

// withKeys makes the record of pairs with keys (theirs).
func withKeys(keys *record.Keys, pairs []kv) *record.Record {
	return fill(keys, pairs, nil)
}

// fill makes the record of pairs with keys: it holds the values of the pairs whose keys are
// not fixed (Keys.FixedAt). With st, the places of the object's own strings are noted for
// placeOwn.
func fill(keys *record.Keys, pairs []kv, st *convState) *record.Record {
	r, slots := record.MakeLayout(keys)
	if vals := slots.Values; len(vals) == len(pairs) { // nothing fixed, all held as anys
		for i, p := range pairs {
			vals[i] = p.v
			if p.own > 0 && st != nil {
				st.own[p.own-1].slot = &vals[i]
			}
		}
		return r
	}
	for i, p := range pairs {
		switch _, fixed := keys.FixedValue(i); {
		case fixed:
		case keys.HoldsString(i):
			st.own[p.own-1].str = &slots.Strings[0] // only own strings are held as strings
			slots.Strings = slots.Strings[1:]
		case keys.HoldsRecord(i):
			slots.Records[0] = p.v.(*record.Record)
			slots.Records = slots.Records[1:]
		default:
			slots.Values[0] = p.v
			if p.own > 0 && st != nil {
				st.own[p.own-1].slot = &slots.Values[0]
			}
			slots.Values = slots.Values[1:]
		}
	}
	return r
}

// keysOf is the key list of pairs, from shapes (nil: a list of its own).
func keysOf(pairs []kv, shapes *record.Shapes) *record.Keys {
	var buf [24]string
	names := pairNames(buf[:0], pairs)
	if shapes == nil {
		return record.NewKeys(names...)
	}
	return shapes.Keys(names)
}

// pairNames appends the keys of pairs to names.
func pairNames(names []string, pairs []kv) []string {
	for _, p := range pairs {
		names = append(names, p.k)
	}
	return names
}

// fixedKey names a key list with the fixed values of an object's extra entries.
type fixedKey struct {
	keys       *record.Keys
	first, sec any
}

// topKeys is the key list of the top-level record of an object, pairs sorted: with the
// values of the two extra entries (apiVersion, kind) fixed when they are its first keys and
// strings: no object holds them then (32 bytes each).
func (sp *structPlan) topKeys(pairs []kv, extra []kv) *record.Keys {
	keys := keysOf(pairs, &sp.shapes)
	if len(extra) != 2 || len(pairs) < 2 {
		return keys
	}
	for i, e := range extra {
		_, isString := e.v.(string)
		if pairs[i].k != e.k || !isString || pairs[i].v != e.v {
			return keys
		}
	}
	k := fixedKey{keys: keys, first: extra[0].v, sec: extra[1].v}
	if fk, ok := sp.fixed.Load(k); ok {
		return fk.(*record.Keys)
	}
	fk, _ := sp.fixed.LoadOrStore(k, keys.Fixed(extra[0].v, extra[1].v))
	return fk.(*record.Keys)
}

// toUnstructured converts obj (a pointer to a struct) as ToUnstructured does, sharing equal
// parts through in (nil: no sharing). extra entries are added to the top-level record.
// place says where the object's own strings go (see placeOwn).
func toUnstructured(obj any, in *interner, place *ownPlace, extra ...kv) (*record.Record, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %T", errUnsupported, obj)
	}
	v = v.Elem()
	p := planFor(v.Type())
	if p.err != nil {
		return nil, p.err
	}
	sp, err := buildStructPlanCached(v.Type())
	if err != nil {
		return nil, err
	}
	st := statePool.Get().(*convState)
	defer func() {
		st.in = nil
		clear(st.fresh) // nor keep the nodes alive in the pool
		st.fresh = st.fresh[:0]
		statePool.Put(st)
	}()
	st.in = in
	st.pairs = st.pairs[:0]
	clear(st.fresh)
	st.fresh = st.fresh[:0]
	st.last, st.lastBox = "", nil
	clear(st.own)
	st.own = st.own[:0]
	if _, _, err := sp.collect(st, v, !sp.shared); err != nil {
		clear(st.pairs)
		clear(st.own) // nor keep what was made of the object alive in the pool
		st.own = st.own[:0]
		return nil, err
	}
	for _, e := range extra {
		e.hk = hashString(e.k)
		e.hv, e.canon = hashScalar(e.v)
		replaced := false
		for i := range st.pairs {
			if st.pairs[i].k == e.k {
				st.pairs[i], replaced = e, true
			}
		}
		if !replaced {
			st.pairs = append(st.pairs, e)
		}
	}
	sorted := sortPairs(st.pairs)
	keys := keysOf(sorted, &sp.shapes)
	if in == nil {
		keys = sp.topKeys(sorted, extra)
	}
	m := st.withKeys(keys, sorted)
	clear(st.pairs)
	st.placeOwn(place)
	return m, nil
}

var statePool = sync.Pool{New: func() any { return &convState{} }}

var structPlans sync.Map // reflect.Type -> *structPlan, for top-level objects

func buildStructPlanCached(t reflect.Type) (*structPlan, error) {
	if sp, ok := structPlans.Load(t); ok {
		return sp.(*structPlan), nil
	}
	planMu.Lock()
	building := map[reflect.Type]*plan{}
	sp, err := buildStructPlan(t, building)
	for bt, bp := range building {
		plans.LoadOrStore(bt, bp)
	}
	planMu.Unlock()
	if err != nil {
		return nil, err
	}
	structPlans.Store(t, sp)
	return sp, nil
}
