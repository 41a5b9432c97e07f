package jinja

import (
	"math"
	"reflect"
	"sync/atomic"
	"weak"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// A chain that a module imported in a loop only calls get on (X.get(KEY), X.get(KEY,
// DEFAULT); reuse_chain.go) is read per key: what the module found of X is what get gave for
// the keys it looked up. Its evaluation records them, call site by call site (keyRecorder),
// and a kept module read the same when the new X gives the same for each of them (X the same
// record or map from the context as when it was computed: the same, without looking). The
// per-route part of the HTTPRoute example looks up the Services its backendRefs name and the
// Gateways its parentRefs name: another Service's or Gateway's change leaves it as it was.
// A lookup whose key is not a plain string or number, on what is not a dict, or on another
// object than the one read at the import (the module's own of the same name), makes the read
// never the same. Calls after the import (the module's macros called by its importer) are not
// the module's evaluation: what it computed is what is kept, and they look again each time.
//
// A loop's body reads by key the same way (bodyReads; reuse_body.go): the run of an iteration
// being kept records its lookups, its inner loops' and its own macros' included, and a kept
// iteration serves when the new X gives the same for each; the loop's own variables are read
// whole (they tell its iterations apart in the hash, which a keyed read does not enter).

// keyedRead is what a module found of a keyed read: the keys it looked up and what get found.
type keyedRead struct {
	ident  atomic.Pointer[identBox] // the data value (never changed) last found the same
	looked []lookup                 // one slice, not one per field: 20,000 of these at 10,000 backends
	stop   bool                     // a lookup that cannot be compared: never the same
}

// lookup is one key a keyed read looked up, and what get found.
type lookup struct {
	key   any
	hk    hashKey
	val   any // a copy (loopSnapshot's) of what was found
	found bool
}

// identBox holds a value of the context read by key, for the fast path: a record weakly
// (a kept read that a loop's sheet takes without comparing it is not noted as found the same
// in each new record: it must not hold the old ones, and the inputs' versions with them), a
// map as it is.
type identBox struct {
	v   any
	rec weak.Pointer[record.Record]
}

// newIdentBox is the box of v.
func newIdentBox(v any) *identBox {
	if r, ok := v.(*record.Record); ok {
		return &identBox{rec: weak.Make(r)}
	}
	return &identBox{v: v}
}

// value is the value held; nil when a record held is gone (nothing else held it).
func (b *identBox) value() any {
	if b.v != nil {
		return b.v
	}
	if r := b.rec.Value(); r != nil {
		return r
	}
	return nil
}

// keyRecorder records a module's keyed reads while it is computed for an import in a loop.
type keyRecorder struct {
	c      *ModuleCache
	sites  map[int]int            // freeInfo.sites
	nested map[string]map[int]int // freeInfo.nested: the sites of the templates it imports
	live   []any                  // the values read at the import
	reads  []*keyedRead           // by read; nil: not keyed, or not set at the import
	// outer: the recorder of the module whose computation imports this one (one that imports
	// others: nested), which records this one's lookups too (reuse_nested.go).
	outer *keyRecorder
}

// newKeyRecorder is the recorder of an import's or a loop body's keyed reads (nil: none; sites:
// the get calls' positions, to the read's index), whose kept values in snap become their
// keyedReads (notSet stays: a name not set is compared as ever).
func newKeyRecorder(c *ModuleCache, reads []freeRead, sites map[int]int, nested map[string]map[int]int, vals, snap []any) *keyRecorder {
	if len(sites) == 0 && len(nested) == 0 {
		return nil
	}
	r := &keyRecorder{c: c, sites: sites, nested: nested, live: vals, reads: make([]*keyedRead, len(vals))}
	for j, fr := range reads {
		if !fr.keyed {
			continue
		}
		if _, ok := vals[j].(notSet); ok {
			continue
		}
		k := &keyedRead{}
		if isData(vals[j]) {
			k.ident.Store(newIdentBox(vals[j]))
		}
		r.reads[j], snap[j] = k, k
	}
	return r
}

// site is the keyed read the get call at pos (of the template cur) records, on obj; nil when
// it is none. A call at a keyed site on another object than the one read makes that read never
// the same.
func (r *keyRecorder) site(cur *Template, pos int, obj any) *keyedRead {
	sites := r.sites
	if r.nested != nil && cur != nil {
		if m, ok := r.nested[cur.name]; ok {
			sites = m // a get call of a template it imports
		}
	}
	j, ok := sites[pos]
	if !ok || r.reads[j] == nil {
		return nil
	}
	k := r.reads[j]
	if !isMapping(obj) || !sameObject(obj, r.live[j]) {
		k.stop = true
		return nil
	}
	return k
}

// note records the lookup get(args...) on obj (caller: a {% call %}'s).
func (r *keyRecorder) note(k *keyedRead, obj any, args []any, kw map[string]any, caller bool) {
	if k.stop {
		return
	}
	if caller || len(kw) > 0 || len(args) < 1 || len(args) > 2 || !plainKey(args[0]) {
		k.stop = true
		return
	}
	hk, err := keyOf(args[0])
	if err != nil {
		k.stop = true
		return
	}
	for _, o := range k.looked {
		if o.hk == hk {
			return
		}
	}
	v, found, err := mapGet(obj, args[0])
	if err != nil {
		k.stop = true
		return
	}
	if found {
		snap, ok := r.c.loopSnapshot([]any{v}, nil)
		if !ok {
			k.stop = true
			return
		}
		v = snap[0]
	}
	k.looked = append(k.looked, lookup{key: args[0], hk: hk, val: v, found: found})
}

// same says whether v gives what the module found for each key it looked up.
func (k *keyedRead) same(v any) bool {
	switch v.(type) {
	case notSet, chainStop:
		return false
	}
	if k.stop {
		return false
	}
	if b := k.ident.Load(); b != nil && sameObject(b.value(), v) {
		return true
	}
	if len(k.looked) == 0 {
		return true // never looked up: what v is does not matter
	}
	if !isMapping(v) {
		return false
	}
	for _, l := range k.looked {
		w, found, err := mapGet(v, l.key)
		if err != nil || found != l.found || found && !sameValue(l.val, w) {
			return false
		}
	}
	if isData(v) {
		k.ident.Store(newIdentBox(v)) // the next import of the same data: without looking
	}
	return true
}

// lookups are what v gives now for the keys k looked up (loopKeep: what the module may hold).
func (k *keyedRead) lookups(v any) []any {
	var out []any
	for _, l := range k.looked {
		if w, found, err := mapGet(v, l.key); err == nil && found {
			out = append(out, w)
		}
	}
	return out
}

// plainKey says whether a key is a plain string or number.
func plainKey(v any) bool {
	switch x := v.(type) {
	case string, int64:
		return true
	case float64:
		return !math.IsNaN(x)
	}
	return false
}

// isData says whether v is a map or record from the context (never changed).
func isData(v any) bool {
	switch v.(type) {
	case map[string]any, map[string]string, *record.Record:
		return true
	}
	return false
}

// sameObject says whether a and b are the same dict, map or record.
func sameObject(a, b any) bool {
	switch x := a.(type) {
	case *Dict, *record.Record:
		return a == b
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	case map[string]string:
		y, ok := b.(map[string]string)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	return false
}
