package parse

import (
	"fmt"
	"strings"
)

// Jinja2's statements, one parse function each (parseStatement dispatches on the tag's name),
// and the targets that set, for and with assign to.

func (p *parser) parseFor() (Stmt, error) {
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
	s := &ForStmt{Pos: start.pos, IterPos: iterPos, Target: tg, Iter: iter}
	defer p.setSoft(false)() // the loop's filter, body and else have a scope of their own
	for {
		if p.skipName("reversed") {
			s.Reversed = true
		} else if p.skipName("sorted") {
			s.Sorted = true
		} else {
			break
		}
	}
	if p.skipName("if") {
		if s.Filter, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	s.Recursive = p.skipName("recursive")
	p.loops++
	p.fors = append(p.fors, s)
	body, end, err := p.parseBody("for", start.pos, "endfor", "else", "empty")
	p.loops--
	if err != nil {
		return nil, err
	}
	s.Body = body
	p.fors = p.fors[:len(p.fors)-1]
	if end != "endfor" {
		// The else body runs outside the loop: break/continue there are an outer loop's.
		els, _, err := p.parseBody("for", start.pos, "endfor")
		if err != nil {
			return nil, err
		}
		s.Else = els
	}
	return s, p.endTag("")
}

func (p *parser) parseIf() (Stmt, error) {
	start := p.next()
	defer p.setSoft(true)()
	s := &IfStmt{Pos: start.pos}
	for {
		cond, err := p.parseTuple(false, false, nil)
		if err != nil {
			return nil, err
		}
		body, end, err := p.parseBody("if", start.pos, "elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		s.Conds = append(s.Conds, cond)
		s.Bodies = append(s.Bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			els, _, err := p.parseBody("if", start.pos, "endif")
			if err != nil {
				return nil, err
			}
			s.Else = els
		}
		return s, p.endTag("")
	}
}

func (p *parser) parseSet() (Stmt, error) {
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
		return &SetStmt{Pos: start.pos, Target: tg, X: x}, p.expectBlockEnd()
	}
	defer p.setSoft(false)() // a block set's filters and body have a scope of their own
	var filters *FilterExpr
	if p.isOp("|") {
		f, err := p.parseFilters(nil, false)
		if err != nil {
			return nil, err
		}
		filters = f.(*FilterExpr)
	}
	body, _, err := p.parseBody("set", start.pos, "endset")
	if err != nil {
		return nil, err
	}
	return &SetBlockStmt{Pos: start.pos, Target: tg, Filters: filters, Body: body}, p.endTag("")
}

func (p *parser) parseWith() (Stmt, error) {
	start := p.next()
	s := &WithStmt{Pos: start.pos}
	for p.cur().kind != tBlockEnd {
		if len(s.Targets) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		tg, err := p.parseAssignTarget(true, false, nil)
		if err != nil {
			return nil, err
		}
		var x Expr
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
			tg = Target{Pos: name.pos, Name: name.val}
		} else {
			return nil, p.unexpected(p.cur(), "'='")
		}
		s.Targets = append(s.Targets, tg)
		s.Values = append(s.Values, x)
	}
	defer p.setSoft(false)()
	body, _, err := p.parseBody("with", start.pos, "endwith")
	if err != nil {
		return nil, err
	}
	s.Body = body
	return s, p.endTag("")
}

// targetAsExpr turns what was parsed as a target back into an expression (pongo2's
// {% with x as y %}, where x is an expression).
func targetAsExpr(t Target) (Expr, error) {
	if t.Name != "" && t.Attr == "" && !t.Tuple {
		return &NameExpr{Pos: t.Pos, Name: t.Name}, nil
	}
	return nil, fmt.Errorf("{%% with value as name %%} takes a name as the value")
}

func (p *parser) parseSignature(m *MacroDef) error {
	defer p.setSoft(false)() // defaults are the macro's
	if _, err := p.expectOp("("); err != nil {
		return err
	}
	for !p.isOp(")") {
		if len(m.Params) > 0 {
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
			m.Defaults = append(m.Defaults, d)
		} else if len(m.Defaults) > 0 {
			return p.fail(name, "non-default argument follows default argument")
		}
		m.Params = append(m.Params, name.val)
	}
	p.p++
	return nil
}

// parseMacroBody parses the body of a macro or call block: break/continue do not cross it.
func (p *parser) parseMacroBody(m *MacroDef, tag string, pos int, end string) error {
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
	m.Body = body
	return err
}

func (p *parser) parseMacro() (Stmt, error) {
	start := p.next()
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	m := &MacroDef{Pos: start.pos, Name: name.val}
	if err := p.parseSignature(m); err != nil {
		return nil, err
	}
	if err := p.parseMacroBody(m, "macro", start.pos, "endmacro"); err != nil {
		return nil, err
	}
	return &MacroStmt{Pos: start.pos, Macro: m}, p.endTag(m.Name)
}

