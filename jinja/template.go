package jinja

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Template is one parsed template (one key of a template set).
type Template struct {
	name    string
	src     string // newline-normalized
	body    []stmt
	blocks  map[string]*blockStmt
	extends bool
	lines   []int // byte offset of each line start
}

// lineCol returns the 1-based line and column (in characters) of a byte offset.
func (t *Template) lineCol(pos int) (int, int) {
	if t == nil {
		return 0, 0
	}
	line := sort.Search(len(t.lines), func(i int) bool { return t.lines[i] > pos }) // first line after
	start := t.lines[line-1]
	if pos > len(t.src) {
		pos = len(t.src)
	}
	return line, utf8.RuneCountInString(t.src[start:pos]) + 1
}

// Error is an error in a template, located at a line and column of one of the set's keys.
type Error struct {
	Template  string
	Line, Col int
	Err       error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("template %q line %d column %d: %v", e.Template, e.Line, e.Col, e.Err)
	}
	return fmt.Sprintf("template %q: %v", e.Template, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Filter is an extra filter given to Compile: the value, the positional and the keyword
// arguments.
type Filter func(v any, args []any, kwargs map[string]any) (any, error)

// Options configure Compile.
type Options struct {
	// Filters are extra filters, beside Jinja2's; they win over pongo2's of the same name.
	Filters map[string]Filter
}

// Program is a compiled template set: the main template and every template it can reach by
// a quoted key ({% include %}, {% import %}, {% from %}, {% extends %}). A Program is read
// only once compiled: any number of renders may share it.
type Program struct {
	main      string
	templates map[string]*Template
	errs      map[string]error // keys that do not compile: the error is raised where they are used
	keys      []string         // every key of the set, for error messages
	filters   map[string]Filter
}

// Compile parses srcs[main] and the templates it reaches. A syntax error in the main
// template is returned; one in a template it reaches is returned when a render uses it, as
// Jinja2 does.
func Compile(srcs map[string]string, main string, opts Options) (prog *Program, err error) {
	defer func() {
		// A last resort: a bug in the parser must fail the compile, not the process.
		if r := recover(); r != nil {
			prog, err = nil, &Error{Template: main, Err: fmt.Errorf("internal error in the template engine (please report it): %v", r)}
		}
	}()
	p := &Program{main: main, templates: map[string]*Template{}, errs: map[string]error{}, filters: opts.Filters}
	for k := range srcs {
		p.keys = append(p.keys, k)
	}
	sort.Strings(p.keys)
	src, ok := srcs[main]
	if !ok {
		return nil, &Error{Template: main, Err: p.missing(main)}
	}
	queue := []string{main}
	refs := map[string]bool{main: true}
	for len(queue) > 0 {
		key := queue[0]
		queue = queue[1:]
		src = srcs[key]
		t, reached, err := p.parse(key, src)
		if err != nil {
			if key == main {
				return nil, err
			}
			p.errs[key] = err
			continue
		}
		p.templates[key] = t
		for _, r := range reached {
			if _, exists := srcs[r]; exists && !refs[r] {
				refs[r] = true
				queue = append(queue, r)
			}
		}
	}
	return p, nil
}

func (p *Program) missing(key string) error {
	return fmt.Errorf("there is no template key %q (keys: %s)", key, strings.Join(p.keys, ", "))
}

// parse parses one template and lists the keys it refers to.
func (p *Program) parse(name, src string) (*Template, []string, error) {
	src = normalizeSource(src)
	t := &Template{name: name, src: src, blocks: map[string]*blockStmt{}, lines: []int{0}}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			t.lines = append(t.lines, i+1)
		}
	}
	toks, err := lex(src)
	if err != nil {
		return nil, nil, t.syntaxError(err)
	}
	ps := &parser{toks: toks, tmpl: t, names: map[string]string{}, extra: p.filters}
	body, err := ps.parseTemplate()
	if err != nil {
		return nil, nil, t.syntaxError(err)
	}
	t.body = body
	return t, ps.refs, nil
}

func (t *Template) syntaxError(err error) error {
	var se *syntaxError
	if errors.As(err, &se) {
		line, col := t.lineCol(se.pos)
		return &Error{Template: t.name, Line: line, Col: col, Err: errors.New(se.msg)}
	}
	return &Error{Template: t.name, Err: err}
}

// Limits are a render's budgets.
type Limits struct {
	// Deadline: past it, the render stops with a *LimitError of kind "time". Zero: none.
	Deadline time.Time
	// Budget names the time budget in the error ("10s").
	Budget string
	// MaxOutput bounds the output, and any string, list or captured block built on the way
	// (a list counts 16 bytes an item). Zero: 64 MiB.
	MaxOutput int
}

