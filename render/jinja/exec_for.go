package jinja

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// {% for %}: the loop variable (loopCtx, whose type is with the evaluator's state), the loop
// filter, pongo2's reversed and sorted, and recursive loops.

func (e *evaluator) execFor(s *parse.ForStmt, f *frame) error {
	// for k, v in d.items(): walk the dict in place, without a view object.
	if c, ok := s.Iter.(*parse.CallExpr); ok && len(c.Args.List) == 0 && len(c.Args.Kw) == 0 && c.Args.Star == nil && c.Args.StarKw == nil {
		if a, ok := c.Fn.(*parse.AttrExpr); ok && (a.Name == "items" || a.Name == "iteritems") {
			obj, err := e.eval(a.Obj, f)
			if err != nil {
				return err
			}
			if sq, ok := viewSeq(obj, viewItems); ok {
				return e.runForSeq(s, f, nil, sq, 0, nil)
			}
			v, err := e.evalCallAfter(c, f, obj)
			if err != nil {
				return err
			}
			return e.runFor(s, f, v, 0, nil)
		}
	}
	if fx, ok := s.Iter.(*parse.FilterExpr); ok && e.dictsortPairs(s, fx) {
		sq, err := e.dictsortSeq(fx, f)
		if err != nil {
			return err
		}
		return e.runForSeq(s, f, nil, sq, 0, nil)
	}
	v, err := e.eval(s.Iter, f)
	if err != nil {
		return err
	}
	return e.runFor(s, f, v, 0, nil)
}

func (e *evaluator) runFor(s *parse.ForStmt, f *frame, v any, depth0 int, parentLoop *loopCtx) error {
	sq, err := e.seqOf(v)
	if err != nil {
		return e.at(s.IterPos, fmt.Errorf("cannot loop over %s: %w", aTypeName(v), err))
	}
	return e.runForSeq(s, f, v, sq, depth0, parentLoop)
}

// runForSeq runs the loop over sq (the items of v; v may be nil when sq was made directly).
func (e *evaluator) runForSeq(s *parse.ForStmt, f *frame, v any, sq seq, depth0 int, parentLoop *loopCtx) error {
	body := e.newFrame(f)
	defer e.release(body)
	// {% for k, v in dict %}: with several names, a dict gives its (key, value) pairs, as in
	// pongo2, whatever its keys (Jinja2 would unpack each key: see docs/templates.md).
	dictPairs := s.Target.Tuple && isMapping(v)
	if dictPairs {
		sq, _ = e.seqOf(&dictView{d: v, kind: viewItems})
	}
	var lf *lazyFilter
	switch {
	case s.Filter != nil && !s.Reversed && !s.Sorted:
		// The filter runs item by item as the loop reaches the items (lazy_filter.go).
		lf = e.newLazyFilter(s, f, sq, dictPairs)
		defer e.endLazyFilter(lf)
		lf.ahead(e, f)
		if ok, err := lf.have(e, 0); err != nil || !ok {
			if err != nil {
				return err
			}
			return e.execInner(s.Else, f, unsetIn(e.cur, &s.Else)) // a frame of its own, as in Jinja2
		}
		sq = seq{list: lf.items, n: len(lf.items)}
	case s.Filter != nil || s.Reversed || s.Sorted:
		// pongo2's reversed and sorted need every item first.
		var err error
		if sq, err = e.prepareFor(s, body, sq, dictPairs); err != nil {
			return err
		}
		if !s.KeepsLoop {
			defer e.putScratch(sq.list)
		}
	}
	if sq.count() == 0 {
		return e.execInner(s.Else, f, unsetIn(e.cur, &s.Else)) // a frame of its own, as in Jinja2
	}
	loop := e.newLoop(s, f, &sq, depth0, parentLoop)
	if loop != nil && !s.KeepsLoop && !s.Recursive {
		defer e.putLoop(loop)
	}
	if loop != nil {
		loop.lf = lf
	}
	// (The iterations in a function of their own: with few returns here, Go open-codes the
	// defers above, which loops run once per item of the data.)
	return e.runIterations(s, body, &sq, loop, lf, dictPairs)
}

