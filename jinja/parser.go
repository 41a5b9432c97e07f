package jinja

import (
	"fmt"
	"slices"
	"strings"
)

// The parser follows Jinja2's (jinja2/parser.py): the same statements, the same expression
// grammar and precedence, the same places where tuples, conditional expressions and tests
// without parentheses are allowed. pongo2's own syntax is accepted where it cannot mean
// anything else in Jinja2: &&, ||, !, <>, filter:argument, for ... reversed/sorted, and
// pongo2's tags (see parseStatement).

type parser struct {
	toks  []token
	p     int
	tmpl  *Template
	names map[string]string // interned names: equal names share their bytes

	open    []openTag // statements whose end tag is awaited
	loops   int       // for loops around the current statement (for break/continue)
	macros  []*macroDef
	fors    []*forStmt
	noColon bool // inside [ ] or a dict key: ':' is a slice or a key, not a pongo2 filter argument
	depth   int
	spaced  bool              // pongo2's space-separated arguments: 'a' 'b' are two strings
	extra   map[string]Filter // Options.Filters
	refs    []string          // the template keys this template names
}

type openTag struct {
	name string // for, if, ...
	pos  int
	ends []string // the tags that may come next (endfor, else, ...)
}

// maxDepth bounds the nesting of expressions and statements, so that a hostile template
// cannot exhaust the stack of the parser or the evaluator.
const maxDepth = 200

func (p *parser) cur() token  { return p.toks[p.p] }
func (p *parser) peek() token { return p.toks[min(p.p+1, len(p.toks)-1)] }

func (p *parser) next() token {
	t := p.toks[p.p]
	if t.kind != tEOF {
		p.p++
	}
	return t
}

func (p *parser) isOp(s string) bool {
	t := p.toks[p.p]
	return t.kind == tOp && t.val == s
}

func (p *parser) isName(s string) bool {
	t := p.toks[p.p]
	return t.kind == tName && t.val == s
}

func (p *parser) skipOp(s string) bool {
	if p.isOp(s) {
		p.p++
		return true
	}
	return false
}

func (p *parser) skipName(s string) bool {
	if p.isName(s) {
		p.p++
		return true
	}
	return false
}

func (p *parser) intern(s string) string {
	if v, ok := p.names[s]; ok {
		return v
	}
	p.names[s] = s
	return s
}

func (p *parser) fail(t token, format string, args ...any) error {
	return errAt(t.pos, format, args...)
}

func (p *parser) unexpected(t token, what string) error {
	switch t.kind {
	case tBlockEnd, tVarEnd:
		return p.fail(t, "expected %s, got the end of the tag", what)
	case tEOF:
		return p.fail(t, "expected %s, got the end of the template", what)
	}
	return p.fail(t, "expected %s, got %s", what, t)
}

func (p *parser) expectOp(s string) (token, error) {
	if p.isOp(s) {
		return p.next(), nil
	}
	return p.cur(), p.unexpected(p.cur(), "'"+s+"'")
}

func (p *parser) expectName() (token, error) {
	t := p.cur()
	if t.kind != tName {
		return t, p.unexpected(t, "a name")
	}
	p.p++
	t.val = p.intern(t.val)
	return t, nil
}

func (p *parser) expectKeyword(s string) error {
	if p.skipName(s) {
		return nil
	}
	return p.unexpected(p.cur(), "'"+s+"'")
}

func (p *parser) expectBlockEnd() error {
	if t := p.cur(); t.kind != tBlockEnd {
		return p.unexpected(t, "the end of the statement ('%}')")
	}
	p.p++
	return nil
}

// parseTemplate parses the whole token list.
func (p *parser) parseTemplate() ([]stmt, error) {
	body, err := p.subparse(nil)
	if err != nil {
		return nil, err
	}
	if t := p.cur(); t.kind != tEOF {
		return nil, p.fail(t, "unexpected %s", t)
	}
	return body, nil
}

