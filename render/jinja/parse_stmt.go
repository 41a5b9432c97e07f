package jinja

import (
	"fmt"
	"strings"
)

// Jinja2's statements, one parse function each (parseStatement dispatches on the tag's name),
// and the targets that set, for and with assign to.

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
	defer p.setSoft(false)() // the loop's filter, body and else have a scope of their own
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
	defer p.setSoft(true)()
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
	defer p.setSoft(false)() // a block set's filters and body have a scope of their own
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
	defer p.setSoft(false)()
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
	defer p.setSoft(false)() // defaults are the macro's
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
	defer p.setSoft(false)()
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
	defer p.setSoft(false)()
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
	p.markLoopKept() // the included template may read the loop
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
	p.markLoopKept() // imported with context, the template may read the loop
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
	p.markLoopKept() // imported with context, the template may read the loop
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
	p.extends = true
	return &extendsStmt{pos: start.pos, key: key, keyPos: keyPos}, p.expectBlockEnd()
}

func (p *parser) parseBlock() (stmt, error) {
	start := p.next()
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	s := &blockStmt{pos: start.pos, name: name.val}
	s.scoped = p.skipName("scoped")
	s.required = p.skipName("required")
	if p.isOp("-") {
		return nil, p.fail(p.cur(), "block names have to be valid Python identifiers and may not contain hyphens, use an underscore instead")
	}
	if _, dup := p.blocks[name.val]; dup {
		return nil, p.fail(name, "block %q defined twice", name.val)
	}
	// Blocks are rendered on their own (through the block table): loop controls do not reach
	// into them, nor the enclosing loops, unless the block is scoped: then it sees the loop
	// variable, and so may any block that overrides it in a template extending this one.
	saved, savedFors := p.loops, p.fors
	p.loops = 0
	if s.scoped && len(p.fors) > 0 {
		f := p.fors[len(p.fors)-1]
		f.usesLoop, f.keepsLoop = true, true
	} else {
		p.fors = nil
	}
	defer p.setSoft(false)()
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
	p.blocks[name.val] = s
	return s, p.endTag(name.val)
}

func (p *parser) parseAutoescape() (stmt, error) {
	start := p.next()
	defer p.setSoft(false)()
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

// markLoop notes that the innermost loop's body needs its loop object.
func (p *parser) markLoop() {
	if len(p.fors) > 0 {
		p.fors[len(p.fors)-1].usesLoop = true
	}
}

// markLoopKept notes that the innermost loop's body needs its loop object, and that it may
// outlive an iteration (an included or imported template may keep it).
func (p *parser) markLoopKept() {
	p.markLoop()
	if len(p.fors) > 0 {
		p.fors[len(p.fors)-1].keepsLoop = true
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

// parsePrint parses {% print a, b %}: the values printed one after the other.
func (p *parser) parsePrint() (stmt, error) {
	t := p.next()
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
}

// parseLoopControl parses {% break %} and {% continue %} (jinja2.ext.loopcontrols).
func (p *parser) parseLoopControl() (stmt, error) {
	t := p.next()
	if p.loops == 0 {
		return nil, p.fail(t, "{%% %s %%} outside a for loop", t.val)
	}
	return &loopControlStmt{pos: t.pos, brk: t.val == "break"}, p.expectBlockEnd()
}

// parseDo parses {% do x %} (jinja2.ext.do).
func (p *parser) parseDo() (stmt, error) {
	t := p.next()
	x, err := p.parseTuple(true, false, nil)
	if err != nil {
		return nil, err
	}
	return &doStmt{pos: t.pos, x: x}, p.expectBlockEnd()
}
