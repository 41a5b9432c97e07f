package parse

import (
	"slices"
)

// Expressions, from the lowest precedence to the highest, as in jinja2/parser.py:
//
//	a if b else c
//	or (||)   and (&&)   not (!)
//	== != < > <= >= (<>) in, not in (chained: 1 < x < 3)
//	+ -       ~       * / // %       **  (left associative, as in Jinja2)
//	-x +x
//	primary: literal, name, (tuple), [list], {dict}; then .attr [item] [a:b:c] (call)
//	then |filter and `is test`, which bind tighter than every operator above.
//
// One function, parseLevel, parses every level from or to **: the levels are a table
// (level, operatorAt), not a function each.

func (p *parser) enter(t token) error {
	p.depth++
	if p.depth > maxDepth {
		return p.fail(t, "the expression is nested more than %d deep", maxDepth)
	}
	return nil
}

func (p *parser) isTupleEnd(extraEnd []string) bool {
	t := p.cur()
	switch t.kind {
	case tVarEnd, tBlockEnd, tEOF:
		return true
	case tOp:
		return t.val == ")"
	case tName:
		return slices.Contains(extraEnd, t.val)
	}
	return false
}

// parseTuple parses an expression, or a tuple when there are commas (`a, b`).
func (p *parser) parseTuple(withCond, explicitParens bool, extraEnd []string) (Expr, error) {
	start := p.cur()
	var items []Expr
	isTuple := false
	for {
		if len(items) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		x, err := p.parseExpression(withCond)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0], nil
		}
		if !explicitParens {
			return nil, p.unexpected(p.cur(), "an expression")
		}
	}
	return &TupleExpr{Pos: start.pos, Items: items}, nil
}

func (p *parser) parseExpression(withCond bool) (Expr, error) {
	if err := p.enter(p.cur()); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if !withCond {
		return p.parseLevel(levelOr)
	}
	uses := len(p.uses)
	x, err := p.parseLevel(levelOr)
	if err != nil {
		return nil, err
	}
	for p.isName("if") {
		t := p.next()
		test, err := p.parseLevel(levelOr)
		if err != nil {
			return nil, err
		}
		var els Expr
		if p.skipName("else") {
			if els, err = p.parseExpression(true); err != nil {
				return nil, err
			}
		}
		x = &CondExpr{Pos: t.pos, Test: test, Then: x, Else: els}
		// A conditional expression is soft as a whole, its first value included.
		for i := uses; i < len(p.uses); i++ {
			p.uses[i].Soft = true
		}
	}
	return x, nil
}

// level is a precedence level of the operators, from the loosest to the tightest: the
// operands of a level's operators are expressions of the next level.
type level uint8

const (
	levelOr      level = iota // or ||
	levelAnd                  // and &&
	levelNot                  // not x, !x: a prefix
	levelCompare              // == != < > <= >= <> in, not in: chained (1 < x < 3)
	levelAdd                  // + -
	levelConcat               // ~
	levelMul                  // * / // %
	levelPow                  // **
	levelUnary                // -x +x, and what binds tighter (parseUnary)
)

// parseLevel parses an expression of level l: an operand of the next level, then as many of
// l's operators and operands as follow, joined left to right.
func (p *parser) parseLevel(l level) (Expr, error) {
	switch l {
	case levelUnary:
		return p.parseUnary(true)
	case levelNot:
		return p.parseNot()
	}
	a, err := p.parseLevel(l + 1)
	if err != nil {
		return nil, err
	}
	var chain *CompareExpr // the comparisons of this level: 1 < x < 3 is one node
	var concat *ConcatExpr // the same for a ~ b ~ c
	for {
		t, op, width := p.operatorAt(l)
		if width == 0 {
			return a, nil
		}
		p.p += width
		b, err := p.parseLevel(l + 1)
		if err != nil {
			return nil, err
		}
		switch l {
		case levelOr:
			a = &OrExpr{Pos: t.pos, A: a, B: b}
		case levelAnd:
			a = &AndExpr{Pos: t.pos, A: a, B: b}
		case levelCompare:
			if chain == nil {
				chain = &CompareExpr{Pos: t.pos, First: a}
				a = chain
			}
			chain.Ops = append(chain.Ops, CmpOp{Pos: t.pos, Op: op, X: b})
		case levelConcat:
			if concat == nil {
				concat = &ConcatExpr{Pos: t.pos, Items: []Expr{a}}
				a = concat
			}
			concat.Items = append(concat.Items, b)
		default:
			a = &BinExpr{Pos: t.pos, Op: op, A: a, B: b}
		}
	}
}

