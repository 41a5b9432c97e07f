package jinja

import (
	"hash/maphash"
	"slices"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A loop whose body reads by key (the Ingress example's backends: each one's Service and
// EndpointSlices looked up in resources.services.by_name and .by_service) finds each kept
// iteration at a cost per iteration (bodyRun.exec: the names looked up, the entry's reads
// compared, its keyed reads through the records' diff), most of it in reaching the entry's
// values, scattered over the heap: at 10,000 backends, 6 ms of a 24 ms render after one
// Ingress's change. So each run of such a loop keeps a sheet too (runSheet): the items it ran
// over and their owners, as a print-only loop's run keeps them (reuse_print.go); the values
// it read outside its loop's names (the same at each iteration: the body sets names in its
// own frame only) and the record each keyed read's chain gave; and, per iteration, a hash of
// the one key each keyed read looked up. The same run in the next render matches its items
// with the sheet's by identity (differ). An item matched and unchanged since (ownRun.holds)
// binds the loop's names as it did then, so the entry the last run had at its place serves
// when the values read outside are the very ones read then and no key it looked up differs
// between the sheet's records and those read now (recordDiffs): its output is written
// without reading the entry's values. The other iterations go the way of bodyRun.exec, which
// looks first at their match's entry.

// runSheet is what a run of a keyed loop keeps for the same run of the next render.
type runSheet struct {
	items  []any
	owned  []ownRun
	outer  []any    // per read (vals' order): its value when it is read outside the loop's names
	keys   []uint64 // per iteration, per keyed read (nk each): keyHash of what it looked up
	nk     int      // keyed reads
	escape bool
}

// The keys' hashes: none looked up (the entry serves whatever changed), more than one or not
// a string (the entry is compared as ever), or the hash of the key with this bit set.
const (
	keyNone    = 0
	keyComplex = 1
	keyHashed  = 2
)

// sheetInfo is how a loop's reads come from its iteration (bodyLoop.sheet): per read, the
// loop's name it is (its index among the target's names), or -1 for a name outside.
type sheetInfo struct {
	ok    bool
	slots []int
	keyed []int // the keyed reads' indices
}

// sheetFor works out whether the loop s (what its body reads: info) keeps sheets: its body
// reads by key, not the loop's position, and it has no filter, is not reversed, sorted or
// recursive, and its target binds plain names.
func sheetFor(s *parse.ForStmt, info *bodyInfo) sheetInfo {
	if !info.ok || info.loop || info.reads == nil || s.Filter != nil || s.Reversed || s.Sorted || s.Recursive || s.UsesLoop {
		return sheetInfo{}
	}
	targets := plainTargetNames(s.Target)
	if targets == nil {
		return sheetInfo{}
	}
	si := sheetInfo{ok: true, slots: make([]int, len(info.reads))}
	for j, rd := range info.reads {
		si.slots[j] = slices.Index(targets, info.names[rd.name])
		if si.slots[j] >= 0 && (rd.keyed || len(rd.chain) > 0) {
			return sheetInfo{} // a loop's name read by key or through a chain: read whole only
		}
		if rd.keyed {
			si.keyed = append(si.keyed, j)
		}
	}
	return si
}

// sheetRun is a run's use of its sheet: the last render's, matched with this run's items,
// and what it found read outside now.
type sheetRun struct {
	last    *runSheet // nil: none to copy from
	items   []any
	from    []int32 // per item, its match in last (-1: none, or not unchanged since)
	owned   []ownRun
	outer   []any
	changed []uint64 // the hashes of the keys that differ between last's records and those read now
	taken   []int32  // per iteration, the match whose entry it took (-1: none)
}

// sheetStart starts the run's sheet, when its loop keeps them: the items of sq matched with
// the last render's same run (f: the loop body's frame, before the first iteration binds it).
func (r *bodyRun) sheetStart(e *evaluator, f *frame, sq *seq) {
	if r.off || !r.lp.sheet.ok || e.taint.any() {
		return
	}
	items := seqItems(sq)
	if len(items) < minPrintKept {
		return
	}
	info := &r.lp.info
	sr := &sheetRun{items: items, outer: make([]any, len(info.reads))}
	for j, rd := range info.reads {
		if r.lp.sheet.slots[j] >= 0 {
			continue
		}
		v, ok := e.lookup(f, info.names[rd.name])
		if !ok {
			v = notSet{}
		}
		if rd.chain != nil {
			v = r.chainValue(e, j, v, rd.chain)
		}
		if !sheetValue(v, rd.keyed) {
			return
		}
		sr.outer[j] = v
	}
	r.c.mu.Lock()
	last := r.lp.sheets.at(r.k)
	r.c.mu.Unlock()
	if last != nil && last.escape == e.autoescape && len(last.outer) == len(sr.outer) {
		sr.last = last
		if !r.sheetOuterSame(sr) {
			sr.last = nil
		}
	}
	var lastItems []any
	var lastOwned []ownRun
	if sr.last != nil {
		lastItems, lastOwned = sr.last.items, sr.last.owned
	}
	sr.from, sr.owned = matchItems(lastItems, lastOwned, items, nil, nil)
	r.sheet = sr
}

// sheetValue says whether v may be read outside a keyed loop's names for its sheet: a value
// that cannot change (a string, number, bool, builtin; the data, which templates cannot
// change), a keyed read's a mapping of the data.
func sheetValue(v any, keyed bool) bool {
	switch v.(type) {
	case *record.Record, map[string]any, map[string]string:
		return true
	case string, int64, float64, bool, nil, notSet, *builtin:
		return !keyed
	}
	return false
}

// sheetOuterSame says whether the values sr read outside the loop's names are those its last
// run read, the keyed reads' records but for the keys in sr.changed (set here).
func (r *bodyRun) sheetOuterSame(sr *sheetRun) bool {
	info := &r.lp.info
	for j, rd := range info.reads {
		if r.lp.sheet.slots[j] >= 0 {
			continue
		}
		was, now := sr.last.outer[j], sr.outer[j]
		if !rd.keyed {
			if !sheetSame(was, now) {
				return false
			}
			continue
		}
		if sameObject(was, now) {
			continue
		}
		old, ok1 := was.(*record.Record)
		cur, ok2 := now.(*record.Record)
		if !ok1 || !ok2 || old.Len() < minDiffed || cur.Len() < minDiffed {
			return false
		}
		d := r.c.diffs.listed(old, cur)
		if d == nil {
			return false
		}
		for _, k := range d.few {
			sr.changed = append(sr.changed, r.c.keyHash(k))
		}
		for k := range d.keys {
			sr.changed = append(sr.changed, r.c.keyHash(k))
		}
	}
	slices.Sort(sr.changed)
	return true
}

// sheetSame says whether a value read outside whole (sheetValue, not keyed) is the one read
// last: the very same, the same object of the data, or an equal scalar.
func sheetSame(was, now any) bool {
	if sameWord(was, now) || isData(was) && sameObject(was, now) {
		return true
	}
	switch was.(type) {
	case string, int64, float64, bool, nil, notSet:
		return bodySame(was, now)
	}
	return false
}

// keyHash is the hash of a key looked up, with keyHashed set.
func (c *bodyCache) keyHash(k string) uint64 {
	return maphash.String(c.hasher.seed, k) | keyHashed
}

// matchItems matches items with last's (nil: none) by identity, as a print-only loop's run
// does (printRun.match): from, per item, its match in last when unchanged since (-1: none);
// owned, the items' owners. from and owned are used again when large enough.
func matchItems(lastItems []any, lastOwned []ownRun, items []any, from []int32, owned []ownRun) ([]int32, []ownRun) {
	from = slices.Grow(from[:0], len(items))[:len(items)]
	for j := range from {
		from[j] = -1
	}
	if lastItems != nil {
		n := max(len(items), len(lastItems))
		d := differ{old: lastItems, cur: items, from: from, limit: n/2 + 8, work: 8*n + 64}
		if !d.match(0, len(lastItems), 0, len(items)) {
			for j := range from {
				from[j] = -1
			}
		}
	}
	owned = owned[:0]
	run := 0
	for j, it := range items {
		if o := from[j]; o >= 0 {
			for lastOwned[run].end <= o {
				run++
			}
			if own := lastOwned[run]; own.holds() {
				owned = addOwned(owned, j+1, own.loan, own.gen, true)
				continue
			}
			from[j] = -1
		}
		l, gen, ok := ownerFor(it)
		owned = addOwned(owned, j+1, l, gen, ok)
	}
	return from, owned
}

// sheetCopy writes, from iteration i on, the output of each matched item's entry in the last
// run that serves as it is (entryServes), one after another; it returns the iteration after
// them (i: none). An iteration whose item has a match whose entry does not serve looks first
// at that entry (bodyRun.exec).
func (r *bodyRun) sheetCopy(e *evaluator, i int) (int, error) {
	sr := r.sheet
	if sr == nil || sr.last == nil || r.i != i {
		return i, nil
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	j := i
	for ; j < len(sr.from); j++ {
		o := int(sr.from[j])
		if o < 0 {
			break
		}
		ent := r.entryServes(sr, o)
		if ent == nil || len(e.out)+len(ent.out) > e.maxSize {
			if o < len(r.hints) {
				r.offset = o - j // the slow way looks at the match first
			}
			break
		}
		if j > i {
			if err := e.tick(); err != nil {
				return j, err
			}
		}
		e.out = append(e.out, ent.out...)
		r.list = append(r.list, ent)
		for len(sr.taken) < j {
			sr.taken = append(sr.taken, -1)
		}
		sr.taken = append(sr.taken, int32(o))
		r.i++
		if len(r.hints) > 0 {
			r.looked++
			r.found++
		}
		r.c.use(r.lp, ent)
		r.c.sheetCopied++
	}
	return j, nil
}

// entryServes is the last run's entry of match o when it serves as it is: it ended without
// break or continue, printed no secret, and no key it looked up differs now.
func (r *bodyRun) entryServes(sr *sheetRun, o int) *bodyEntry {
	if o >= len(r.hints) {
		return nil
	}
	ent := r.hints[o]
	if ent == nil || ent.rare != nil {
		return nil
	}
	last := sr.last
	for _, h := range last.keys[o*last.nk : (o+1)*last.nk] {
		switch h {
		case keyNone:
		case keyComplex:
			return nil
		default:
			if _, differs := slices.BinarySearch(sr.changed, h); differs {
				return nil
			}
		}
	}
	return ent
}

// sheetEnd is the sheet of the run that ended, for the same run of the next render; nil when
// it keeps none (it did not run over all its items). The entries taken from the last sheet
// stay noted as found the same in the records they were compared in last (keyedRead.ident),
// which they hold weakly.
func (r *bodyRun) sheetEnd(e *evaluator) *runSheet {
	sr := r.sheet
	if sr == nil || r.off || len(r.list) != len(sr.items) {
		return nil
	}
	keyed := r.lp.sheet.keyed
	nk := len(keyed)
	sh := &runSheet{items: slices.Clone(sr.items), owned: sr.owned, outer: sr.outer, nk: nk, escape: e.autoescape,
		keys: make([]uint64, len(sr.items)*nk)}
	for j, ent := range r.list {
		dst := sh.keys[j*nk : (j+1)*nk]
		if j < len(sr.taken) && sr.taken[j] >= 0 {
			o := int(sr.taken[j])
			copy(dst, sr.last.keys[o*nk:(o+1)*nk])
			continue
		}
		if ent == nil {
			continue
		}
		for x, ri := range keyed {
			dst[x] = r.c.lookedHash(ent.vals[ri])
		}
	}
	return sh
}

// lookedHash is the keys' hash of a kept keyed read (runSheet.keys).
func (c *bodyCache) lookedHash(v any) uint64 {
	k, ok := v.(*keyedRead)
	switch {
	case !ok || k.stop || len(k.looked) > 1:
		return keyComplex
	case len(k.looked) == 0:
		return keyNone
	}
	if _, ok := k.looked[0].key.(string); !ok {
		return keyComplex
	}
	return c.keyHash(k.looked[0].hk.s)
}