// runIterations runs the loop's body once per item of sq, in the frame body.
// lf: the loop's filter, run as the loop advances (nil: sq holds every item).
func (e *evaluator) runIterations(s *parse.ForStmt, body *frame, sq *seq, loop *loopCtx, lf *lazyFilter, dictPairs bool) error {
	simple, pairs, flat, base := bindLoopNames(s, body, sq.view == viewItems && (sq.rec != nil || sq.keys != nil || sq.dk != nil), loop)
	// What the body sets before any mention starts undefined, at each iteration (Jinja2).
	unset := unsetIn(e.cur, s)
	br := e.iterationsRun(s, sq, lf)
	var pr *printRun // a print-only loop's run, copied from the last render's (reuse_print.go)
	if br == nil {
		pr = e.printRun(s, sq, lf)
	}
	if br != nil && lf == nil {
		br.sheetStart(e, body, sq) // (reuse_body_sheet.go)
	}
	var items stretchItems // for stretches (reuse_body_stretch.go)
	if br != nil && br.stretchable(s) {
		items = func(j int, eval bool) (any, bool, error) {
			if lf != nil {
				if j >= len(lf.items) && !eval {
					return nil, false, nil
				}
				if ok, err := lf.have(e, j); err != nil || !ok {
					return nil, false, err
				}
				sq.list, sq.n = lf.items, len(lf.items)
			} else if j >= sq.count() {
				return nil, false, nil
			}
			return sq.at(j), true, nil
		}
	}
	e.forDepth++
	defer func() { e.forDepth-- }()
	for i := 0; ; i++ {
		if lf != nil {
			ok, err := lf.have(e, i)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			sq.list, sq.n = lf.items, len(lf.items)
		} else if i >= sq.count() {
			break
		}
		if err := e.tick(); err != nil {
			return e.at(s.Pos, err)
		}
		if items != nil {
			j, err := br.stretch(e, i, items)
			if err != nil {
				return e.at(s.Pos, err)
			}
			if j > i {
				i = j - 1
				continue
			}
		}
		if br != nil && br.sheet != nil {
			j, err := br.sheetCopy(e, i)
			if err != nil {
				return e.at(s.Pos, err)
			}
			if j > i {
				i = j - 1
				continue
			}
		}
		if pr != nil {
			j, err := pr.copy(e, i)
			if err != nil {
				return err
			}
			if j > i {
				i = j - 1
				continue
			}
		}
		if loop != nil {
			loop.index0 = i
		}
		switch {
		case simple:
			clear(body.vals[base:])
			body.names, body.vals = body.names[:base], body.vals[:base]
			body.vals[0] = sq.at(i)
		case pairs:
			clear(body.vals[base:])
			body.names, body.vals = body.names[:base], body.vals[:base]
			body.vals[0], body.vals[1], _ = sq.pair(i)
		case flat && unpackFlat(body.vals[:base], s.Target, sq.at(i)) >= 0:
			clear(body.vals[base:])
			body.names, body.vals = body.names[:base], body.vals[:base]
		default:
			clear(body.vals)
			body.names, body.vals = body.names[:0], body.vals[:0]
			if err := e.assign(body, s.Target, sq.at(i)); err != nil {
				return loopTargetError(e, s, err, dictPairs)
			}
			if loop != nil {
				body.names = append(body.names, "loop", "forloop")
				body.vals = append(body.vals, loop, loop)
			}
		}
		if unset != nil {
			bindUnset(body, unset)
		}
		var err error
		if br != nil {
			err = br.exec(e, s.Body, body, loop)
		} else {
			err = e.execAll(s.Body, body)
		}
		if pr != nil && err == nil {
			pr.ran(e)
		}
		if err != nil {
			if err == errContinue {
				continue
			}
			if err == errBreak {
				break
			}
			return err
		}
	}
	br.done(e)
	pr.done(e)
	return nil
}

// iterationsRun is the run of s whose iterations may be kept (reuse_body.go); nil when not.
// A loop inside another is kept when it has enough items (with a filter that runs as the
// loop advances, those of its source: how many pass is not known yet). Not with such a filter
// when the body reads the loop's position: the kept iterations would be found by a length not
// known before the filter ends.
func (e *evaluator) iterationsRun(s *parse.ForStmt, sq *seq, lf *lazyFilter) *bodyRun {
	n := sq.count()
	if lf != nil && !lf.done {
		n = lf.src.count()
	}
	if e.forDepth != 0 && n < minNestedKept {
		return nil
	}
	br := e.bodyRun(s)
	if br != nil && lf != nil && !lf.done && br.lp.info.loop {
		return nil
	}
	return br
}

