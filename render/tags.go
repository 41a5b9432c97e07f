package render

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/flosch/pongo2/v6"

	"github.com/haproxy-sidecar/haproxy-sidecar/record"
)

// The translator (translate.go) turns every Jinja2 statement into one of these pongo2 tags;
// the tag's only argument is an index into the program being compiled, whose entry holds the
// parsed expressions. pongo2 keeps doing what it is good at (the document structure, block
// nesting, whitespace control, include), our tags evaluate Jinja2 expressions.
//
// Tags are global in pongo2; their names start with "_" and the translator never lets a
// template name them directly.

// compiling is the program whose tags pongo2 is parsing. It is only set while compileMu is
// held (see compile), which also serializes pongo2's own compile-time state.
var compiling *program

func init() {
	for name, fn := range map[string]pongo2.TagParser{
		"_root":     parseRootTag,
		"_p":        parsePrintTag,
		"_if":       parseIfTag,
		"_for":      parseForTag,
		"_set":      parseSetTag,
		"_setblock": parseSetBlockTag,
		"_with":     parseWithTag,
		"_incl":     parseIncludeTag,
		"_filter":   parseFilterTag,
		"_macro":    parseMacroTag,
		"_break":    parseLoopControlTag(errBreak),
		"_continue": parseLoopControlTag(errContinue),
	} {
		if err := pongo2.RegisterTag(name, fn); err != nil {
			panic(err)
		}
	}
}

func specArg(args *pongo2.Parser) (any, *pongo2.Error) {
	t := args.MatchType(pongo2.TokenNumber)
	if t == nil || args.Remaining() != 0 {
		return nil, args.Error("internal: this tag takes one spec index", nil)
	}
	i, err := strconv.Atoi(t.Val)
	if err != nil || compiling == nil || i < 0 || i >= len(compiling.specs) {
		return nil, args.Error("internal: bad spec index", t)
	}
	return compiling.specs[i], nil
}

// blockArgs parses a block tag with one spec index: the spec, and the body up to end.
func blockArgs(doc *pongo2.Parser, args *pongo2.Parser, end string) (any, *pongo2.NodeWrapper, *pongo2.Error) {
	s, err := specArg(args)
	if err != nil {
		return nil, nil, err
	}
	body, endargs, err := doc.WrapUntilTag(end)
	if err != nil {
		return nil, nil, err
	}
	return s, body, endArgsNone(endargs)
}

func endArgsNone(endargs *pongo2.Parser) *pongo2.Error {
	if endargs.Count() > 0 {
		return endargs.Error("internal: end tag takes no arguments", nil)
	}
	return nil
}

// fail turns an evaluation error into a pongo2 error carrying our templateError, so Render can
// report the key, line and column.
func (u *unit) fail(err error, off int) *pongo2.Error {
	if err == nil {
		return nil
	}
	if isLoopControl(err) {
		return &pongo2.Error{Sender: "loop", OrigError: err}
	}
	var te *templateError
	if errors.As(err, &te) {
		return &pongo2.Error{Sender: "execution", OrigError: te}
	}
	var ee *exprError
	if errors.As(err, &ee) {
		off, err = ee.at, ee.err
	}
	line, col := u.lineCol(off)
	return &pongo2.Error{Sender: "execution", OrigError: &templateError{key: u.key, line: line, col: col, err: err}}
}

// ---- {{ expr }} ----

type printSpec struct {
	u  *unit
	at int
	e  node
}

type printTag struct{ s *printSpec }

func parsePrintTag(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
	s, err := specArg(args)
	if err != nil {
		return nil, err
	}
	return &printTag{s: s.(*printSpec)}, nil
}

func (t *printTag) Execute(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	v, err := t.s.e.eval(ctx)
	if err == nil {
		err = at(t.s.at, writeValue(w, v))
	}
	if err != nil {
		return t.s.u.fail(err, t.s.at)
	}
	return nil
}

// ---- {% if %} {% elif %} {% else %} {% endif %} ----

type ifSpec struct {
	u    *unit
	at   int
	cond node
}

