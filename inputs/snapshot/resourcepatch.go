package snapshot

import (
	"cmp"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// A watched resource of which a few objects changed since the last Assemble gets its lookups
// from the last ones (issue 25): by_name and each index with the entries of the changed objects
// made again and the others kept, at the cost of a copy of their entries rather than of
// reading every object (an index's labels or fields) and sorting the keys.

// objectChange is an object that changed since the last Assemble: old nil when it is new, cur
// nil when it is gone.
type objectChange struct{ old, cur *Object }

// maxPatched is how many changed objects a resource of n objects may have for its lookups to
// be patched; with more, making them anew costs about as much.
func maxPatched(n int) int { return 64 + n/8 }

// diffObjects is what changed from last (as sortedObjects gave it) to list, in their order (an
// object the same pointer is unchanged); false when list is not as sortedObjects would give it
// (checked only around what changed: last is) or more than max changed.
func diffObjects(last, list []*Object, max int) ([]objectChange, bool) {
	var out []objectChange
	i, lastSame := 0, false
	for j, o := range list {
		if o == nil {
			return nil, false
		}
		for ; i < len(last) && o != last[i] && compareObjects(last[i], o) < 0; i++ { // gone
			if out = append(out, objectChange{old: last[i]}); len(out) > max {
				return nil, false
			}
		}
		same := i < len(last) && o == last[i]
		// Two objects kept are in last's order; one beside a change is checked.
		if j > 0 && !(same && lastSame) && compareObjects(list[j-1], o) >= 0 {
			return nil, false
		}
		lastSame = same
		switch {
		case same:
			i++
			continue
		case i < len(last) && compareObjects(last[i], o) == 0: // a new version
			out, i = append(out, objectChange{last[i], o}), i+1
		default:
			out = append(out, objectChange{cur: o})
		}
		if len(out) > max {
			return nil, false
		}
	}
	for ; i < len(last); i++ {
		if out = append(out, objectChange{old: last[i]}); len(out) > max {
			return nil, false
		}
	}
	return out, true
}

// patchedValue is resourceValue(spec, objs, true) made from last, the value of the last
// objects, and the changes from them to objs. false for objects of several clusters (by_name
// has the first cluster's of a name, by_cluster each's): those are made anew.
func patchedValue(spec watchspec.Resource, last *record.Record, objs []*Object, changes []objectChange) (*record.Record, bool) {
	if _, split := last.Get("by_cluster"); split {
		return nil, false
	}
	byName := make([]keyed, 0, len(changes))
	for _, c := range changes {
		if c.cur != nil && c.cur.cluster != "" {
			return nil, false
		}
		if c.cur == nil {
			byName = append(byName, keyed{key: c.old.key})
		} else {
			byName = append(byName, keyed{key: c.cur.key, val: c.cur.obj})
		}
	}
	slices.SortFunc(byName, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	all := make([]any, len(objs))
	for i, o := range objs {
		all[i] = o.obj
	}
	keys := []string{"all", "by_name"}
	vals := []any{all, patchedByName(lookup(last, "by_name"), byName, objs, all)}
	for _, ix := range spec.Indexes {
		keys = append(keys, "by_"+ix.Name)
		vals = append(vals, patchedIndex(ix, lookup(last, "by_"+ix.Name), changes))
	}
	return record.FromPairs(nil, keys, vals), true
}

func lookup(r *record.Record, key string) *record.Record {
	v, _ := r.Get(key)
	x, _ := v.(*record.Record)
	return x
}

// keyed is a record's entry; a nil val removes the key (patchRecord).
type keyed struct {
	key string
	val any
}

// patchRecord is r with the entries of patch (sorted by key, each key once) put in or taken
// out (a nil val), its other entries kept (record.Patched: r's key list when no key comes or
// goes, a new version of an object).
func patchRecord(r *record.Record, patch []keyed) *record.Record {
	return r.Patched(recordChanges(patch))
}

// recordChanges is patch as record.Patched takes it.
func recordChanges(patch []keyed) []record.Change {
	changes := make([]record.Change, len(patch))
	for i, p := range patch {
		changes[i] = record.Change{Key: p.key, Value: p.val, Remove: p.val == nil}
	}
	return changes
}

// patchedByName is last, the last by_name, with the entries of patch (see patchRecord), for
// the objects objs whose records are all: when its keys are in the order of objs (unless a
// namespace is another's prefix followed by a character before "/", see keyOrder), its values
// are all itself rather than a copy of them, as objectsByName makes it.
func patchedByName(last *record.Record, patch []keyed, objs []*Object, all []any) *record.Record {
	changes := recordChanges(patch)
	if keys := last.PatchedKeys(changes); keysInOrderOf(keys, objs) {
		changed := make([]string, len(patch))
		for i, p := range patch {
			changed[i] = p.key
		}
		return record.NewFrom(keys, all, last, changed)
	}
	return last.Patched(changes)
}

// keysInOrderOf reports whether keys are the keys of objs, in their order.
func keysInOrderOf(keys *record.Keys, objs []*Object) bool {
	if keys.Len() != len(objs) {
		return false
	}
	for i, o := range objs {
		if keys.At(i) != o.key {
			return false
		}
	}
	return true
}

// patchedIndex is the index ix of the objects after changes, from last, the index before them
// (see indexed): the lists of the keys a changed object had or has are made again from their
// last entries, less the changed objects' last versions, with their new versions put in their
// place.
func patchedIndex(ix watchspec.Index, last *record.Record, changes []objectChange) *record.Record {
	gone := map[*record.Record]bool{}
	touched := map[string]bool{}
	curKeys := make([][]string, len(changes))
	var values []string
	for i, c := range changes {
		if c.old != nil {
			gone[c.old.obj] = true
			for _, k := range indexKeys(ix, c.old, &values) {
				touched[k] = true
			}
		}
		if c.cur != nil {
			curKeys[i] = slices.Clone(indexKeys(ix, c.cur, &values))
			for _, k := range curKeys[i] {
				touched[k] = true
			}
		}
	}
	patch := make([]keyed, 0, len(touched))
	for _, k := range slices.Sorted(maps.Keys(touched)) {
		v, _ := last.Get(k)
		prev, _ := v.([]any)
		list := make([]any, 0, len(prev)+1)
		for _, x := range prev {
			if r, _ := x.(*record.Record); !gone[r] {
				list = append(list, x)
			}
		}
		for i, c := range changes {
			if c.cur == nil || !slices.Contains(curKeys[i], k) {
				continue
			}
			at := sort.Search(len(list), func(p int) bool { return compareRecord(list[p], c.cur) >= 0 })
			list = slices.Insert(list, at, any(c.cur.obj))
		}
		if len(list) == 0 {
			patch = append(patch, keyed{key: k})
		} else {
			patch = append(patch, keyed{key: k, val: list})
		}
	}
	return patchRecord(last, patch)
}

// compareRecord orders an object's record (v) and o as compareObjects orders their objects
// (of one cluster): by metadata.namespace, then metadata.name, which make an Object's key.
func compareRecord(v any, o *Object) int {
	r, _ := v.(*record.Record)
	meta := lookup(r, "metadata")
	ns, _ := meta.Get("namespace")
	name, _ := meta.Get("name")
	s, _ := ns.(string)
	n, _ := name.(string)
	return cmp.Or(strings.Compare(s, o.Namespace()), strings.Compare(n, o.Name()))
}
