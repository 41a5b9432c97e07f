package jinja

import (
	"cmp"
	"hash/maphash"
	"slices"
	"sort"
	"weak"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// sort and unique keep, per call site (a filter node of a program, with a ModuleCache), what
// their last call computed: its input items, who owned them, and its output (as the items'
// indices). The Ingress example merges its blocks' parts (modules imported in a loop, kept
// from render to render and lent to each: the very same lists and dicts) into lists of
// 10,000 to 20,000 items, deduped and sorted at every render; after one Ingress's change, all
// but a block's items are the same objects as in the last render. The next call with the
// same arguments matches its items with the last call's by identity (differ: a few runs
// replaced, found in O(n) without a map); a matched item is as it was when the last call read
// its key when it cannot have changed since: a string, a number, a record of the data, or a
// dict or list owned whole by a loan not spoiled since (reuse_body_sealed.go: any change of
// one spoils its loan first) and that disowned none since (loan.disowns): the items' owners
// are not read again, only their loans, once a run. Identity alone is not enough: a template
// changes its lists and dicts in place. The others' keys are computed, and the output patched: sort drops the
// items gone and inserts the new ones by binary search on (key, position), which is where a
// stable sort puts them (reverse too: Python's keeps ties in order); unique decides again
// only the keys whose first item may have changed (a first item gone, an item added).
// Otherwise (the first call, too many changes, keys neither all strings nor all ints for
// sort, an error, any marked text consumed: taint.go) the filter computes all, as without a
// cache, and keeps it when most items may be matched next time. The output is a fresh list.

// minSeqKept is how many items a call must have for what it computed to be kept: below it,
// keeping costs about what it saves.
const minSeqKept = 64

// maxSeqCalls is how many calls of a site a render keeps (a site in a loop: its first ones).
const maxSeqCalls = 4

// maxSeqOwned is how many values (counting each item) an item may hold to be matched.
const maxSeqOwned = 64

// maxSeqIdle is how many renders in a row a site may not run and keep what it computed: the
// Ingress example's routes are a module kept whole while the Ingresses are the same (an
// endpoint's change, say), and sorted again at the next change of an Ingress.
const maxSeqIdle = 64

// seqKey is a call site of sort, unique or join (its filter node, a *parse.FilterExpr) or of
// a list's extend (its call, a *parse.CallExpr: reuse_extend.go), in a program (held weakly:
// a program replaced, its sites are forgotten at the next sweep).
type seqKey struct {
	prog weak.Pointer[Program]
	at   any
}

// seqSite is what is kept of a call site.
type seqSite struct {
	idle    int          // sweeps since it last ran
	refused int          // calls in a row that kept nothing (maxRefused: the site is not tried)
	calls   []*seqState  // by the call's number in a render
	joins   []*joinState // join's, by the call's number in a render (reuse_join.go)
	maps    []*mapState  // map's by attribute, likewise (reuse_map.go)
	// extended: extend's, how long the last list it grew was at the end of the last render
	// it ran in (reuse_extend.go).
	extended int
	split    *splitSite // str.split's (reuse_split.go)
}

// seqArgs are what a call computes with, besides its items.
type seqArgs struct {
	unique, reverse, cs bool
	attr                string // the attribute (a string), when hasAttr
	hasAttr             bool
}

// seqState is what a call computed, patched in place by the next (with a scratch, one for
// the cache, lent to one call at a time). No key is kept (the Ingress example's 100,000
// items at six sites: 2 MB of live heap): the few a patch compares are read again from their
// items, unchanged.
type seqState struct {
	args  seqArgs
	items []any
	owned []ownRun // who owns items, by runs
	ints  bool     // sort's keys are ints (else strings)
	// hashes: unique's, of each item's key (seed's): the keys to look at again are told
	// apart from the others without reading them.
	hashes []uint32
	seed   maphash.Seed
	// order: sort's output, as indices of items; unique's, the indices of each key's first.
	order []int32
}

// seqScratch is what a call computes with besides its state: per item, the index of its
// match in the last call (-1: none); per item of the last call, its index here (-1: gone);
// the output, hashes and owners being made (swapped with the state's once made); the keys
// of the items computed.
type seqScratch struct {
	from, to, order []int32
	hashes          []uint32
	owned           []ownRun
	keys            []any
}

// ownRun is a run of items (up to end) owned whole by one loan (nil: immutable) when its
// disowns were gen, or not matched again (!ok: a dict or list of nobody's, or another value
// that may change).
type ownRun struct {
	end  int32
	gen  uint32
	loan *loan
	ok   bool
}

// seqCall is one call of sort or unique whose work may be kept.
type seqCall struct {
	c    *bodyCache
	site *seqSite
	k    int
	last *seqState // the same call's in the last render
	args seqArgs
	sc   *seqScratch
}

// seqCall returns the call of the filter name (at the site evalFilter noted) on n items,
// whose work may be kept; nil when not.
func (e *evaluator) seqCall(name string, n int, args seqArgs) *seqCall {
	c, s, k, ok := e.siteCall(name, n)
	if !ok {
		return nil
	}
	defer c.mu.Unlock()
	sc := &seqCall{c: c, site: s, k: k, args: args, sc: c.seqScratch}
	c.seqScratch = nil
	if sc.sc == nil {
		sc.sc = &seqScratch{} // lent to another call (a render apart)
	}
	if k < len(s.calls) {
		sc.last, s.calls[k] = s.calls[k], nil // this render's, while it computes
	}
	return sc
}

// site is the site at at in prog, made at its first call, marked used in this render (c.mu
// held): sort's and unique's, join's, split's and extend's.
func (c *bodyCache) site(prog *Program, at any) *seqSite {
	key := seqKey{weak.Make(prog), at}
	s := c.seqs[key]
	if s == nil {
		s = &seqSite{}
		if c.seqs == nil {
			c.seqs = map[seqKey]*seqSite{}
		}
		c.seqs[key] = s
	}
	s.idle = 0
	return s
}

// siteCall finds the site of the filter name (at the site evalFilter noted) called on n
// items, and the call's number there in this render, with c locked; false: its work is not
// to be kept (c not locked).
func (e *evaluator) siteCall(name string, n int) (c *bodyCache, s *seqSite, k int, ok bool) {
	at := e.filterAt
	e.filterAt = nil
	if at == nil || at.Name != name || n < minSeqKept || e.shared == nil || e.shared.Across == nil ||
		e.bodies.off() || e.taint.any() {
		return nil, nil, 0, false
	}
	e.bodyState()
	c = &e.shared.Across.bodies
	c.mu.Lock()
	s = c.site(e.prog, at)
	if s.refused >= maxRefused {
		c.mu.Unlock()
		return nil, nil, 0, false
	}
	if e.bodies.seqCalls == nil {
		e.bodies.seqCalls = map[*seqSite]int{}
	}
	k = e.bodies.seqCalls[s]
	e.bodies.seqCalls[s] = k + 1
	if k >= maxSeqCalls {
		c.mu.Unlock()
		return nil, nil, 0, false
	}
	return c, s, k, true
}

// done keeps st (nil: nothing) as the call's; patched: st was patched from the last.
func (sc *seqCall) done(st *seqState, patched bool) {
	sc.c.mu.Lock()
	defer sc.c.mu.Unlock()
	if patched {
		sc.c.seqPatched++
	}
	clear(sc.sc.keys) // not to hold keys
	sc.c.seqScratch = sc.sc
	keepCall(sc.site, &sc.site.calls, sc.k, st)
}

// keepCall keeps st (nil: nothing) as call k's of site s in calls (sort's, join's, map's),
// and counts the site's calls in a row that kept nothing (c.mu held).
func keepCall[T any](s *seqSite, calls *[]*T, k int, st *T) {
	for len(*calls) <= k {
		*calls = append(*calls, nil)
	}
	(*calls)[k] = st
	if st == nil {
		s.refused++
	} else {
		s.refused = 0
	}
}

// SeqPatched is how many calls of sort and unique patched what their last call computed
// rather than computing it all.
func (c *ModuleCache) SeqPatched() int {
	c.bodies.mu.Lock()
	defer c.bodies.mu.Unlock()
	return c.bodies.seqPatched
}

// sweepSeqs ends a render for sort's and unique's sites: a site of a program gone, or that
// did not run for maxSeqIdle renders, is forgotten.
func (c *bodyCache) sweepSeqs() {
	for key, s := range c.seqs {
		if s.idle++; s.idle > maxSeqIdle || key.prog.Value() == nil {
			delete(c.seqs, key)
		} else if s.split != nil {
			s.split.sweep()
		}
	}
}

// seqKept is the output of the filter name (sort or unique: args, attribute attr, keys by
// key) on items, computed with what its last call at this site kept; false: not computed
// here (the filter runs as without a cache). The taint its work consumed is the filter's.
func (e *evaluator) seqKept(name string, items []any, attr any, args seqArgs, key func(any) (any, error)) ([]any, bool) {
	switch a := attr.(type) {
	case nil:
	case string:
		args.attr, args.hasAttr = a, true
	default:
		e.filterAt = nil
		return nil, false
	}
	sc := e.seqCall(name, len(items), args)
	if sc == nil {
		return nil, false
	}
	outer := e.taint
	out, ok := sc.run(e, items, key)
	if !ok {
		e.taint = outer // what the filter then consumes is its own
	}
	return out, ok
}

// run is the call's output: items sorted stably by key (sortedValues), or the first item
// of each key in their order (fUnique); false: not done here (the caller runs the filter).
func (sc *seqCall) run(e *evaluator, items []any, key func(any) (any, error)) ([]any, bool) {
	st, patched, ok := sc.compute(e, items, key)
	if !ok {
		sc.done(nil, false)
		return nil, false
	}
	out := make([]any, len(st.order))
	for i, j := range st.order {
		out[i] = items[j]
	}
	sc.keep(st, patched)
	return out, true
}

// keep keeps st when most of its items may be matched next time.
func (sc *seqCall) keep(st *seqState, patched bool) {
	unowned := 0
	start := int32(0)
	for _, r := range st.owned {
		if !r.ok {
			unowned += int(r.end - start)
		}
		start = r.end
	}
	if unowned > len(st.items)/4 {
		st = nil
	}
	sc.done(st, patched)
}

// compute computes the call's state from the last call's (patched), or from scratch; false:
// not computed here (an error, a key of another type, a consumption of marked text).
func (sc *seqCall) compute(e *evaluator, items []any, key func(any) (any, error)) (st *seqState, patched, ok bool) {
	st = sc.last
	if st != nil && st.args == sc.args {
		patched = st.patch(items, key, sc.sc)
	}
	if st == nil {
		st = &seqState{}
	}
	if !patched {
		st.args = sc.args
		ok = st.full(items, key, sc.sc)
	}
	if !(ok || patched) || e.taint.any() {
		return nil, false, false
	}
	return st, patched, true
}

// sortKey checks k, a key of sort's, against the others' type (ints); false: neither a
// string nor an int, or not of their type.
func sortKey(k any, ints bool) bool {
	switch k.(type) {
	case string:
		return !ints
	case int64:
		return ints
	}
	return false
}

// compareKeys compares two keys of sort's (sortKey), reversed with reverse.
func compareKeys(a, b any, reverse bool) int {
	var c int
	if s, ok := a.(string); ok {
		c = cmp.Compare(s, b.(string))
	} else {
		c = cmp.Compare(a.(int64), b.(int64))
	}
	if reverse {
		c = -c
	}
	return c
}

// addOwned notes who owns the items up to n (l when its disowns were gen, ok: ownerFor) in
// owned, by runs.
func addOwned(owned []ownRun, n int, l *loan, gen uint32, ok bool) []ownRun {
	if k := len(owned); k > 0 && owned[k-1].loan == l && owned[k-1].gen == gen && owned[k-1].ok == ok {
		owned[k-1].end = int32(n)
		return owned
	}
	return append(owned, ownRun{end: int32(n), gen: gen, loan: l, ok: ok})
}

// ownerFor is the loan that owns item whole (nil: item cannot change) and its disowns, read
// before what it owns is (a disown after is seen: another count); false: item may change
// unseen (a dict or list of nobody's, a tuple, ...).
func ownerFor(item any) (*loan, uint32, bool) {
	switch item.(type) {
	case string, Markup, *tainted, int64, bool, *record.Record:
		return nil, 0, true
	case *List, *Dict:
		l := ownerOf(item)
		if l == nil {
			return nil, 0, false
		}
		gen := l.disowns.Load()
		budget := maxSeqOwned
		if l.spoiled.Load() || !ownedBy(item, l, &budget) {
			return nil, 0, false
		}
		return l, gen, true
	}
	return nil, 0, false
}

// holds says whether the items of r are still as they were when r was noted: immutable, or
// owned whole by its loan, not spoiled and with no dict or list disowned since (a change of
// one spoils it before it is made; adopt and watch take only a dict or list of nobody's or of
// a spoiled loan's; disown counts).
func (r ownRun) holds() bool {
	return r.ok && (r.loan == nil || !r.loan.spoiled.Load() && r.loan.disowns.Load() == r.gen)
}

// full computes st from scratch, as the filter does (sortOrder, the first of each key).
func (st *seqState) full(items []any, key func(any) (any, error), sc *seqScratch) bool {
	keys := sc.keys[:0]
	st.owned = st.owned[:0]
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			sc.keys = keys // cleared (done)
			return false
		}
		keys = append(keys, k)
		l, gen, ok := ownerFor(it)
		st.owned = addOwned(st.owned, i+1, l, gen, ok)
	}
	sc.keys = keys
	st.items = append(st.items[:0], items...)
	st.order = st.order[:0]
	if st.args.unique {
		return st.fullUnique(keys)
	}
	return st.fullSort(keys)
}