type ifTag struct {
	conds  []*ifSpec
	bodies []*pongo2.NodeWrapper
	els    *pongo2.NodeWrapper
}

func parseIfTag(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
	s, perr := specArg(args)
	if perr != nil {
		return nil, perr
	}
	tag := &ifTag{}
	cond := s.(*ifSpec)
	for {
		wrapper, endargs, err := doc.WrapUntilTag("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		tag.conds = append(tag.conds, cond)
		tag.bodies = append(tag.bodies, wrapper)
		switch wrapper.Endtag {
		case "elif":
			s, err := specArg(endargs)
			if err != nil {
				return nil, err
			}
			cond = s.(*ifSpec)
		case "else":
			if err := endArgsNone(endargs); err != nil {
				return nil, err
			}
			els, endargs, err := doc.WrapUntilTag("endif")
			if err != nil {
				return nil, err
			}
			tag.els = els
			return tag, endArgsNone(endargs)
		default:
			return tag, endArgsNone(endargs)
		}
	}
}

func (t *ifTag) Execute(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	for i, c := range t.conds {
		v, err := c.cond.eval(ctx)
		if err != nil {
			return c.u.fail(err, c.at)
		}
		if truthy(v) {
			return t.bodies[i].Execute(ctx, w)
		}
	}
	if t.els != nil {
		return t.els.Execute(ctx, w)
	}
	return nil
}

// ---- {% for %} ----

// LoopInfo is both Jinja2's `loop` (index, index0, first, last, length, revindex, ...) and
// pongo2's `forloop` (Counter, Counter0, First, Last, Revcounter, Parentloop).
type LoopInfo struct {
	Counter, Counter0, Revcounter, Revcounter0 int
	First, Last                                bool
	Parentloop                                 *LoopInfo
	Length                                     int
}

const loopAttrList = "index, index0, revindex, revindex0, first, last, length, depth, depth0, cycle()"

func (l *LoopInfo) attr(name string) (any, error) {
	switch name {
	case "index", "Counter":
		return int64(l.Counter), nil
	case "index0", "Counter0":
		return int64(l.Counter0), nil
	case "revindex", "Revcounter":
		return int64(l.Revcounter), nil
	case "revindex0", "Revcounter0":
		return int64(l.Revcounter0), nil
	case "first", "First":
		return l.First, nil
	case "last", "Last":
		return l.Last, nil
	case "length", "Length":
		return int64(l.Length), nil
	case "depth":
		// Jinja2's depth counts recursive calls (loop(...)), which are not supported.
		return int64(1), nil
	case "depth0":
		return int64(0), nil
	case "Parentloop", "parentloop":
		if l.Parentloop == nil {
			return nil, nil
		}
		return l.Parentloop, nil
	case "cycle":
		return &builtinFunc{name: "loop.cycle", fn: func(args []any, _ map[string]any) (any, error) {
			v, _, err := callMethod(l, "cycle", args, nil)
			return v, err
		}}, nil
	}
	switch name {
	case "previtem", "nextitem", "changed":
		return nil, jinja2Unsupported("loop."+name, "loop has "+loopAttrList+"; keep the previous item with {% set ns = namespace(prev=none) %} and {% set ns.prev = item %}")
	}
	return nil, fmt.Errorf("loop has no attribute %s (loop has: %s)", name, loopAttrList)
}

type forSpec struct {
	u        *unit
	at       int
	targets  []string
	iter     node
	cond     node
	reversed bool
	sorted   bool
	loopVar  bool // set loop and forloop (only when the body may read them)
	// restore lists the variables the loop sets (targets, loop, forloop, and every {% set %}
	// inside its body): their values from before the loop are put back when it ends, which is
	// Jinja2's scoping (nothing set inside a loop is visible after it) without copying the
	// context for every loop.
	restore []string
}

type forTag struct {
	s         *forSpec
	body, els *pongo2.NodeWrapper
}

var (
	errBreak    = errors.New("{% break %} outside a loop")
	errContinue = errors.New("{% continue %} outside a loop")
)

func isLoopControl(err error) bool { return err == errBreak || err == errContinue }

type loopControlTag struct{ err error }

func (t *loopControlTag) Execute(*pongo2.ExecutionContext, pongo2.TemplateWriter) *pongo2.Error {
	return &pongo2.Error{Sender: "loop", OrigError: t.err}
}

func parseLoopControlTag(err error) pongo2.TagParser {
	return func(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
		return &loopControlTag{err: err}, nil
	}
}

func parseForTag(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
	s, perr := specArg(args)
	if perr != nil {
		return nil, perr
	}
	tag := &forTag{s: s.(*forSpec)}
	body, endargs, err := doc.WrapUntilTag("else", "endfor")
	if err != nil {
		return nil, err
	}
	if err := endArgsNone(endargs); err != nil {
		return nil, err
	}
	tag.body = body
	if body.Endtag == "else" {
		els, endargs, err := doc.WrapUntilTag("endfor")
		if err != nil {
			return nil, err
		}
		tag.els = els
		return tag, endArgsNone(endargs)
	}
	return tag, nil
}

type savedVar struct {
	name string
	val  any
	ok   bool
}

func saveVars(p pongo2.Context, names []string, buf []savedVar) []savedVar {
	for _, n := range names {
		v, ok := p[n]
		buf = append(buf, savedVar{name: n, val: v, ok: ok})
	}
	return buf
}

func restoreVars(p pongo2.Context, saved []savedVar) {
	for _, s := range saved {
		if s.ok {
			p[s.name] = s.val
		} else {
			delete(p, s.name)
		}
	}
}

func (t *forTag) Execute(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	v, err := t.s.iter.eval(ctx)
	if err != nil {
		return t.s.u.fail(err, t.s.at)
	}
	var buf [8]savedVar
	saved := saveVars(ctx.Private, t.s.restore, buf[:0])
	var li *LoopInfo
	if t.s.loopVar {
		parent, _ := ctx.Private["forloop"].(*LoopInfo)
		li = &LoopInfo{Parentloop: parent}
		ctx.Private["loop"] = li
		ctx.Private["forloop"] = li
	}
	perr := t.run(ctx, w, v, li)
	restoreVars(ctx.Private, saved)
	return perr
}

// seq is what a for loop iterates: a list, or a map in sorted key order.
type seq struct {
	n     int
	list  []any
	maps  []map[string]any
	strs  []string
	keys  []string // sorted keys of m / ms
	m     map[string]any
	ms    map[string]string
	rec   *record.Record // iterated by index: its keys are sorted
	gen   any            // any other map (reflect)
	gkeys []any          // its sorted keys
	view  byte           // 0 for a map iterated directly (one target: key; two: key, value)
	isMap bool
}

func (s *seq) init(v any) error {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		s.list, s.n = x, len(x)
	case tuple:
		s.list, s.n = x, len(x)
	case []map[string]any:
		s.maps, s.n = x, len(x)
	case []string:
		s.strs, s.n = x, len(x)
	case map[string]any:
		s.initMap(x, 0)
	case map[string]string:
		s.initMap(x, 0)
	case *record.Record:
		s.initMap(x, 0)
	case *dictView:
		s.initMap(x.m, x.kind)
	case unsetPassword:
		return errStatsPassword
	default:
		if isMap(v) {
			s.initMap(v, 0)
			return nil
		}
		l, ok := asList(v)
		if !ok {
			return fmt.Errorf("cannot loop over %s", aType(v))
		}
		s.list, s.n = l, len(l)
	}
	return nil
}

