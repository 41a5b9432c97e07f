package render

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/flosch/pongo2/v6"
)

// The translator reads a Jinja2 (or pongo2) template and writes the pongo2 source that
// compiles it: text is copied as is, every statement becomes one of our tags (tags.go) whose
// argument indexes the parsed expressions in the program. Line numbers are kept: a tag that
// spans lines, or a multi-line comment, is followed by {% comment %} holding as many newlines,
// so pongo2's line numbers are the template's. Columns are mapped back through anchors.

// program is one template set being compiled: every key it reaches from the main key.
type program struct {
	srcs    map[string]string
	units   map[string]*unit
	specs   []any
	gets    int
	loadErr error
	set     *pongo2.TemplateSet // the set being compiled (for _include)
}

// unit is one template key.
type unit struct {
	key     string
	src     string
	lines   []int // byte offset of each line start in src
	out     string
	anchors []anchor
	state   int // 0 new, 1 translating, 2 done
	incl    []includeRef
	main    bool // the main template: its output goes to the render's own buffer (_root)
}

type anchor struct{ out, orig, origEnd int }

type includeRef struct {
	key string
	at  int
}

// templateError is an error located in a template key.
type templateError struct {
	key       string
	line, col int
	err       error
}

func (e *templateError) Error() string {
	return fmt.Sprintf("key %q line %d column %d: %v", e.key, e.line, e.col, e.err)
}

func (e *templateError) Unwrap() error { return e.err }

func newUnit(key, src string) *unit {
	// Like Jinja2, line endings become "\n".
	src = strings.ReplaceAll(src, "\r\n", "\n")
	u := &unit{key: key, src: src, lines: []int{0}}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			u.lines = append(u.lines, i+1)
		}
	}
	return u
}

// lineCol converts a byte offset of src to a 1-based line and (rune) column.
func (u *unit) lineCol(off int) (int, int) {
	off = max(0, min(off, len(u.src)))
	l := sort.Search(len(u.lines), func(i int) bool { return u.lines[i] > off }) - 1
	return l + 1, utf8.RuneCountInString(u.src[u.lines[l]:off]) + 1
}

func (u *unit) errAt(off int, err error) *templateError {
	line, col := u.lineCol(off)
	return &templateError{key: u.key, line: line, col: col, err: err}
}

// origOffset maps a pongo2 position (line, byte column) in the translated text back to a byte
// offset in src.
func (u *unit) origOffset(line, col int) int {
	off := 0
	l := 1
	for i := 0; i < len(u.out) && l < line; i++ {
		if u.out[i] == '\n' {
			l++
			off = i + 1
		}
	}
	off += max(col-1, 0)
	k := sort.Search(len(u.anchors), func(i int) bool { return u.anchors[i].out > off }) - 1
	if k < 0 {
		return 0
	}
	a := u.anchors[k]
	return min(a.orig+(off-a.out), max(a.origEnd-1, a.orig))
}

type block struct {
	kind    string
	at      int
	sawElse bool
	restore *[]string // for, with: names to restore when the block ends
	loop    *forSpec  // for
}

type translator struct {
	prog  *program
	u     *unit
	out   strings.Builder
	stack []*block
}

// unsupported are Jinja2 statements pongo2 has no equivalent for: what they are, and what to
// write instead.
var unsupported = map[string][2]string{
	"extends":   {"template inheritance ({% extends %}, {% block %})", "put the shared parts in another key of the ConfigMap and {% include \"key\" %} it"},
	"block":     {"template inheritance ({% extends %}, {% block %})", "put the shared parts in another key of the ConfigMap and {% include \"key\" %} it"},
	"endblock":  {"template inheritance ({% extends %}, {% block %})", "put the shared parts in another key of the ConfigMap and {% include \"key\" %} it"},
	"import":    {"{% import %}", "define the macro in the template that calls it"},
	"from":      {"{% from ... import %}", "define the macro in the template that calls it"},
	"call":      {"{% call %} (a macro called with caller())", "pass the content to the macro as an argument"},
	"endcall":   {"{% call %} (a macro called with caller())", "pass the content to the macro as an argument"},
	"do":        {"{% do %} (the jinja2.ext.do extension)", "use {% set %}, with namespace() to change a value from inside a loop"},
	"trans":     {"{% trans %} (i18n)", "write the text directly"},
	"endtrans":  {"{% trans %} (i18n)", "write the text directly"},
	"pluralize": {"{% pluralize %} (i18n)", "write the text directly"},
	"debug":     {"{% debug %}", "print the values you need with {{ ... }}"},
}

