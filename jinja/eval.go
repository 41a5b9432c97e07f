package jinja

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/record"
)

// The evaluator runs a template's tree and writes its output. One evaluator serves one
// render: it holds the output, the variables in scope (frames), the budgets, and nothing that
// outlives the render.

type evaluator struct {
	ctx      context.Context
	deadline time.Time
	prog     *Program
	vars     map[string]any // the render context

	out      []byte // where output goes now (the render's, or a capture's)
	maxSize  int    // bytes: the output, and any string or capture built on the way
	maxItems int    // items: any list or dict built on the way
	steps    uint32
	depth    int // nested macro calls, includes, recursive loops

	autoescape bool
	taint      string   // the data string behind tainted text the current operation consumed
	kwOrder    []string // the keyword arguments of the call being made, in order
	blockIn    any      // the input of the innermost filter of a {% filter %} or {% set %} block

	cur       *Template // whose nodes run now (errors are located in it)
	root      *frame    // the current template's top-level frame
	blocks    map[string][]*blockStmt
	extending *Template // {% extends %} ran: the child's top-level output is dropped
	suppress  bool
	blockCall []blockCall // blocks being rendered, for super()

	free      []*frame
	freeLoops []*loopCtx
	scratch   [][]any
	modules   map[string]*module // imports without context, once per render
}

type blockCall struct {
	name string
	idx  int
}

// frame holds the variables of one scope: a template's top level, a loop body, a macro
// call, a with block. Lookups go from the innermost frame outwards.
type frame struct {
	parent  *frame
	names   []string
	vals    []any
	ctx     map[string]any // at a template's top level (with context): the render context
	escaped bool           // a macro keeps it: not reused
}

func (f *frame) set(name string, v any) {
	for i, n := range f.names {
		if n == name {
			f.vals[i] = v
			return
		}
	}
	f.names = append(f.names, name)
	f.vals = append(f.vals, v)
}

func (e *evaluator) lookup(f *frame, name string) (any, bool) {
	for fr := f; fr != nil; fr = fr.parent {
		for i := len(fr.names) - 1; i >= 0; i-- {
			if fr.names[i] == name {
				return fr.vals[i], true
			}
		}
		if fr.ctx != nil {
			if v, ok := fr.ctx[name]; ok {
				return fromData(v), true
			}
		}
	}
	if b := lookupBuiltin(name); b != nil {
		return b, true
	}
	return nil, false
}

// Loop objects and filtered item lists are reused from loop to loop when nothing can keep
// them (see forStmt.keepsLoop): loops run once per item of the data.
func (e *evaluator) getLoop() *loopCtx {
	if n := len(e.freeLoops); n > 0 {
		l := e.freeLoops[n-1]
		e.freeLoops = e.freeLoops[:n-1]
		return l
	}
	return &loopCtx{}
}

func (e *evaluator) putLoop(l *loopCtx) {
	*l = loopCtx{}
	e.freeLoops = append(e.freeLoops, l)
}

func (e *evaluator) getScratch() []any {
	if n := len(e.scratch); n > 0 {
		s := e.scratch[n-1]
		e.scratch = e.scratch[:n-1]
		return s[:0]
	}
	return nil
}

func (e *evaluator) putScratch(s []any) {
	if cap(s) == 0 || cap(s) > 1<<16 {
		return
	}
	clear(s)
	e.scratch = append(e.scratch, s[:0])
}

func (e *evaluator) newFrame(parent *frame) *frame {
	if n := len(e.free); n > 0 {
		f := e.free[n-1]
		e.free = e.free[:n-1]
		f.parent = parent
		return f
	}
	return &frame{parent: parent}
}

func (e *evaluator) release(f *frame) {
	if f.escaped {
		return
	}
	clear(f.vals)
	f.names, f.vals, f.parent, f.ctx = f.names[:0], f.vals[:0], nil, nil
	e.free = append(e.free, f)
}

// keep marks f and its parents as kept by a macro.
func keep(f *frame) {
	for ; f != nil && !f.escaped; f = f.parent {
		f.escaped = true
	}
}

// Errors.

// posError is an error at a position of a template.
type posError struct {
	tmpl *Template
	pos  int
	err  error
}

func (p *posError) Error() string { return p.err.Error() }
func (p *posError) Unwrap() error { return p.err }

var (
	errBreak    = errors.New("{% break %} outside a loop")
	errContinue = errors.New("{% continue %} outside a loop")
)