// DefaultMaxOutput is the output budget when Limits.MaxOutput is zero.
const DefaultMaxOutput = 64 << 20

// Render renders the main template with vars as its context, appending the output to buf.
// It stops when ctx is done or a budget is exceeded. Errors are *Error (located), wrapping
// *LimitError, *UnsafeValueError, *UndefinedError or a plain error.
func (p *Program) Render(ctx context.Context, vars map[string]any, lim Limits, buf []byte) (out []byte, err error) {
	e := &evaluator{ctx: ctx, deadline: lim.Deadline, prog: p, vars: vars, out: buf[:0], maxSize: lim.MaxOutput}
	if e.maxSize <= 0 {
		e.maxSize = DefaultMaxOutput
	}
	e.maxItems = max(e.maxSize/16, 1024)
	defer func() {
		// A last resort: a bug in the engine must fail the render, not the process.
		if r := recover(); r != nil {
			out, err = nil, p.locate(e, fmt.Errorf("internal error in the template engine (please report it): %v", r))
		}
	}()
	if err := e.checkTime(); err != nil {
		return nil, p.locate(e, err)
	}
	t := p.templates[p.main]
	root := &frame{ctx: vars}
	if err := e.runTemplate(t, root); err != nil {
		if err == errBreak || err == errContinue {
			err = errors.New("{% break %} or {% continue %} outside a loop")
		}
		var le *LimitError
		if errors.As(err, &le) && le.Kind == "time" {
			le.Limit = lim.Budget
		}
		return nil, p.locate(e, err)
	}
	return e.out, nil
}

// locate turns an evaluation error into an *Error.
func (p *Program) locate(e *evaluator, err error) error {
	var te *Error
	if errors.As(err, &te) {
		return te
	}
	var pe *posError
	if errors.As(err, &pe) {
		line, col := pe.tmpl.lineCol(pe.pos)
		name := p.main
		if pe.tmpl != nil {
			name = pe.tmpl.name
		}
		return &Error{Template: name, Line: line, Col: col, Err: pe.err}
	}
	name := p.main
	if e.cur != nil {
		name = e.cur.name
	}
	return &Error{Template: name, Err: err}
}

// runTemplate renders t at the top level of root, then the templates it extends.
func (e *evaluator) runTemplate(t *Template, root *frame) error {
	savedCur, savedRoot, savedBlocks, savedExt, savedSuppress := e.cur, e.root, e.blocks, e.extending, e.suppress
	defer func() {
		e.cur, e.root, e.blocks, e.extending, e.suppress = savedCur, savedRoot, savedBlocks, savedExt, savedSuppress
	}()
	e.cur, e.root, e.extending, e.suppress = t, root, nil, false
	e.blocks = nil
	if len(t.blocks) > 0 || t.extends {
		e.blocks = map[string][]*blockStmt{}
		for name, b := range t.blocks {
			e.blocks[name] = []*blockStmt{b}
		}
	}
	if err := e.execAll(t.body, root); err != nil {
		return err
	}
	// {% extends %}: the parent renders, with the child's blocks first in the block table.
	for seen := 0; e.extending != nil; seen++ {
		if seen > maxCallDepth {
			return errors.New("templates extend each other in a cycle")
		}
		parent := e.extending
		e.extending, e.suppress = nil, false
		for name, b := range parent.blocks {
			e.blocks[name] = append(e.blocks[name], b)
		}
		e.cur = parent
		if err := e.execAll(parent.body, root); err != nil {
			return err
		}
	}
	return nil
}

// template returns the compiled template of key, or the error of using it.
func (e *evaluator) template(key string) (*Template, error) {
	if t, ok := e.prog.templates[key]; ok {
		return t, nil
	}
	if err, ok := e.prog.errs[key]; ok {
		return nil, err
	}
	return nil, e.prog.missing(key)
}

func (e *evaluator) execExtends(s *extendsStmt, f *frame) error {
	if e.extending != nil {
		return e.at(s.pos, errors.New("extended multiple times"))
	}
	t, err := e.template(s.key)
	if err != nil {
		return e.at(s.keyPos, err)
	}
	e.extending, e.suppress = t, true
	return nil
}

func (e *evaluator) execBlock(s *blockStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	parent := e.root
	if s.scoped {
		parent = f
	}
	return e.at(s.pos, e.renderBlock(s.name, 0, parent))
}