func (s *seq) initMap(m any, view byte) {
	s.isMap, s.view = true, view
	switch x := m.(type) {
	case map[string]any:
		s.m, s.keys = x, sortedKeysAny(x)
		s.n = len(s.keys)
	case map[string]string:
		s.ms, s.keys = x, sortedKeysStr(x)
		s.n = len(s.keys)
	case *record.Record:
		s.rec, s.n = x, x.Len()
	default:
		s.gen, s.gkeys = m, sortedMapKeys(m)
		s.n = len(s.gkeys)
	}
}

// kv returns item i: for maps its key and value, for lists the item (and nil).
func (s *seq) kv(i int) (any, any) {
	switch {
	case s.list != nil:
		return s.list[i], nil
	case s.maps != nil:
		return s.maps[i], nil
	case s.strs != nil:
		return s.strs[i], nil
	case s.m != nil:
		k := s.keys[i]
		return k, s.m[k]
	case s.ms != nil:
		k := s.keys[i]
		return k, s.ms[k]
	case s.rec != nil:
		return s.rec.Key(i), s.rec.Value(i)
	case s.gen != nil:
		k := s.gkeys[i]
		return k, mapGet(s.gen, k)
	}
	return nil, nil
}

// bind sets the loop targets for item i.
func (t *forTag) bind(p pongo2.Context, s *seq, i int) error {
	k, v := s.kv(i)
	targets := t.s.targets
	one := func(x any) error {
		if len(targets) == 1 {
			p[targets[0]] = x
			return nil
		}
		return unpack(p, targets, x)
	}
	if !s.isMap {
		return one(k)
	}
	switch s.view {
	case viewKeys:
		return one(k)
	case viewValues:
		return one(v)
	case viewItems:
		if len(targets) == 1 {
			p[targets[0]] = tuple{k, v}
			return nil
		}
	default:
		if len(targets) == 1 {
			p[targets[0]] = k
			return nil
		}
	}
	if len(targets) != 2 {
		return fmt.Errorf("a dict gives 2 values (key, value) per item, not %d", len(targets))
	}
	p[targets[0]] = k
	p[targets[1]] = v
	return nil
}