// operatorAt reads the operator of level l at the current token, if there is one: its first
// token, the operator as the tree names it, and how many tokens it takes (0: none there).
func (p *parser) operatorAt(l level) (token, string, int) {
	t := p.cur()
	switch l {
	case levelOr:
		if p.isName("or") || p.isOp("||") {
			return t, "or", 1
		}
	case levelAnd:
		if p.isName("and") || p.isOp("&&") {
			return t, "and", 1
		}
	case levelCompare:
		switch {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">="):
			return t, t.val, 1
		case p.isOp("<>"):
			return t, "!=", 1
		case p.isName("in"):
			return t, "in", 1
		case p.isName("not") && p.peek().kind == tName && p.peek().val == "in":
			return t, "notin", 2
		}
	case levelAdd:
		if p.isOp("+") || p.isOp("-") {
			return t, t.val, 1
		}
	case levelConcat:
		if p.isOp("~") {
			return t, "~", 1
		}
	case levelMul:
		if p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
			return t, t.val, 1
		}
	case levelPow:
		if p.isOp("**") {
			return t, "**", 1
		}
	}
	return t, "", 0
}

// parseNot parses not x (and pongo2's !x), which binds looser than comparisons.
func (p *parser) parseNot() (Expr, error) {
	if !p.isName("not") && !p.isOp("!") {
		return p.parseLevel(levelCompare)
	}
	t := p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	return &NotExpr{Pos: t.pos, X: x}, nil
}

func (p *parser) parseUnary(withFilter bool) (Expr, error) {
	t := p.cur()
	var x Expr
	var err error
	switch {
	case p.isOp("-") || p.isOp("+"):
		p.p++
		if err := p.enter(t); err != nil {
			return nil, err
		}
		inner, err := p.parseUnary(false)
		p.depth--
		if err != nil {
			return nil, err
		}
		x = &NegExpr{Pos: t.pos, X: inner, Neg: t.val == "-"}
	default:
		if x, err = p.parsePrimary(); err != nil {
			return nil, err
		}
	}
	if x, err = p.parsePostfix(x); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(x)
	}
	return x, nil
}

func (p *parser) parsePrimary() (Expr, error) {
	t := p.cur()
	switch t.kind {
	case tName:
		p.p++
		switch t.val {
		case "true", "True":
			return &ConstExpr{Pos: t.pos, Value: true}, nil
		case "false", "False":
			return &ConstExpr{Pos: t.pos, Value: false}, nil
		case "none", "None":
			return &ConstExpr{Pos: t.pos, Value: nil}, nil
		}
		switch t.val {
		case "loop", "forloop":
			p.markLoop()
			// loop.index and loop(...) use the loop object in place; anything else (set x =
			// loop, m(loop), loop.cycle as a value...) may keep it past the iteration.
			next, after := p.cur(), p.peek()
			inPlace := next.kind == tOp && next.val == "(" ||
				next.kind == tOp && next.val == "." && after.kind == tName && after.val != "Parentloop" &&
					(after.val != "cycle" && after.val != "changed" || p.toks[min(p.p+2, len(p.toks)-1)].val == "(")
			if !inPlace && len(p.fors) > 0 {
				p.fors[len(p.fors)-1].KeepsLoop = true
			}
		case "caller", "varargs", "kwargs":
			// A macro accepts extra arguments, and a caller, only when its body names them.
			for _, m := range p.macros {
				m.UsesCaller = m.UsesCaller || t.val == "caller"
				m.UsesVarargs = m.UsesVarargs || t.val == "varargs"
				m.UsesKwargs = m.UsesKwargs || t.val == "kwargs"
			}
		}
		return &NameExpr{Pos: t.pos, Name: p.intern(t.val)}, nil
	case tString:
		p.p++
		s := t.val
		for p.cur().kind == tString && !p.spaced { // adjacent literals are joined, as in Python
			s += p.next().val
		}
		return &ConstExpr{Pos: t.pos, Value: s}, nil
	case tInt, tFloat:
		p.p++
		return &ConstExpr{Pos: t.pos, Value: t.num}, nil
	case tOp:
		switch t.val {
		case "(":
			p.p++
			saved := p.noColon
			p.noColon = false
			x, err := p.parseTuple(true, true, nil)
			p.noColon = saved
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return x, nil
		case "[":
			return p.parseList()
		case "{":
			return p.parseDict()
		}
	}
	return nil, p.unexpected(t, "an expression")
}

