package render

import (
	"fmt"
	"slices"
	"strings"
)

// parser turns the tokens of one tag into expression nodes, following Jinja2's grammar and
// precedence (jinja2/parser.py), plus pongo2's operators (&&, ||, !, <>) and pongo2's
// filter:argument form.
type parser struct {
	toks []token
	p    int
	// sawLoop is set when the expression names loop or forloop: loops then set them (they
	// skip it otherwise, which saves work on every loop that does not use them).
	sawLoop bool
}

func (p *parser) peek() token { return p.toks[p.p] }

func (p *parser) peekN(n int) token {
	if p.p+n < len(p.toks) {
		return p.toks[p.p+n]
	}
	return p.toks[len(p.toks)-1]
}

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

func (p *parser) atEOF() bool { return p.toks[p.p].kind == tEOF }

func (p *parser) errf(t token, format string, args ...any) error {
	return &exprError{at: t.off, err: fmt.Errorf(format, args...)}
}

func (p *parser) expectOp(s string) (token, error) {
	t := p.peek()
	if t.kind != tOp || t.val != s {
		return t, p.errf(t, "expected '%s', got %s", s, t)
	}
	return p.next(), nil
}

func (p *parser) expectName() (token, error) {
	t := p.peek()
	if t.kind != tName {
		return t, p.errf(t, "expected a name, got %s", t)
	}
	if t.val == renderStateKey || t.val == includeWriterKey {
		return t, p.errf(t, "%s is a name the renderer keeps for itself: choose another", t.val)
	}
	return p.next(), nil
}

func (p *parser) expectEOF(what string) error {
	if t := p.peek(); t.kind != tEOF {
		return p.errf(t, "unexpected %s in %s", t, what)
	}
	return nil
}

// parseExpression parses a full expression; withCond allows `a if b else c`.
func (p *parser) parseExpression(withCond bool) (node, error) {
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for withCond && p.isName("if") {
		t := p.next()
		cond, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var els node
		if p.isName("else") {
			p.next()
			if els, err = p.parseExpression(true); err != nil {
				return nil, err
			}
		}
		e = &condNode{at: t.off, cond: cond, a: e, b: els}
	}
	return e, nil
}

// parseTuple parses `a, b, c` (a tuple if there is a comma). endNames are names that end it
// (for's `if`, `recursive`...).
func (p *parser) parseTuple(withCond, parens bool, endNames ...string) (node, error) {
	start := p.peek()
	var items []node
	isTuple := false
	for {
		if len(items) > 0 {
			if !p.isOp(",") {
				break
			}
			p.next()
			isTuple = true
		}
		t := p.peek()
		if t.kind == tEOF || (t.kind == tOp && (t.val == ")" || t.val == "]" || t.val == "}")) {
			break
		}
		if t.kind == tName && slices.Contains(endNames, t.val) {
			break
		}
		e, err := p.parseExpression(withCond)
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	if !isTuple {
		if len(items) == 0 {
			if parens {
				return &constNode{at: start.off, v: tuple{}}, nil
			}
			return nil, p.errf(start, "expected an expression, got %s", start)
		}
		return items[0], nil
	}
	return &listNode{at: start.off, items: items, tuple: true}, nil
}

func (p *parser) parseOr() (node, error) {
	return p.parseLogical(p.parseAnd, "or", "||", func(at int, a, b node) node { return &orNode{at: at, a: a, b: b} })
}

func (p *parser) parseAnd() (node, error) {
	return p.parseLogical(p.parseNot, "and", "&&", func(at int, a, b node) node { return &andNode{at: at, a: a, b: b} })
}

// parseLogical parses operands joined by the keyword name or the operator op, left to right.
func (p *parser) parseLogical(operand func() (node, error), name, op string, join func(at int, a, b node) node) (node, error) {
	a, err := operand()
	if err != nil {
		return nil, err
	}
	for p.isName(name) || p.isOp(op) {
		t := p.next()
		b, err := operand()
		if err != nil {
			return nil, err
		}
		a = join(t.off, a, b)
	}
	return a, nil
}

func (p *parser) parseNot() (node, error) {
	if p.isName("not") || p.isOp("!") {
		t := p.next()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &notNode{at: t.off, x: x}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (node, error) {
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	var ops []string
	var rest []node
	for {
		t := p.peek()
		op := ""
		switch {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">=" || t.val == "<>"):
			op = t.val
			if op == "<>" {
				op = "!="
			}
			p.next()
		case t.kind == tName && t.val == "in":
			op = "in"
			p.next()
		case t.kind == tName && t.val == "not" && p.peekN(1).kind == tName && p.peekN(1).val == "in":
			op = "not in"
			p.next()
			p.next()
		}
		if op == "" {
			break
		}
		e, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
		rest = append(rest, e)
	}
	if len(ops) == 0 {
		return first, nil
	}
	return &cmpNode{at: first.pos(), first: first, ops: ops, rest: rest}, nil
}

func (p *parser) parseBinary(next func() (node, error), ops ...string) (node, error) {
	a, err := next()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tOp || !slices.Contains(ops, t.val) {
			return a, nil
		}
		p.next()
		b, err := next()
		if err != nil {
			return nil, err
		}
		a = &binNode{at: t.off, op: t.val, a: a, b: b}
	}
}

func (p *parser) parseMath1() (node, error) { return p.parseBinary(p.parseConcat, "+", "-") }

func (p *parser) parseConcat() (node, error) { return p.parseBinary(p.parseMath2, "~") }

func (p *parser) parseMath2() (node, error) {
	return p.parseBinary(p.parsePow, "*", "/", "//", "%")
}

func (p *parser) parsePow() (node, error) {
	return p.parseBinary(func() (node, error) { return p.parseUnary(true) }, "**")
}

func (p *parser) parseUnary(withFilter bool) (node, error) {
	var n node
	var err error
	t := p.peek()
	switch {
	case t.kind == tOp && t.val == "-":
		p.next()
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		n = &negNode{at: t.off, x: x}
	case t.kind == tOp && t.val == "+":
		p.next()
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		n = &negNode{at: t.off, x: x, plus: true}
	default:
		if n, err = p.parsePrimary(); err != nil {
			return nil, err
		}
	}
	if n, err = p.parsePostfix(n); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(n)
	}
	return n, nil
}