// renderBlock renders definition idx of block name (0: the most derived).
func (e *evaluator) renderBlock(name string, idx int, parent *frame) error {
	defs := e.blocks[name]
	if idx >= len(defs) {
		return fmt.Errorf("there is no parent block called %s", reprString(name))
	}
	b := defs[idx]
	if b.required && idx == 0 {
		return fmt.Errorf("required block %s not found", reprString(name))
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxCallDepth {
		return fmt.Errorf("blocks nested more than %d deep", maxCallDepth)
	}
	fr := e.newFrame(parent)
	defer e.release(fr)
	fr.set("super", &builtin{name: "super", fn: func(e *evaluator, a []any, kw map[string]any) (any, error) {
		return e.renderBlockValue(name, idx+1)
	}})
	saved := e.cur
	e.cur = b.tmpl
	err := e.execAll(b.body, fr)
	e.cur = saved
	return err
}

// renderBlockValue renders a block into a string (super(), self.name()).
func (e *evaluator) renderBlockValue(name string, idx int) (any, error) {
	saved, savedSuppress := e.out, e.suppress
	e.out, e.suppress = nil, false
	err := e.renderBlock(name, idx, e.root)
	out := string(e.out)
	e.out, e.suppress = saved, savedSuppress
	if err != nil {
		return nil, err
	}
	if e.autoescape {
		return Markup(out), nil
	}
	return out, nil
}

// selfRef is `self` in a template with blocks; blockRef is self.name.
type (
	selfRef  struct{}
	blockRef struct{ name string }
)

func (e *evaluator) execInclude(s *includeStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	t, err := e.template(s.key)
	if err != nil {
		if s.ignoreMissing && e.prog.errs[s.key] == nil {
			return nil
		}
		return e.at(s.keyPos, err)
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxCallDepth {
		return e.at(s.pos, fmt.Errorf("includes nested more than %d deep (templates that include each other without end?)", maxCallDepth))
	}
	if err := e.tick(); err != nil {
		return e.at(s.pos, err)
	}
	root := e.newFrame(nil)
	defer e.release(root)
	if s.withContext {
		root.parent = f
	}
	for _, v := range s.vars {
		val, err := e.eval(v.x, f)
		if err != nil {
			return err
		}
		root.set(v.name, val)
	}
	// An included template escapes as its own text says (the environment's default: off).
	saved := e.autoescape
	e.autoescape = false
	err = e.runTemplate(t, root)
	e.autoescape = saved
	return err
}

// importModule renders key as a module: its top-level variables and macros.
func (e *evaluator) importModule(key string, keyPos int, withContext bool, f *frame) (*module, error) {
	if !withContext {
		if m, ok := e.modules[key]; ok {
			return m, nil
		}
	}
	t, err := e.template(key)
	if err != nil {
		return nil, e.at(keyPos, err)
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxCallDepth {
		return nil, e.at(keyPos, fmt.Errorf("imports nested more than %d deep", maxCallDepth))
	}
	root := &frame{}
	if withContext {
		root.parent = f
	}
	saved, savedEscape := e.out, e.autoescape
	e.out, e.autoescape = nil, false
	err = e.runTemplate(t, root)
	out := string(e.out)
	e.out, e.autoescape = saved, savedEscape
	if err != nil {
		return nil, err
	}
	keep(root)
	m := &module{name: key, vars: newDict(len(root.names)), output: out}
	for i, n := range root.names {
		if !strings.HasPrefix(n, "_") {
			m.vars.set(n, root.vals[i])
		}
	}
	if !withContext {
		if e.modules == nil {
			e.modules = map[string]*module{}
		}
		e.modules[key] = m
	}
	return m, nil
}

func (e *evaluator) execImport(s *importStmt, f *frame) error {
	m, err := e.importModule(s.key, s.keyPos, s.withContext, f)
	if err != nil {
		return err
	}
	f.set(s.as, m)
	return nil
}

func (e *evaluator) execFromImport(s *fromImportStmt, f *frame) error {
	m, err := e.importModule(s.key, s.keyPos, s.withContext, f)
	if err != nil {
		return err
	}
	for _, n := range s.names {
		v, ok := m.vars.getStr(n.name)
		if !ok {
			line, _ := e.cur.lineCol(s.pos)
			v = undefinedHint(fmt.Sprintf("the template %s (imported on line %d in %s) does not export the requested name %s", reprString(s.key), line, reprString(e.cur.name), reprString(n.name)))
		}
		f.set(n.as, v)
	}
	return nil
}