func (p *parser) parseList() (Expr, error) {
	start := p.next()
	saved := p.noColon
	p.noColon = false
	defer func() { p.noColon = saved }()
	l := &ListExpr{Pos: start.pos}
	for !p.isOp("]") {
		if len(l.Items) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp("]") {
				break
			}
		}
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		l.Items = append(l.Items, x)
	}
	p.p++
	return l, nil
}

func (p *parser) parseDict() (Expr, error) {
	start := p.next()
	saved := p.noColon
	defer func() { p.noColon = saved }()
	d := &DictExpr{Pos: start.pos}
	for !p.isOp("}") {
		if len(d.Keys) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp("}") {
				break
			}
		}
		p.noColon = true
		k, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp(":"); err != nil {
			return nil, err
		}
		p.noColon = false
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		d.Keys = append(d.Keys, k)
		d.Values = append(d.Values, v)
	}
	p.p++
	return d, nil
}

func (p *parser) parsePostfix(x Expr) (Expr, error) {
	for {
		var err error
		switch {
		case p.isOp(".") || p.isOp("["):
			x, err = p.parseSubscript(x)
		case p.isOp("("):
			x, err = p.parseCall(x)
		default:
			return x, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseFilterExpr(x Expr) (Expr, error) {
	for {
		var err error
		switch {
		case p.isOp("|"):
			x, err = p.parseFilters(x, false)
		case p.isName("is"):
			x, err = p.parseTest(x)
		case p.isOp("("):
			x, err = p.parseCall(x)
		default:
			return x, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseSubscript(x Expr) (Expr, error) {
	t := p.next()
	if t.val == "." {
		a := p.cur()
		switch a.kind {
		case tName:
			p.p++
			return &AttrExpr{Pos: a.pos, Obj: x, Name: p.intern(a.val)}, nil
		case tInt:
			p.p++
			return &ItemExpr{Pos: a.pos, Obj: x, Key: &ConstExpr{Pos: a.pos, Value: a.num}}, nil
		}
		return nil, p.unexpected(a, "a name or a number after '.'")
	}
	saved := p.noColon
	p.noColon = true
	defer func() { p.noColon = saved }()
	var items []Expr
	for !p.isOp("]") {
		if len(items) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		it, err := p.parseSubscribed(x)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	p.p++
	if len(items) == 0 {
		return nil, p.fail(t, "expected a subscript expression inside [ ]")
	}
	if s, ok := items[0].(*SliceExpr); ok && len(items) == 1 {
		s.Obj = x
		return s, nil
	}
	var key Expr = items[0]
	if len(items) > 1 {
		for _, it := range items {
			if _, ok := it.(*SliceExpr); ok {
				return nil, p.fail(t, "slices inside a tuple subscript (x[a:b, c]) are not supported")
			}
		}
		key = &TupleExpr{Pos: t.pos, Items: items}
	}
	return &ItemExpr{Pos: t.pos, Obj: x, Key: key}, nil
}

// parseSubscribed parses one subscript: an expression or a slice a:b:c (any part optional).
func (p *parser) parseSubscribed(obj Expr) (Expr, error) {
	start := p.cur()
	var parts [3]Expr
	if !p.isOp(":") {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return x, nil
		}
		parts[0] = x
	}
	p.p++ // the first ':'
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		parts[1] = x
	}
	if p.skipOp(":") && !p.isOp("]") && !p.isOp(",") {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		parts[2] = x
	}
	return &SliceExpr{Pos: start.pos, Obj: obj, Lo: parts[0], Hi: parts[1], Step: parts[2]}, nil
}

func (p *parser) parseCallArgs() (Args, error) {
	start, err := p.expectOp("(")
	if err != nil {
		return Args{}, err
	}
	saved := p.noColon
	p.noColon = false
	defer func() { p.noColon = saved }()
	a := Args{Pos: start.pos, Present: true}
	invalid := func() error { return p.fail(start, "invalid syntax for function call expression") }
	needComma := false
	for !p.isOp(")") {
		if needComma {
			if _, err := p.expectOp(","); err != nil {
				return Args{}, err
			}
			if p.isOp(")") {
				break
			}
		}
		switch {
		case p.isOp("*"):
			if a.Star != nil || a.StarKw != nil {
				return Args{}, invalid()
			}
			p.p++
			x, err := p.parseExpression(true)
			if err != nil {
				return Args{}, err
			}
			a.Star = x
		case p.isOp("**"):
			if a.StarKw != nil {
				return Args{}, invalid()
			}
			p.p++
			x, err := p.parseExpression(true)
			if err != nil {
				return Args{}, err
			}
			a.StarKw = x
		case p.cur().kind == tName && p.peek().kind == tOp && p.peek().val == "=":
			if a.StarKw != nil {
				return Args{}, invalid()
			}
			name := p.next()
			p.p++
			x, err := p.parseExpression(true)
			if err != nil {
				return Args{}, err
			}
			a.Kw = append(a.Kw, KwArg{Name: p.intern(name.val), X: x})
		default:
			if a.Star != nil || a.StarKw != nil || len(a.Kw) > 0 {
				return Args{}, invalid()
			}
			x, err := p.parseExpression(true)
			if err != nil {
				return Args{}, err
			}
			a.List = append(a.List, x)
		}
		needComma = true
	}
	p.p++
	if len(a.Kw) == 0 && a.Star == nil && a.StarKw == nil && len(a.List) > 0 {
		consts := make([]any, len(a.List))
		for i, x := range a.List {
			c, ok := x.(*ConstExpr)
			if !ok {
				consts = nil
				break
			}
			consts[i] = c.Value
		}
		a.Consts = consts
	}
	return a, nil
}

func (p *parser) parseCall(fn Expr) (Expr, error) {
	pos := p.cur().pos
	a, err := p.parseCallArgs()
	if err != nil {
		return nil, err
	}
	return &CallExpr{Pos: pos, Fn: fn, Args: a}, nil
}

// parseFilters parses |f1|f2(args)... applied to x (nil: the innermost filter of a filter
// block or a set block, whose input is the block's output). startInline: the first filter
// name comes without a '|' ({% filter upper %}).
func (p *parser) parseFilters(x Expr, startInline bool) (Expr, error) {
	for p.isOp("|") || startInline {
		if !startInline {
			p.p++
		}
		startInline = false
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		full := name.val
		for p.isOp(".") {
			p.p++
			part, err := p.expectName()
			if err != nil {
				return nil, err
			}
			full += "." + part.val
		}
		f := &FilterExpr{Pos: name.pos, In: x, Name: full}
		switch {
		case p.isOp("("):
			if f.Args, err = p.parseCallArgs(); err != nil {
				return nil, err
			}
		case p.isOp(":") && !p.noColon:
			// pongo2: filter:argument.
			p.p++
			arg, err := p.parseUnary(false)
			if err != nil {
				return nil, err
			}
			f.Args = Args{Pos: arg.Position(), List: []Expr{arg}, Present: true}
			f.Pongo2 = true
		}
		f.Use = p.addUse(Use{Name: full, Pos: name.pos, Pongo2: f.Pongo2})
		x = f
	}
	return x, nil
}

func (p *parser) parseTest(x Expr) (Expr, error) {
	isTok := p.next()
	negate := p.skipName("not")
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	full := name.val
	for p.isOp(".") {
		p.p++
		part, err := p.expectName()
		if err != nil {
			return nil, err
		}
		full += "." + part.val
	}
	t := &TestExpr{Pos: isTok.pos, In: x, Name: full, Negate: negate}
	c := p.cur()
	switch {
	case p.isOp("("):
		if t.Args, err = p.parseCallArgs(); err != nil {
			return nil, err
		}
	case (c.kind == tName || c.kind == tString || c.kind == tInt || c.kind == tFloat || p.isOp("[") || p.isOp("{")) &&
		!(c.kind == tName && (c.val == "else" || c.val == "or" || c.val == "and")):
		if c.kind == tName && c.val == "is" {
			return nil, p.fail(c, "you cannot chain multiple tests with is")
		}
		arg, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if arg, err = p.parsePostfix(arg); err != nil {
			return nil, err
		}
		t.Args = Args{Pos: arg.Position(), List: []Expr{arg}, Present: true}
	}
	t.Use = p.addUse(Use{Test: true, Name: full, Pos: name.pos})
	return t, nil
}

// addUse notes a filter or test the template names, and returns its index.
func (p *parser) addUse(u Use) int {
	u.Soft = p.soft
	p.uses = append(p.uses, u)
	return len(p.uses) - 1
}