// notAllowed are tags that exist but must not run here.
var notAllowed = map[string]string{
	"ssi":   "{% ssi %} reads files from the local disk and is not allowed: put the content in another key of the ConfigMap and {% include \"key\" %} it",
	"now":   "{% now %} makes every render different (HAProxy would reload on every change) and is not allowed",
	"lorem": "{% lorem %} makes renders random and is not allowed",
}

// jinja2Unsupported is the error for a Jinja2 construct we do not support.
func jinja2Unsupported(what, instead string) error {
	return fmt.Errorf("%s is a Jinja2 construct that pongo2 does not support: %s", what, instead)
}

// passThrough are pongo2 tags copied as they are (they parse their arguments themselves).
var passThrough = map[string]string{
	"firstof":     "",
	"cycle":       "",
	"widthratio":  "",
	"templatetag": "",
	"spaceless":   "open",
	"ifequal":     "open",
	"ifnotequal":  "open",
	"ifchanged":   "open",
}

var endOf = map[string]string{
	"if": "endif", "for": "endfor", "macro": "endmacro", "filter": "endfilter", "set": "endset",
	"with": "endwith", "autoescape": "endautoescape", "spaceless": "endspaceless",
	"ifequal": "endifequal", "ifnotequal": "endifnotequal", "ifchanged": "endifchanged",
}

var reEndRaw = regexp.MustCompile(`\{%([-+]?)\s*end(raw|verbatim)\s*([-+]?)%\}`)
var reEndComment = regexp.MustCompile(`\{%([-+]?)\s*endcomment\s*([-+]?)%\}`)

// translate translates u and, depth first, every key it includes; a key that includes itself
// (directly or not) is an error.
func (prog *program) translate(u *unit, chain []string) error {
	switch u.state {
	case 2:
		return nil
	case 1:
		return nil // reported by the caller, which knows where the include is
	}
	u.state = 1
	t := &translator{prog: prog, u: u}
	if err := t.run(); err != nil {
		return err
	}
	chain = append(chain, u.key)
	for _, inc := range u.incl {
		next := prog.units[inc.key]
		if next.state == 1 {
			return u.errAt(inc.at, fmt.Errorf("include cycle: %s -> %s", strings.Join(chain, " -> "), inc.key))
		}
		if err := prog.translate(next, chain); err != nil {
			return err
		}
	}
	u.state = 2
	return nil
}

func (t *translator) run() error {
	// Like Jinja2 (keep_trailing_newline=False), a single trailing newline of the template is
	// not part of the output. Render ends the configuration with a newline.
	src := strings.TrimSuffix(t.u.src, "\n")
	t.out.WriteString("{% autoescape off %}{% _root %}")
	i := 0
	for i < len(src) {
		j := nextTagStart(src, i)
		if j < 0 {
			t.text(i, len(src))
			break
		}
		t.text(i, j)
		var err error
		switch src[j+1] {
		case '#':
			i, err = t.comment(j)
		case '{':
			i, err = t.variable(j)
		default:
			i, err = t.statement(j)
		}
		if err != nil {
			var ee *exprError
			if errors.As(err, &ee) {
				return t.u.errAt(ee.at, ee.err)
			}
			var te *templateError
			if errors.As(err, &te) {
				return te
			}
			return t.u.errAt(j, err)
		}
	}
	if len(t.stack) > 0 {
		b := t.stack[len(t.stack)-1]
		return t.u.errAt(b.at, fmt.Errorf("{%% %s %%} is never closed: expected {%% %s %%}", b.kind, endOf[b.kind]))
	}
	t.out.WriteString("{% end_root %}{% endautoescape %}")
	t.u.out = t.out.String()
	return nil
}

