package jinja

import (
	"slices"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// join keeps, per call site (as sort and unique: reuse_sort.go), what its last call made: its
// items, the string and where each item's part of it ends. The Ingress example joins the uids
// of its 10,000 Ingresses at each change of one (a record each: the same objects as at the
// last render but the changed one), reading a path of each (a cache miss or more per item in
// the sidecar). The next call with the same separator and attribute matches its items with
// the last call's by identity (differ), and copies the matched runs' parts from the last
// string: a matched item's part is what it was when it cannot have changed, which join keeps
// only of items that cannot change (immutableItem: a string, a number, a record of the data).
// The other items' parts are computed as the filter does. A call that consumed marked text
// (taint.go) or read an item that may change keeps nothing.

// strCounts count the calls of join, split and map that used what was kept, for tests.
type strCounts struct {
	joinPatched int // join's patched (or given again)
	splitsFound int // split's given again (reuse_split.go)
	mapPatched  int // map's patched (reuse_map.go)
}

// joinState is what a call of join made.
type joinState struct {
	sep   string
	attr  any // nil, or the attribute (a string)
	items []any
	ends  []int32 // by item, where its part of s ends (the separator follows)
	s     string
}

// joinCall is one call of join whose work may be kept.
type joinCall struct {
	c    *bodyCache
	site *seqSite
	k    int
	last *joinState // the same call's in the last render (nil: none)
}

// joinCall returns the call of join (at the site evalFilter noted) on n items whose work may
// be kept; nil when not.
func (e *evaluator) joinCall(n int, attr any) *joinCall {
	switch attr.(type) {
	case nil, string:
	default:
		e.filterAt = nil
		return nil
	}
	c, s, k, ok := e.siteCall("join", n)
	if !ok {
		return nil
	}
	defer c.mu.Unlock()
	jc := &joinCall{c: c, site: s, k: k}
	if k < len(s.joins) {
		jc.last, s.joins[k] = s.joins[k], nil // this render's, while it computes
	}
	return jc
}

// done keeps st (nil: nothing) as the call's.
func (jc *joinCall) done(st *joinState, patched bool) {
	jc.c.mu.Lock()
	defer jc.c.mu.Unlock()
	if patched {
		jc.c.strKept.joinPatched++
	}
	keepCall(jc.site, &jc.site.joins, jc.k, st)
}

// JoinPatched is how many calls of join copied most of what their last call made rather
// than making it all.
func (c *ModuleCache) JoinPatched() int {
	c.bodies.mu.Lock()
	defer c.bodies.mu.Unlock()
	return c.bodies.strKept.joinPatched
}

// immutableItem says whether item cannot change: its part of a join (its str, or its
// attribute's) is then the same at each call.
func immutableItem(item any) bool {
	switch item.(type) {
	case string, Markup, int64, bool, *record.Record:
		return true
	}
	return false
}

// joinKept is items joined with sep (their attribute parts, if any), made with what the last
// call at this site made; false: not made here (the filter makes it as without a cache).
func (e *evaluator) joinKept(items []any, sep string, attr any, parts []any) (string, bool) {
	jc := e.joinCall(len(items), attr)
	if jc == nil {
		return "", false
	}
	st := jc.last
	if st == nil || st.sep != sep || st.attr != attr {
		st = &joinState{sep: sep, attr: attr}
	}
	outer := e.taint
	s, patched, keep, ok := st.make(e, items, parts)
	if !ok {
		jc.done(nil, false)
		e.taint = outer // the filter computes it all again, and its own error
		return "", false
	}
	if !keep || e.taint.any() {
		st = nil
	}
	jc.done(st, patched && st != nil)
	return s, true
}

// make makes st's string for items (patched from st's last, when there is one and most items
// match), and st with it; keep: st may be kept (every item immutable); false: not made (an
// error, the string too long: the filter, run afresh, says which).
func (st *joinState) make(e *evaluator, items []any, parts []any) (s string, patched, keep, ok bool) {
	n := len(items)
	from := make([]int32, n)
	for j := range from {
		from[j] = -1
	}
	if st.items != nil {
		d := differ{old: st.items, cur: items, from: from, limit: n/4 + 8, work: 8*n + 64}
		patched = d.match(0, len(st.items), 0, n)
		if !patched {
			for j := range from {
				from[j] = -1
			}
		}
	}
	if patched && len(st.s) <= e.maxSize && st.sameParts(e, items, from, parts) {
		st.items = slices.Clone(items)
		return st.s, true, true, true
	}
	var b strings.Builder
	b.Grow(len(st.s) + 64)
	ends := make([]int32, n)
	keep = true
	for j := 0; j < n; {
		if j > 0 {
			b.WriteString(st.sep)
		}
		if o := int(from[j]); o >= 0 {
			j = st.copyRun(&b, from, ends, j, o)
			continue
		}
		part, err := e.joinPart(items[j], parts, st.attr != nil)
		if err != nil || b.Len()+len(part) > e.maxSize {
			return "", false, false, false
		}
		keep = keep && immutableItem(items[j])
		b.WriteString(part)
		ends[j] = int32(b.Len())
		j++
		if j&1023 == 0 && e.checkTime() != nil {
			return "", false, false, false
		}
	}
	if b.Len() > e.maxSize {
		return "", false, false, false
	}
	st.items, st.ends, st.s = slices.Clone(items), ends, b.String()
	return st.s, patched, keep, true
}

// sameParts says whether items make st.s again: each matched where it was, each other (of
// immutable items) with the part the last call's item at its place had (an Ingress whose
// paths changed, its uid the same). The string is then st's, not copied.
func (st *joinState) sameParts(e *evaluator, items []any, from []int32, parts []any) bool {
	if len(items) != len(st.items) {
		return false
	}
	start := 0
	for j, o := range from {
		end := int(st.ends[j])
		if int(o) != j {
			if o >= 0 || !immutableItem(items[j]) {
				return false
			}
			part, err := e.joinPart(items[j], parts, st.attr != nil)
			if err != nil || part != st.s[start:end] {
				return false
			}
		}
		start = end + len(st.sep)
	}
	return true
}

// copyRun copies the parts of the run of items from j matched with the last call's from o on
// (consecutive in both) from the last string, with the separators between them, notes where
// they end, and returns the index after the run.
func (st *joinState) copyRun(b *strings.Builder, from, ends []int32, j, o int) int {
	k := j + 1
	for k < len(from) && int(from[k]) == o+k-j {
		k++
	}
	start := 0
	if o > 0 {
		start = int(st.ends[o-1]) + len(st.sep)
	}
	shift := int32(b.Len() - start)
	b.WriteString(st.s[start:st.ends[o+k-j-1]])
	for i := j; i < k; i++ {
		ends[i] = st.ends[o+i-j] + shift
	}
	return k
}

// joinPart is an item's part of a join: its str, or its attribute's (byAttr).
func (e *evaluator) joinPart(it any, parts []any, byAttr bool) (string, error) {
	if byAttr {
		var err error
		if it, err = e.attrPath(it, parts, nil); err != nil {
			return "", err
		}
	}
	return e.str(it)
}