// at locates err at pos of the current template, unless it already has a place.
func (e *evaluator) at(pos int, err error) error {
	if err == nil || err == errBreak || err == errContinue {
		return err
	}
	var pe *posError
	var te *Error
	if errors.As(err, &pe) || errors.As(err, &te) {
		return err
	}
	return &posError{tmpl: e.cur, pos: pos, err: err}
}

// LimitError is a render that went over a budget.
type LimitError struct {
	Kind  string // "time" or "output"
	Limit string // the budget, as given
}

func (l *LimitError) Error() string {
	if l.Kind == "time" {
		return "the render took longer than its time budget of " + l.Limit
	}
	return "the render produced more than its output budget of " + l.Limit
}

func (e *evaluator) sizeError() error {
	return &LimitError{Kind: "output", Limit: formatSize(e.maxSize)}
}

func formatSize(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.Itoa(n>>30) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " bytes"
}

// checkSize fails if a string of n bytes would exceed the output budget.
func (e *evaluator) checkSize(n int) error {
	if n > e.maxSize {
		return e.sizeError()
	}
	return nil
}

// checkItems fails if a list or dict of n items would exceed the budget.
func (e *evaluator) checkItems(n int) error {
	if n > e.maxItems {
		return e.sizeError()
	}
	return nil
}

// tick counts a step (a loop iteration, a call) and, every so often, checks the time budget
// and the render's context.
func (e *evaluator) tick() error {
	e.steps++
	if e.steps&255 != 0 {
		return nil
	}
	return e.checkTime()
}

func (e *evaluator) checkTime() error {
	if err := e.ctx.Err(); err != nil {
		return fmt.Errorf("render stopped: %w", err)
	}
	if !e.deadline.IsZero() && time.Now().After(e.deadline) {
		return &LimitError{Kind: "time"}
	}
	return nil
}

// Output.

func (e *evaluator) write(s string) error {
	if len(e.out)+len(s) > e.maxSize {
		return e.sizeError()
	}
	e.out = append(e.out, s...)
	return nil
}

// print writes v as Jinja2 prints it ({{ v }}).
func (e *evaluator) print(v any) error {
	switch x := v.(type) {
	case string:
		if e.autoescape {
			return e.write(escapeString(x))
		}
		return e.write(x)
	case int64:
		if len(e.out)+20 > e.maxSize {
			return e.sizeError()
		}
		e.out = strconv.AppendInt(e.out, x, 10)
		return nil
	case Markup:
		return e.write(string(x))
	case *tainted:
		return &UnsafeValueError{Value: x.s, Source: x.src}
	case *Undefined:
		if x.err != nil {
			return x.err
		}
		return nil
	}
	s, err := e.str(v)
	if err != nil {
		return err
	}
	if e.autoescape {
		s = escapeString(s)
	}
	return e.write(s)
}

// capture runs body with its output going to a string of its own.
func (e *evaluator) capture(body []stmt, f *frame) (string, error) {
	saved := e.out
	e.out = nil
	err := e.execAll(body, f)
	out := string(e.out)
	e.out = saved
	return out, err
}

// exec runs one statement.
func (e *evaluator) exec(s stmt, f *frame) error {
	switch s := s.(type) {
	case *textStmt:
		return e.execText(s, f)
	case *printStmt:
		return e.execPrint(s, f)
	case *ifStmt:
		return e.execIf(s, f)
	case *forStmt:
		return e.execFor(s, f)
	case *setStmt:
		return e.execSet(s, f)
	case *setBlockStmt:
		return e.execSetBlock(s, f)
	case *withStmt:
		return e.execWith(s, f)
	case *macroStmt:
		return e.execMacro(s, f)
	case *callBlockStmt:
		return e.execCallBlock(s, f)
	case *filterBlockStmt:
		return e.execFilterBlock(s, f)
	case *includeStmt:
		return e.execInclude(s, f)
	case *importStmt:
		return e.execImport(s, f)
	case *fromImportStmt:
		return e.execFromImport(s, f)
	case *extendsStmt:
		return e.execExtends(s, f)
	case *blockStmt:
		return e.execBlock(s, f)
	case *autoescapeStmt:
		return e.execAutoescape(s, f)
	case *loopControlStmt:
		return e.execLoopControl(s, f)
	case *doStmt:
		return e.execDo(s, f)
	case *cycleStmt:
		return e.execCycle(s, f)
	case *firstofStmt:
		return e.execFirstof(s, f)
	case *ifchangedStmt:
		return e.execIfchanged(s, f)
	case *widthratioStmt:
		return e.execWidthratio(s, f)
	case *spacelessStmt:
		return e.execSpaceless(s, f)
	}
	return e.at(s.position(), fmt.Errorf("internal error: no evaluation for statement %T", s))
}