func nextTagStart(src string, i int) int {
	for {
		k := strings.IndexByte(src[i:], '{')
		if k < 0 || i+k+1 >= len(src) {
			return -1
		}
		j := i + k
		switch src[j+1] {
		case '{', '%', '#':
			return j
		}
		i = j + 1
	}
}

func (t *translator) anchor(orig, origEnd int) {
	t.u.anchors = append(t.u.anchors, anchor{out: t.out.Len(), orig: orig, origEnd: origEnd})
}

func (t *translator) text(i, j int) {
	if i >= j {
		return
	}
	t.anchor(i, j)
	t.out.WriteString(t.u.src[i:j])
}

// emit writes pongo2 tags for the template text src[start:end]: {%L b1 %}{% b2 %}...{% bn R%},
// followed by a comment holding the newlines src[start:end] had.
func (t *translator) emit(start, end int, trimL, trimR bool, bodies ...string) {
	t.anchor(start, end)
	nl := strings.Count(t.u.src[start:end], "\n")
	for i, b := range bodies {
		t.out.WriteString("{%")
		if i == 0 && trimL {
			t.out.WriteByte('-')
		}
		t.out.WriteByte(' ')
		t.out.WriteString(b)
		t.out.WriteByte(' ')
		if i == len(bodies)-1 && trimR && nl == 0 {
			t.out.WriteByte('-')
		}
		t.out.WriteString("%}")
	}
	if nl > 0 {
		t.newlines(nl, false, trimR)
	}
}

// newlines writes a comment that holds n newlines (and carries whitespace control).
func (t *translator) newlines(n int, trimL, trimR bool) {
	t.out.WriteString("{%")
	if trimL {
		t.out.WriteByte('-')
	}
	t.out.WriteString(" comment %}")
	t.out.WriteString(strings.Repeat("\n", n))
	t.out.WriteString("{% endcomment ")
	if trimR {
		t.out.WriteByte('-')
	}
	t.out.WriteString("%}")
}

// noop writes nothing but keeps the whitespace control and line count of src[start:end].
func (t *translator) noop(start, end int, trimL, trimR bool) {
	nl := strings.Count(t.u.src[start:end], "\n")
	if nl == 0 && !trimL && !trimR {
		return
	}
	t.anchor(start, end)
	t.newlines(nl, trimL, trimR)
}

func (t *translator) addSpec(s any) string {
	t.prog.specs = append(t.prog.specs, s)
	return strconv.Itoa(len(t.prog.specs) - 1)
}

func (t *translator) comment(j int) (int, error) {
	src := t.u.src
	k := strings.Index(src[j+2:], "#}")
	if k < 0 {
		return 0, &exprError{at: j, err: errors.New("comment {# is not closed: expected #}")}
	}
	end := j + 2 + k + 2
	inner := src[j+2 : end-2]
	trimL := strings.HasPrefix(inner, "-")
	trimR := strings.HasSuffix(inner, "-") && len(inner) > 0 && !(len(inner) == 1 && trimL)
	t.noop(j, end, trimL, trimR)
	return end, nil
}

// openDelim reads "{{" or "{%" at j and an optional - or +; returns where the content starts
// and whether to trim the whitespace before.
func openDelim(src string, j int) (int, bool) {
	i := j + 2
	if i < len(src) && (src[i] == '-' || src[i] == '+') {
		return i + 1, src[i] == '-'
	}
	return i, false
}