// subparse parses statements until one of the end tags (left as the current token, just
// after its {%) or the end of the template.
func (p *parser) subparse(ends []string) ([]stmt, error) {
	var body []stmt
	for {
		t := p.cur()
		switch t.kind {
		case tEOF:
			if len(p.open) > 0 {
				o := p.open[len(p.open)-1]
				return nil, errAt(o.pos, "{%% %s %%} is never closed: expected %s", o.name, tagList(o.ends))
			}
			return body, nil
		case tData:
			p.p++
			body = append(body, &textStmt{pos: t.pos, text: t.val})
		case tVarBeg:
			p.p++
			start := p.cur().pos
			x, err := p.parseTuple(true, false, nil)
			if err != nil {
				return nil, err
			}
			if t := p.cur(); t.kind != tVarEnd {
				return nil, p.unexpected(t, "the end of the print statement ('}}')")
			}
			p.p++
			body = append(body, &printStmt{pos: start, x: x})
		case tBlockBeg:
			p.p++
			name := p.cur()
			if name.kind == tName && slices.Contains(ends, name.val) {
				return body, nil
			}
			s, err := p.parseStatement()
			if err != nil {
				return nil, err
			}
			if s != nil {
				body = append(body, s)
			}
		default:
			return nil, p.fail(t, "unexpected %s", t)
		}
	}
}

func tagList(ends []string) string {
	parts := make([]string, len(ends))
	for i, e := range ends {
		parts[i] = "{% " + e + " %}"
	}
	return strings.Join(parts, " or ")
}

// parseBody parses a statement's body after its opening tag: the block end, then statements
// up to one of ends. It returns the body and the end tag's name; the parser is left just
// after that name (the rest of the end tag is the caller's).
func (p *parser) parseBody(tag string, pos int, ends ...string) ([]stmt, string, error) {
	p.skipOp(":") // Jinja2 allows a colon before the end of a block statement, Python style
	if err := p.expectBlockEnd(); err != nil {
		return nil, "", err
	}
	p.open = append(p.open, openTag{name: tag, pos: pos, ends: ends})
	body, err := p.subparse(ends)
	p.open = p.open[:len(p.open)-1]
	if err != nil {
		return nil, "", err
	}
	end := p.next()
	return body, end.val, nil
}

// endTag finishes an end tag such as {% endmacro name %}: an optional repeated name, then %}.
func (p *parser) endTag(name string) error {
	if name != "" {
		p.skipName(name)
	}
	return p.expectBlockEnd()
}

// statements that are the ends of other statements: meeting one where it is not expected is
// a nesting mistake.
var endTags = map[string]bool{
	"endfor": true, "endif": true, "elif": true, "else": true, "endset": true, "endwith": true,
	"endmacro": true, "endcall": true, "endfilter": true, "endblock": true, "endautoescape": true,
	"endraw": true, "endcomment": true, "endifequal": true, "endifnotequal": true, "empty": true,
	"endifchanged": true, "endspaceless": true, "endverbatim": true, "endtrans": true,
}