// newLoop makes the loop object, when the body uses it (nil otherwise): from the pool unless
// something may keep it past the loop.
func (e *evaluator) newLoop(s *parse.ForStmt, f *frame, sq *seq, depth0 int, parentLoop *loopCtx) *loopCtx {
	if !s.UsesLoop {
		return nil
	}
	if parentLoop == nil {
		if p, ok := e.lookup(f, "loop"); ok {
			parentLoop, _ = p.(*loopCtx)
		}
	}
	var loop *loopCtx
	if s.KeepsLoop || s.Recursive {
		loop = &loopCtx{}
	} else {
		loop = e.getLoop()
	}
	*loop = loopCtx{length: sq.n, s: *sq, depth0: depth0, parent: parentLoop}
	if s.Recursive {
		loop.stmt, loop.frame, loop.tmpl = s, f, e.cur
		keep(f)
	}
	return loop
}

// bindLoopNames sets, once, the names the loop binds in its body's frame: they are the same
// every iteration, which then sets their values and drops what the previous one added
// ({% set %} in the body). simple: one name; pairs: two names over a dict's items (items:
// the sequence walks a dict's items in place), set without making a tuple; flat: names,
// nested or not, each once, unpacked from the template's lists and tuples in place
// (unpackFlat; e.assign otherwise, which sets them in the same order). base is how many
// names stay from one iteration to the next.
func bindLoopNames(s *parse.ForStmt, body *frame, items bool, loop *loopCtx) (simple, pairs, flat bool, base int) {
	simple = !s.Target.Tuple
	pairs = s.Target.Tuple && len(s.Target.Items) == 2 && !s.Target.Items[0].Tuple && !s.Target.Items[1].Tuple &&
		s.Target.Items[0].Attr == "" && s.Target.Items[1].Attr == "" && items
	clear(body.vals)
	body.names, body.vals = body.names[:0], body.vals[:0] // prepare may have used the frame
	switch {
	case simple:
		body.names = append(body.names, s.Target.Name)
		base = 1
	case pairs:
		body.names = append(body.names, s.Target.Items[0].Name, s.Target.Items[1].Name)
		base = 2
	default:
		var ok bool
		if body.names, ok = flatNames(body.names, s.Target); ok {
			flat, base = true, len(body.names)
		} else {
			body.names = body.names[:0]
		}
	}
	for range base {
		body.vals = append(body.vals, nil)
	}
	if loop != nil && (simple || pairs || flat) {
		body.names = append(body.names, "loop", "forloop")
		body.vals = append(body.vals, loop, loop)
		base += 2
	}
	return simple, pairs, flat, base
}

// flatNames appends the names of tuple target t to names, in the order e.assign sets them;
// false when one is an attribute (ns.attr) or is there twice.
func flatNames(names []string, t parse.Target) ([]string, bool) {
	for _, it := range t.Items {
		var ok bool
		switch {
		case it.Tuple:
			if names, ok = flatNames(names, it); !ok {
				return names, false
			}
		case it.Attr != "" || slices.Contains(names, it.Name):
			return names, false
		default:
			names = append(names, it.Name)
		}
	}
	return names, true
}

// unpackFlat sets dst, in flatNames' order, to the items of v unpacked by tuple target t,
// when v and the tuples in it are lists or tuples of the template of the target's lengths:
// their items are what e.unpack would give. It returns how many it set; -1 otherwise
// (e.assign then unpacks v, or says why it cannot).
func unpackFlat(dst []any, t parse.Target, v any) int {
	items, ok := templateItems(v)
	if !ok || len(items) != len(t.Items) {
		return -1
	}
	k := 0
	for i, it := range t.Items {
		if !it.Tuple {
			if k >= len(dst) {
				return -1
			}
			dst[k] = items[i]
			k++
			continue
		}
		n := unpackFlat(dst[k:], it, items[i])
		if n < 0 {
			return -1
		}
		k += n
	}
	return k
}