func (t *translator) variable(j int) (int, error) {
	i, trimL := openDelim(t.u.src, j)
	toks, end, trimR, err := lexTag(t.u.src, i, "}}")
	if err != nil {
		return 0, err
	}
	p := &parser{toks: toks}
	if p.atEOF() {
		return 0, &exprError{at: j, err: errors.New("empty {{ }}")}
	}
	e, err := p.parseTuple(true, false)
	if err != nil {
		return 0, err
	}
	if err := p.expectEOF("{{ ... }}"); err != nil {
		return 0, err
	}
	if p.sawLoop {
		t.markLoopUse()
	}
	idx := t.addSpec(&printSpec{u: t.u, at: toks[0].off, e: e})
	t.emit(j, end, trimL, trimR, "_p "+idx)
	return end, nil
}

func (t *translator) top() *block {
	if len(t.stack) == 0 {
		return nil
	}
	return t.stack[len(t.stack)-1]
}

func (t *translator) push(b *block) { t.stack = append(t.stack, b) }

// pop closes the innermost block, which must be kind.
func (t *translator) pop(end string, at int) (*block, error) {
	b := t.top()
	if b == nil {
		return nil, &exprError{at: at, err: fmt.Errorf("{%% %s %%} without an opening tag", end)}
	}
	if endOf[b.kind] != end {
		l, c := t.u.lineCol(b.at)
		return nil, &exprError{at: at, err: fmt.Errorf("{%% %s %%} does not match {%% %s %%} opened at line %d column %d: expected {%% %s %%}", end, b.kind, l, c, endOf[b.kind])}
	}
	t.stack = t.stack[:len(t.stack)-1]
	return b, nil
}

// recordSet notes that a variable is set inside the enclosing loops and with blocks, so they
// restore it when they end.
func (t *translator) recordSet(names ...string) {
	for i := len(t.stack) - 1; i >= 0; i-- {
		b := t.stack[i]
		if b.kind == "macro" {
			return
		}
		if b.restore == nil {
			continue
		}
		for _, n := range names {
			if !slices.Contains(*b.restore, n) {
				*b.restore = append(*b.restore, n)
			}
		}
	}
}

// markLoopUse makes the enclosing loops set loop and forloop: something inside them may read
// them (an expression naming them, an include, a pongo2 tag).
func (t *translator) markLoopUse() {
	for i := len(t.stack) - 1; i >= 0; i-- {
		if f := t.stack[i].loop; f != nil && !f.loopVar {
			f.loopVar = true
			f.restore = append(f.restore, "loop", "forloop")
		}
	}
}

func (t *translator) inLoop() bool {
	for i := len(t.stack) - 1; i >= 0; i-- {
		switch t.stack[i].kind {
		case "for":
			return true
		case "macro":
			return false
		}
	}
	return false
}