func (p *parser) parseStatement() (stmt, error) {
	t := p.cur()
	if t.kind != tName {
		return nil, p.unexpected(t, "a statement name after '{%'")
	}
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, p.fail(t, "statements are nested more than %d deep", maxDepth)
	}
	switch t.val {
	case "for":
		return p.parseFor()
	case "if":
		return p.parseIf()
	case "set":
		return p.parseSet()
	case "with":
		return p.parseWith()
	case "macro":
		return p.parseMacro()
	case "call":
		return p.parseCallBlock()
	case "filter":
		return p.parseFilterBlock()
	case "include":
		return p.parseInclude()
	case "import":
		return p.parseImport()
	case "from":
		return p.parseFrom()
	case "extends":
		return p.parseExtends()
	case "block":
		return p.parseBlock()
	case "autoescape":
		return p.parseAutoescape()
	case "print":
		p.p++
		var items []expr
		for p.cur().kind != tBlockEnd {
			if len(items) > 0 {
				if _, err := p.expectOp(","); err != nil {
					return nil, err
				}
			}
			x, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			items = append(items, x)
		}
		p.p++
		var x expr = &constExpr{pos: t.pos, v: ""}
		if len(items) > 0 {
			x = &concatExpr{pos: items[0].position(), items: items}
		}
		return &printStmt{pos: t.pos, x: x}, nil
	case "break", "continue":
		p.p++
		if p.loops == 0 {
			return nil, p.fail(t, "{%% %s %%} outside a for loop", t.val)
		}
		return &loopControlStmt{pos: t.pos, brk: t.val == "break"}, p.expectBlockEnd()
	case "do":
		p.p++
		x, err := p.parseTuple(true, false, nil)
		if err != nil {
			return nil, err
		}
		return &doStmt{pos: t.pos, x: x}, p.expectBlockEnd()
	// pongo2's tags.
	case "cycle":
		return p.parseCycle()
	case "firstof":
		p.p++
		values, err := p.parseSpaced()
		if err != nil {
			return nil, err
		}
		return &firstofStmt{pos: t.pos, values: values}, p.expectBlockEnd()
	case "ifequal", "ifnotequal":
		return p.parseIfEqual()
	case "ifchanged":
		return p.parseIfChanged()
	case "widthratio":
		return p.parseWidthRatio()
	case "spaceless":
		p.p++
		body, _, err := p.parseBody("spaceless", t.pos, "endspaceless")
		if err != nil {
			return nil, err
		}
		return &spacelessStmt{pos: t.pos, body: body}, p.endTag("")
	case "templatetag":
		p.p++
		arg, err := p.expectName()
		if err != nil {
			return nil, err
		}
		text, ok := map[string]string{"openblock": "{%", "closeblock": "%}", "openvariable": "{{", "closevariable": "}}",
			"openbrace": "{", "closebrace": "}", "opencomment": "{#", "closecomment": "#}"}[arg.val]
		if !ok {
			return nil, p.fail(arg, "{%% templatetag %%}: unknown argument %q", arg.val)
		}
		return &textStmt{pos: arg.pos, text: text}, p.expectBlockEnd()
	case "comment":
		p.p++
		if _, _, err := p.parseBody("comment", t.pos, "endcomment"); err != nil {
			return nil, err
		}
		return nil, p.endTag("")
	case "ssi":
		return nil, p.fail(t, "{%% ssi %%} reads files from the local disk and is not allowed: put the text in another key of the ConfigMap and {%% include \"key\" %%} it")
	case "now":
		return nil, p.fail(t, "{%% now %%} is not allowed: every render would differ and HAProxy would reload for nothing")
	case "lorem":
		return nil, p.fail(t, "{%% lorem %%} is not allowed: it is random, every render would differ")
	}
	if endTags[t.val] {
		if len(p.open) == 0 {
			return nil, p.fail(t, "unexpected {%% %s %%}: no statement is open", t.val)
		}
		o := p.open[len(p.open)-1]
		line, col := p.tmpl.lineCol(o.pos)
		return nil, p.fail(t, "{%% %s %%} does not match {%% %s %%} opened at line %d column %d: expected %s", t.val, o.name, line, col, tagList(o.ends))
	}
	if t.val == "trans" || t.val == "pluralize" {
		return nil, p.fail(t, "unknown tag {%% %s %%}: i18n ({%% trans %%}) is not enabled; write the text directly", t.val)
	}
	return nil, p.fail(t, "unknown tag {%% %s %%}", t.val)
}