// prepareFor applies the loop filter (for x in y if cond) and pongo2's reversed/sorted.
func (e *evaluator) prepareFor(s *parse.ForStmt, body *frame, sq seq, dictPairs bool) (seq, error) {
	items := e.getScratch()
	var fr *filterRun // nil: the filter's results are not kept (reuse_filter.go)
	if sq.n >= minFilterKept {
		fr = e.filterRun(s)
	}
	for i := 0; i < sq.n; i++ {
		item := sq.at(i)
		if s.Filter != nil {
			if err := e.tick(); err != nil {
				return seq{}, e.at(s.Pos, err)
			}
			body.names, body.vals = body.names[:0], body.vals[:0]
			if err := e.assign(body, s.Target, item); err != nil {
				return seq{}, loopTargetError(e, s, err, dictPairs)
			}
			var ok bool
			var err error
			if fr != nil {
				ok, err = fr.cond(e, s, body)
			} else {
				ok, err = e.cond(s.Filter, body)
			}
			if err != nil {
				return seq{}, err
			}
			if !ok {
				continue
			}
		}
		items = append(items, item)
	}
	fr.done()
	if s.Sorted {
		var err error
		sort.SliceStable(items, func(i, j int) bool {
			c, cerr := compare(items[i], items[j], "<")
			if cerr != nil && err == nil {
				err = cerr
			}
			return c < 0
		})
		if err != nil {
			return seq{}, e.at(s.Pos, err)
		}
	}
	if s.Reversed {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	return seq{list: items, n: len(items)}, nil
}

// loopTargetError is the error of setting the loop's names to an item. dictPairs: the items
// are a dict's (key, value) pairs, which the error says.
func loopTargetError(e *evaluator, s *parse.ForStmt, err error, dictPairs bool) error {
	if dictPairs {
		err = fmt.Errorf("{%% for %%} with several names over a dict unpacks each (key, value) pair: %w", err)
	}
	return e.at(s.Pos, err)
}

// call is loop(x) in a recursive loop: the loop body again over x, one level deeper.
func (l *loopCtx) call(e *evaluator, a []any) (any, error) {
	if l.stmt == nil {
		return nil, errors.New("the loop must have the 'recursive' marker to be called recursively")
	}
	if len(a) != 1 {
		return nil, fmt.Errorf("loop() takes exactly one argument (%d given)", len(a))
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxCallDepth {
		return nil, fmt.Errorf("recursive loop calls nested more than %d deep", maxCallDepth)
	}
	savedCur := e.cur
	c := e.startCapture()
	e.cur = l.tmpl
	err := e.runFor(l.stmt, l.frame, a[0], l.depth0+1, l.parent)
	out, secret := e.endCapture(c)
	e.cur = savedCur
	if err != nil {
		return nil, err
	}
	return textValue(out, secret, e.autoescape), nil
}

// dictsortPairs says whether the loop is for k, v in d|dictsort(...) with Jinja's dictsort,
// whose pairs it can bind without making them: no loop object (loop.previtem would show a
// pair), no filter, nothing but the two names.
func (e *evaluator) dictsortPairs(s *parse.ForStmt, fx *parse.FilterExpr) bool {
	t := s.Target
	if !t.Tuple || len(t.Items) != 2 || t.Items[0].Tuple || t.Items[1].Tuple || t.Items[0].Attr != "" || t.Items[1].Attr != "" {
		return false
	}
	if s.UsesLoop || s.Filter != nil || s.Reversed || s.Sorted || s.Recursive || fx.In == nil {
		return false
	}
	u := e.cur.tree.Uses[fx.Use]
	_, custom := e.prog.filters[u.Name]
	return u.Name == "dictsort" && !u.Pongo2 && !custom && e.cur.filters[fx.Use] != nil
}

// dictsortSeq walks the pairs d|dictsort(...) gives (evalFilter's steps, with fDictsort's
// keys and values in their order and no list of pairs).
func (e *evaluator) dictsortSeq(fx *parse.FilterExpr, f *frame) (seq, error) {
	in, err := e.eval(fx.In, f)
	if err != nil {
		return seq{}, err
	}
	list, kw, err := e.evalArgs(&fx.Args, f, nil)
	if err != nil {
		return seq{}, err
	}
	if u, ok := in.(*Undefined); ok && u.err != nil {
		return seq{}, e.at(fx.Pos, u.err)
	}
	keys, vals, err := dictsortItems(in, list, kw)
	if err != nil {
		return seq{}, e.filterError(fx, err)
	}
	if len(keys) == 0 {
		return seq{view: viewItems}, nil
	}
	return seq{dk: keys, dv: vals, view: viewItems, n: len(keys)}, nil
}