func unpack(p pongo2.Context, targets []string, v any) error {
	l, ok := asList(v)
	if !ok || isMap(v) {
		return fmt.Errorf("cannot unpack %s into %d variables (%s)", aType(v), len(targets), strings.Join(targets, ", "))
	}
	if _, isStr := v.(string); isStr || len(l) != len(targets) {
		return fmt.Errorf("cannot unpack %d values into %d variables (%s)", len(l), len(targets), strings.Join(targets, ", "))
	}
	for i, n := range targets {
		p[n] = l[i]
	}
	return nil
}

func (t *forTag) run(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter, v any, li *LoopInfo) *pongo2.Error {
	s := t.s
	var sq seq
	if err := sq.init(v); err != nil {
		return s.u.fail(err, startPos(s.iter))
	}
	var order []int // nil: 0..n-1
	if s.sorted || s.reversed {
		order = make([]int, sq.n)
		for i := range order {
			order[i] = i
		}
		if s.sorted && !sq.isMap {
			sort.SliceStable(order, func(a, b int) bool {
				x, _ := sq.kv(order[a])
				y, _ := sq.kv(order[b])
				return compareValues(x, y) < 0
			})
		}
		if s.reversed {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
	}
	if s.cond != nil {
		kept := make([]int, 0, sq.n)
		for k := 0; k < sq.n; k++ {
			i := k
			if order != nil {
				i = order[k]
			}
			if err := t.bind(ctx.Private, &sq, i); err != nil {
				return s.u.fail(err, s.at)
			}
			c, err := s.cond.eval(ctx)
			if err != nil {
				return s.u.fail(err, s.cond.pos())
			}
			if truthy(c) {
				kept = append(kept, i)
			}
		}
		order = kept
	}
	count := sq.n
	if order != nil {
		count = len(order)
	}
	if li != nil {
		li.Length = count
	}
	if count == 0 {
		if t.els != nil {
			return t.els.Execute(ctx, w)
		}
		return nil
	}
	for k := 0; k < count; k++ {
		i := k
		if order != nil {
			i = order[k]
		}
		if err := t.bind(ctx.Private, &sq, i); err != nil {
			return s.u.fail(err, s.at)
		}
		if li != nil {
			li.Counter, li.Counter0 = k+1, k
			li.Revcounter, li.Revcounter0 = count-k, count-k-1
			li.First, li.Last = k == 0, k == count-1
		}
		if err := t.body.Execute(ctx, w); err != nil {
			switch err.OrigError {
			case errBreak:
				return nil
			case errContinue:
				continue
			}
			return err
		}
	}
	return nil
}

// ---- {% set %} ----

type setSpec struct {
	u       *unit
	at      int
	targets []string
	nsAttr  string // {% set ns.attr = ... %}: targets[0] is the namespace
	e       node
}

type setTag struct{ s *setSpec }

func parseSetTag(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
	s, err := specArg(args)
	if err != nil {
		return nil, err
	}
	return &setTag{s: s.(*setSpec)}, nil
}

func (t *setTag) Execute(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	v, err := t.s.e.eval(ctx)
	if err == nil {
		err = assign(ctx, t.s, v)
	}
	return t.s.u.fail(err, t.s.at)
}

func assign(ctx *pongo2.ExecutionContext, s *setSpec, v any) error {
	if s.nsAttr != "" {
		ns, err := (&nameNode{name: s.targets[0]}).eval(ctx)
		if err != nil {
			return err
		}
		n, ok := ns.(*namespace)
		if !ok {
			return fmt.Errorf("cannot set %s.%s: %s is %s, not a namespace() (write {%% set %s = namespace() %%} first)", s.targets[0], s.nsAttr, s.targets[0], aType(ns), s.targets[0])
		}
		n.m[s.nsAttr] = v
		return nil
	}
	if len(s.targets) == 1 {
		ctx.Private[s.targets[0]] = v
		return nil
	}
	return unpack(ctx.Private, s.targets, v)
}

// ---- {% set x %}...{% endset %} ----

type setBlockSpec struct {
	set     *setSpec
	filters []*filterNode
}

type setBlockTag struct {
	s    *setBlockSpec
	body *pongo2.NodeWrapper
}

func parseSetBlockTag(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
	s, body, err := blockArgs(doc, args, "endset")
	if err != nil {
		return nil, err
	}
	return &setBlockTag{s: s.(*setBlockSpec), body: body}, nil
}

func (t *setBlockTag) Execute(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	v, err := captureFiltered(ctx, t.body, t.s.filters, t.s.set.u)
	if err != nil {
		return err
	}
	return t.s.set.u.fail(assign(ctx, t.s.set, v), t.s.set.at)
}

// captureFiltered renders body into a string and passes it through filters.
func captureFiltered(ctx *pongo2.ExecutionContext, body *pongo2.NodeWrapper, filters []*filterNode, u *unit) (any, *pongo2.Error) {
	var b bytes.Buffer
	if err := body.Execute(ctx, &b); err != nil {
		return nil, err
	}
	var v any = b.String()
	var err error
	for _, f := range filters {
		if v, err = f.apply(ctx, v); err != nil {
			return nil, u.fail(err, f.at)
		}
	}
	return v, nil
}

// ---- {% with a=1, b=2 %} / {% with expr as name %} ----

type withSpec struct {
	u       *unit
	at      int
	names   []string
	exprs   []node
	restore []string
}

type withTag struct {
	s    *withSpec
	body *pongo2.NodeWrapper
}

func parseWithTag(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
	s, body, err := blockArgs(doc, args, "endwith")
	if err != nil {
		return nil, err
	}
	return &withTag{s: s.(*withSpec), body: body}, nil
}

func (t *withTag) Execute(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	vals := make([]any, len(t.s.exprs))
	for i, e := range t.s.exprs {
		v, err := e.eval(ctx)
		if err != nil {
			return t.s.u.fail(err, e.pos())
		}
		vals[i] = v
	}
	var buf [8]savedVar
	saved := saveVars(ctx.Private, t.s.restore, buf[:0])
	for i, n := range t.s.names {
		ctx.Private[n] = vals[i]
	}
	err := t.body.Execute(ctx, w)
	restoreVars(ctx.Private, saved)
	return err
}

// ---- {% filter upper|replace("a", "b") %}...{% endfilter %} ----

type filterBlockSpec struct {
	u       *unit
	filters []*filterNode
}

type filterBlockTag struct {
	s    *filterBlockSpec
	body *pongo2.NodeWrapper
}

func parseFilterTag(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
	s, body, err := blockArgs(doc, args, "endfilter")
	if err != nil {
		return nil, err
	}
	return &filterBlockTag{s: s.(*filterBlockSpec), body: body}, nil
}

func (t *filterBlockTag) Execute(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	v, err := captureFiltered(ctx, t.body, t.s.filters, t.s.u)
	if err != nil {
		return err
	}
	return t.s.u.fail(at(t.s.filters[0].at, writeValue(w, v)), t.s.filters[0].at)
}

// ---- {% macro name(a, b=1) %}...{% endmacro %} ----

type macroSpec struct {
	u        *unit
	at       int
	name     string
	params   []string
	defaults []node // nil entries: no default
}

type macroTag struct {
	s    *macroSpec
	body *pongo2.NodeWrapper
}

type macro struct {
	spec *macroSpec
	body *pongo2.NodeWrapper
	def  *pongo2.ExecutionContext
}

// renderState is per render; it is in the public context under renderStateKey.
type renderState struct {
	macroDepth int
	out        bytes.Buffer
}

// rootTag wraps every template: the main one renders into the render's own pre-sized buffer,
// which spares growing pongo2's buffer from a few bytes to megabytes on every render; an
// included one into the writer of the include (see includeTag).
type rootTag struct{ body *pongo2.NodeWrapper }

func parseRootTag(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
	body, endargs, err := doc.WrapUntilTag("end_root")
	if err != nil {
		return nil, err
	}
	return &rootTag{body: body}, endArgsNone(endargs)
}

func (t *rootTag) Execute(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	if iw, ok := ctx.Public[includeWriterKey].(pongo2.TemplateWriter); ok {
		return t.body.Execute(ctx, iw)
	}
	rs, ok := ctx.Public[renderStateKey].(*renderState)
	if !ok {
		return t.body.Execute(ctx, w)
	}
	return t.body.Execute(ctx, &rs.out)
}

const (
	// The renderer's own variables (pongo2 wants identifiers): templates cannot read them
	// (the parser makes them undefined) nor assign them (see internalName).
	renderStateKey = "_hs_render"
	// includeWriterKey holds, in an included template's variables, the writer its output goes
	// to.
	includeWriterKey = "_hs_include_writer"
	maxMacroDepth    = 64
)

func parseMacroTag(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
	s, body, err := blockArgs(doc, args, "endmacro")
	if err != nil {
		return nil, err
	}
	return &macroTag{s: s.(*macroSpec), body: body}, nil
}

func (t *macroTag) Execute(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	ctx.Private[t.s.name] = &macro{spec: t.s, body: t.body, def: ctx}
	return nil
}

func (m *macro) call(c *pongo2.ExecutionContext, args []any, kw map[string]any) (any, error) {
	s := m.spec
	if len(args) > len(s.params) {
		return nil, fmt.Errorf("macro %s takes %d arguments, %d given", s.name, len(s.params), len(args))
	}
	for k := range kw {
		if !slices.Contains(s.params, k) {
			return nil, fmt.Errorf("macro %s has no argument %s", s.name, k)
		}
	}
	rs, _ := c.Public[renderStateKey].(*renderState)
	if rs != nil {
		if rs.macroDepth >= maxMacroDepth {
			return nil, fmt.Errorf("macro %s: calls nested more than %d deep (endless recursion?)", s.name, maxMacroDepth)
		}
		rs.macroDepth++
		defer func() { rs.macroDepth-- }()
	}
	mctx := pongo2.NewChildExecutionContext(m.def)
	for i, p := range s.params {
		switch {
		case i < len(args):
			mctx.Private[p] = args[i]
		case kw != nil && mapHas(kw, p):
			mctx.Private[p] = kw[p]
		case s.defaults[i] != nil:
			v, err := s.defaults[i].eval(mctx)
			if err != nil {
				return nil, err
			}
			mctx.Private[p] = v
		default:
			mctx.Private[p] = nil
		}
	}
	// A macro sees its own loop variables only.
	delete(mctx.Private, "loop")
	delete(mctx.Private, "forloop")
	var b bytes.Buffer
	if err := m.body.Execute(mctx, &b); err != nil {
		if err.OrigError != nil {
			var te *templateError
			if errors.As(err.OrigError, &te) {
				return nil, te
			}
		}
		return nil, err
	}
	return b.String(), nil
}

// ---- global functions ----

const maxRange = 1 << 20

var builtinFuncs = map[string]*builtinFunc{
	"range": {name: "range", fn: func(args []any, kw map[string]any) (any, error) {
		var nums [3]int64
		for i, a := range args {
			if i >= 3 {
				return nil, errors.New("range() takes at most 3 arguments")
			}
			n, ok := toIntStrict(a)
			if !ok {
				return nil, fmt.Errorf("range() needs integers, not %s", aType(a))
			}
			nums[i] = n
		}
		start, stop, step := int64(0), int64(0), int64(1)
		switch len(args) {
		case 1:
			stop = nums[0]
		case 2:
			start, stop = nums[0], nums[1]
		case 3:
			start, stop, step = nums[0], nums[1], nums[2]
		default:
			return nil, errors.New("range() needs 1 to 3 arguments")
		}
		if step == 0 {
			return nil, errors.New("range() step cannot be zero")
		}
		out := []any{}
		for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
			if len(out) >= maxRange {
				return nil, fmt.Errorf("range() of more than %d items", maxRange)
			}
			out = append(out, i)
		}
		return out, nil
	}},
	"dict": {name: "dict", fn: func(args []any, kw map[string]any) (any, error) {
		out := map[string]any{}
		for k, v := range kw {
			out[k] = v
		}
		return out, nil
	}},
	"namespace": {name: "namespace", fn: func(args []any, kw map[string]any) (any, error) {
		ns := &namespace{m: map[string]any{}}
		for _, a := range args {
			if isMap(a) {
				for _, k := range sortedMapKeys(a) {
					ks, _ := toStr(k)
					ns.m[ks] = mapGet(a, k)
				}
			}
		}
		for k, v := range kw {
			ns.m[k] = v
		}
		return ns, nil
	}},
}