func (p *parser) parseFor() (stmt, error) {
	start := p.next()
	tg, err := p.parseAssignTarget(true, false, []string{"in"})
	if err != nil {
		return nil, err
	}
	if err := p.expectKeyword("in"); err != nil {
		return nil, err
	}
	iterPos := p.cur().pos
	iter, err := p.parseTuple(false, false, []string{"recursive", "reversed", "sorted"})
	if err != nil {
		return nil, err
	}
	s := &forStmt{pos: start.pos, iterPos: iterPos, target: tg, iter: iter}
	for {
		if p.skipName("reversed") {
			s.reversed = true
		} else if p.skipName("sorted") {
			s.sorted = true
		} else {
			break
		}
	}
	if p.skipName("if") {
		if s.filter, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	s.recursive = p.skipName("recursive")
	p.loops++
	p.fors = append(p.fors, s)
	body, end, err := p.parseBody("for", start.pos, "endfor", "else", "empty")
	p.loops--
	if err != nil {
		return nil, err
	}
	s.body = body
	p.fors = p.fors[:len(p.fors)-1]
	if end != "endfor" {
		// The else body runs outside the loop: break/continue there are an outer loop's.
		els, _, err := p.parseBody("for", start.pos, "endfor")
		if err != nil {
			return nil, err
		}
		s.els = els
	}
	return s, p.endTag("")
}

func (p *parser) parseIf() (stmt, error) {
	start := p.next()
	s := &ifStmt{pos: start.pos}
	for {
		cond, err := p.parseTuple(false, false, nil)
		if err != nil {
			return nil, err
		}
		body, end, err := p.parseBody("if", start.pos, "elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		s.conds = append(s.conds, cond)
		s.bodies = append(s.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			els, _, err := p.parseBody("if", start.pos, "endif")
			if err != nil {
				return nil, err
			}
			s.els = els
		}
		return s, p.endTag("")
	}
}

func (p *parser) parseSet() (stmt, error) {
	start := p.next()
	tg, err := p.parseAssignTarget(true, true, nil)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		x, err := p.parseTuple(true, false, nil)
		if err != nil {
			return nil, err
		}
		return &setStmt{pos: start.pos, target: tg, x: x}, p.expectBlockEnd()
	}
	var filters *filterExpr
	if p.isOp("|") {
		f, err := p.parseFilters(nil, false)
		if err != nil {
			return nil, err
		}
		filters = f.(*filterExpr)
	}
	body, _, err := p.parseBody("set", start.pos, "endset")
	if err != nil {
		return nil, err
	}
	return &setBlockStmt{pos: start.pos, target: tg, filters: filters, body: body}, p.endTag("")
}

func (p *parser) parseWith() (stmt, error) {
	start := p.next()
	s := &withStmt{pos: start.pos}
	for p.cur().kind != tBlockEnd {
		if len(s.targets) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		tg, err := p.parseAssignTarget(true, false, nil)
		if err != nil {
			return nil, err
		}
		var x expr
		if p.skipOp("=") {
			if x, err = p.parseExpression(true); err != nil {
				return nil, err
			}
		} else if p.skipName("as") {
			// pongo2: {% with value as name %}
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			x, err = targetAsExpr(tg)
			if err != nil {
				return nil, p.fail(p.cur(), "%v", err)
			}
			tg = target{pos: name.pos, name: name.val}
		} else {
			return nil, p.unexpected(p.cur(), "'='")
		}
		s.targets = append(s.targets, tg)
		s.values = append(s.values, x)
	}
	body, _, err := p.parseBody("with", start.pos, "endwith")
	if err != nil {
		return nil, err
	}
	s.body = body
	return s, p.endTag("")
}

// targetAsExpr turns what was parsed as a target back into an expression (pongo2's
// {% with x as y %}, where x is an expression).
func targetAsExpr(t target) (expr, error) {
	if t.name != "" && t.attr == "" && !t.tuple {
		return &nameExpr{pos: t.pos, name: t.name}, nil
	}
	return nil, fmt.Errorf("{%% with value as name %%} takes a name as the value")
}

func (p *parser) parseSignature(m *macroDef) error {
	if _, err := p.expectOp("("); err != nil {
		return err
	}
	for !p.isOp(")") {
		if len(m.params) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return err
			}
		}
		name, err := p.expectName()
		if err != nil {
			return err
		}
		if p.skipOp("=") {
			d, err := p.parseExpression(true)
			if err != nil {
				return err
			}
			m.defaults = append(m.defaults, d)
		} else if len(m.defaults) > 0 {
			return p.fail(name, "non-default argument follows default argument")
		}
		m.params = append(m.params, name.val)
	}
	p.p++
	return nil
}

// parseMacroBody parses the body of a macro or call block: break/continue do not cross it.
func (p *parser) parseMacroBody(m *macroDef, tag string, pos int, end string) error {
	saved, savedFors := p.loops, p.fors
	p.loops = 0
	if tag == "macro" {
		p.fors = nil // a macro does not see the loops around its definition; a caller does
	}
	p.macros = append(p.macros, m)
	body, _, err := p.parseBody(tag, pos, end)
	p.macros = p.macros[:len(p.macros)-1]
	p.loops, p.fors = saved, savedFors
	m.body = body
	return err
}

func (p *parser) parseMacro() (stmt, error) {
	start := p.next()
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	m := &macroDef{pos: start.pos, name: name.val}
	if err := p.parseSignature(m); err != nil {
		return nil, err
	}
	if err := p.parseMacroBody(m, "macro", start.pos, "endmacro"); err != nil {
		return nil, err
	}
	return &macroStmt{pos: start.pos, macro: m}, p.endTag(m.name)
}