// fullUnique makes st.order the first item of each of keys, and st.hashes theirs.
func (st *seqState) fullUnique(keys []any) bool {
	st.seed = maphash.MakeSeed()
	st.hashes = st.hashes[:0]
	seen := make(map[string]struct{}, len(keys))
	for i, k := range keys {
		s, ok := strValue(k)
		if !ok {
			return false
		}
		st.hashes = append(st.hashes, uint32(maphash.String(st.seed, s)))
		if _, dup := seen[s]; !dup {
			seen[s] = struct{}{}
			st.order = append(st.order, int32(i))
		}
	}
	return true
}

// fullSort makes st.order the items sorted by keys (sortOrder: the filter's own order).
func (st *seqState) fullSort(keys []any) bool {
	st.ints = false
	if len(keys) > 0 {
		_, st.ints = keys[0].(int64)
	}
	for _, k := range keys {
		if !sortKey(k, st.ints) {
			return false
		}
	}
	idx, err := sortOrder(keys, st.args.reverse)
	if err != nil {
		return false
	}
	for _, i := range idx {
		st.order = append(st.order, int32(i))
	}
	return true
}

// patch patches st, the last call's (same arguments), for items; false: not done (too many
// changes, an error...: st is then to be computed afresh).
func (st *seqState) patch(items []any, key func(any) (any, error), sc *seqScratch) bool {
	n := max(len(items), len(st.items))
	sc.from = slices.Grow(sc.from[:0], len(items))[:len(items)]
	d := differ{old: st.items, cur: items, from: sc.from, limit: n/4 + 8, work: 8*n + 64}
	if !d.match(0, len(st.items), 0, len(items)) || !st.reown(items, key, sc, &d) {
		return false
	}
	sc.to = slices.Grow(sc.to[:0], len(st.items))[:len(st.items)]
	for i := range sc.to {
		sc.to[i] = -1
	}
	for j, o := range sc.from {
		if o >= 0 {
			sc.to[o] = int32(j)
		}
	}
	var ok bool
	if st.args.unique {
		ok = st.patchUnique(items, key, sc)
	} else {
		ok = st.patchSort(items, key, sc)
	}
	if !ok {
		return false
	}
	st.items = append(st.items[:0], items...)
	st.owned, sc.owned = sc.owned, st.owned
	return true
}

