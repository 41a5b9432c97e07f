package jinja

import (
	"unsafe"
	"weak"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// A kept iteration's read of a dict or list the template made is kept as a copy and compared
// item by item at each render (bodySame): the HTTPRoute example's backends loop reads each
// backend, a dict of its refs that its route's part made (a module imported in a loop, kept
// from render to render and lent to each: the same objects). When every dict and list of such
// a read is owned by one loan (reuse_loop.go: a kept module's, lent to the render), the
// iteration also notes the object and that loan (sealedRead): while the loan is not spoiled,
// none of them changed since (a change of any spoils it first: List.changing, Dict.changing),
// and the same object read again is the same, without comparing. Both are held weakly: a kept
// iteration does not keep a module the cache dropped alive; once either is gone, the copy is
// compared as before.

// sealedRead is a kept read of a dict or list whose dicts and lists one loan owned when the
// iteration ran.
type sealedRead struct {
	copy  any                // as the iteration read it (copyReads): compared with another object
	dict  weak.Pointer[Dict] // the object read: a dict, or a list
	list  weak.Pointer[List]
	owner weak.Pointer[loan] // the loan that owned its dicts and lists
	// addr is the object's address: another address is another object, told without asking
	// the weak pointer (which costs a few cache misses: as much as comparing a small dict).
	addr uintptr
}

// maxSealed is how many values (counting each item) a read may hold to be sealed: a body that
// reads the template's own values reads a few (ownSmall).
const maxSealed = 4 * maxOwnRead

// seal is what an iteration keeps of its read v (copy: copyReads'), after its body ran and
// left v as it read it: a sealedRead when one loan, not spoiled, owns all of v's dicts and
// lists; else copy.
func seal(v, copy any) any {
	owner := ownerOf(v)
	budget := maxSealed
	if owner == nil || owner.spoiled.Load() || !ownedBy(v, owner, &budget) {
		return copy
	}
	s := &sealedRead{copy: copy}
	s.note(v, owner)
	return s
}

// note makes s hold v (a dict or list whose dicts and lists owner owns).
func (s *sealedRead) note(v any, owner *loan) {
	s.owner, s.dict, s.list = weak.Make(owner), weak.Pointer[Dict]{}, weak.Pointer[List]{}
	switch x := v.(type) {
	case *Dict:
		s.dict, s.addr = weak.Make(x), uintptr(unsafe.Pointer(x))
	case *List:
		s.list, s.addr = weak.Make(x), uintptr(unsafe.Pointer(x))
	}
}

// reseal makes s hold v, found the same as its copy (bodySame) though another object, when
// one loan, not spoiled, owns v's dicts and lists: the next renders that read v again find it
// held, without comparing. The HTTPRoute example's backends were found in other dicts than
// those their iterations were kept with, at each render after a wave of status writes (the
// routes' parts computed again once, equal): compared item by item at every render since.
func (s *sealedRead) reseal(v any) {
	owner := ownerOf(v)
	budget := maxSealed
	if owner == nil || owner.spoiled.Load() || !ownedBy(v, owner, &budget) {
		return
	}
	s.note(v, owner)
}

// ownedBy says whether every dict and list of v is l's, and v holds nothing else a render may
// change in place (a tuple: retaint; a namespace's attributes are a dict).
func ownedBy(v any, l *loan, budget *int) bool {
	*budget--
	if *budget < 0 {
		return false
	}
	switch x := v.(type) {
	case nil, bool, int64, float64, string, Markup:
		return true
	case map[string]any, map[string]string, []any, []string, []map[string]any, *record.Record:
		return true // the data: never changed
	case *Namespace:
		return ownedBy(x.attrs, l, budget)
	case *List:
		if x.owner != l {
			return false
		}
		for _, e := range x.items {
			if !ownedBy(e, l, budget) {
				return false
			}
		}
		return true
	case *Dict:
		if x.owner != l {
			return false
		}
		for i := range x.keys {
			if !ownedBy(x.keys[i], l, budget) || !ownedBy(x.vals[i], l, budget) {
				return false
			}
		}
		return true
	}
	return false
}

// holds says whether v is the object s noted, its owner still the loan that owned it then, not
// spoiled since: v is then as the iteration read it.
func (s *sealedRead) holds(v any) bool {
	var owner *loan
	switch x := v.(type) {
	case *Dict:
		if uintptr(unsafe.Pointer(x)) != s.addr || s.dict.Value() != x {
			return false
		}
		owner = x.owner
	case *List:
		if uintptr(unsafe.Pointer(x)) != s.addr || s.list.Value() != x {
			return false
		}
		owner = x.owner
	default:
		return false
	}
	return owner != nil && s.owner.Value() == owner && !owner.spoiled.Load()
}

// sealReads seals what an iteration read (vals, as they are after its body ran) in its kept
// reads snap (copies): each dict or list the template made that one loan owns whole, but those
// read by key.
func sealReads(snap, vals []any) {
	for i, v := range vals {
		if _, keyed := snap[i].(*keyedRead); keyed {
			continue // compared by the keys it looked up
		}
		switch v.(type) {
		case *Dict, *List:
			snap[i] = seal(v, snap[i])
		}
	}
}

// ownerOf is the loan a dict or list is part of (nil: none, or v is neither).
func ownerOf(v any) *loan {
	switch x := v.(type) {
	case *Dict:
		return x.owner
	case *List:
		return x.owner
	}
	return nil
}