func (p *parser) parsePrimary() (node, error) {
	t := p.next()
	switch t.kind {
	case tName:
		switch t.val {
		case "true", "True":
			return &constNode{at: t.off, v: true}, nil
		case "false", "False":
			return &constNode{at: t.off, v: false}, nil
		case "none", "None", "nil":
			return &constNode{at: t.off, v: nil}, nil
		case "loop", "forloop":
			p.sawLoop = true
		case renderStateKey, includeWriterKey:
			return &constNode{at: t.off}, nil // internal, not for templates
		}
		return &nameNode{at: t.off, name: t.val}, nil
	case tString:
		s := t.val
		for p.peek().kind == tString {
			s += p.next().val
		}
		return &constNode{at: t.off, v: s}, nil
	case tInt:
		return &constNode{at: t.off, v: t.i}, nil
	case tFloat:
		return &constNode{at: t.off, v: t.f}, nil
	case tOp:
		switch t.val {
		case "(":
			e, err := p.parseTuple(true, true)
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return e, nil
		case "[":
			var items []node
			for !p.isOp("]") {
				if len(items) > 0 {
					if _, err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("]") {
						break
					}
				}
				e, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				items = append(items, e)
			}
			p.next()
			return &listNode{at: t.off, items: items}, nil
		case "{":
			d := &dictNode{at: t.off}
			for !p.isOp("}") {
				if len(d.keys) > 0 {
					if _, err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("}") {
						break
					}
				}
				k, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				if _, err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
			}
			p.next()
			return d, nil
		}
	case tEOF:
		return nil, p.errf(t, "expected an expression, got the end of the tag")
	}
	return nil, p.errf(t, "unexpected %s", t)
}

func (p *parser) parsePostfix(n node) (node, error) {
	for {
		t := p.peek()
		if t.kind != tOp {
			return n, nil
		}
		switch t.val {
		case ".":
			p.next()
			a := p.next()
			switch a.kind {
			case tName:
				n = &attrNode{at: a.off, obj: n, name: a.val}
			case tInt:
				n = &itemNode{at: a.off, obj: n, key: &constNode{at: a.off, v: a.i}}
			default:
				return nil, p.errf(a, "expected an attribute name after '.', got %s", a)
			}
		case "[":
			p.next()
			var err error
			if n, err = p.parseSubscript(t, n); err != nil {
				return nil, err
			}
		case "(":
			p.next()
			c, err := p.parseCallArgs(t, n)
			if err != nil {
				return nil, err
			}
			n = c
		default:
			return n, nil
		}
	}
}

func (p *parser) parseSubscript(open token, obj node) (node, error) {
	var parts [3]node
	isSlice := false
	idx := 0
	for {
		if p.isOp("]") {
			p.next()
			break
		}
		if p.isOp(":") {
			p.next()
			isSlice = true
			idx++
			if idx > 2 {
				return nil, p.errf(p.peek(), "too many ':' in a slice")
			}
			continue
		}
		if parts[idx] != nil {
			return nil, p.errf(p.peek(), "expected ']' or ':', got %s", p.peek())
		}
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		parts[idx] = e
	}
	if !isSlice {
		if parts[0] == nil {
			return nil, p.errf(open, "empty subscript []")
		}
		return &itemNode{at: open.off, obj: obj, key: parts[0]}, nil
	}
	return &sliceNode{at: open.off, obj: obj, lo: parts[0], hi: parts[1], step: parts[2]}, nil
}

