package parse

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer turns a whole template into tokens, as Jinja2's lexer does (jinja2/lexer.py with
// the default delimiters, trim_blocks and lstrip_blocks off, keep_trailing_newline off):
// template text, the start and end of each {% %} and {{ }} tag, and inside tags names,
// literals and operators. Comments and {% raw %} are resolved here. Whitespace control
// ({%- -%}, {{- -}}, {#- -#}) strips the neighbouring text here too.

type tokKind uint8

const (
	tEOF      tokKind = iota
	tData             // template text
	tBlockBeg         // {%
	tBlockEnd         // %}
	tVarBeg           // {{
	tVarEnd           // }}
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	val  string   // text, name, operator or the unescaped string literal
	num  any      // tInt: int64 or *big.Int; tFloat: float64
	pos  int      // byte offset in the (newline-normalized) source
	end  int      // byte offset just after the token
	_    struct{} // tokens are values; keep them small
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tData:
		return "template data"
	case tBlockBeg:
		return "'{%'"
	case tBlockEnd:
		return "end of statement block"
	case tVarBeg:
		return "'{{'"
	case tVarEnd:
		return "end of print statement"
	case tString:
		return "string " + strconv.Quote(t.val)
	case tInt, tFloat:
		return "number " + t.val
	case tName:
		return "'" + t.val + "'"
	}
	return "'" + t.val + "'"
}

