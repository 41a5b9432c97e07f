package jinja

import (
	"cmp"
	"hash/maphash"
	"slices"
	"sort"
	"weak"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// sort and unique keep, per call site (a filter node of a program, with a ModuleCache), what
// their last call computed: its input items, their keys and its output. The Ingress example
// merges its blocks' parts (modules imported in a loop, kept from render to render and lent
// to each: the very same lists and dicts) into lists of 10,000 to 20,000 items, deduped and
// sorted at every render; after one Ingress's change, all but one block's items are the
// same objects as in the last render. The next call with the same arguments matches its
// items with the last call's by identity (differ: a few runs replaced, found in O(n)); an
// item matched is as it was when its key was computed when it cannot have changed since: a
// string, a number, a record of the data, or a dict or list owned whole by a loan not
// spoiled since (reuse_body_sealed.go: any change of one spoils its loan first). Its key is
// taken as it was; the others' are computed, and the output patched: sort drops the items
// gone and inserts the new ones by binary search on (key, position), which is what a stable
// sort gives (reverse too); unique re-decides only the keys whose first item may have
// changed (a first item gone, a new item). Otherwise (the first call, too many changes, keys
// of other types than strings, or ints for sort, an error, any consumption of marked text)
// the filter runs as it does without a cache, and keeps what it computed when most items
// could be matched next time. The output is a fresh list each time.

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

// seqKey is a call site of sort or unique: its filter node, in a program (held weakly: a
// program replaced, its sites are forgotten at the next sweep).
type seqKey struct {
	prog weak.Pointer[Program]
	at   *parse.FilterExpr
}

// seqSite is what is kept of a call site.
type seqSite struct {
	idle    int         // sweeps since it last ran
	refused int         // calls in a row that kept nothing (maxRefused: the site is not tried)
	calls   []*seqState // by the call's number in a render
}

// seqArgs are what a call computes with, besides its items.
type seqArgs struct {
	unique, reverse, cs bool
	attr                string // the attribute (a string), when hasAttr
	hasAttr             bool
}

// seqState is what a call computed.
type seqState struct {
	args  seqArgs
	items []any
	owned []ownRun // who owns items, by runs
	strs  []string // the items' keys, when strings
	// hashes: unique's, of each key (seed's): a key looked up among a few is told apart
	// from most without reading it.
	hashes []uint32
	seed   maphash.Seed
	ints   []int64 // when ints (sort)
	// order: sort's output, as indices of items; unique's, the indices of each key's first.
	order []int32
	spare *seqState // the buffers of the state before, for the next call
	// scratch: per item, the index of its match in the last call (-1: none); per item of
	// the last call, its index here; the items of the last output kept.
	from, to, kept []int32
}

// ownRun is a run of items (up to end) owned by one loan (nil: immutable), or not matched
// again (!ok: a dict or list of nobody's, or another value that may change).
type ownRun struct {
	end  int32
	loan *loan
	ok   bool
}

// seqCall is one call of sort or unique whose work may be kept.
type seqCall struct {
	c    *bodyCache
	site *seqSite
	k    int
	last *seqState // the same call's in the last render, or its buffers (args differ)
	args seqArgs
}

// seqCall returns the call of the filter name (at the site evalFilter noted) on n items,
// whose work may be kept; nil when not.
func (e *evaluator) seqCall(name string, n int, args seqArgs) *seqCall {
	at := e.filterAt
	e.filterAt = nil
	if at == nil || at.Name != name || n < minSeqKept || e.shared == nil || e.shared.Across == nil ||
		e.bodies.off() || e.taint.any() {
		return nil
	}
	if e.bodies == nil {
		e.bodies = &bodyEval{runs: map[*bodyLoop]int{}, info: map[bodyKey]*bodyLoop{}}
	}
	c := &e.shared.Across.bodies
	c.mu.Lock()
	defer c.mu.Unlock()
	key := seqKey{weak.Make(e.prog), at}
	s := c.seqs[key]
	if s == nil {
		s = &seqSite{}
		if c.seqs == nil {
			c.seqs = map[seqKey]*seqSite{}
		}
		c.seqs[key] = s
	}
	s.idle = 0
	if s.refused >= maxRefused {
		return nil
	}
	if e.bodies.seqCalls == nil {
		e.bodies.seqCalls = map[*seqSite]int{}
	}
	k := e.bodies.seqCalls[s]
	e.bodies.seqCalls[s] = k + 1
	if k >= maxSeqCalls {
		return nil
	}
	sc := &seqCall{c: c, site: s, k: k, args: args}
	if k < len(s.calls) {
		sc.last, s.calls[k] = s.calls[k], nil // this render's, while it computes
	}
	return sc
}

// done keeps st (nil: nothing) as the call's; patched: st was patched from the last.
func (sc *seqCall) done(st *seqState, patched bool) {
	sc.c.mu.Lock()
	defer sc.c.mu.Unlock()
	if patched {
		sc.c.seqPatched++
	}
	for len(sc.site.calls) <= sc.k {
		sc.site.calls = append(sc.site.calls, nil)
	}
	sc.site.calls[sc.k] = st
	if st == nil {
		sc.site.refused++
	} else {
		sc.site.refused = 0
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
	prev := sc.last
	switch {
	case prev == nil:
		st = &seqState{}
	case prev.spare != nil:
		st, prev.spare = prev.spare, nil
	default:
		st = &seqState{}
	}
	st.args = sc.args
	if prev != nil && prev.args != sc.args {
		prev = nil
	}
	if prev != nil {
		patched = st.patch(e, prev, items, key)
	}
	ok = patched || st.full(e, items, key)
	if !ok || e.taint.any() {
		return nil, false, false
	}
	if prev != nil {
		prev.spare = nil
		st.spare = prev // its buffers, for the next call
	}
	return st, patched, true
}

// reset empties st's buffers for n items.
func (st *seqState) reset(items []any) {
	st.items = append(st.items[:0], items...)
	st.owned = st.owned[:0]
	st.strs = st.strs[:0]
	st.hashes = st.hashes[:0]
	st.ints = st.ints[:0]
	st.order = st.order[:0]
}

// addKey appends k, the key of the next item, to st's keys; false: not of the keys' type.
func (st *seqState) addKey(k any) bool {
	if st.args.unique {
		s, ok := uniqueStr(k)
		st.strs = append(st.strs, s)
		st.hashes = append(st.hashes, uint32(maphash.String(st.seed, s)))
		return ok
	}
	switch x := k.(type) {
	case string:
		st.strs = append(st.strs, x)
		return len(st.ints) == 0
	case int64:
		st.ints = append(st.ints, x)
		return len(st.strs) == 0
	}
	return false
}

// uniqueStr is the string of a key that unique hashes as a string (keyOf: kind 's').
func uniqueStr(k any) (string, bool) {
	switch x := k.(type) {
	case string:
		return x, true
	case Markup:
		return string(x), true
	case *tainted:
		return x.s, true
	}
	return "", false
}

// own notes who owns item, the next of st's items.
func (st *seqState) own(item any) {
	l, ok := ownerFor(item)
	st.addOwned(l, ok)
}

func (st *seqState) addOwned(l *loan, ok bool) {
	end := int32(len(st.strs) + len(st.ints))
	if n := len(st.owned); n > 0 && st.owned[n-1].loan == l && st.owned[n-1].ok == ok {
		st.owned[n-1].end = end
		return
	}
	st.owned = append(st.owned, ownRun{end: end, loan: l, ok: ok})
}

// ownerFor is the loan that owns item whole (nil: item cannot change); false: item may
// change unseen (a dict or list of nobody's, a tuple, ...).
func ownerFor(item any) (*loan, bool) {
	switch item.(type) {
	case string, Markup, *tainted, int64, bool, *record.Record:
		return nil, true
	case *List, *Dict:
		l := ownerOf(item)
		budget := maxSeqOwned
		if l == nil || l.spoiled.Load() || !ownedBy(item, l, &budget) {
			return nil, false
		}
		return l, true
	}
	return nil, false
}

// full computes st from scratch.
func (st *seqState) full(e *evaluator, items []any, key func(any) (any, error)) bool {
	st.reset(items)
	st.seed = maphash.MakeSeed()
	for _, it := range items {
		k, err := key(it)
		if err != nil || !st.addKey(k) {
			return false
		}
		st.own(it)
	}
	if st.args.unique {
		st.order = firstOfKeys(st.strs, st.order)
		return true
	}
	for i := range st.items {
		st.order = append(st.order, int32(i))
	}
	ord := sortIdx(st)
	slices.SortStableFunc(st.order, ord.compare)
	return true
}

// firstOfKeys appends to order the index of the first of each key of keys.
func firstOfKeys(keys []string, order []int32) []int32 {
	seen := make(map[string]struct{}, len(keys))
	for i, k := range keys {
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			order = append(order, int32(i))
		}
	}
	return order
}

// keyOrder compares st's items by key, as a stable sort orders them (reverse keeps
// stability), but for their positions.
type keyOrder struct {
	strs    []string
	ints    []int64
	reverse bool
}

func sortIdx(st *seqState) keyOrder {
	return keyOrder{strs: st.strs, ints: st.ints, reverse: st.args.reverse}
}

func (o keyOrder) compare(a, b int32) int {
	var c int
	if len(o.strs) > 0 {
		c = cmp.Compare(o.strs[a], o.strs[b])
	} else {
		c = cmp.Compare(o.ints[a], o.ints[b])
	}
	if o.reverse {
		c = -c
	}
	return c
}

// before says whether item a comes before item b in the output: by key, then position.
func (o keyOrder) before(a, b int32) bool {
	if c := o.compare(a, b); c != 0 {
		return c < 0
	}
	return a < b
}

// patch computes st from prev, the last call's (same arguments); false: not done (too many
// changes, an error...).
func (st *seqState) patch(e *evaluator, prev *seqState, items []any, key func(any) (any, error)) bool {
	n := max(len(items), len(prev.items))
	st.from = slices.Grow(st.from[:0], len(items))[:len(items)]
	d := differ{old: prev.items, cur: items, from: st.from, limit: n/4 + 8, work: 8*n + 64}
	if !d.match(0, len(prev.items), 0, len(items)) {
		return false
	}
	st.reset(items)
	st.seed = prev.seed
	if !st.takeKeys(e, prev, key, &d) {
		return false
	}
	// to: per item of prev, its index here (-1: gone).
	st.to = slices.Grow(st.to[:0], len(prev.items))[:len(prev.items)]
	for i := range st.to {
		st.to[i] = -1
	}
	for j, o := range st.from {
		if o >= 0 {
			st.to[o] = int32(j)
		}
	}
	if st.args.unique {
		st.patchUnique(prev)
	} else {
		st.patchSort(prev)
	}
	return true
}

// takeKeys fills st's keys and owners: a matched item's as prev had them, while the loan
// that owned it whole then is not spoiled; the others' computed (then unmatched). A dict or
// list a loan owns stays its until the loan is spoiled: a change spoils its owner before it
// is made and leaves it nobody's (List.changing), and adopt and watch take only a dict or
// list of nobody's or of a spoiled loan's (disown undoes an adoption by a loan just made).
// So the item is not read (20,000 items' owners read cost a tenth of the Ingress example's
// patched calls: a cache miss each).
func (st *seqState) takeKeys(e *evaluator, prev *seqState, key func(any) (any, error), d *differ) bool {
	r := 0 // prev's run of the item matched
	var last *loan
	spoiled := false // last's
	for j, it := range st.items {
		if o := st.from[j]; o >= 0 {
			for prev.owned[r].end <= o {
				r++
			}
			run := prev.owned[r]
			if run.loan != last {
				last, spoiled = run.loan, run.loan != nil && run.loan.spoiled.Load()
			}
			if run.ok && !spoiled {
				if st.args.unique {
					st.strs = append(st.strs, prev.strs[o])
					st.hashes = append(st.hashes, prev.hashes[o])
				} else if len(prev.strs) > 0 {
					st.strs = append(st.strs, prev.strs[o])
				} else {
					st.ints = append(st.ints, prev.ints[o])
				}
				st.addOwned(run.loan, true)
				continue
			}
			st.from[j] = -1 // may have changed: its key computed again
			d.changed += 2
			if d.changed > d.limit {
				return false
			}
		}
		k, err := key(it)
		if err != nil || !st.addKey(k) {
			return false
		}
		st.own(it)
	}
	return true
}

// patchSort sorts st's items: prev's output without the items gone, in the order it had
// them (their keys and relative positions are as they were), with the new ones inserted
// where a stable sort puts them.
func (st *seqState) patchSort(prev *seqState) {
	kept := st.kept[:0]
	for _, o := range prev.order {
		if j := st.to[o]; j >= 0 {
			kept = append(kept, j)
		}
	}
	st.kept = kept
	ord := sortIdx(st)
	added := st.to[:0] // prev's indices are no longer needed
	for j, o := range st.from {
		if o < 0 {
			added = append(added, int32(j))
		}
	}
	slices.SortFunc(added, func(a, b int32) int {
		if c := ord.compare(a, b); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	pos := 0
	for _, a := range added {
		i := pos + sort.Search(len(kept)-pos, func(i int) bool { return ord.before(a, kept[pos+i]) })
		st.order = append(st.order, kept[pos:i]...)
		st.order = append(st.order, a)
		pos = i
	}
	st.order = append(st.order, kept[pos:]...)
}

// patchUnique finds the first item of each key: as in prev for a key none of whose items was
// added and whose first was not gone; the others' by looking.
func (st *seqState) patchUnique(prev *seqState) {
	redo := map[string]bool{}
	var bits hashBits
	for _, o := range prev.order {
		if st.to[o] < 0 {
			redo[prev.strs[o]] = true
			bits.add(prev.hashes[o])
		}
	}
	for j, o := range st.from {
		if o < 0 {
			redo[st.strs[j]] = true
			bits.add(st.hashes[j])
		}
	}
	seen := map[string]bool{}
	p := 0 // prev.order's next first
	for j, o := range st.from {
		if k := st.strs[j]; bits.has(st.hashes[j]) && redo[k] {
			if !seen[k] {
				seen[k] = true
				st.order = append(st.order, int32(j))
			}
			continue
		}
		for p < len(prev.order) && prev.order[p] < o {
			p++
		}
		if p < len(prev.order) && prev.order[p] == o {
			st.order = append(st.order, int32(j))
		}
	}
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