type callArgs struct {
	args    []node
	kwNames []string
	kwVals  []node
}

func (p *parser) parseArgs() (callArgs, error) {
	var ca callArgs
	for !p.isOp(")") {
		if len(ca.args)+len(ca.kwVals) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return ca, err
			}
			if p.isOp(")") {
				break
			}
		}
		t := p.peek()
		if t.kind == tOp && (t.val == "*" || t.val == "**") {
			return ca, &exprError{at: t.off, err: jinja2Unsupported("*args and **kwargs in a call", "pass the arguments one by one")}
		}
		if t.kind == tName && p.peekN(1).kind == tOp && p.peekN(1).val == "=" {
			p.next()
			p.next()
			v, err := p.parseExpression(true)
			if err != nil {
				return ca, err
			}
			ca.kwNames = append(ca.kwNames, t.val)
			ca.kwVals = append(ca.kwVals, v)
			continue
		}
		if len(ca.kwVals) > 0 {
			return ca, p.errf(t, "a positional argument cannot follow a keyword argument")
		}
		e, err := p.parseExpression(true)
		if err != nil {
			return ca, err
		}
		ca.args = append(ca.args, e)
	}
	p.next()
	return ca, nil
}

func (p *parser) parseCallArgs(open token, fn node) (node, error) {
	ca, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	return &callNode{at: open.off, fn: fn, callArgs: ca}, nil
}

func (p *parser) parseFilterExpr(n node) (node, error) {
	for {
		t := p.peek()
		switch {
		case t.kind == tOp && t.val == "|":
			p.next()
			f, err := p.parseFilter(n)
			if err != nil {
				return nil, err
			}
			n = f
		case t.kind == tName && t.val == "is":
			p.next()
			tn, err := p.parseTest(t, n)
			if err != nil {
				return nil, err
			}
			n = tn
		case t.kind == tOp && t.val == "(":
			p.next()
			c, err := p.parseCallArgs(t, n)
			if err != nil {
				return nil, err
			}
			n = c
		default:
			return n, nil
		}
	}
}

// parseFilter parses one filter after '|': name, name(args) (Jinja2) or name:arg (pongo2).
func (p *parser) parseFilter(in node) (*filterNode, error) {
	nameTok, err := p.expectName()
	if err != nil {
		return nil, p.errf(nameTok, "expected a filter name after '|', got %s", nameTok)
	}
	name := nameTok.val
	f := &filterNode{at: nameTok.off, in: in, name: name}
	switch {
	case p.isOp("("):
		p.next()
		if f.callArgs, err = p.parseArgs(); err != nil {
			return nil, err
		}
	case p.isOp(":"):
		p.next()
		f.pongo = true
		a, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if a, err = p.parsePostfix(a); err != nil {
			return nil, err
		}
		f.args = []node{a}
	}
	if err := bindFilter(f); err != nil {
		return nil, &exprError{at: nameTok.off, err: err}
	}
	return f, nil
}

func (p *parser) parseTest(is token, in node) (node, error) {
	negate := false
	if p.isName("not") {
		p.next()
		negate = true
	}
	t := p.next()
	name := t.val
	switch {
	case t.kind == tName:
	case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">="):
	default:
		return nil, p.errf(t, "expected a test name after 'is', got %s", t)
	}
	n := &testNode{at: t.off, in: in, name: name, negate: negate}
	fn, ok := tests[name]
	if !ok {
		return nil, p.errf(t, "unknown test '%s' (known tests: %s)", name, strings.Join(testNames(), ", "))
	}
	n.fn = fn
	nt := p.peek()
	switch {
	case nt.kind == tOp && nt.val == "(":
		p.next()
		ca, err := p.parseArgs()
		if err != nil {
			return nil, err
		}
		if len(ca.kwVals) > 0 {
			return nil, p.errf(nt, "tests take no keyword arguments")
		}
		n.args = ca.args
	case nt.kind == tString || nt.kind == tInt || nt.kind == tFloat ||
		(nt.kind == tOp && (nt.val == "[" || nt.val == "{")) ||
		(nt.kind == tName && !slices.Contains([]string{"else", "or", "and", "if", "is", "recursive", "reversed", "sorted"}, nt.val)):
		a, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if a, err = p.parsePostfix(a); err != nil {
			return nil, err
		}
		n.args = []node{a}
	}
	return n, nil
}