func (t *translator) statement(j int) (int, error) {
	src := t.u.src
	i, trimL := openDelim(src, j)
	toks, end, trimR, err := lexTag(src, i, "%}")
	if err != nil {
		return 0, err
	}
	if toks[0].kind != tName {
		return 0, &exprError{at: toks[0].off, err: fmt.Errorf("expected a tag name after {%%, got %s", toks[0])}
	}
	name := toks[0].val
	at := toks[0].off
	p := &parser{toks: toks[1:]}
	emit := func(bodies ...string) { t.emit(j, end, trimL, trimR, bodies...) }

	switch name {
	case "raw", "verbatim":
		if err := p.expectEOF("{% " + name + " %}"); err != nil {
			return 0, err
		}
		return t.raw(j, end, trimL, trimR)
	case "comment":
		m := reEndComment.FindStringSubmatchIndex(src[end:])
		if m == nil {
			return 0, &exprError{at: at, err: errors.New("{% comment %} is never closed: expected {% endcomment %}")}
		}
		close := end + m[1]
		t.noop(j, close, trimL, src[end+m[4]:end+m[5]] == "-")
		return close, nil

	case "if":
		cond, err := p.parseExpression(true)
		if err != nil {
			return 0, err
		}
		if err := p.expectEOF("{% if %}"); err != nil {
			return 0, err
		}
		t.push(&block{kind: "if", at: at})
		emit("_if " + t.addSpec(&ifSpec{u: t.u, at: at, cond: cond}))
	case "elif":
		b := t.top()
		if b == nil || b.kind != "if" {
			return 0, &exprError{at: at, err: errors.New("{% elif %} outside {% if %}")}
		}
		if b.sawElse {
			return 0, &exprError{at: at, err: errors.New("{% elif %} after {% else %}")}
		}
		cond, err := p.parseExpression(true)
		if err != nil {
			return 0, err
		}
		if err := p.expectEOF("{% elif %}"); err != nil {
			return 0, err
		}
		emit("elif " + t.addSpec(&ifSpec{u: t.u, at: at, cond: cond}))
	case "else", "empty":
		b := t.top()
		ok := b != nil && (b.kind == "for" || (name == "else" && (b.kind == "if" || b.kind == "ifequal" || b.kind == "ifnotequal" || b.kind == "ifchanged")))
		if !ok {
			return 0, &exprError{at: at, err: fmt.Errorf("{%% %s %%} outside {%% if %%} or {%% for %%}", name)}
		}
		if b.sawElse {
			return 0, &exprError{at: at, err: fmt.Errorf("a second {%% %s %%} in the same {%% %s %%}", name, b.kind)}
		}
		b.sawElse = true
		if err := p.expectEOF("{% " + name + " %}"); err != nil {
			return 0, err
		}
		emit("else")
	case "for":
		spec, err := t.parseFor(p, at)
		if err != nil {
			return 0, err
		}
		t.push(&block{kind: "for", at: at, restore: &spec.restore, loop: spec})
		emit("_for " + t.addSpec(spec))
	case "break", "continue":
		if !t.inLoop() {
			return 0, &exprError{at: at, err: fmt.Errorf("{%% %s %%} outside a {%% for %%} loop", name)}
		}
		if err := p.expectEOF("{% " + name + " %}"); err != nil {
			return 0, err
		}
		emit("_" + name)
	case "set":
		return t.set(p, j, end, at, trimL, trimR)
	case "with":
		spec := &withSpec{u: t.u, at: at}
		for !p.atEOF() {
			if len(spec.names) > 0 && p.isOp(",") {
				p.next()
			}
			if p.peek().kind == tName && p.peekN(1).kind == tOp && p.peekN(1).val == "=" {
				n := p.next()
				p.next()
				e, err := p.parseExpression(true)
				if err != nil {
					return 0, err
				}
				spec.names = append(spec.names, n.val)
				spec.exprs = append(spec.exprs, e)
				continue
			}
			e, err := p.parseExpression(true)
			if err != nil {
				return 0, err
			}
			if !p.isName("as") {
				return 0, p.errf(p.peek(), "expected 'name = value' or 'value as name' in {%% with %%}, got %s", p.peek())
			}
			p.next()
			n, err := p.expectName()
			if err != nil {
				return 0, err
			}
			spec.names = append(spec.names, n.val)
			spec.exprs = append(spec.exprs, e)
		}
		spec.restore = append([]string{}, spec.names...)
		t.push(&block{kind: "with", at: at, restore: &spec.restore})
		emit("_with " + t.addSpec(spec))
	case "include":
		return t.include(p, j, end, at, trimL, trimR)
	case "macro":
		spec := &macroSpec{u: t.u, at: at}
		n, err := p.expectName()
		if err != nil {
			return 0, err
		}
		spec.name = n.val
		if _, err := p.expectOp("("); err != nil {
			return 0, err
		}
		for !p.isOp(")") {
			if len(spec.params) > 0 {
				if _, err := p.expectOp(","); err != nil {
					return 0, err
				}
			}
			pn, err := p.expectName()
			if err != nil {
				return 0, err
			}
			var def node
			if p.isOp("=") {
				p.next()
				if def, err = p.parseExpression(true); err != nil {
					return 0, err
				}
			}
			spec.params = append(spec.params, pn.val)
			spec.defaults = append(spec.defaults, def)
		}
		p.next()
		if err := p.expectEOF("{% macro %}"); err != nil {
			return 0, err
		}
		t.recordSet(spec.name)
		t.push(&block{kind: "macro", at: at})
		emit("_macro " + t.addSpec(spec))
	case "filter":
		spec := &filterBlockSpec{u: t.u}
		for {
			f, err := p.parseFilter(nil)
			if err != nil {
				return 0, err
			}
			spec.filters = append(spec.filters, f)
			if !p.isOp("|") {
				break
			}
			p.next()
		}
		if err := p.expectEOF("{% filter %}"); err != nil {
			return 0, err
		}
		t.push(&block{kind: "filter", at: at})
		emit("_filter " + t.addSpec(spec))
	case "autoescape":
		v := p.next()
		on := v.kind == tName && (v.val == "true" || v.val == "True" || v.val == "on")
		off := v.kind == tName && (v.val == "false" || v.val == "False" || v.val == "off")
		if !on && !off {
			return 0, p.errf(v, "{%% autoescape %%} takes true or false, got %s", v)
		}
		if on {
			return 0, &exprError{at: at, err: jinja2Unsupported("{% autoescape true %}", "an HAProxy configuration is not HTML; use the |e filter where a value must be HTML-escaped")}
		}
		if err := p.expectEOF("{% autoescape %}"); err != nil {
			return 0, err
		}
		t.push(&block{kind: "autoescape", at: at})
		t.noop(j, end, trimL, trimR)

	case "endif", "endfor", "endmacro", "endfilter", "endset", "endwith", "endautoescape",
		"endspaceless", "endifequal", "endifnotequal", "endifchanged":
		if !p.atEOF() && !(name == "endmacro" && p.peek().kind == tName) {
			return 0, p.errf(p.peek(), "{%% %s %%} takes no arguments", name)
		}
		if _, err := t.pop(name, at); err != nil {
			return 0, err
		}
		if name == "endautoescape" {
			t.noop(j, end, trimL, trimR)
		} else {
			emit(name)
		}
	default:
		if u, ok := unsupported[name]; ok {
			return 0, &exprError{at: at, err: jinja2Unsupported(u[0], u[1])}
		}
		if why, ok := notAllowed[name]; ok {
			return 0, &exprError{at: at, err: errors.New(why)}
		}
		kind, ok := passThrough[name]
		if !ok {
			return 0, &exprError{at: at, err: fmt.Errorf("unknown tag {%% %s %%}", name)}
		}
		inner := strings.TrimSpace(src[toks[0].off:toks[len(toks)-1].off])
		if strings.Contains(inner, "\n") {
			return 0, &exprError{at: at, err: fmt.Errorf("the pongo2 tag {%% %s %%} must be on one line", name)}
		}
		if kind == "open" {
			t.push(&block{kind: name, at: at})
		}
		t.markLoopUse() // pongo2 expressions may read forloop
		emit(inner)
	}
	if p.sawLoop {
		t.markLoopUse()
	}
	return end, nil
}

