package jinja

import (
	"slices"
	"sort"
	"weak"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A print-only loop (printsOnly: routes.map's `{{ key }}? {{ backend }}`) is not kept
// iteration by iteration (reuse_body.go): running its body costs less than looking a kept
// iteration up. When its body reads nothing but the loop's names, an iteration's output is a
// function of its item alone (and of autoescape). So each run of such a loop (with a
// ModuleCache) keeps its items, who owned them (as sort does: reuse_sort.go), where each
// iteration's output ends and the run's output; the same run in the next render matches its
// items with those by identity (differ), and each stretch of matched items that cannot have
// changed since (ownRun.holds: a string, a number, a record of the data, a dict or list owned
// whole by a loan neither spoiled nor disowned from since) writes the last output's span in
// one copy: only the new items' iterations run. Not with a loop filter, reversed or sorted,
// recursive, nor where loops' iterations are not kept (bodyEval.off), while tracing, where
// output is dropped, in a template set that tests identity, or with marked text being
// consumed.

// minPrintKept is how many items a run needs for it to be kept: below it, matching costs
// about what it saves.
const minPrintKept = 32

// maxPrintOut is how long a run's output may be for it to be kept (a copy is held).
const maxPrintOut = 4 << 20

// maxPrintRuns is how many runs of a loop a render keeps (a loop inside another: its first).
const maxPrintRuns = 64

// printKey is a print-only loop of a program (held weakly, as seqKey).
type printKey struct {
	prog weak.Pointer[Program]
	node *parse.ForStmt
}

// printLoop is what is kept of a print-only loop.
type printLoop struct {
	ok      bool          // its body reads the loop's names only (printBodyOwn)
	idle    int           // sweeps since it last ran
	refused int           // runs in a row not kept (maxRefused: not tried again)
	ran     int           // runs in the render being swept
	runs    []*printState // by the run's number in a render
}

// printState is one run of a loop: its items, their owners by runs, where each
// iteration's output ends in out, the secret spans of out, and autoescape's setting.
type printState struct {
	items  []any
	owned  []ownRun
	ends   []int32
	out    string
	secret []int
	escape bool
	// spare: arrays of the run before, used again by the next (a run's ends and matches
	// are made at each render: 10,000 items' at 10,000 Ingresses).
	spareEnds, spareFrom []int32
}

// printRun is a run of a print-only loop being matched with the last render's and kept.
type printRun struct {
	c      *bodyCache
	lp     *printLoop
	k      int
	last   *printState // nil: nothing to copy from
	items  []any
	from   []int32 // per item, the index of its match in last, unchanged since (-1: none)
	owned  []ownRun
	ends   []int32 // per iteration run so far, where its output ends (from start)
	start  int     // len(e.out) when the loop started
	sstart int     // len(e.secret) then
	copied int     // iterations written from last
}

// printBodyOwn says whether s's body prints only what it reads of the loop's own names
// (bound by plain names, not ns.attr).
func printBodyOwn(s *parse.ForStmt) bool {
	if !printsOnly(s.Body) || s.Filter != nil || s.Reversed || s.Sorted || s.Recursive || s.UsesLoop {
		return false
	}
	names := plainTargetNames(s.Target)
	if names == nil {
		return false
	}
	for _, st := range s.Body {
		p, ok := st.(*parse.PrintStmt)
		if !ok {
			continue
		}
		if n := rootName(p.X); n != "" && !slices.Contains(names, n) {
			return false
		}
	}
	return true
}

// rootName is the name a plain read (plainRead) starts from; "" for a constant.
func rootName(x parse.Expr) string {
	for {
		switch y := x.(type) {
		case *parse.NameExpr:
			return y.Name
		case *parse.AttrExpr:
			x = y.Obj
		case *parse.ItemExpr:
			x = y.Obj
		default:
			return ""
		}
	}
}

// seqItems are the items of sq when it holds them as values (nil otherwise).
func seqItems(sq *seq) []any {
	switch {
	case sq.live != nil:
		return sq.live.items
	case sq.list != nil && sq.view == 0:
		return sq.list[:sq.n]
	case sq.data != nil:
		return sq.data[:sq.n] // as the data holds them: strings and int64 match, maps never
	}
	return nil
}

// printRun returns the run of print-only loop s over sq whose output may be copied from the
// last render's and kept; nil when not.
func (e *evaluator) printRun(s *parse.ForStmt, sq *seq, lf *lazyFilter) *printRun {
	if lf != nil || e.shared == nil || e.shared.Across == nil || e.origins != nil || e.suppress ||
		e.bodies.off() || e.taint.any() || !printsOnly(s.Body) {
		return nil
	}
	b := e.bodyState()
	lp := b.printLoops[s]
	if lp == nil {
		lp = e.printLoop(s)
		if b.printLoops == nil {
			b.printLoops = map[*parse.ForStmt]*printLoop{}
		}
		b.printLoops[s] = lp
	}
	if !lp.ok {
		return nil
	}
	if b.printRuns == nil {
		b.printRuns = map[*printLoop]int{}
	}
	k := b.printRuns[lp]
	b.printRuns[lp] = k + 1
	items := seqItems(sq)
	if k >= maxPrintRuns || len(items) < minPrintKept {
		return nil
	}
	c := &e.shared.Across.bodies
	c.mu.Lock()
	lp.idle = 0
	lp.ran = max(lp.ran, k+1)
	if lp.refused >= maxRefused {
		c.mu.Unlock()
		return nil
	}
	r := &printRun{c: c, lp: lp, k: k, items: items, start: len(e.out), sstart: len(e.secret)}
	if k < len(lp.runs) {
		r.last, lp.runs[k] = lp.runs[k], nil // this render's, while it runs
	}
	c.mu.Unlock()
	if r.last != nil {
		r.ends, r.from = r.last.spareEnds[:0], r.last.spareFrom
		if r.last.escape != e.autoescape {
			r.last = nil
		}
	}
	r.match()
	return r
}

// printLoop is what is kept of print-only loop s, made when first met (ok is set then only).
func (e *evaluator) printLoop(s *parse.ForStmt) *printLoop {
	c := &e.shared.Across.bodies
	c.mu.Lock()
	defer c.mu.Unlock()
	key := printKey{weak.Make(e.prog), s}
	lp := c.prints[key]
	if lp == nil {
		lp = &printLoop{ok: printBodyOwn(s) && !e.prog.testsIdentity()}
		if c.prints == nil {
			c.prints = map[printKey]*printLoop{}
		}
		c.prints[key] = lp
	}
	return lp
}

// match sets r.from and r.owned: a matched item is kept matched while the loan that owned it
// whole in the last run is not spoiled and still owns it (seqState.reown's rule); the others'
// owners are found (ownerFor).
func (r *printRun) match() {
	var lastItems []any
	var lastOwned []ownRun
	if r.last != nil {
		lastItems, lastOwned = r.last.items, r.last.owned
	}
	r.from, r.owned = matchItems(lastItems, lastOwned, r.items, r.from, r.owned)
}

// copy writes, from iteration i on, the last run's output of the stretch of matched items
// that follow one another there too, ticking once per iteration after the first; it returns
// the iteration after them (i: none written).
func (r *printRun) copy(e *evaluator, i int) (int, error) {
	o := int(r.from[i])
	if o < 0 {
		return i, nil
	}
	j := i + 1
	for j < len(r.from) && int(r.from[j]) == o+j-i {
		j++
	}
	last := r.last
	lo := 0
	if o > 0 {
		lo = int(last.ends[o-1])
	}
	hi := int(last.ends[o+j-i-1])
	if len(e.out)+hi-lo > e.maxSize {
		return i, nil // run as without a cache, which fails where it must
	}
	for range j - i - 1 {
		if err := e.tick(); err != nil {
			return i, err
		}
	}
	base := len(e.out) - lo
	e.out = append(e.out, last.out[lo:hi]...)
	p := sort.SearchInts(last.secret, lo)
	p += p & 1 // an end at lo: a span of the iteration before
	for ; p+1 < len(last.secret) && last.secret[p] < hi; p += 2 {
		e.secret = append(e.secret, base+last.secret[p], base+last.secret[p+1])
	}
	for t := o; t < o+j-i; t++ {
		r.ends = append(r.ends, int32(base+int(last.ends[t])-r.start))
	}
	r.copied += j - i
	return j, nil
}

// ran notes where the iteration just run ended.
func (r *printRun) ran(e *evaluator) { r.ends = append(r.ends, int32(len(e.out)-r.start)) }

// done keeps the run, when every iteration ended (no error) and most of its items may be
// matched next time.
func (r *printRun) done(e *evaluator) {
	if r == nil {
		return
	}
	var st *printState
	size := len(e.out) - r.start
	if len(r.ends) == len(r.items) && size <= maxPrintOut && !e.taint.any() && r.matchable() {
		st = &printState{}
		if r.last != nil { // done with: its arrays are used again
			st.items, st.secret, st.spareEnds = r.last.items[:0], r.last.secret[:0], r.last.ends
		}
		st.owned, st.ends, st.spareFrom, st.escape = r.owned, r.ends, r.from, e.autoescape
		st.items = append(st.items, r.items...) // a copy: a list of the template may change in place
		if r.last != nil && r.copied == len(r.items) && len(r.last.ends) == len(r.ends) && size == len(r.last.out) {
			st.out = r.last.out // all copied in one piece: the same bytes
		} else {
			st.out = string(e.out[r.start:])
		}
		for _, p := range e.secret[r.sstart:] {
			st.secret = append(st.secret, p-r.start)
		}
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.c.printCopied += r.copied
	for len(r.lp.runs) <= r.k {
		r.lp.runs = append(r.lp.runs, nil)
	}
	r.lp.runs[r.k] = st
	if st == nil {
		r.lp.refused++
	} else {
		r.lp.refused = 0
	}
}

// matchable says whether most items may be matched next time (owned by nobody that may
// change them unseen).
func (r *printRun) matchable() bool {
	n, prev := 0, 0
	for _, o := range r.owned {
		if o.ok {
			n += int(o.end) - prev
		}
		prev = int(o.end)
	}
	return 2*n >= len(r.items)
}

// sweepPrints ends a render for print-only loops: one of a program gone, or that did not run
// for maxSeqIdle renders, is forgotten; the runs past those of the last render are dropped.
func (c *bodyCache) sweepPrints() {
	for key, lp := range c.prints {
		if lp.idle++; lp.idle > maxSeqIdle || key.prog.Value() == nil {
			delete(c.prints, key)
			continue
		}
		if lp.ran < len(lp.runs) {
			clear(lp.runs[lp.ran:])
			lp.runs = lp.runs[:lp.ran]
		}
		lp.ran = 0
	}
}