// reown makes sc.owned the owners of items: a matched item's as st had them, while its run
// holds (ownRun.holds: no item's owner is read again, a cache miss per item); the others'
// found (ownerFor), their keys computed (sc.keys, by item: read only for those unmatched),
// and those matched whose run no longer holds unmatched.
func (st *seqState) reown(items []any, key func(any) (any, error), sc *seqScratch, d *differ) bool {
	sc.owned = sc.owned[:0]
	sc.keys = slices.Grow(sc.keys[:0], len(items))[:len(items)]
	r := 0 // st's run of the item matched
	held := len(st.owned) > 0 && st.owned[0].holds()
	for j := 0; j < len(items); {
		if o := sc.from[j]; o >= 0 {
			for st.owned[r].end <= o {
				r++
				held = st.owned[r].holds()
			}
			run := st.owned[r]
			if held { // the items matched next in the same run: all as they were
				k := j + 1
				for k < len(items) && sc.from[k] >= 0 && sc.from[k] < run.end {
					k++
				}
				sc.owned = addOwned(sc.owned, k, run.loan, run.gen, true)
				j = k
				continue
			}
			sc.from[j] = -1 // may have changed: its key computed again
			if d.changed += 2; d.changed > d.limit {
				return false
			}
		}
		k, err := key(items[j])
		if err != nil {
			return false
		}
		sc.keys[j] = k
		l, gen, ok := ownerFor(items[j])
		j++
		sc.owned = addOwned(sc.owned, j, l, gen, ok)
	}
	return true
}