// includeTag is {% include "key" %}: the key's template, compiled with the including one,
// executed with the including template's variables. Unlike pongo2's include it writes into the
// writer it is given (through the included template's rootTag): pongo2's renders into a
// buffer of its own first, grown from the size of the template's source to the size of its
// output (megabytes for the rules of 10,000 services), on every render.
type includeTag struct {
	tpl *pongo2.Template
}

func parseIncludeTag(doc *pongo2.Parser, start *pongo2.Token, args *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
	keyTok := args.Current() // where the translator put the key's position
	s, err := specArg(args)
	if err != nil {
		return nil, err
	}
	key, ok := s.(string)
	if !ok || compiling.set == nil {
		return nil, args.Error("internal: _incl takes a template key", start)
	}
	tpl, ferr := compiling.set.FromFile(key)
	if ferr != nil {
		var pe *pongo2.Error
		if !errors.As(ferr, &pe) {
			return nil, args.Error(ferr.Error(), start)
		}
		if pe.Token != nil {
			return nil, pe // located in the included template
		}
		// Not located (the included key could not be loaded): at the include, as pongo2's
		// own include reports it.
		at := args.Error("", keyTok)
		at.Sender, at.OrigError = pe.Sender, pe.OrigError
		return nil, at
	}
	return &includeTag{tpl: tpl}, nil
}

func (t *includeTag) Execute(ctx *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	// The included template sees every variable of the including one, as with pongo2's include.
	inner := make(pongo2.Context, len(ctx.Public)+len(ctx.Private)+1)
	inner.Update(ctx.Public)
	inner.Update(ctx.Private)
	inner[includeWriterKey] = w
	if err := t.tpl.ExecuteWriterUnbuffered(inner, w); err != nil {
		var pe *pongo2.Error
		if errors.As(err, &pe) {
			return pe
		}
		return ctx.Error(err.Error(), nil)
	}
	return nil
}