func (e *evaluator) execAll(body []stmt, f *frame) error {
	for _, s := range body {
		if err := e.exec(s, f); err != nil {
			return err
		}
	}
	return nil
}

// Statements.

func (e *evaluator) execText(s *textStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	if len(e.out)+len(s.text) > e.maxSize {
		return e.at(s.pos, e.sizeError())
	}
	e.out = append(e.out, s.text...)
	return nil
}

func (e *evaluator) execPrint(s *printStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	v, err := e.eval(s.x, f)
	if err != nil {
		return err
	}
	if str, ok := v.(string); ok && !e.autoescape && len(e.out)+len(str) <= e.maxSize {
		e.out = append(e.out, str...) // the common case, inline
		return nil
	}
	return e.at(s.pos, e.print(v))
}

func (e *evaluator) execIf(s *ifStmt, f *frame) error {
	for i, c := range s.conds {
		ok, err := e.cond(c, f)
		if err != nil {
			return err
		}
		if ok {
			return e.execAll(s.bodies[i], f)
		}
	}
	return e.execAll(s.els, f)
}

// cond evaluates x for its truth only: a missing key or name is false without making an
// Undefined on the way (conditions run once per item of the data: no allocation).
func (e *evaluator) cond(x expr, f *frame) (bool, error) {
	switch c := x.(type) {
	case *attrExpr:
		obj, err := e.eval(c.obj, f)
		if err != nil {
			return false, err
		}
		if !isDictMethod(c.name) {
			switch m := obj.(type) {
			case map[string]any:
				return truthy(m[c.name]), nil
			case *record.Record:
				v, _ := m.Get(c.name)
				return truthy(v), nil
			}
		}
		v, err := e.getAttr(obj, c.name)
		if err != nil {
			return false, e.at(c.pos, err)
		}
		return truthy(v), nil
	case *nameExpr:
		v, ok := e.lookup(f, c.name)
		return ok && truthy(v), nil
	case *notExpr:
		ok, err := e.cond(c.x, f)
		return !ok, err
	case *andExpr:
		ok, err := e.cond(c.a, f)
		if err != nil || !ok {
			return false, err
		}
		return e.cond(c.b, f)
	case *orExpr:
		ok, err := e.cond(c.a, f)
		if err != nil || ok {
			return ok, err
		}
		return e.cond(c.b, f)
	}
	v, err := e.eval(x, f)
	if err != nil {
		return false, err
	}
	return truthy(v), nil
}

func (e *evaluator) execSet(s *setStmt, f *frame) error {
	v, err := e.eval(s.x, f)
	if err != nil {
		return err
	}
	return e.at(s.pos, e.assign(f, s.target, v))
}

func (e *evaluator) assign(f *frame, t target, v any) error {
	switch {
	case t.tuple:
		items, err := e.unpack(v, len(t.items))
		if err != nil {
			return err
		}
		for i, it := range t.items {
			if err := e.assign(f, it, items[i]); err != nil {
				return err
			}
		}
		return nil
	case t.attr != "":
		obj, _ := e.lookup(f, t.name)
		ns, ok := obj.(*Namespace)
		if !ok {
			return fmt.Errorf("cannot set %s.%s: %s is not a namespace() (cannot assign attribute on non-namespace object)", t.name, t.attr, t.name)
		}
		return ns.attrs.set(t.attr, v)
	}
	f.set(t.name, v)
	return nil
}

// unpack splits v into n values (a, b = v).
func (e *evaluator) unpack(v any, n int) ([]any, error) {
	if u, ok := v.(*Undefined); ok && u.err != nil {
		return nil, u.err
	}
	s, err := e.seqOf(v)
	if err != nil {
		return nil, fmt.Errorf("cannot unpack non-iterable %s object", typeName(v))
	}
	if s.n > n {
		return nil, fmt.Errorf("cannot unpack: too many values to unpack (expected %d)", n)
	}
	if s.n < n {
		return nil, fmt.Errorf("cannot unpack: not enough values to unpack (expected %d, got %d)", n, s.n)
	}
	out := make([]any, n)
	for i := range out {
		out[i] = s.at(i)
	}
	return out, nil
}