// patchSort sorts items into st.order: st's output without the items gone, in the order it
// had them (their keys and relative positions are as they were), with the new ones inserted
// where a stable sort puts them (by binary search, the keys of the kept it compares with
// read again).
func (st *seqState) patchSort(items []any, key func(any) (any, error), sc *seqScratch) bool {
	kept := sc.order[:0]
	for _, o := range st.order {
		if j := sc.to[o]; j >= 0 {
			kept = append(kept, j)
		}
	}
	added := sc.to[:0] // st's indices are no longer needed
	for j, o := range sc.from {
		if o < 0 {
			if !sortKey(sc.keys[j], st.ints) {
				return false
			}
			added = append(added, int32(j))
		}
	}
	rev := st.args.reverse
	slices.SortFunc(added, func(a, b int32) int {
		if c := compareKeys(sc.keys[a], sc.keys[b], rev); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out, ok := st.merge(items, key, sc.keys, kept, added)
	st.order, sc.order = out, kept
	return ok
}

// merge is kept (sorted) with added (sorted, keys their keys by item) inserted where a stable
// sort puts them, in st.order's buffer (read: kept is what is left of it); false: a key of
// kept's items, read again, is not what it was.
func (st *seqState) merge(items []any, key func(any) (any, error), keys []any, kept, added []int32) ([]int32, bool) {
	keyAt := func(j int32) (any, bool) {
		k, err := key(items[j])
		return k, err == nil && sortKey(k, st.ints)
	}
	rev := st.args.reverse
	out := st.order[:0]
	pos, ok := 0, true
	for _, a := range added {
		before := func(i int) bool { // whether a goes before kept[i]
			k, good := keyAt(kept[i])
			if !good {
				ok = false
				return true
			}
			c := compareKeys(keys[a], k, rev)
			return c < 0 || c == 0 && a < kept[i]
		}
		// Galloping from pos, then a binary search: the items added are sorted, and those a
		// changed block of the template made are together (an Ingress block's 256 paths at
		// 10,000 Ingresses: a search over all that is left of kept for each cost 1.3 ms a
		// change, each one reading kept's keys again).
		lo, hi, step := pos, pos, 1
		for hi < len(kept) && !before(hi) {
			lo, hi, step = hi+1, hi+1+step, step*2
		}
		hi = min(hi, len(kept))
		i := lo + sort.Search(hi-lo, func(x int) bool { return before(lo + x) })
		out = append(out, kept[pos:i]...)
		out = append(out, a)
		pos = i
	}
	return append(out, kept[pos:]...), ok
}

// patchUnique finds the first item of each key into st.order: as in st for a key none of
// whose items was added and whose first was not gone; the others' by looking (their keys
// read again), and sc.hashes, swapped with st's.
func (st *seqState) patchUnique(items []any, key func(any) (any, error), sc *seqScratch) bool {
	redo, bits, ok := st.redoKeys(sc)
	if !ok {
		return false
	}
	seen := map[string]bool{}
	out := sc.order[:0]
	p := 0 // st.order's next first
	for j, o := range sc.from {
		if h := sc.hashes[j]; bits.has(h) && redo[h] {
			k := sc.keys[j]
			if o >= 0 {
				var err error
				if k, err = key(items[j]); err != nil {
					return false
				}
			}
			s, ok := strValue(k)
			if !ok {
				return false
			}
			if !seen[s] {
				seen[s] = true
				out = append(out, int32(j))
			}
			continue
		}
		for p < len(st.order) && st.order[p] < o {
			p++
		}
		if p < len(st.order) && st.order[p] == o {
			out = append(out, int32(j))
		}
	}
	st.order, sc.order = out, st.order
	st.hashes, sc.hashes = sc.hashes, st.hashes
	return true
}

// redoKeys are the hashes of the keys whose first item may have changed: those of the firsts
// gone, and of the items added (theirs are made: sc.hashes, by item, the others' as st had
// them).
func (st *seqState) redoKeys(sc *seqScratch) (map[uint32]bool, *hashBits, bool) {
	sc.hashes = slices.Grow(sc.hashes[:0], len(sc.from))[:len(sc.from)]
	redo := map[uint32]bool{}
	bits := &hashBits{}
	for _, o := range st.order {
		if sc.to[o] < 0 {
			redo[st.hashes[o]] = true
			bits.add(st.hashes[o])
		}
	}
	for j, o := range sc.from {
		if o >= 0 {
			sc.hashes[j] = st.hashes[o]
			continue
		}
		s, ok := strValue(sc.keys[j])
		if !ok {
			return nil, nil, false
		}
		h := uint32(maphash.String(st.seed, s))
		sc.hashes[j] = h
		redo[h] = true
		bits.add(h)
	}
	return redo, bits, true
}

// hashBits is a set of hashes, some of which may be there though not added (1 in 4096 for
// each added).
type hashBits [64]uint64

func (b *hashBits) add(h uint32) { b[h>>6&63] |= 1 << (h & 63) }

func (b *hashBits) has(h uint32) bool { return b[h>>6&63]&(1<<(h&63)) != 0 }

// differ matches a call's items with the last call's by identity: from[j] is the index in
// old of cur[j], or -1; the matched indices increase with j. It looks at the ends of a
// range, then for an item found in both near where it would be with few changes (an
// anchor), and does the same on each side of it.
type differ struct {
	old, cur []any
	from     []int32
	changed  int // items gone or added so far
	limit    int // changes that make a patch not worth it
	work     int // comparisons left for anchors
}

func (d *differ) match(oLo, oHi, nLo, nHi int) bool {
	for {
		for oLo < oHi && nLo < nHi && sameItem(d.old[oLo], d.cur[nLo]) {
			d.from[nLo] = int32(oLo)
			oLo, nLo = oLo+1, nLo+1
		}
		for oLo < oHi && nLo < nHi && sameItem(d.old[oHi-1], d.cur[nHi-1]) {
			oHi, nHi = oHi-1, nHi-1
			d.from[nHi] = int32(oHi)
		}
		if oLo == oHi || nLo == nHi {
			return d.unmatched(oLo, oHi, nLo, nHi)
		}
		o, n, found := d.anchor(oLo, oHi, nLo, nHi)
		if !found {
			return d.unmatched(oLo, oHi, nLo, nHi)
		}
		if !d.match(oLo, o, nLo, n) {
			return false
		}
		d.from[n] = int32(o)
		oLo, nLo = o+1, n+1
	}
}

// unmatched notes the items of a range as changes.
func (d *differ) unmatched(oLo, oHi, nLo, nHi int) bool {
	for j := nLo; j < nHi; j++ {
		d.from[j] = -1
	}
	d.changed += oHi - oLo + nHi - nLo
	return d.changed <= d.limit
}

// anchor finds an item of cur[nLo:nHi] in old[oLo:oHi]: one of a few at even intervals,
// looked for within the changes that can be left of where it would be without changes.
func (d *differ) anchor(oLo, oHi, nLo, nHi int) (int, int, bool) {
	reach := d.limit - d.changed
	for _, f := range [...]int{2, 4, 1, 3} { // the middle, the quarters, a quarter before the end
		n := nLo + (nHi-nLo)*f/5
		at := oLo + (n - nLo)
		for dist := 0; dist <= reach && d.work > 0; dist++ {
			d.work -= 2
			if o := at - dist; o >= oLo && o < oHi && sameItem(d.old[o], d.cur[n]) {
				return o, n, true
			}
			if o := at + dist; dist > 0 && o >= oLo && o < oHi && sameItem(d.old[o], d.cur[n]) {
				return o, n, true
			}
			if at-dist < oLo && at+dist >= oHi {
				break
			}
		}
	}
	return 0, 0, false
}

// sameItem says whether a and b are the same item: the same dict, list or record, or equal
// strings or numbers.
func sameItem(a, b any) bool {
	switch x := a.(type) {
	case *List:
		y, ok := b.(*List)
		return ok && x == y
	case *Dict:
		y, ok := b.(*Dict)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case *record.Record:
		y, ok := b.(*record.Record)
		return ok && x == y
	case *tainted:
		y, ok := b.(*tainted)
		return ok && x == y
	case Markup:
		y, ok := b.(Markup)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}