func (t *translator) parseFor(p *parser, at int) (*forSpec, error) {
	spec := &forSpec{u: t.u, at: at}
	parens := false
	if p.isOp("(") {
		p.next()
		parens = true
	}
	for {
		n, err := p.expectName()
		if err != nil {
			return nil, err
		}
		spec.targets = append(spec.targets, n.val)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if parens {
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	if !p.isName("in") {
		return nil, p.errf(p.peek(), "expected 'in' in {%% for %%}, got %s", p.peek())
	}
	p.next()
	iter, err := p.parseTuple(false, false, "if", "recursive", "reversed", "sorted")
	if err != nil {
		return nil, err
	}
	spec.iter = iter
	for !p.atEOF() {
		tk := p.next()
		switch {
		case tk.kind == tName && tk.val == "if" && spec.cond == nil:
			if spec.cond, err = p.parseExpression(true); err != nil {
				return nil, err
			}
		case tk.kind == tName && tk.val == "reversed":
			spec.reversed = true
		case tk.kind == tName && tk.val == "sorted":
			spec.sorted = true
		case tk.kind == tName && tk.val == "recursive":
			return nil, &exprError{at: tk.off, err: jinja2Unsupported("a recursive loop ({% for ... recursive %} with loop(...))", "write a macro that calls itself")}
		default:
			return nil, p.errf(tk, "unexpected %s in {%% for %%}", tk)
		}
	}
	spec.restore = append([]string{}, spec.targets...)
	return spec, nil
}

func (t *translator) set(p *parser, j, end, at int, trimL, trimR bool) (int, error) {
	spec := &setSpec{u: t.u, at: at}
	n, err := p.expectName()
	if err != nil {
		return 0, err
	}
	spec.targets = []string{n.val}
	switch {
	case p.isOp("."):
		p.next()
		a, err := p.expectName()
		if err != nil {
			return 0, err
		}
		spec.nsAttr = a.val
	case p.isOp(","):
		for p.isOp(",") {
			p.next()
			n, err := p.expectName()
			if err != nil {
				return 0, err
			}
			spec.targets = append(spec.targets, n.val)
		}
	}
	if p.isOp("=") {
		p.next()
		if spec.e, err = p.parseTuple(true, false); err != nil {
			return 0, err
		}
		if err := p.expectEOF("{% set %}"); err != nil {
			return 0, err
		}
		if spec.nsAttr == "" {
			t.recordSet(spec.targets...)
		}
		if p.sawLoop {
			t.markLoopUse()
		}
		t.emit(j, end, trimL, trimR, "_set "+t.addSpec(spec))
		return end, nil
	}
	// Block form: {% set x %}...{% endset %}, optionally {% set x | filter %}.
	if len(spec.targets) > 1 {
		return 0, p.errf(p.peek(), "expected '=' in {%% set %%}")
	}
	bs := &setBlockSpec{set: spec}
	for p.isOp("|") {
		p.next()
		f, err := p.parseFilter(nil)
		if err != nil {
			return 0, err
		}
		bs.filters = append(bs.filters, f)
	}
	if err := p.expectEOF("{% set %}"); err != nil {
		return 0, p.errf(p.peek(), "expected '=' or the end of the tag in {%% set %%}, got %s", p.peek())
	}
	if spec.nsAttr == "" {
		t.recordSet(spec.targets...)
	}
	if p.sawLoop {
		t.markLoopUse()
	}
	t.push(&block{kind: "set", at: at})
	t.emit(j, end, trimL, trimR, "_setblock "+t.addSpec(bs))
	return end, nil
}

var reKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

func (t *translator) include(p *parser, j, end, at int, trimL, trimR bool) (int, error) {
	kt := p.next()
	if kt.kind != tString {
		return 0, p.errf(kt, "{%% include %%} needs the template key as a quoted string (includes are resolved when the template is compiled, so the key cannot come from a variable), got %s", kt)
	}
	key := kt.val
	ignoreMissing := false
	var with *withSpec
	for !p.atEOF() {
		tk := p.next()
		switch {
		case tk.kind == tName && tk.val == "ignore" && p.isName("missing"):
			p.next()
			ignoreMissing = true
		case tk.kind == tName && tk.val == "if_exists":
			ignoreMissing = true
		case tk.kind == tName && tk.val == "with" && p.isName("context"):
			p.next()
		case tk.kind == tName && tk.val == "without" && p.isName("context"):
			return 0, &exprError{at: tk.off, err: jinja2Unsupported("{% include ... without context %}", "drop it: an included template always sees the variables of the template that includes it")}
		case tk.kind == tName && tk.val == "with":
			with = &withSpec{u: t.u, at: at}
			for p.peek().kind == tName && p.peekN(1).kind == tOp && p.peekN(1).val == "=" {
				n := p.next()
				p.next()
				e, err := p.parseExpression(true)
				if err != nil {
					return 0, err
				}
				with.names = append(with.names, n.val)
				with.exprs = append(with.exprs, e)
				if p.isOp(",") {
					p.next()
				}
			}
			if len(with.names) == 0 {
				return 0, p.errf(p.peek(), "expected name=value after 'with' in {%% include %%}")
			}
			if p.isName("only") {
				return 0, p.errf(p.peek(), "{%% include ... only %%} is not supported: an included template always sees the variables of the template that includes it")
			}
			with.restore = append([]string{}, with.names...)
		default:
			return 0, p.errf(tk, "unexpected %s in {%% include %%}", tk)
		}
	}
	if _, ok := t.prog.srcs[key]; !ok {
		if ignoreMissing {
			t.noop(j, end, trimL, trimR)
			return end, nil
		}
		return 0, &exprError{at: kt.off, err: fmt.Errorf("include: there is no template key %q (keys: %s)", key, strings.Join(sortedKeysStr(t.prog.srcs), ", "))}
	}
	if !reKey.MatchString(key) {
		return 0, &exprError{at: kt.off, err: fmt.Errorf("include: %q is not a valid key name", key)}
	}
	if _, ok := t.prog.units[key]; !ok {
		t.prog.units[key] = newUnit(key, t.prog.srcs[key])
	}
	t.u.incl = append(t.u.incl, includeRef{key: key, at: kt.off})
	t.markLoopUse() // the included template sees loop
	if p.sawLoop {
		t.markLoopUse()
	}
	// Padded so that the key's spec index sits where the key was in `include "key"`: errors
	// about the included key point at it.
	inc := "_incl   " + t.addSpec(key)
	if with != nil {
		t.emit(j, end, trimL, trimR, "_with "+t.addSpec(with), inc, "endwith")
	} else {
		t.emit(j, end, trimL, trimR, inc)
	}
	return end, nil
}

// raw copies {% raw %}...{% endraw %} as text (pongo2's verbatim), with Jinja2's whitespace
// control on both tags.
func (t *translator) raw(j, openEnd int, trimL, trimR bool) (int, error) {
	src := t.u.src
	m := reEndRaw.FindStringSubmatchIndex(src[openEnd:])
	if m == nil {
		return 0, &exprError{at: j, err: errors.New("{% raw %} is never closed: expected {% endraw %}")}
	}
	closeStart, closeEnd := openEnd+m[0], openEnd+m[1]
	closeTrimL := src[openEnd+m[2]:openEnd+m[3]] == "-"
	closeTrimR := src[openEnd+m[6]:openEnd+m[7]] == "-"
	cs, ce := openEnd, closeStart
	if trimR {
		for cs < ce && strings.IndexByte(" \t\r\n", src[cs]) >= 0 {
			cs++
		}
	}
	if closeTrimL {
		for ce > cs && strings.IndexByte(" \t\r\n", src[ce-1]) >= 0 {
			ce--
		}
	}
	content := src[cs:ce]
	if content == "" {
		// pongo2's lexer cannot close an empty verbatim block.
		t.noop(j, closeEnd, trimL, closeTrimR)
		return closeEnd, nil
	}
	if strings.Contains(content, "{% endverbatim %}") {
		return 0, &exprError{at: cs, err: errors.New("a raw block cannot contain {% endverbatim %}")}
	}
	t.anchor(j, cs)
	t.newlines(strings.Count(src[j:cs], "\n"), trimL, false)
	t.out.WriteString("{% verbatim %}")
	t.anchor(cs, ce)
	t.out.WriteString(content)
	t.out.WriteString("{% endverbatim %}")
	t.anchor(ce, closeEnd)
	t.newlines(strings.Count(src[ce:closeEnd], "\n"), false, closeTrimR)
	return closeEnd, nil
}
