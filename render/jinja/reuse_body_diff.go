package jinja

import (
	"slices"
	"sync"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// A kept iteration's keyed read (reuse_keyed.go) of a large record of the data, when the
// record read now is another object than the one it was last found the same in (its ident):
// rather than each kept iteration looking its keys up in the new record (a binary search over
// 10,000 Services' names, and a comparison, per key and iteration), the two records are
// compared once, key by key in their order, and what differs between them is noted for the
// render (recordDiffs): a read none of whose keys differ is the same, without looking.
// Each sync's snapshot makes the Ingress example's services.by_name and
// endpointslices.by_service anew (or patches them: another record), so every one of the
// 10,000 backends' iterations found them other objects.

// minDiffed is how many entries a record must have for its keyed reads to be compared through
// a diff: in a smaller one a lookup costs a few comparisons.
const minDiffed = 64

// maxDiffs is how many pairs of records may be compared in one render (each costs a walk of
// both): kept iterations whose reads were last found the same in many records are looked up
// key by key past that.
const maxDiffs = 8

// maxDiffKeys is how many keys may differ between two records compared: with more, the reads
// are looked up key by key (what differs is not held for a render).
const maxDiffKeys = 1024

// recordDiffs are the diffs of a render, between sweeps (bodyCache.sweep). Its lock is taken
// last: the loops' iterations and the imports in loops (ModuleCache.mu held) compare through it.
type recordDiffs struct {
	mu     sync.Mutex
	list   []*recordDiff
	diffed int // pairs diffed, for tests
}

// sweep forgets the diffs of the render that ended.
func (ds *recordDiffs) sweep() {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	clear(ds.list) // (their records are not kept alive)
	ds.list = ds.list[:0]
}

// recordDiff is what differs between two records (an older, a newer), by key.
type recordDiff struct {
	old, cur *record.Record      // kept alive: their addresses are theirs until the sweep
	keys     map[string]struct{} // in one of them only, or with values not the same (sameValue); or the keys the newer was made with (record.ChangedSince)
	few      []string            // keys when there are few: compared, not hashed, at each read
	box      *identBox           // the newer record, shared by the keyed reads found the same in it
	many     bool                // more than maxDiffKeys differ: not used
}

// keyedSame says whether v gives what the kept keyed read k found for each key it looked up
// (keyedRead.same), through the diff between v and the record k was last found the same in
// when there is one (ds nil: keyedRead.same).
func (ds *recordDiffs) keyedSame(k *keyedRead, v any) bool {
	return ds.keyedSameMemo(k, v, nil)
}

// keyedSameMemo is keyedSame, with the diff last found for the read in memo (nil: none):
// the iterations of a loop's run find the same one, for each of their keyed reads.
func (ds *recordDiffs) keyedSameMemo(k *keyedRead, v any, memo *diffMemo) bool {
	if ds == nil {
		return k.same(v)
	}
	if d := ds.diffFor(k, v, memo); d != nil && !d.touches(k.looked) {
		k.ident.Store(d.box)
		return true
	}
	return k.same(v)
}

// diffMemo is the diff diffFor found last for one read of a loop's run: between old and cur
// (nil: none, or too much differs). A diff is what differs between its two records, which
// never change: it is theirs for good.
type diffMemo struct {
	old, cur *record.Record
	d        *recordDiff
}

// diffFor is what differs between the record k was last found the same in and v, when both
// are large records of the data; nil when not, or when too much differs. memo (nil: none)
// answers for the pair it holds, without the lock and the list, and is set to the answer.
func (ds *recordDiffs) diffFor(k *keyedRead, v any, memo *diffMemo) *recordDiff {
	cur, ok := v.(*record.Record)
	if !ok || cur.Len() < minDiffed || k.stop {
		return nil
	}
	b := k.ident.Load()
	if b == nil {
		return nil
	}
	old, ok := b.value().(*record.Record)
	if !ok || old == cur || old.Len() < minDiffed {
		return nil
	}
	if memo != nil && memo.old == old && memo.cur == cur {
		return memo.d
	}
	d := ds.listed(old, cur)
	if memo != nil {
		*memo = diffMemo{old, cur, d}
	}
	return d
}

// listed is the diff of old to cur of this render, made when first asked for; nil when too
// much differs, or when the render has compared maxDiffs pairs.
func (ds *recordDiffs) listed(old, cur *record.Record) *recordDiff {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var d *recordDiff
	for _, x := range ds.list { // a few: scanned
		if x.old == old && x.cur == cur {
			d = x
			break
		}
	}
	if d == nil {
		if len(ds.list) >= maxDiffs {
			return nil
		}
		d = diffRecords(old, cur)
		ds.list = append(ds.list, d)
		ds.diffed++
	}
	if d.many {
		return nil
	}
	return d
}

// diffRecords is what differs from old to cur: the keys cur notes it was made from old with
// (a change of few objects at 10,000: not 10,000 values compared), else those found walking
// both in their keys' order.
func diffRecords(old, cur *record.Record) *recordDiff {
	d := &recordDiff{old: old, cur: cur, box: newIdentBox(cur)}
	add := func(key string) bool {
		if d.keys == nil {
			d.keys = map[string]struct{}{}
		}
		d.keys[key] = struct{}{}
		d.many = len(d.keys) > maxDiffKeys
		return !d.many
	}
	if changed, ok := cur.ChangedSince(old); ok {
		// cur was made from old with these keys changed: nothing else need be compared.
		for _, k := range changed {
			if !add(k) {
				d.keys = nil
				return d
			}
		}
	} else {
		d.walk(old, cur, add)
		if d.many {
			return d
		}
	}
	if len(d.keys) <= maxFewDiffs {
		for k := range d.keys {
			d.few = append(d.few, k)
		}
		d.keys = nil
	}
	return d
}

// walk adds to d each key whose value differs between old and cur, walking both in their
// keys' order, until add says too many (d.many, d.keys nil).
func (d *recordDiff) walk(old, cur *record.Record, add func(string) bool) {
	i, j, n, m := 0, 0, old.Len(), cur.Len()
	for i < n || j < m {
		var ok bool
		switch {
		case j == m:
			ok, i = add(old.Key(i)), i+1
		case i == n:
			ok, j = add(cur.Key(j)), j+1
		case old.Key(i) == cur.Key(j): // most often the same string: one pointer compared
			ok = sameValue(old.Value(i), cur.Value(j)) || add(old.Key(i))
			i, j = i+1, j+1
		case old.Key(i) < cur.Key(j):
			ok, i = add(old.Key(i)), i+1
		default:
			ok, j = add(cur.Key(j)), j+1
		}
		if !ok {
			d.keys = nil
			return
		}
	}
}

// maxFewDiffs is how many keys that differ are compared one by one at each read rather than
// looked up (a pod added: one key).
const maxFewDiffs = 8

// touches says whether one of looked's keys differs (a key not a string: looked up as ever).
func (d *recordDiff) touches(looked []lookup) bool {
	if d.keys == nil && d.few == nil {
		return false // the same entries: the lookups need not be read
	}
	for _, l := range looked {
		if _, ok := l.key.(string); !ok {
			return true
		}
		key := l.hk.s // the key's string (keyOf), without following the key's own pointer

		if slices.Contains(d.few, key) {
			return true
		}
		if _, differs := d.keys[key]; differs {
			return true
		}
	}
	return false
}