// normalizeSource does what Jinja2 does before lexing: every line ending (\r\n, \r, \n)
// becomes \n, and one trailing newline is dropped (keep_trailing_newline=False).
func normalizeSource(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

// operators of Jinja2, longest first, plus pongo2's &&, ||, !, <>.
var twoCharOps = [...]string{"**", "//", "==", "!=", "<=", ">=", "&&", "||", "<>"}

const oneCharOps = "+-*/%~<>=()[]{},.:|;!"

type lexer struct {
	src  string
	toks []token
}

// lex tokenizes a normalized source.
func lex(src string) ([]token, error) {
	l := &lexer{src: src, toks: make([]token, 0, len(src)/4+8)}
	if err := l.run(); err != nil {
		return nil, err
	}
	l.toks = append(l.toks, token{kind: tEOF, pos: len(src), end: len(src)})
	return l.toks, nil
}

// errAt is a syntax error at a byte offset (Parse adds its line and column).
func errAt(pos int, format string, args ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// tagStart finds the next {{, {% or {# at or after i. It returns its offset and kind (0 if
// none).
func tagStart(src string, i int) (int, byte) {
	for {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			return -1, 0
		}
		i += j
		switch src[i+1] {
		case '{', '%', '#':
			return i, src[i+1]
		}
		i++
	}
}

func (l *lexer) data(text string, pos int) {
	if text != "" {
		l.toks = append(l.toks, token{kind: tData, val: text, pos: pos, end: pos + len(text)})
	}
}

func (l *lexer) run() error {
	src := l.src
	i := 0
	lstrip := false // the previous tag ended with "-": strip the whitespace that follows it
	for i < len(src) {
		j, kind := tagStart(src, i)
		if j < 0 {
			text := src[i:]
			if lstrip {
				text = trimLeftSpace(text)
			}
			l.data(text, len(src)-len(text))
			return nil
		}
		text := src[i:j]
		textPos := i
		if lstrip {
			t := trimLeftSpace(text)
			textPos += len(text) - len(t)
			text = t
		}
		sign := byte(0)
		k := j + 2
		if k < len(src) && (src[k] == '-' || src[k] == '+') {
			sign = src[k]
			k++
		}
		if sign == '-' {
			text = trimRightSpace(text)
		}
		// {% raw %}: everything up to {% endraw %} is text.
		if kind == '%' {
			if word, trim, bodyStart, ok := matchRaw(src, k); ok {
				l.data(text, textPos)
				body, after, rstrip, err := rawBody(src, word, bodyStart, j)
				if err != nil {
					return err
				}
				if trim {
					body = trimLeftSpace(body)
				}
				if rstrip {
					body = trimRightSpace(body)
				}
				l.data(body, bodyStart)
				i, lstrip = after.pos, after.lstrip
				continue
			}
		}
		l.data(text, textPos)
		switch kind {
		case '#':
			end := strings.Index(src[k:], "#}")
			if end < 0 {
				return errAt(j, "missing end of comment tag: a {# comment #} is never closed")
			}
			end += k
			lstrip = end > k && src[end-1] == '-'
			i = end + 2
			continue
		case '{':
			l.toks = append(l.toks, token{kind: tVarBeg, val: "{{", pos: j, end: k})
		case '%':
			l.toks = append(l.toks, token{kind: tBlockBeg, val: "{%", pos: j, end: k})
		}
		next, strip, err := l.tag(k, kind)
		if err != nil {
			return err
		}
		i, lstrip = next, strip
	}
	return nil
}

// opened names a tag that is not closed: "{{", or "{%" and the statement's name when it has
// one ({% if).
func (l *lexer) opened(first int, kind byte) string {
	if kind == '{' {
		return "this {{"
	}
	if first < len(l.toks) && l.toks[first].kind == tName {
		return "this {% " + l.toks[first].val
	}
	return "this {%"
}

// lineColOf is the 1-based line and column (in characters) of byte offset pos of src.
func lineColOf(src string, pos int) (int, int) {
	start := strings.LastIndexByte(src[:pos], '\n') + 1
	return 1 + strings.Count(src[:pos], "\n"), utf8.RuneCountInString(src[start:pos]) + 1
}

type rawEnd struct {
	pos    int
	lstrip bool
}

// matchRaw reports whether the tag whose content starts at k is {% raw %} (optionally
// {% raw -%}); bodyStart is just after it.
func matchRaw(src string, k int) (word string, trim bool, bodyStart int, ok bool) {
	p := skipSpace(src, k)
	switch {
	case strings.HasPrefix(src[p:], "raw"):
		word = "raw"
	case strings.HasPrefix(src[p:], "verbatim"): // pongo2's name for it
		word = "verbatim"
	default:
		return "", false, 0, false
	}
	p += len(word)
	if p < len(src) && isNameByte(src[p]) {
		return "", false, 0, false
	}
	p = skipSpace(src, p)
	if strings.HasPrefix(src[p:], "-%}") {
		return word, true, p + 3, true
	}
	if strings.HasPrefix(src[p:], "%}") {
		return word, false, p + 2, true
	}
	return "", false, 0, false
}

// rawBody finds {% endraw %} (or {% endverbatim %}) after bodyStart. It returns the body,
// where lexing resumes, and whether the end tag strips the whitespace before it.
func rawBody(src, word string, bodyStart, rawPos int) (body string, after rawEnd, rstrip bool, err error) {
	endWord := "end" + word
	i := bodyStart
	for {
		j := strings.Index(src[i:], "{%")
		if j < 0 {
			return "", rawEnd{}, false, errAt(rawPos, "missing end of raw directive: {%% %s %%} is never closed by {%% %s %%}", word, endWord)
		}
		j += i
		p := j + 2
		sign := byte(0)
		if p < len(src) && (src[p] == '-' || src[p] == '+') {
			sign = src[p]
			p++
		}
		p = skipSpace(src, p)
		if strings.HasPrefix(src[p:], endWord) && (p+len(endWord) >= len(src) || !isNameByte(src[p+len(endWord)])) {
			p = skipSpace(src, p+len(endWord))
			switch {
			case strings.HasPrefix(src[p:], "-%}"):
				return src[bodyStart:j], rawEnd{pos: p + 3, lstrip: true}, sign == '-', nil
			case strings.HasPrefix(src[p:], "+%}"):
				return src[bodyStart:j], rawEnd{pos: p + 3}, sign == '-', nil
			case strings.HasPrefix(src[p:], "%}"):
				return src[bodyStart:j], rawEnd{pos: p + 2}, sign == '-', nil
			}
		}
		i = j + 2
	}
}

// tag lexes the inside of a {{ }} or {% %} tag starting at i, up to and including its end.
// It returns the offset after the end and whether the end strips the following whitespace.
func (l *lexer) tag(i int, kind byte) (int, bool, error) {
	src := l.src
	closer := "%}"
	endKind := tBlockEnd
	if kind == '{' {
		closer, endKind = "}}", tVarEnd
	}
	var balance []byte
	lastDot := false
	start := i - 2
	first := len(l.toks) // the tag's first token, once lexed
	for {
		for i < len(src) && isSpaceByte(src[i]) {
			i++
		}
		if i >= len(src) {
			return 0, false, errAt(start, "%s is never closed: expected %q before the end of the template", l.opened(first, kind), closer)
		}
		if len(balance) == 0 {
			if strings.HasPrefix(src[i:], closer) {
				l.toks = append(l.toks, token{kind: endKind, val: closer, pos: i, end: i + 2})
				return i + 2, false, nil
			}
			if src[i] == '-' && strings.HasPrefix(src[i+1:], closer) {
				l.toks = append(l.toks, token{kind: endKind, val: closer, pos: i, end: i + 3})
				return i + 3, true, nil
			}
			if kind == '%' && src[i] == '+' && strings.HasPrefix(src[i+1:], closer) {
				l.toks = append(l.toks, token{kind: endKind, val: closer, pos: i, end: i + 3})
				return i + 3, false, nil
			}
			if strings.HasPrefix(src[i:], "{%") || strings.HasPrefix(src[i:], "{{") {
				// Reported where the tag opens, as Jinja2 cannot (it stops at the first token
				// after the missing end, past the line the operator has to fix).
				line, col := lineColOf(src, i)
				return 0, false, errAt(start, "%s is never closed: expected %q before the next tag, at line %d column %d", l.opened(first, kind), closer, line, col)
			}
		}
		c := src[i]
		p := i
		switch {
		case isDigitByte(c):
			tok, n, err := lexNumber(src, i, lastDot)
			if err != nil {
				return 0, false, err
			}
			l.toks = append(l.toks, tok)
			i = n
			lastDot = false
			continue
		case c == '"' || c == '\'':
			s, n, err := lexString(src, i)
			if err != nil {
				return 0, false, err
			}
			l.toks = append(l.toks, token{kind: tString, val: s, pos: p, end: n})
			i = n
			lastDot = false
			continue
		case isNameStartByte(c) || c >= utf8.RuneSelf:
			n := nameEnd(src, i)
			if n == i {
				r, _ := utf8.DecodeRuneInString(src[i:])
				return 0, false, errAt(i, "unexpected character %q inside a tag", r)
			}
			l.toks = append(l.toks, token{kind: tName, val: src[i:n], pos: p, end: n})
			i = n
			lastDot = false
			continue
		}
		op, bal, err := operator(src, i, balance)
		if err != nil {
			return 0, false, err
		}
		balance = bal
		l.toks = append(l.toks, token{kind: tOp, val: op, pos: p, end: i + len(op)})
		i += len(op)
		lastDot = op == "."
	}
}

// nameEnd returns the end of the name starting at i (i itself if there is none): letters,
// '_', then digits and combining marks too, as Python identifiers.
func nameEnd(src string, i int) int {
	n := i
	for n < len(src) {
		r, size := utf8.DecodeRuneInString(src[n:])
		if r == '_' || unicode.IsLetter(r) || (n > i && (unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r))) {
			n += size
			continue
		}
		break
	}
	return n
}