func (p *parser) parseCallBlock() (stmt, error) {
	start := p.next()
	m := &macroDef{pos: start.pos, name: "caller"}
	if p.isOp("(") {
		if err := p.parseSignature(m); err != nil {
			return nil, err
		}
	}
	x, err := p.parseExpression(true)
	if err != nil {
		return nil, err
	}
	call, ok := x.(*callExpr)
	if !ok {
		return nil, errAt(x.position(), "{%% call %%} expects a macro call such as m(args)")
	}
	if err := p.parseMacroBody(m, "call", start.pos, "endcall"); err != nil {
		return nil, err
	}
	return &callBlockStmt{pos: start.pos, call: call, caller: m}, p.endTag("")
}

func (p *parser) parseFilterBlock() (stmt, error) {
	start := p.next()
	f, err := p.parseFilters(nil, true)
	if err != nil {
		return nil, err
	}
	body, _, err := p.parseBody("filter", start.pos, "endfilter")
	if err != nil {
		return nil, err
	}
	return &filterBlockStmt{pos: start.pos, filters: f.(*filterExpr), body: body}, p.endTag("")
}

// templateKey parses the name of an included, imported or extended template: it must be a
// quoted key, so that every template a render can reach is known when compiling.
func (p *parser) templateKey(stmtName string) (string, int, error) {
	x, err := p.parseExpression(true)
	if err != nil {
		return "", 0, err
	}
	if c, ok := x.(*constExpr); ok {
		if s, ok := c.v.(string); ok {
			p.refs = append(p.refs, s)
			return s, c.pos, nil
		}
	}
	return "", 0, errAt(x.position(), "{%% %s %%} needs the template key as a quoted string, e.g. {%% %s \"key\" %%}: a key computed at render time is not supported", stmtName, stmtName)
}

// contextModifier parses an optional `with context` / `without context`.
func (p *parser) contextModifier(def bool) bool {
	if (p.isName("with") || p.isName("without")) && p.peek().kind == tName && p.peek().val == "context" {
		with := p.next().val == "with"
		p.p++
		return with
	}
	return def
}

func (p *parser) parseInclude() (stmt, error) {
	start := p.next()
	p.markLoop() // the included template may read the loop
	if len(p.fors) > 0 {
		p.fors[len(p.fors)-1].keepsLoop = true
	}
	key, keyPos, err := p.templateKey("include")
	if err != nil {
		return nil, err
	}
	s := &includeStmt{pos: start.pos, key: key, keyPos: keyPos, withContext: true}
	if p.isName("ignore") && p.peek().kind == tName && p.peek().val == "missing" {
		p.p += 2
		s.ignoreMissing = true
	} else if p.skipName("if_exists") { // pongo2
		s.ignoreMissing = true
	}
	s.withContext = p.contextModifier(true)
	if p.isName("with") {
		// pongo2: {% include "x" with a=1 b=2 [only] %}
		p.p++
		for p.cur().kind == tName && p.peek().kind == tOp && p.peek().val == "=" {
			name, _ := p.expectName()
			p.p++
			x, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			s.vars = append(s.vars, kwArg{name: name.val, x: x})
			p.skipOp(",")
		}
		if len(s.vars) == 0 {
			return nil, p.unexpected(p.cur(), "name=value after with")
		}
		if p.skipName("only") {
			s.withContext = false
		}
	}
	return s, p.expectBlockEnd()
}

func (p *parser) parseImport() (stmt, error) {
	start := p.next()
	key, keyPos, err := p.templateKey("import")
	if err != nil {
		return nil, err
	}
	if err := p.expectKeyword("as"); err != nil {
		return nil, err
	}
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	s := &importStmt{pos: start.pos, key: key, keyPos: keyPos, as: name.val}
	s.withContext = p.contextModifier(false)
	return s, p.expectBlockEnd()
}

