package parse

// pongo2's own tags: cycle, firstof, ifequal/ifnotequal, ifchanged, widthratio, spaceless,
// templatetag, comment; and the ones that are not allowed (ssi, now, lorem).

// parseSpaced parses pongo2's space-separated arguments (firstof, cycle).
func (p *parser) parseSpaced() ([]Expr, error) {
	p.spaced = true
	defer func() { p.spaced = false }()
	var values []Expr
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

func (p *parser) parseCycle() (Stmt, error) {
	start := p.next()
	if p.loops == 0 {
		return nil, p.fail(start, "{%% cycle %%} outside a for loop: use loop.cycle(...) or a cycler()")
	}
	values, err := p.parseSpaced()
	if err != nil {
		return nil, err
	}
	s := &CycleStmt{Pos: start.pos, Values: values}
	if p.skipName("as") {
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		s.As = name.val
		s.Silent = p.skipName("silent")
	}
	p.markLoop()
	return s, p.expectBlockEnd()
}

func (p *parser) parseIfEqual() (Stmt, error) {
	start := p.next()
	defer p.setSoft(true)() // an if statement
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
	cond := &CompareExpr{Pos: start.pos, First: a, Ops: []CmpOp{{Pos: start.pos, Op: op, X: b}}}
	s := &IfStmt{Pos: start.pos, Conds: []Expr{cond}}
	body, got, err := p.parseBody(start.val, start.pos, "else", end)
	if err != nil {
		return nil, err
	}
	s.Bodies = [][]Stmt{body}
	if got == "else" {
		if s.Else, _, err = p.parseBody(start.val, start.pos, end); err != nil {
			return nil, err
		}
	}
	return s, p.endTag("")
}

func (p *parser) parseIfChanged() (Stmt, error) {
	start := p.next()
	if p.loops == 0 {
		return nil, p.fail(start, "{%% ifchanged %%} outside a for loop")
	}
	s := &IfchangedStmt{Pos: start.pos}
	for p.cur().kind != tBlockEnd {
		x, err := p.parseExpression(false)
		if err != nil {
			return nil, err
		}
		s.Values = append(s.Values, x)
	}
	body, got, err := p.parseBody("ifchanged", start.pos, "else", "endifchanged")
	if err != nil {
		return nil, err
	}
	s.Body = body
	if got == "else" {
		if s.Else, _, err = p.parseBody("ifchanged", start.pos, "endifchanged"); err != nil {
			return nil, err
		}
	}
	p.markLoop()
	return s, p.endTag("")
}

func (p *parser) parseWidthRatio() (Stmt, error) {
	start := p.next()
	var xs [3]Expr
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
	return &WidthratioStmt{Pos: start.pos, Value: xs[0], Max: xs[1], Size: xs[2]}, p.expectBlockEnd()
}

func (p *parser) parseFirstof() (Stmt, error) {
	t := p.next()
	values, err := p.parseSpaced()
	if err != nil {
		return nil, err
	}
	return &FirstofStmt{Pos: t.pos, Values: values}, p.expectBlockEnd()
}

func (p *parser) parseSpaceless() (Stmt, error) {
	t := p.next()
	body, _, err := p.parseBody("spaceless", t.pos, "endspaceless")
	if err != nil {
		return nil, err
	}
	return &SpacelessStmt{Pos: t.pos, Body: body}, p.endTag("")
}

// parseTemplatetag parses {% templatetag openblock %}: the text of a delimiter.
func (p *parser) parseTemplatetag() (Stmt, error) {
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
	return &TextStmt{Pos: arg.pos, Text: text}, p.expectBlockEnd()
}

// parseComment parses {% comment %}...{% endcomment %}: nothing is left of it.
func (p *parser) parseComment() (Stmt, error) {
	t := p.next()
	if _, _, err := p.parseBody("comment", t.pos, "endcomment"); err != nil {
		return nil, err
	}
	return nil, p.endTag("")
}

// notAllowed is the error of pongo2's tags that read the disk or the clock, or are random.
func (p *parser) notAllowed(t token) error {
	switch t.val {
	case "ssi":
		return p.fail(t, "{%% ssi %%} reads files from the local disk and is not allowed: put the text in another key of the ConfigMap and {%% include \"key\" %%} it")
	case "now":
		return p.fail(t, "{%% now %%} is not allowed: every render would differ and HAProxy would reload for nothing")
	}
	return p.fail(t, "{%% lorem %%} is not allowed: it is random, every render would differ")
}