func (p *parser) parseCallBlock() (Stmt, error) {
	start := p.next()
	m := &MacroDef{Pos: start.pos, Name: "caller"}
	if p.isOp("(") {
		if err := p.parseSignature(m); err != nil {
			return nil, err
		}
	}
	x, err := p.parseExpression(true)
	if err != nil {
		return nil, err
	}
	call, ok := x.(*CallExpr)
	if !ok {
		return nil, errAt(x.Position(), "{%% call %%} expects a macro call such as m(args)")
	}
	if err := p.parseMacroBody(m, "call", start.pos, "endcall"); err != nil {
		return nil, err
	}
	return &CallBlockStmt{Pos: start.pos, Call: call, Caller: m}, p.endTag("")
}

func (p *parser) parseFilterBlock() (Stmt, error) {
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
	return &FilterBlockStmt{Pos: start.pos, Filters: f.(*FilterExpr), Body: body}, p.endTag("")
}

// templateKey parses the name of an included, imported or extended template: it must be a
// quoted key, so that every template a render can reach is known when compiling.
func (p *parser) templateKey(stmtName string) (string, int, error) {
	x, err := p.parseExpression(true)
	if err != nil {
		return "", 0, err
	}
	if c, ok := x.(*ConstExpr); ok {
		if s, ok := c.Value.(string); ok {
			p.refs = append(p.refs, s)
			return s, c.Pos, nil
		}
	}
	return "", 0, errAt(x.Position(), "{%% %s %%} needs the template key as a quoted string, e.g. {%% %s \"key\" %%}: a key computed at render time is not supported", stmtName, stmtName)
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

func (p *parser) parseInclude() (Stmt, error) {
	start := p.next()
	p.markLoopKept() // the included template may read the loop
	key, keyPos, err := p.templateKey("include")
	if err != nil {
		return nil, err
	}
	s := &IncludeStmt{Pos: start.pos, Key: key, KeyPos: keyPos, WithContext: true}
	if p.isName("ignore") && p.peek().kind == tName && p.peek().val == "missing" {
		p.p += 2
		s.IgnoreMissing = true
	} else if p.skipName("if_exists") { // pongo2
		s.IgnoreMissing = true
	}
	s.WithContext = p.contextModifier(true)
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
			s.Vars = append(s.Vars, KwArg{Name: name.val, X: x})
			p.skipOp(",")
		}
		if len(s.Vars) == 0 {
			return nil, p.unexpected(p.cur(), "name=value after with")
		}
		if p.skipName("only") {
			s.WithContext = false
		}
	}
	return s, p.expectBlockEnd()
}

func (p *parser) parseImport() (Stmt, error) {
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
	s := &ImportStmt{Pos: start.pos, Key: key, KeyPos: keyPos, As: name.val}
	s.WithContext = p.contextModifier(false)
	return s, p.expectBlockEnd()
}

func (p *parser) parseFrom() (Stmt, error) {
	start := p.next()
	p.markLoopKept() // imported with context, the template may read the loop
	key, keyPos, err := p.templateKey("from ... import")
	if err != nil {
		return nil, err
	}
	if err := p.expectKeyword("import"); err != nil {
		return nil, err
	}
	s := &FromImportStmt{Pos: start.pos, Key: key, KeyPos: keyPos}
	for {
		if len(s.Names) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if (p.isName("with") || p.isName("without")) && p.peek().kind == tName && p.peek().val == "context" {
			s.WithContext = p.contextModifier(false)
			break
		}
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(name.val, "_") {
			return nil, p.fail(name, "names starting with an underline can not be imported")
		}
		in := ImportName{Name: name.val, As: name.val}
		if p.skipName("as") {
			alias, err := p.expectName()
			if err != nil {
				return nil, err
			}
			in.As = alias.val
		}
		s.Names = append(s.Names, in)
		if (p.isName("with") || p.isName("without")) && p.peek().kind == tName && p.peek().val == "context" {
			s.WithContext = p.contextModifier(false)
			break
		}
		if !p.isOp(",") {
			break
		}
	}
	return s, p.expectBlockEnd()
}

func (p *parser) parseExtends() (Stmt, error) {
	start := p.next()
	key, keyPos, err := p.templateKey("extends")
	if err != nil {
		return nil, err
	}
	p.extends = true
	return &ExtendsStmt{Pos: start.pos, Key: key, KeyPos: keyPos}, p.expectBlockEnd()
}