func (p *parser) parseFrom() (stmt, error) {
	start := p.next()
	key, keyPos, err := p.templateKey("from ... import")
	if err != nil {
		return nil, err
	}
	if err := p.expectKeyword("import"); err != nil {
		return nil, err
	}
	s := &fromImportStmt{pos: start.pos, key: key, keyPos: keyPos}
	for {
		if len(s.names) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if (p.isName("with") || p.isName("without")) && p.peek().kind == tName && p.peek().val == "context" {
			s.withContext = p.contextModifier(false)
			break
		}
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(name.val, "_") {
			return nil, p.fail(name, "names starting with an underline can not be imported")
		}
		in := importName{name: name.val, as: name.val}
		if p.skipName("as") {
			alias, err := p.expectName()
			if err != nil {
				return nil, err
			}
			in.as = alias.val
		}
		s.names = append(s.names, in)
		if (p.isName("with") || p.isName("without")) && p.peek().kind == tName && p.peek().val == "context" {
			s.withContext = p.contextModifier(false)
			break
		}
		if !p.isOp(",") {
			break
		}
	}
	return s, p.expectBlockEnd()
}

func (p *parser) parseExtends() (stmt, error) {
	start := p.next()
	key, keyPos, err := p.templateKey("extends")
	if err != nil {
		return nil, err
	}
	p.tmpl.extends = true
	return &extendsStmt{pos: start.pos, key: key, keyPos: keyPos}, p.expectBlockEnd()
}

func (p *parser) parseBlock() (stmt, error) {
	start := p.next()
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	s := &blockStmt{pos: start.pos, name: name.val, tmpl: p.tmpl}
	s.scoped = p.skipName("scoped")
	s.required = p.skipName("required")
	if p.isOp("-") {
		return nil, p.fail(p.cur(), "block names have to be valid Python identifiers and may not contain hyphens, use an underscore instead")
	}
	if _, dup := p.tmpl.blocks[name.val]; dup {
		return nil, p.fail(name, "block %q defined twice", name.val)
	}
	// Blocks are rendered on their own (through the block table): loop controls and the
	// enclosing loops do not reach into them.
	saved, savedFors := p.loops, p.fors
	p.loops, p.fors = 0, nil
	body, _, err := p.parseBody("block", start.pos, "endblock")
	p.loops, p.fors = saved, savedFors
	if err != nil {
		return nil, err
	}
	if s.required {
		for _, st := range body {
			if t, ok := st.(*textStmt); !ok || strings.TrimFunc(t.text, isPySpace) != "" {
				return nil, p.fail(name, "required blocks can only contain comments or whitespace")
			}
		}
	}
	s.body = body
	p.tmpl.blocks[name.val] = s
	return s, p.endTag(name.val)
}

func (p *parser) parseAutoescape() (stmt, error) {
	start := p.next()
	x, err := p.parseExpression(true)
	if err != nil {
		return nil, err
	}
	body, _, err := p.parseBody("autoescape", start.pos, "endautoescape")
	if err != nil {
		return nil, err
	}
	return &autoescapeStmt{pos: start.pos, on: x, body: body}, p.endTag("")
}

// parseSpaced parses pongo2's space-separated arguments (firstof, cycle).
func (p *parser) parseSpaced() ([]expr, error) {
	p.spaced = true
	defer func() { p.spaced = false }()
	var values []expr
	for p.cur().kind != tBlockEnd && !p.isName("as") {
		x, err := p.parseExpression(false)
		if err != nil {
			return nil, err
		}
		values = append(values, x)
		p.skipOp(",")
	}
	if len(values) == 0 {
		return nil, p.unexpected(p.cur(), "at least one value")
	}
	return values, nil
}

func (p *parser) parseCycle() (stmt, error) {
	start := p.next()
	if p.loops == 0 {
		return nil, p.fail(start, "{%% cycle %%} outside a for loop: use loop.cycle(...) or a cycler()")
	}
	values, err := p.parseSpaced()
	if err != nil {
		return nil, err
	}
	s := &cycleStmt{pos: start.pos, values: values}
	if p.skipName("as") {
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		s.as = name.val
		s.silent = p.skipName("silent")
	}
	p.markLoop()
	return s, p.expectBlockEnd()
}

func (p *parser) parseIfEqual() (stmt, error) {
	start := p.next()
	a, err := p.parseExpression(false)
	if err != nil {
		return nil, err
	}
	b, err := p.parseExpression(false)
	if err != nil {
		return nil, err
	}
	op := "=="
	end := "endifequal"
	if start.val == "ifnotequal" {
		op, end = "!=", "endifnotequal"
	}
	cond := &compareExpr{pos: start.pos, first: a, ops: []cmpOp{{pos: start.pos, op: op, x: b}}}
	s := &ifStmt{pos: start.pos, conds: []expr{cond}}
	body, got, err := p.parseBody(start.val, start.pos, "else", end)
	if err != nil {
		return nil, err
	}
	s.bodies = [][]stmt{body}
	if got == "else" {
		if s.els, _, err = p.parseBody(start.val, start.pos, end); err != nil {
			return nil, err
		}
	}
	return s, p.endTag("")
}

