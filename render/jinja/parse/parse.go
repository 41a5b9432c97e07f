package parse

import (
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
	tree  *Tree             // the template's source and lines (for messages)
	names map[string]string // interned names: equal names share their bytes

	open    []openTag // statements whose end tag is awaited
	loops   int       // for loops around the current statement (for break/continue)
	macros  []*MacroDef
	fors    []*ForStmt
	noColon bool // inside [ ] or a dict key: ':' is a slice or a key, not a pongo2 filter argument
	depth   int
	spaced  bool     // pongo2's space-separated arguments: 'a' 'b' are two strings
	refs    []string // the template keys this template names
	blocks  map[string]*BlockStmt
	extends bool

	// The filters and tests the template names, in the order met (names only: resolving
	// them is for what runs the tree), and whether the current statement is soft for them
	// (see Use.Soft). Statements that open a scope of their own (for bodies, macros,
	// blocks...) are not soft.
	uses []Use
	soft bool
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
func (p *parser) parseTemplate() ([]Stmt, error) {
	body, err := p.subparse(nil)
	if err != nil {
		return nil, err
	}
	if t := p.cur(); t.kind != tEOF {
		return nil, p.fail(t, "unexpected %s", t)
	}
	return body, nil
}

// setSoft sets p.soft and returns what restores it: defer p.setSoft(false)().
func (p *parser) setSoft(soft bool) func() {
	saved := p.soft
	p.soft = soft
	return func() { p.soft = saved }
}

// subparse parses statements until one of the end tags (left as the current token, just
// after its {%) or the end of the template.
func (p *parser) subparse(ends []string) ([]Stmt, error) {
	var body []Stmt
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
			body = append(body, &TextStmt{Pos: t.pos, Text: t.val})
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
			body = append(body, &PrintStmt{Pos: start, X: x})
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
func (p *parser) parseBody(tag string, pos int, ends ...string) ([]Stmt, string, error) {
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

func (p *parser) parseStatement() (Stmt, error) {
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
		return p.parsePrint()
	case "break", "continue":
		return p.parseLoopControl()
	case "do":
		return p.parseDo()
	// pongo2's tags.
	case "cycle":
		return p.parseCycle()
	case "firstof":
		return p.parseFirstof()
	case "ifequal", "ifnotequal":
		return p.parseIfEqual()
	case "ifchanged":
		return p.parseIfChanged()
	case "widthratio":
		return p.parseWidthRatio()
	case "spaceless":
		return p.parseSpaceless()
	case "templatetag":
		return p.parseTemplatetag()
	case "comment":
		return p.parseComment()
	case "ssi", "now", "lorem":
		return nil, p.notAllowed(t)
	}
	return nil, p.unknownTag(t)
}

// unknownTag is the error of a tag that is not a statement here: an end tag out of place (a
// nesting mistake), i18n, or a name nothing knows.
func (p *parser) unknownTag(t token) error {
	if endTags[t.val] {
		if len(p.open) == 0 {
			return p.fail(t, "unexpected {%% %s %%}: no statement is open", t.val)
		}
		o := p.open[len(p.open)-1]
		line, col := p.tree.LineCol(o.pos)
		return p.fail(t, "{%% %s %%} does not match {%% %s %%} opened at line %d column %d: expected %s", t.val, o.name, line, col, tagList(o.ends))
	}
	if t.val == "trans" || t.val == "pluralize" {
		return p.fail(t, "unknown tag {%% %s %%}: i18n ({%% trans %%}) is not enabled; write the text directly", t.val)
	}
	return p.fail(t, "unknown tag {%% %s %%}", t.val)
}