func (p *parser) parseBlock() (Stmt, error) {
	start := p.next()
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	s := &BlockStmt{Pos: start.pos, Name: name.val}
	s.Scoped = p.skipName("scoped")
	s.Required = p.skipName("required")
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
	if s.Scoped && len(p.fors) > 0 {
		f := p.fors[len(p.fors)-1]
		f.UsesLoop, f.KeepsLoop = true, true
	} else {
		p.fors = nil
	}
	defer p.setSoft(false)()
	body, _, err := p.parseBody("block", start.pos, "endblock")
	p.loops, p.fors = saved, savedFors
	if err != nil {
		return nil, err
	}
	if s.Required {
		for _, st := range body {
			if t, ok := st.(*TextStmt); !ok || strings.TrimFunc(t.Text, isPySpace) != "" {
				return nil, p.fail(name, "required blocks can only contain comments or whitespace")
			}
		}
	}
	s.Body = body
	p.blocks[name.val] = s
	return s, p.endTag(name.val)
}

func (p *parser) parseAutoescape() (Stmt, error) {
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
	return &AutoescapeStmt{Pos: start.pos, On: x, Body: body}, p.endTag("")
}

// markLoop notes that the innermost loop's body needs its loop object.
func (p *parser) markLoop() {
	if len(p.fors) > 0 {
		p.fors[len(p.fors)-1].UsesLoop = true
	}
}

// markLoopKept notes that the innermost loop's body needs its loop object, and that it may
// outlive an iteration (an included or imported template may keep it).
func (p *parser) markLoopKept() {
	p.markLoop()
	if len(p.fors) > 0 {
		p.fors[len(p.fors)-1].KeepsLoop = true
	}
}

// parseAssignTarget parses where set/for/with store: a name, names separated by commas
// (nested in parentheses too), or ns.attr (withNamespace).
func (p *parser) parseAssignTarget(withTuple, withNamespace bool, extraEnd []string) (Target, error) {
	t := p.cur()
	if withNamespace && t.kind == tName && p.peek().kind == tOp && p.peek().val == "." {
		name, _ := p.expectName()
		p.p++
		attr, err := p.expectName()
		if err != nil {
			return Target{}, err
		}
		return Target{Pos: t.pos, Name: name.val, Attr: attr.val}, nil
	}
	if !withTuple {
		return p.parseTargetPrimary()
	}
	var items []Target
	isTuple := false
	for {
		if len(items) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return Target{}, err
			}
		}
		if p.isTupleEnd(extraEnd) || p.isOp("=") || p.isOp("|") {
			break
		}
		it, err := p.parseTargetPrimary()
		if err != nil {
			return Target{}, err
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
			return Target{}, p.unexpected(p.cur(), "a name to assign to")
		}
		return items[0], nil
	}
	return Target{Pos: t.pos, Items: items, Tuple: true}, nil
}

func (p *parser) parseTargetPrimary() (Target, error) {
	t := p.cur()
	if t.kind == tName {
		switch t.val {
		case "true", "false", "True", "False", "none", "None":
			return Target{}, p.fail(t, "can't assign to %s", t.val)
		}
		p.p++
		return Target{Pos: t.pos, Name: p.intern(t.val)}, nil
	}
	if p.isOp("(") {
		p.p++
		var items []Target
		for !p.isOp(")") {
			if len(items) > 0 {
				if _, err := p.expectOp(","); err != nil {
					return Target{}, err
				}
				if p.isOp(")") {
					break
				}
			}
			it, err := p.parseTargetPrimary()
			if err != nil {
				return Target{}, err
			}
			items = append(items, it)
		}
		p.p++
		return Target{Pos: t.pos, Items: items, Tuple: true}, nil
	}
	return Target{}, p.unexpected(t, "a name to assign to")
}

// parsePrint parses {% print a, b %}: the values printed one after the other.
func (p *parser) parsePrint() (Stmt, error) {
	t := p.next()
	var items []Expr
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
	var x Expr = &ConstExpr{Pos: t.pos, Value: ""}
	if len(items) > 0 {
		x = &ConcatExpr{Pos: items[0].Position(), Items: items}
	}
	return &PrintStmt{Pos: t.pos, X: x}, nil
}

// parseLoopControl parses {% break %} and {% continue %} (jinja2.ext.loopcontrols).
func (p *parser) parseLoopControl() (Stmt, error) {
	t := p.next()
	if p.loops == 0 {
		return nil, p.fail(t, "{%% %s %%} outside a for loop", t.val)
	}
	return &LoopControlStmt{Pos: t.pos, Break: t.val == "break"}, p.expectBlockEnd()
}

// parseDo parses {% do x %} (jinja2.ext.do).
func (p *parser) parseDo() (Stmt, error) {
	t := p.next()
	x, err := p.parseTuple(true, false, nil)
	if err != nil {
		return nil, err
	}
	return &DoStmt{Pos: t.pos, X: x}, p.expectBlockEnd()
}
