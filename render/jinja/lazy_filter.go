package jinja

import (
	"math/big"
	"reflect"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A loop's filter ({% for x in items if cond %}) runs as Jinja2's runs: a generator the loop
// advances, so the filter of an item runs when the loop reaches it, after the body ran for
// the items before, and sees what the body did (a namespace set, a list appended to: the
// ingress-nginx example's first-wins loops, `for n in [...] if s.allow is none`). The loop
// object reads ahead as Jinja2's LoopContext does: loop.last and loop.nextitem run the filter
// up to the next item that passes; loop.length, loop.revindex and loop.revindex0 run it over
// every item left, at that time, and the loop then walks those (a list the body extends is no
// longer read). {% break %} leaves the rest untested: their filter neither runs nor fails.
//
// pongo2's reversed and sorted need every item first: their filter runs before the loop
// (prepareFor).

// lazyFilter is a loop's items passed through its filter as far as the loop needs them.
type lazyFilter struct {
	e         *evaluator
	s         *parse.ForStmt
	src       seq
	pos       int   // the next item of src to test
	items     []any // the items that passed so far
	done      bool  // every item of src was tested (or taken at once: rest)
	frame     *frame
	fr        *filterRun // nil: the filter's results are not kept (reuse_filter.go)
	dictPairs bool
	pooled    bool // frame and items go back to the evaluator's pools at the end
}

// newLazyFilter starts the filter of loop s over sq; f is the frame the loop runs in.
func (e *evaluator) newLazyFilter(s *parse.ForStmt, f *frame, sq seq, dictPairs bool) *lazyFilter {
	var lf *lazyFilter
	// The filter's own frame: it sees the loop's names and what is outside the loop, not
	// what the body sets (nor the loop object: `loop` there is an outer loop's).
	if s.KeepsLoop || s.Recursive {
		// The loop object may be read after the loop (or by loop(x)): it may still run the
		// filter then, in frames that stay.
		lf = &lazyFilter{frame: &frame{parent: f}}
		keep(f)
	} else {
		// From the pool: loops run once per item of the data.
		if n := len(e.freeLazy); n > 0 {
			lf = e.freeLazy[n-1]
			e.freeLazy = e.freeLazy[:n-1]
		} else {
			lf = &lazyFilter{}
		}
		lf.frame, lf.pooled = e.newFrame(f), true
	}
	lf.e, lf.s, lf.src, lf.dictPairs, lf.items = e, s, sq, dictPairs, e.getScratch()
	if sq.count() >= minFilterKept {
		lf.fr = e.filterRun(s)
	}
	return lf
}

// endLazyFilter ends the loop: the filter results kept are stored for the next render.
func (e *evaluator) endLazyFilter(lf *lazyFilter) {
	lf.fr.done()
	lf.fr = nil
	if lf.pooled {
		e.release(lf.frame)
		e.putScratch(lf.items)
		*lf = lazyFilter{}
		e.freeLazy = append(e.freeLazy, lf)
	}
}

// have runs the filter until the i-th item that passes is known; false when there is none.
func (lf *lazyFilter) have(e *evaluator, i int) (bool, error) {
	for len(lf.items) <= i && !lf.done {
		if err := lf.next(e); err != nil {
			return false, err
		}
	}
	return i < len(lf.items), nil
}

// rest runs the filter over every item left (Jinja2's loop.length lists the rest of the
// iterator): the loop walks those, and reads its source no more.
func (lf *lazyFilter) rest(e *evaluator) error {
	for !lf.done {
		if err := lf.next(e); err != nil {
			return err
		}
	}
	return nil
}

// next tests the next item of the source (a list of the template is read as it is now: the
// body may have extended it).
func (lf *lazyFilter) next(e *evaluator) error {
	if lf.frame == nil || lf.pos >= lf.src.count() {
		lf.done = true
		return nil
	}
	item := lf.src.at(lf.pos)
	lf.pos++
	s := lf.s
	if err := e.tick(); err != nil {
		return e.at(s.Pos, err)
	}
	f := lf.frame
	if pass, ok := lf.fr.quick(e, f, item); ok {
		if pass {
			lf.items = append(lf.items, item)
		}
		return nil
	}
	clear(f.vals)
	f.names, f.vals = f.names[:0], f.vals[:0]
	if err := e.assign(f, s.Target, item); err != nil {
		return loopTargetError(e, s, err, lf.dictPairs)
	}
	var ok bool
	var err error
	if lf.fr != nil {
		ok, err = lf.fr.cond(e, s, f)
	} else {
		ok, err = e.cond(s.Filter, f)
	}
	if err != nil {
		return err
	}
	if ok {
		lf.items = append(lf.items, item)
	}
	return nil
}

// settle runs the filter as far as the loop attribute name needs, for a loop at index0:
// loop.last and loop.nextitem the next item that passes, loop.length and loop.revindex
// every item left.
func (lf *lazyFilter) settle(e *evaluator, name string, index0 int) error {
	switch name {
	case "last", "Last", "nextitem":
		_, err := lf.have(e, index0+1)
		return err
	case "length", "revindex", "revindex0", "Revcounter", "Revcounter0":
		return lf.rest(e)
	}
	return nil
}

// count is len(loop): with a filter run as the loop advances, it runs over every item left.
func (l *loopCtx) count() (int, error) {
	if l.lf != nil {
		// (Through an interface: len() and repr() are reached from the package's globals,
		// which the filter's evaluation reaches in turn; a direct call is an init cycle.)
		var r rester = l.lf
		if err := r.rest(l.lf.e); err != nil {
			return 0, err
		}
		l.length = len(l.lf.items)
	}
	return l.length, nil
}

type rester interface{ rest(e *evaluator) error }

// lazyAttr is a loop attribute that depends on the items the filter passed (settle ran
// first); false for the others.
func (l *loopCtx) lazyAttr(name string) (any, bool) {
	items := l.lf.items
	switch name {
	case "last", "Last":
		return l.index0+1 >= len(items), true
	case "nextitem":
		if l.index0+1 >= len(items) {
			return undefinedHint("there is no next item"), true
		}
		return items[l.index0+1], true
	case "previtem":
		if l.index0 == 0 {
			return undefinedHint("there is no previous item"), true
		}
		return items[l.index0-1], true
	}
	l.length = len(items)
	return nil, false
}

// The fast path: a filter that reads nothing the body can change (the loop's items and the
// names it reads are data, which templates cannot change, or numbers, strings and undefined)
// and so can call nothing that changes anything, gives each item the answer it would give
// when the loop reaches it. It then runs over every item before the loop, as it did before
// it ran lazily: the loop's length is known first (the loop's iterations may be kept,
// reuse_body.go, even when the body reads loop.length). An item whose filter fails stops
// it: that item and those after it are tested when the loop reaches them, so that a
// {% break %} before them leaves the error unraised, as in Jinja2.

// ahead runs the filter over the items before the loop when the answers cannot differ.
func (lf *lazyFilter) ahead(e *evaluator, f *frame) {
	if !dataSeq(&lf.src) || !e.filterReadsData(lf.s, f) {
		return
	}
	for !lf.done {
		pos, n := lf.pos, len(lf.items)
		if err := lf.next(e); err != nil {
			lf.pos, lf.items = pos, lf.items[:n]
			return
		}
	}
}

// dataSeq says whether sq walks data (or a range): items the body cannot change.
func dataSeq(sq *seq) bool {
	if sq.live != nil || sq.list != nil || sq.dk != nil {
		return false
	}
	return sq.data != nil || sq.strs != nil || sq.maps != nil || sq.rec != nil || sq.keys != nil || sq.rng != nil
}

// filterReadsData says whether the names loop s's filter reads (but the loop's own names)
// are, as f shows them, values the body cannot change.
func (e *evaluator) filterReadsData(s *parse.ForStmt, f *frame) bool {
	names, ok := e.filterNames(s)
	if !ok {
		return false
	}
	for _, n := range names {
		if targetBinds(&s.Target, n) {
			continue
		}
		v, found := e.lookup(f, n)
		if found && !immutableValue(v) {
			return false
		}
	}
	return true
}

// filterNames are the free names of loop s's filter (once per render per loop); false when
// they cannot be told.
func (e *evaluator) filterNames(s *parse.ForStmt) ([]string, bool) {
	if fn, ok := e.lazyNames[s]; ok {
		return fn.names, fn.ok
	}
	w := bodyWalk{freeWalk: freeWalk{seen: map[string]bool{}, bound: map[string]int{}, ok: true}}
	w.walk(reflect.ValueOf(s.Filter))
	fn := filterFree{names: w.names, ok: w.ok}
	if e.lazyNames == nil {
		e.lazyNames = map[*parse.ForStmt]filterFree{}
	}
	e.lazyNames[s] = fn
	return fn.names, fn.ok
}

// filterFree is what filterNames found.
type filterFree struct {
	names []string
	ok    bool
}

// targetBinds says whether t binds name.
func targetBinds(t *parse.Target, name string) bool {
	if !t.Tuple {
		return t.Attr == "" && t.Name == name
	}
	for i := range t.Items {
		if targetBinds(&t.Items[i], name) {
			return true
		}
	}
	return false
}

// immutableValue says whether v is a value no template can change: data, a number, a string,
// undefined, a range or a global function (not a dict, list or namespace of the template, a
// loop object, a macro, a cycler...).
func immutableValue(v any) bool {
	switch v.(type) {
	case nil, bool, int64, float64, *big.Int, string, Markup, *tainted, *Undefined, *rangeVal, *builtin,
		map[string]any, map[string]string, []any, []string, []map[string]any, *record.Record:
		return true
	}
	return false
}