func (p *parser) parseIfChanged() (stmt, error) {
	start := p.next()
	if p.loops == 0 {
		return nil, p.fail(start, "{%% ifchanged %%} outside a for loop")
	}
	s := &ifchangedStmt{pos: start.pos}
	for p.cur().kind != tBlockEnd {
		x, err := p.parseExpression(false)
		if err != nil {
			return nil, err
		}
		s.values = append(s.values, x)
	}
	body, got, err := p.parseBody("ifchanged", start.pos, "else", "endifchanged")
	if err != nil {
		return nil, err
	}
	s.body = body
	if got == "else" {
		if s.els, _, err = p.parseBody("ifchanged", start.pos, "endifchanged"); err != nil {
			return nil, err
		}
	}
	p.markLoop()
	return s, p.endTag("")
}

func (p *parser) parseWidthRatio() (stmt, error) {
	start := p.next()
	var xs [3]expr
	for i := range xs {
		x, err := p.parseExpression(false)
		if err != nil {
			if p.cur().kind == tBlockEnd {
				return nil, p.fail(p.cur(), "{%% widthratio %%} takes 3 arguments (value, maximum, width), %d given", i)
			}
			return nil, err
		}
		xs[i] = x
	}
	return &widthratioStmt{pos: start.pos, value: xs[0], max: xs[1], size: xs[2]}, p.expectBlockEnd()
}

// markLoop notes that the innermost loop's body needs its loop object.
func (p *parser) markLoop() {
	if len(p.fors) > 0 {
		p.fors[len(p.fors)-1].usesLoop = true
	}
}

// parseAssignTarget parses where set/for/with store: a name, names separated by commas
// (nested in parentheses too), or ns.attr (withNamespace).
func (p *parser) parseAssignTarget(withTuple, withNamespace bool, extraEnd []string) (target, error) {
	t := p.cur()
	if withNamespace && t.kind == tName && p.peek().kind == tOp && p.peek().val == "." {
		name, _ := p.expectName()
		p.p++
		attr, err := p.expectName()
		if err != nil {
			return target{}, err
		}
		return target{pos: t.pos, name: name.val, attr: attr.val}, nil
	}
	if !withTuple {
		return p.parseTargetPrimary()
	}
	var items []target
	isTuple := false
	for {
		if len(items) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return target{}, err
			}
		}
		if p.isTupleEnd(extraEnd) || p.isOp("=") || p.isOp("|") {
			break
		}
		it, err := p.parseTargetPrimary()
		if err != nil {
			return target{}, err
		}
		items = append(items, it)
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(items) == 0 {
			return target{}, p.unexpected(p.cur(), "a name to assign to")
		}
		return items[0], nil
	}
	return target{pos: t.pos, items: items, tuple: true}, nil
}

func (p *parser) parseTargetPrimary() (target, error) {
	t := p.cur()
	if t.kind == tName {
		switch t.val {
		case "true", "false", "True", "False", "none", "None":
			return target{}, p.fail(t, "can't assign to %s", t.val)
		}
		p.p++
		return target{pos: t.pos, name: p.intern(t.val)}, nil
	}
	if p.isOp("(") {
		p.p++
		var items []target
		for !p.isOp(")") {
			if len(items) > 0 {
				if _, err := p.expectOp(","); err != nil {
					return target{}, err
				}
				if p.isOp(")") {
					break
				}
			}
			it, err := p.parseTargetPrimary()
			if err != nil {
				return target{}, err
			}
			items = append(items, it)
		}
		p.p++
		return target{pos: t.pos, items: items, tuple: true}, nil
	}
	return target{}, p.unexpected(t, "a name to assign to")
}

// targetNames lists the names a target binds.
func targetNames(t target, out []string) []string {
	if t.tuple {
		for _, it := range t.items {
			out = targetNames(it, out)
		}
		return out
	}
	if t.attr == "" {
		out = append(out, t.name)
	}
	return out
}