// operator reads the operator at src[i]. balance holds the closing brackets awaited: it is
// returned with the bracket the operator opens or closes.
func operator(src string, i int, balance []byte) (string, []byte, error) {
	op := ""
	for _, o := range twoCharOps {
		if strings.HasPrefix(src[i:], o) {
			op = o
			break
		}
	}
	if op == "" && strings.IndexByte(oneCharOps, src[i]) >= 0 {
		op = src[i : i+1]
	}
	if op == "" {
		r, _ := utf8.DecodeRuneInString(src[i:])
		return "", balance, errAt(i, "unexpected character %q inside a tag", r)
	}
	switch op {
	case "(":
		balance = append(balance, ')')
	case "[":
		balance = append(balance, ']')
	case "{":
		balance = append(balance, '}')
	case ")", "]", "}":
		if len(balance) == 0 {
			return "", balance, errAt(i, "unbalanced %q: there is no opening bracket for it", op)
		}
		if want := balance[len(balance)-1]; want != op[0] {
			return "", balance, errAt(i, "unbalanced %q: expected %q", op, want)
		}
		balance = balance[:len(balance)-1]
	}
	return op, balance, nil
}

// lexNumber reads an integer (decimal, 0x, 0o, 0b; _ separators) or a float at src[i]. After a
// dot, digits are an integer (foo.0.1 is foo[0][1]), as in Jinja2.
func lexNumber(src string, i int, afterDot bool) (token, int, error) {
	start := i
	if src[i] == '0' && i+1 < len(src) {
		base := 0
		switch src[i+1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			j := i + 2
			for j < len(src) && (src[j] == '_' || digitVal(src[j]) < base) {
				j++
			}
			text := strings.ReplaceAll(src[i+2:j], "_", "")
			if text == "" {
				return token{}, 0, errAt(i, "bad number %q", src[i:j])
			}
			return intToken(text, base, src[start:j], start, j)
		}
	}
	j := i
	for j < len(src) && (isDigitByte(src[j]) || (src[j] == '_' && j+1 < len(src) && isDigitByte(src[j+1]))) {
		j++
	}
	isFloat := false
	if !afterDot {
		if j+1 < len(src) && src[j] == '.' && isDigitByte(src[j+1]) {
			isFloat = true
			j++
			for j < len(src) && (isDigitByte(src[j]) || (src[j] == '_' && j+1 < len(src) && isDigitByte(src[j+1]))) {
				j++
			}
		}
		if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
			k := j + 1
			if k < len(src) && (src[k] == '+' || src[k] == '-') {
				k++
			}
			if k < len(src) && isDigitByte(src[k]) {
				isFloat = true
				j = k
				for j < len(src) && (isDigitByte(src[j]) || (src[j] == '_' && j+1 < len(src) && isDigitByte(src[j+1]))) {
					j++
				}
			}
		}
	}
	text := strings.ReplaceAll(src[i:j], "_", "")
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !isRangeErr(err) {
			return token{}, 0, errAt(i, "bad number %q", src[i:j])
		}
		return token{kind: tFloat, val: src[i:j], num: f, pos: start, end: j}, j, nil
	}
	if len(text) > 1 && text[0] == '0' && strings.Trim(text, "0") != "" {
		// Python has no 012: Jinja2 lexes 0 and 12 and then fails to parse.
		return token{}, 0, errAt(i, "bad number %q: leading zeros are not allowed (write 0o12 for octal)", src[i:j])
	}
	return intToken(text, 10, src[i:j], start, j)
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func intToken(digits string, base int, text string, start, end int) (token, int, error) {
	if n, err := strconv.ParseInt(digits, base, 64); err == nil {
		return token{kind: tInt, val: text, num: n, pos: start, end: end}, end, nil
	}
	b, ok := new(big.Int).SetString(digits, base)
	if !ok {
		return token{}, 0, errAt(start, "bad number %q", text)
	}
	return token{kind: tInt, val: text, num: b, pos: start, end: end}, end, nil
}

func digitVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return 99
}

// lexString reads a quoted string at src[i] with Python's escapes (Jinja2 decodes them with
// "unicode-escape"); it returns the value and the offset after the closing quote.
func lexString(src string, i int) (string, int, error) {
	q := src[i]
	start := i
	i++
	// Fast path: no escapes.
	if j := strings.IndexByte(src[i:], q); j >= 0 && strings.IndexByte(src[i:i+j], '\\') < 0 {
		return src[i : i+j], i + j + 1, nil
	}
	var b strings.Builder
	for {
		if i >= len(src) {
			return "", 0, errAt(start, "this string is never closed")
		}
		c := src[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(src) {
			return "", 0, errAt(start, "this string is never closed")
		}
		e := src[i+1]
		i += 2
		switch e {
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case '\n':
			// line continuation
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for n := 0; n < 2 && i < len(src) && src[i] >= '0' && src[i] <= '7'; n++ {
				v = v*8 + int(src[i]-'0')
				i++
			}
			b.WriteRune(rune(v))
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(src) {
				return "", 0, errAt(i-2, "truncated \\%c escape in a string", e)
			}
			v, err := strconv.ParseUint(src[i:i+n], 16, 32)
			if err != nil || v > unicode.MaxRune {
				return "", 0, errAt(i-2, "truncated \\%c escape in a string", e)
			}
			b.WriteRune(rune(v))
			i += n
		case 'N':
			// Python's \N{name}: Unicode's name table is not here (an error rather than
			// another meaning; Jinja2 also fails on a \N without a valid name).
			return "", 0, errAt(i-2, "\\N{...} escapes (Unicode character names) are not supported in strings: write the character itself or \\uXXXX")
		default:
			// Python keeps unknown escapes as they are: '\.' is a backslash and a dot.
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
}

func isNameStartByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isNameByte(c byte) bool { return isNameStartByte(c) || isDigitByte(c) }

func isDigitByte(c byte) bool { return c >= '0' && c <= '9' }

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func skipSpace(src string, i int) int {
	for i < len(src) && isSpaceByte(src[i]) {
		i++
	}
	return i
}

// isPySpace is Python's str.isspace for one character.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

func trimLeftSpace(s string) string  { return strings.TrimLeftFunc(s, isPySpace) }
func trimRightSpace(s string) string { return strings.TrimRightFunc(s, isPySpace) }
