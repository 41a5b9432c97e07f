package jinja

// map by attribute keeps, per call site (as join: reuse_join.go), what its last call gave:
// its items and each one's attribute. The HTTPRoute example maps its 3,000 routes four times
// per render (their specs, namespaces, names and generations, in blocks of 64); after one
// route's change all but one are the same records as at the last render, and reading a path
// of each costs a cache miss or two. The next call with the same attribute and default
// matches its items with the last call's by identity (differ) and gives a matched item the
// value it had: the last call keeps what it gave only when every item cannot change
// (immutableItem: a string, a number, a record of the data) and every value given cannot
// either (keptValue), so that a value given again is the very value the path reads. The
// others are read as the filter reads them. A call that consumed marked text (taint.go), or
// met an error, keeps nothing; an error is the filter's own, as it runs again afresh.

// mapState is what a call of map by attribute gave.
type mapState struct {
	attr  string
	def   any // the default (nil: none), immutable
	items []any
	outs  []any // by item, its value
}

// mapKept is the values of attribute attr (parts: its path; def: the default, nil for none)
// of items, given with what the last call at this site gave; false: not given here (the
// filter reads them as without a cache).
func (e *evaluator) mapKept(items []any, attr, def any, parts []any) ([]any, bool) {
	a, ok := attr.(string)
	if !ok || def != nil && !immutableItem(def) {
		e.filterAt = nil
		return nil, false
	}
	c, s, k, ok := e.siteCall("map", len(items))
	if !ok {
		return nil, false
	}
	var last *mapState
	if k < len(s.maps) {
		last, s.maps[k] = s.maps[k], nil // this render's, while it reads
	}
	c.mu.Unlock()
	if last != nil && (last.attr != a || !sameDefault(last.def, def)) {
		last = nil
	}
	outer := e.taint
	out, patched, keep, ok := e.mapValues(last, items, parts, def)
	if !ok {
		e.taint = outer // the filter reads them all again, and gives its own error
		keepMap(c, s, k, nil, false)
		return nil, false
	}
	var st *mapState
	if keep && !e.taint.any() {
		// The last call's buffers are read no more.
		st = last
		if st == nil {
			st = &mapState{attr: a, def: def}
		}
		st.items = append(st.items[:0], items...)
		st.outs = append(st.outs[:0], out...)
	}
	keepMap(c, s, k, st, patched && st != nil)
	return out, true
}

// mapValues reads each item's value (its path parts, or def), a matched item's taken from
// last (nil: none); patched: items were matched with last's; keep: every item and value
// cannot change; false: an error.
func (e *evaluator) mapValues(last *mapState, items, parts []any, def any) (out []any, patched, keep, ok bool) {
	n := len(items)
	out = make([]any, n)
	var from []int32
	if last != nil {
		from = make([]int32, n)
		d := differ{old: last.items, cur: items, from: from, limit: n/4 + 8, work: 8*n + 64}
		if patched = d.match(0, len(last.items), 0, n); !patched {
			from = nil
		}
	}
	keep = true
	for j, it := range items {
		if from != nil && from[j] >= 0 {
			out[j] = last.outs[from[j]]
			continue
		}
		v, err := e.attrPath(it, parts, def)
		if err != nil {
			return nil, false, false, false
		}
		out[j] = v
		keep = keep && immutableItem(it) && keptValue(v)
	}
	return out, patched, keep, true
}

// keptValue says whether v, a value map gave, may be given again for the same item: nothing,
// or a value that cannot change (not a dict or list a template may change, not an Undefined,
// not marked text: each is made afresh).
func keptValue(v any) bool {
	switch v.(type) {
	case nil, float64:
		return true
	}
	return immutableItem(v)
}

// sameDefault says whether two defaults of map (nil, or immutable) are the same.
func sameDefault(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return sameItem(a, b)
}

// keepMap keeps st (nil: nothing) as call k's at site s.
func keepMap(c *bodyCache, s *seqSite, k int, st *mapState, patched bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if patched {
		c.strKept.mapPatched++
	}
	keepCall(s, &s.maps, k, st)
}

// MapPatched is how many calls of map by attribute gave most values as their last call did
// rather than reading them all.
func (c *ModuleCache) MapPatched() int {
	c.bodies.mu.Lock()
	defer c.bodies.mu.Unlock()
	return c.bodies.strKept.mapPatched
}