func (e *evaluator) execSetBlock(s *setBlockStmt, f *frame) error {
	out, err := e.capture(s.body, f)
	if err != nil {
		return err
	}
	var v any = out
	if e.autoescape {
		v = Markup(out)
	}
	if s.filters != nil {
		saved := e.blockIn
		e.blockIn = v
		v, err = e.eval(s.filters, f)
		e.blockIn = saved
		if err != nil {
			return err
		}
	}
	return e.at(s.pos, e.assign(f, s.target, v))
}

func (e *evaluator) execWith(s *withStmt, f *frame) error {
	vals := make([]any, len(s.values))
	for i, x := range s.values {
		v, err := e.eval(x, f)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	inner := e.newFrame(f)
	defer e.release(inner)
	for i, t := range s.targets {
		if err := e.assign(inner, t, vals[i]); err != nil {
			return e.at(s.pos, err)
		}
	}
	return e.execAll(s.body, inner)
}

func (e *evaluator) execMacro(s *macroStmt, f *frame) error {
	keep(f)
	f.set(s.macro.name, &Macro{def: s.macro, closure: f, tmpl: e.cur, escape: e.autoescape})
	return nil
}

func (e *evaluator) execCallBlock(s *callBlockStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	keep(f)
	caller := &Macro{def: s.caller, closure: f, tmpl: e.cur, escape: e.autoescape}
	v, err := e.evalCallWith(s.call, f, caller)
	if err != nil {
		return err
	}
	return e.at(s.pos, e.print(v))
}

func (e *evaluator) execFilterBlock(s *filterBlockStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	out, err := e.capture(s.body, f)
	if err != nil {
		return err
	}
	var in any = out
	if e.autoescape {
		in = Markup(out)
	}
	saved := e.blockIn
	e.blockIn = in
	v, err := e.eval(s.filters, f)
	e.blockIn = saved
	if err != nil {
		return err
	}
	return e.at(s.pos, e.print(v))
}

func (e *evaluator) execAutoescape(s *autoescapeStmt, f *frame) error {
	v, err := e.eval(s.on, f)
	if err != nil {
		return err
	}
	saved := e.autoescape
	e.autoescape = truthy(v)
	err = e.execAll(s.body, f)
	e.autoescape = saved
	return err
}

func (e *evaluator) execLoopControl(s *loopControlStmt, f *frame) error {
	if s.brk {
		return errBreak
	}
	return errContinue
}

func (e *evaluator) execDo(s *doStmt, f *frame) error {
	_, err := e.eval(s.x, f)
	return err
}

// Loops.

// loopCtx is the loop variable (and pongo2's forloop).
type loopCtx struct {
	index0, length int
	s              seq
	depth0         int
	parent         *loopCtx
	changedLast    []any
	changedSet     bool
	ifchanged      map[*ifchangedStmt]string
	stmt           *forStmt // recursive loops: loop(x) runs stmt again
	frame          *frame
}

func (e *evaluator) execFor(s *forStmt, f *frame) error {
	// for k, v in d.items(): walk the dict in place, without a view object.
	if c, ok := s.iter.(*callExpr); ok && len(c.args.list) == 0 && len(c.args.kw) == 0 && c.args.star == nil && c.args.starKw == nil {
		if a, ok := c.fn.(*attrExpr); ok && (a.name == "items" || a.name == "iteritems") {
			obj, err := e.eval(a.obj, f)
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
	v, err := e.eval(s.iter, f)
	if err != nil {
		return err
	}
	return e.runFor(s, f, v, 0, nil)
}

func (e *evaluator) runFor(s *forStmt, f *frame, v any, depth0 int, parentLoop *loopCtx) error {
	sq, err := e.seqOf(v)
	if err != nil {
		return e.at(s.iterPos, fmt.Errorf("cannot loop over %s: %w", aTypeName(v), err))
	}
	return e.runForSeq(s, f, v, sq, depth0, parentLoop)
}

// runSeq runs the loop over sq (the items of v; v may be nil when sq was made directly).
func (e *evaluator) runForSeq(s *forStmt, f *frame, v any, sq seq, depth0 int, parentLoop *loopCtx) error {
	var err error
	body := e.newFrame(f)
	defer e.release(body)
	// pongo2: {% for k, v in dict %} gives keys and values (Jinja2 would unpack each key).
	if isMapping(v) && s.target.tuple && len(s.target.items) == 2 && !allTwoCharKeys(v) {
		sq, _ = e.seqOf(&dictView{d: v, kind: viewItems})
	}
	if s.filter != nil || s.reversed || s.sorted {
		if sq, err = e.prepareFor(s, body, sq); err != nil {
			return err
		}
		if !s.keepsLoop {
			defer e.putScratch(sq.list)
		}
	}
	if sq.count() == 0 {
		return e.execAll(s.els, f)
	}
	var loop *loopCtx
	if s.usesLoop {
		if parentLoop == nil {
			if p, ok := e.lookup(f, "loop"); ok {
				parentLoop, _ = p.(*loopCtx)
			}
		}
		if s.keepsLoop || s.recursive {
			loop = &loopCtx{}
		} else {
			loop = e.getLoop()
			defer e.putLoop(loop)
		}
		*loop = loopCtx{length: sq.n, s: sq, depth0: depth0, parent: parentLoop}
		if s.recursive {
			loop.stmt, loop.frame = s, f
			keep(f)
		}
	}
	// The names the loop binds are the same every iteration: set them once; each iteration
	// sets their values and drops what the previous one added ({% set %} in the body).
	simple := !s.target.tuple
	pairs := s.target.tuple && len(s.target.items) == 2 && !s.target.items[0].tuple && !s.target.items[1].tuple &&
		s.target.items[0].attr == "" && s.target.items[1].attr == "" && sq.view == viewItems && (sq.rec != nil || sq.keys != nil)
	base := 0
	clear(body.vals)
	body.names, body.vals = body.names[:0], body.vals[:0] // prepare may have used the frame
	switch {
	case simple:
		body.names = append(body.names, s.target.name)
		body.vals = append(body.vals, nil)
		base = 1
	case pairs:
		body.names = append(body.names, s.target.items[0].name, s.target.items[1].name)
		body.vals = append(body.vals, nil, nil)
		base = 2
	}
	if loop != nil && (simple || pairs) {
		body.names = append(body.names, "loop", "forloop")
		body.vals = append(body.vals, loop, loop)
		base += 2
	}
	for i := 0; i < sq.count(); i++ {
		if err := e.tick(); err != nil {
			return e.at(s.pos, err)
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
		default:
			clear(body.vals)
			body.names, body.vals = body.names[:0], body.vals[:0]
			if err := e.assign(body, s.target, sq.at(i)); err != nil {
				return e.at(s.pos, err)
			}
			if loop != nil {
				body.names = append(body.names, "loop", "forloop")
				body.vals = append(body.vals, loop, loop)
			}
		}
		if err := e.execAll(s.body, body); err != nil {
			if err == errContinue {
				continue
			}
			if err == errBreak {
				break
			}
			return err
		}
	}
	return nil
}

// prepare applies the loop filter (for x in y if cond) and pongo2's reversed/sorted.
func (e *evaluator) prepareFor(s *forStmt, body *frame, sq seq) (seq, error) {
	items := e.getScratch()
	for i := 0; i < sq.n; i++ {
		item := sq.at(i)
		if s.filter != nil {
			if err := e.tick(); err != nil {
				return seq{}, e.at(s.pos, err)
			}
			body.names, body.vals = body.names[:0], body.vals[:0]
			if err := e.assign(body, s.target, item); err != nil {
				return seq{}, e.at(s.pos, err)
			}
			ok, err := e.cond(s.filter, body)
			if err != nil {
				return seq{}, err
			}
			if !ok {
				continue
			}
		}
		items = append(items, item)
	}
	if s.sorted {
		var err error
		sort.SliceStable(items, func(i, j int) bool {
			c, cerr := compare(items[i], items[j], "<")
			if cerr != nil && err == nil {
				err = cerr
			}
			return c < 0
		})
		if err != nil {
			return seq{}, e.at(s.pos, err)
		}
	}
	if s.reversed {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	return seq{list: items, n: len(items)}, nil
}

func allTwoCharKeys(m any) bool {
	all := mapLen(m) > 0
	eachItem(m, func(k, _ any) bool {
		s, ok := strValue(k)
		if !ok || len([]rune(s)) != 2 {
			all = false
		}
		return all
	})
	return all
}

func aTypeName(v any) string {
	n := typeName(v)
	switch n[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + n
	}
	return "a " + n
}

// attr returns a loop attribute.
func (l *loopCtx) attr(name string) (any, bool) {
	if l.s.live != nil {
		l.length = l.s.count()
	}
	switch name {
	case "index", "Counter":
		return int64(l.index0 + 1), true
	case "index0", "Counter0":
		return int64(l.index0), true
	case "revindex", "Revcounter":
		return int64(l.length - l.index0), true
	case "revindex0", "Revcounter0":
		return int64(l.length - l.index0 - 1), true
	case "first", "First":
		return l.index0 == 0, true
	case "last", "Last":
		return l.index0 == l.length-1, true
	case "length":
		return int64(l.length), true
	case "depth":
		return int64(l.depth0 + 1), true
	case "depth0":
		return int64(l.depth0), true
	case "previtem":
		if l.index0 == 0 {
			return undefinedHint("there is no previous item"), true
		}
		return l.s.at(l.index0 - 1), true
	case "nextitem":
		if l.index0 >= l.length-1 {
			return undefinedHint("there is no next item"), true
		}
		return l.s.at(l.index0 + 1), true
	case "Parentloop":
		if l.parent == nil {
			return undefinedAttr(l, name), true
		}
		return l.parent, true
	}
	return nil, false
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
	saved := e.out
	e.out = nil
	err := e.runFor(l.stmt, l.frame, a[0], l.depth0+1, l.parent)
	out := string(e.out)
	e.out = saved
	if err != nil {
		return nil, err
	}
	if e.autoescape {
		return Markup(out), nil
	}
	return out, nil
}

// pongo2's tags.

func (e *evaluator) execCycle(s *cycleStmt, f *frame) error {
	lv, _ := e.lookup(f, "loop")
	loop, ok := lv.(*loopCtx)
	if !ok || len(s.values) == 0 {
		return e.at(s.pos, errors.New("{% cycle %} needs values and a loop"))
	}
	v, err := e.eval(s.values[loop.index0%len(s.values)], f)
	if err != nil {
		return err
	}
	if s.as != "" {
		f.set(s.as, v)
		if s.silent {
			return nil
		}
	}
	if e.suppress {
		return nil
	}
	return e.at(s.pos, e.print(v))
}

func (e *evaluator) execFirstof(s *firstofStmt, f *frame) error {
	for _, x := range s.values {
		v, err := e.eval(x, f)
		if err != nil {
			return err
		}
		if truthy(v) {
			if e.suppress {
				return nil
			}
			return e.at(s.pos, e.print(v))
		}
	}
	return nil
}

func (e *evaluator) execIfchanged(s *ifchangedStmt, f *frame) error {
	lv, _ := e.lookup(f, "loop")
	loop, _ := lv.(*loopCtx)
	if loop == nil {
		return e.at(s.pos, errors.New("{% ifchanged %} outside a loop"))
	}
	var key, out string
	if len(s.values) > 0 {
		for _, x := range s.values {
			v, err := e.eval(x, f)
			if err != nil {
				return err
			}
			r, err := repr(v)
			if err != nil {
				return e.at(s.pos, err)
			}
			key += r + "\x00"
		}
	} else {
		var err error
		if out, err = e.capture(s.body, f); err != nil {
			return err
		}
		key = out
	}
	if loop.ifchanged == nil {
		loop.ifchanged = map[*ifchangedStmt]string{}
	}
	last, seen := loop.ifchanged[s]
	if seen && last == key {
		return e.execAll(s.els, f)
	}
	loop.ifchanged[s] = key
	if len(s.values) > 0 {
		return e.execAll(s.body, f)
	}
	return e.at(s.pos, e.write(out))
}

func (e *evaluator) execWidthratio(s *widthratioStmt, f *frame) error {
	var xs [3]float64
	for i, x := range []expr{s.value, s.max, s.size} {
		v, err := e.eval(x, f)
		if err != nil {
			return err
		}
		n := toNum(v)
		if n.kind == 0 {
			return e.at(s.pos, fmt.Errorf("{%% widthratio %%} needs numbers, not %s", aTypeName(v)))
		}
		if xs[i], err = n.float(); err != nil {
			return e.at(s.pos, err)
		}
	}
	r := math.Ceil(xs[0]/xs[1]*xs[2] + 0.5)
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return e.at(s.pos, errors.New("{% widthratio %}: division by zero"))
	}
	if e.suppress {
		return nil
	}
	return e.at(s.pos, e.write(strconv.Itoa(int(r))))
}

var spacelessRE = regexp.MustCompile(`(?U:(<.*>))([\t\n\v\f\r ]+)(?U:(<.*>))`)

func (e *evaluator) execSpaceless(s *spacelessStmt, f *frame) error {
	out, err := e.capture(s.body, f)
	if err != nil {
		return err
	}
	for {
		next := spacelessRE.ReplaceAllString(out, "$1$3")
		if next == out {
			break
		}
		out = next
	}
	if e.suppress {
		return nil
	}
	return e.at(s.pos, e.write(out))
}
