package render

import (
	"fmt"
	"strconv"
	"strings"
)

// This file lexes the inside of one template tag ({{ ... }} or {% ... %}) into Jinja2 tokens.
// The lexer accepts the union of Jinja2's and pongo2's expression syntax: Jinja2 operators
// (~, **, //, is, not in, ...) and pongo2's (&&, ||, !, <>, filter:arg).

type tokKind uint8

const (
	tEOF tokKind = iota
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	val  string // name, operator, or the unescaped string literal
	i    int64
	f    float64
	off  int // byte offset of the token in the template source
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of tag"
	case tString:
		return strconv.Quote(t.val)
	case tInt, tFloat, tName, tOp:
		return "'" + t.val + "'"
	}
	return t.val
}

// threeOps and twoOps are matched longest first.
var twoOps = []string{"**", "//", "==", "!=", "<=", ">=", "&&", "||", "<>"}

const oneOps = "+-*/%~<>=()[]{},.:|!"

// lexTag lexes from off (just after "{{" or "{%" and an optional whitespace-control sign) to
// the closing delimiter. closer is "}}" or "%}". It returns the tokens (ending with tEOF), the
// offset just after the closing delimiter, and whether the closer asked to trim whitespace
// ("-}}" / "-%}").
func lexTag(src string, off int, closer string) (toks []token, end int, trimRight bool, err error) {
	var depth []byte
	i := off
	lastWasDot := false
	for {
		// Skip whitespace (Jinja2 allows newlines inside tags).
		for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
			i++
		}
		if i >= len(src) {
			return nil, 0, false, &exprError{at: off, err: fmt.Errorf("tag is not closed: expected %q before the end of the template", closer)}
		}
		if len(depth) == 0 {
			if strings.HasPrefix(src[i:], closer) {
				toks = append(toks, token{kind: tEOF, off: i})
				return toks, i + len(closer), false, nil
			}
			if (src[i] == '-' || src[i] == '+') && strings.HasPrefix(src[i+1:], closer) {
				toks = append(toks, token{kind: tEOF, off: i})
				return toks, i + 1 + len(closer), src[i] == '-', nil
			}
			if strings.HasPrefix(src[i:], "{%") || strings.HasPrefix(src[i:], "{{") {
				return nil, 0, false, &exprError{at: i, err: fmt.Errorf("a new tag starts here but the previous one is not closed: expected %q", closer)}
			}
		}
		c := src[i]
		start := i
		switch {
		case isNameStart(c):
			for i < len(src) && isNameChar(src[i]) {
				i++
			}
			toks = append(toks, token{kind: tName, val: src[start:i], off: start})
			lastWasDot = false
			continue
		case c >= '0' && c <= '9':
			for i < len(src) && (isDigit(src[i]) || src[i] == '_') {
				i++
			}
			isFloat := false
			// A float, unless this number is an attribute (foo.0.1 is foo[0][1]).
			if !lastWasDot && i+1 < len(src) && src[i] == '.' && isDigit(src[i+1]) {
				isFloat = true
				i++
				for i < len(src) && (isDigit(src[i]) || src[i] == '_') {
					i++
				}
			}
			if !lastWasDot && i < len(src) && (src[i] == 'e' || src[i] == 'E') {
				j := i + 1
				if j < len(src) && (src[j] == '+' || src[j] == '-') {
					j++
				}
				if j < len(src) && isDigit(src[j]) {
					isFloat = true
					i = j
					for i < len(src) && isDigit(src[i]) {
						i++
					}
				}
			}
			text := strings.ReplaceAll(src[start:i], "_", "")
			if isFloat {
				f, perr := strconv.ParseFloat(text, 64)
				if perr != nil {
					return nil, 0, false, &exprError{at: start, err: fmt.Errorf("bad number %q", src[start:i])}
				}
				toks = append(toks, token{kind: tFloat, val: src[start:i], f: f, off: start})
			} else {
				n, perr := strconv.ParseInt(text, 10, 64)
				if perr != nil {
					return nil, 0, false, &exprError{at: start, err: fmt.Errorf("bad number %q", src[start:i])}
				}
				toks = append(toks, token{kind: tInt, val: src[start:i], i: n, off: start})
			}
			lastWasDot = false
			continue
		case c == '"' || c == '\'':
			s, n, serr := lexString(src, i)
			if serr != nil {
				return nil, 0, false, serr
			}
			toks = append(toks, token{kind: tString, val: s, off: start})
			i = n
			lastWasDot = false
			continue
		}
		// Operators.
		op := ""
		for _, o := range twoOps {
			if strings.HasPrefix(src[i:], o) {
				op = o
				break
			}
		}
		if op == "" && strings.IndexByte(oneOps, c) >= 0 {
			op = src[i : i+1]
		}
		if op == "" {
			return nil, 0, false, &exprError{at: i, err: fmt.Errorf("unexpected character %q inside a tag", src[i])}
		}
		switch op {
		case "(", "[", "{":
			depth = append(depth, op[0])
		case ")", "]", "}":
			want := map[string]byte{")": '(', "]": '[', "}": '{'}[op]
			if len(depth) == 0 || depth[len(depth)-1] != want {
				return nil, 0, false, &exprError{at: i, err: fmt.Errorf("unbalanced %q", op)}
			}
			depth = depth[:len(depth)-1]
		}
		i += len(op)
		toks = append(toks, token{kind: tOp, val: op, off: start})
		lastWasDot = op == "."
	}
}

// lexString reads a quoted string at src[i] with Python escapes; returns the value and the
// offset after the closing quote.
func lexString(src string, i int) (string, int, error) {
	q := src[i]
	start := i
	i++
	var b strings.Builder
	for {
		if i >= len(src) {
			return "", 0, &exprError{at: start, err: fmt.Errorf("string is not closed")}
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
			return "", 0, &exprError{at: start, err: fmt.Errorf("string is not closed")}
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
		case '0':
			b.WriteByte(0)
		case '\n':
			// line continuation
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(src) {
				return "", 0, &exprError{at: i - 2, err: fmt.Errorf("bad \\%c escape", e)}
			}
			v, err := strconv.ParseUint(src[i:i+n], 16, 32)
			if err != nil {
				return "", 0, &exprError{at: i - 2, err: fmt.Errorf("bad \\%c escape", e)}
			}
			b.WriteRune(rune(v))
			i += n
		default:
			// Python keeps unknown escapes as they are: '\.' is backslash, dot.
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
}

func isNameStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isNameChar(c byte) bool { return isNameStart(c) || isDigit(c) }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
