package jinja

import (
	"hash/maphash"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Comparing and hashing what a loop's body read (reuse_body.go). As sameValue and hashValue,
// with what a loop over thousands of items needs: the data (the context's maps, lists and
// records, which nothing changes: see copier) is the same when it is the same object, so a
// service the snapshot kept is compared in one step; and a map is hashed by its contents in
// any order (hashValue hashes its size only: every service would fall in one bucket).

// bodySame says whether a and b are the same to a body that reads them (as sameValue).
func bodySame(a, b any) bool {
	switch x := a.(type) {
	case string: // most reads: a name, a namespace (as sameData)
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if mapID(x) == mapID(y) {
			return true
		}
		for k, v := range x {
			if w, found := y[k]; !found || !bodySame(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if len(x) == 0 || &x[0] == &y[0] {
			return true
		}
		return bodySameAll(x, y)
	case []map[string]any:
		y, ok := b.([]map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if len(x) == 0 || &x[0] == &y[0] {
			return true
		}
		for i := range x {
			if !bodySame(x[i], y[i]) {
				return false
			}
		}
		return true
	case *record.Record:
		y, ok := b.(*record.Record)
		if !ok || x.Len() != y.Len() {
			return false
		}
		if x == y {
			return true
		}
		// Keys in sorted order: the same data has the same key at each place (sameData).
		sameKeys := x.SameKeys(y)
		for i := range x.Len() {
			if !sameKeys && x.Key(i) != y.Key(i) || !bodySame(x.Value(i), y.Value(i)) {
				return false
			}
		}
		return true
	case *List:
		y, ok := b.(*List)
		return ok && bodySameAll(x.items, y.items)
	case Tuple:
		y, ok := b.(Tuple)
		return ok && bodySameAll(x, y)
	case *Namespace:
		y, ok := b.(*Namespace)
		return ok && bodySame(x.attrs, y.attrs)
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || len(x.keys) != len(y.keys) {
			return false
		}
		for i := range x.keys {
			if !bodySame(x.keys[i], y.keys[i]) || !bodySame(x.vals[i], y.vals[i]) {
				return false
			}
		}
		return true
	}
	return sameValue(a, b)
}

func bodySameAll(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bodySame(a[i], b[i]) {
			return false
		}
	}
	return true
}

// mapID is a map's identity.
func mapID(m map[string]any) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&m)) }

// maxBodyHashed bounds the values hashed for one iteration: a body that reads more is run.
const maxBodyHashed = 1 << 16

// bodyHasher hashes what bodies read: equal values (bodySame) hash alike.
type bodyHasher struct {
	seed   maphash.Seed
	budget int
}

// maxBodyDepth is how deep values are hashed: below, a map, list or record is hashed by its
// size only. Values that are the same still hash alike, and the hash only finds candidates
// (bodySame decides): a service's name and host names tell it from the others, its pods'
// contents need not be hashed (at each service's first render, 10,000 x 10 pods).
const maxBodyDepth = 2

// mix adds v to the hash h (the hash only finds candidates: bodySame decides).
func mix(h, v uint64) uint64 { return (h ^ v) * 0x100000001b3 }

// sum is the hash of v (depth: how deep v is in what is hashed); false when v cannot be
// compared (a macro, a loop object: sameValue never finds them the same) or there is too
// much of it.
func (hs *bodyHasher) sum(v any, depth int) (uint64, bool) {
	hs.budget--
	if hs.budget < 0 {
		return 0, false
	}
	switch x := v.(type) {
	case string:
		return maphash.String(hs.seed, x), true
	case bool:
		if x {
			return 0x51, true
		}
		return 0x50, true
	case int64:
		return mix(0x49, uint64(x)), true
	case notSet:
		return 0x55, true
	case map[string]any:
		if depth > maxBodyDepth {
			return mix(0x4d, uint64(len(x))), true
		}
		// In any order: the sum of the entries' hashes.
		var total uint64
		for k, e := range x {
			s, ok := hs.sum(e, depth+1)
			if !ok {
				return 0, false
			}
			total += mix(maphash.String(hs.seed, k), s)
		}
		return mix(0x4d, total), true
	case *record.Record:
		if depth > maxBodyDepth {
			return mix(0x72, uint64(x.Len())), true
		}
		h := uint64(0x72)
		for k, e := range x.All() {
			s, ok := hs.sum(e, depth+1)
			if !ok {
				return 0, false
			}
			h = mix(mix(h, maphash.String(hs.seed, k)), s)
		}
		return h, true
	case []any:
		return hs.list(0x4c, x, depth)
	case *List:
		return hs.list(0x6c, x.items, depth)
	case Tuple:
		return hs.list(0x70, x, depth)
	case []map[string]any:
		if depth > maxBodyDepth {
			return mix(0x44, uint64(len(x))), true
		}
		h := uint64(0x44)
		for _, e := range x {
			s, ok := hs.sum(e, depth+1)
			if !ok {
				return 0, false
			}
			h = mix(h, s)
		}
		return h, true
	case *Namespace:
		s, ok := hs.sum(x.attrs, depth+1)
		return mix(0x4e, s), ok
	case *sealedRead:
		return hs.sum(x.copy, depth) // a kept read: as what it read
	case *Dict:
		h := uint64(0x64)
		for i := range x.keys {
			k, ok := hs.sum(x.keys[i], depth+1)
			if !ok {
				return 0, false
			}
			s, ok := hs.sum(x.vals[i], depth+1)
			if !ok {
				return 0, false
			}
			h = mix(mix(h, k), s)
		}
		return h, true
	}
	var h maphash.Hash
	h.SetSeed(hs.seed)
	if !hashScalar(&h, v) {
		return 0, false
	}
	return h.Sum64(), true
}

// reads is the hash of an iteration's reads vals (those of a loop whose body reads by key:
// reads; else nil): a keyed read is hashed as set or not only, the kept iterations of that
// hash are compared on the keys they looked up (keyedRead.same).
func (hs *bodyHasher) reads(vals []any, reads []freeRead) (uint64, bool) {
	if reads == nil {
		return hs.sum(Tuple(vals), 0)
	}
	hs.budget--
	h := uint64(0x70)
	for i, v := range vals {
		s := uint64(0x4b)
		switch _, unset := v.(notSet); {
		case i < len(reads) && reads[i].keyed && unset:
			s = 0x55
		case i >= len(reads) || !reads[i].keyed:
			var ok bool
			if s, ok = hs.sum(v, 1); !ok {
				return 0, false
			}
		}
		h = mix(h, s)
	}
	return h, true
}

func (hs *bodyHasher) list(tag uint64, items []any, depth int) (uint64, bool) {
	if depth > maxBodyDepth {
		return mix(tag, uint64(len(items))), true
	}
	h := tag
	for _, e := range items {
		s, ok := hs.sum(e, depth+1)
		if !ok {
			return 0, false
		}
		h = mix(h, s)
	}
	return h, true
}
