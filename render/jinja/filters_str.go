package jinja

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Jinja2's filters of text: capitalize, title, upper, lower, center, format, indent, replace,
// trim, truncate, wordcount, wordwrap, string.

// strFilter is a filter of one string with no arguments.
func strFilter(name string, fn func(string) string) filterFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
		if _, err := bind(name, a, kw); err != nil {
			return nil, err
		}
		s, err := e.str(in)
		if err != nil {
			return nil, err
		}
		out := fn(s)
		if _, ok := in.(Markup); ok {
			return Markup(out), nil
		}
		return out, nil
	}
}

var wordBeginningSplit = regexp.MustCompile(`([-\s({\[<]+)`)

// jinjaTitle is the title filter: every word capitalized (words start after -, space and
// opening brackets).
func jinjaTitle(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range wordBeginningSplit.FindAllStringIndex(s, -1) {
		b.WriteString(capitalizeWord(s[last:m[0]]))
		b.WriteString(s[m[0]:m[1]])
		last = m[1]
	}
	b.WriteString(capitalizeWord(s[last:]))
	return b.String()
}

func capitalizeWord(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + strings.ToLower(s[n:])
}

func fCenter(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("center", a, kw, "width")
	if err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	w, ok := indexOf(argOr(p[0], int64(80)))
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(p[0]))
	}
	return e.justify(s, "center", w, " ")
}

func fFormat(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if len(a) > 0 && len(kw) > 0 {
		return nil, errors.New("can't handle positional and keyword arguments at the same time")
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	if len(kw) > 0 {
		d := newDict(len(kw))
		for _, k := range sortedKeys(kw) {
			d.set(k, kw[k])
		}
		return e.percentFormat(s, d)
	}
	return e.percentFormat(s, Tuple(a))
}

func fIndent(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("indent", a, kw, "width", "first", "blank")
	if err != nil {
		return nil, err
	}
	if err := needString(in); err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	var ind string
	switch w := argOr(p[0], int64(4)).(type) {
	case string:
		ind = w
	default:
		n, ok := indexOf(w)
		if !ok {
			return nil, fmt.Errorf("can't multiply sequence by non-int of type '%s'", typeName(w))
		}
		if n > 0 {
			if err := e.checkSize(int(min(n, int64(e.maxSize)+1))); err != nil {
				return nil, err
			}
			ind = strings.Repeat(" ", int(n))
		}
	}
	if err := e.checkSize(len(s) + (strings.Count(s, "\n")+2)*len(ind)); err != nil {
		return nil, err
	}
	s += "\n"
	lines := splitLines(s, false)
	var rv string
	if truthy(argOr(p[2], false)) {
		rv = strings.Join(lines, "\n"+ind)
	} else {
		var b strings.Builder
		b.WriteString(lines[0])
		for _, l := range lines[1:] {
			b.WriteByte('\n')
			if l != "" {
				b.WriteString(ind)
			}
			b.WriteString(l)
		}
		rv = b.String()
	}
	if truthy(argOr(p[1], false)) {
		rv = ind + rv
	}
	if _, ok := in.(Markup); ok {
		return Markup(rv), nil
	}
	return rv, nil
}

func fReplace(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("replace", a, kw, "old", "new", "count")
	if err != nil {
		return nil, err
	}
	if p[0] == noArg || p[1] == noArg {
		return nil, errors.New("replace() missing required arguments 'old' and 'new'")
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	old, err := e.str(p[0])
	if err != nil {
		return nil, err
	}
	repl, err := e.str(p[1])
	if err != nil {
		return nil, err
	}
	n := -1
	if c := argOr(p[2], nil); c != nil {
		x, ok := indexOf(c)
		if !ok {
			return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(c))
		}
		n = int(x)
	}
	v, err := e.pyReplace(s, old, repl, n)
	if m, ok := in.(Markup); ok && e.autoescape {
		_ = m
		return Markup(v.(string)), err
	}
	return v, err
}

func fString(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("string", a, kw); err != nil {
		return nil, err
	}
	if m, ok := in.(Markup); ok {
		return m, nil
	}
	return e.str(in)
}

func fTrim(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("trim", a, kw, "chars")
	if err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	if c := argOr(p[0], nil); c != nil {
		cut, err := e.str(c)
		if err != nil {
			return nil, err
		}
		return strings.Trim(s, cut), nil
	}
	return strings.TrimFunc(s, isPySpace), nil
}

func fTruncate(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("truncate", a, kw, "length", "killwords", "end", "leeway")
	if err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	length, ok := indexOf(argOr(p[0], int64(255)))
	if !ok {
		return nil, errors.New("truncate: length must be an integer")
	}
	end, err := e.str(argOr(p[2], "..."))
	if err != nil {
		return nil, err
	}
	leeway, ok := indexOf(argOr(p[3], int64(5)))
	if !ok || p[3] == nil {
		leeway = 5
	}
	endLen := int64(utf8.RuneCountInString(end))
	if length < endLen {
		return nil, fmt.Errorf("expected length >= %d, got %d", endLen, length)
	}
	if leeway < 0 {
		return nil, fmt.Errorf("expected leeway >= 0, got %d", leeway)
	}
	switch in.(type) {
	case nil, bool, int64, *big.Int, float64:
		return nil, fmt.Errorf("object of type '%s' has no len() (truncate takes a string: add |string)", typeName(in))
	}
	r := []rune(s)
	if int64(len(r)) <= length+leeway {
		return s, nil
	}
	cut := string(r[:length-endLen])
	if truthy(argOr(p[1], false)) {
		return cut + end, nil
	}
	if i := strings.LastIndex(cut, " "); i >= 0 {
		cut = cut[:i]
	}
	return cut + end, nil
}

func fWordcount(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("wordcount", a, kw); err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	n, inWord := int64(0), false
	for _, r := range s {
		w := r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
		if w && !inWord {
			n++
		}
		inWord = w
	}
	return n, nil
}

func fWordwrap(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("wordwrap", a, kw, "width", "break_long_words", "wrapstring", "break_on_hyphens")
	if err != nil {
		return nil, err
	}
	if err := needString(in); err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	width, ok := indexOf(argOr(p[0], int64(79)))
	if !ok {
		return nil, errors.New("wordwrap: width must be an integer")
	}
	if width <= 0 {
		return nil, fmt.Errorf("invalid width %d (must be > 0)", width)
	}
	wrap := "\n"
	if w := argOr(p[2], nil); w != nil {
		if wrap, err = e.str(w); err != nil {
			return nil, err
		}
	}
	breakLong := truthy(argOr(p[1], true))
	hyphens := truthy(argOr(p[3], true))
	lines := splitLines(s, false)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.Join(textWrap(l, int(width), breakLong, hyphens), wrap)
	}
	res := strings.Join(out, wrap)
	return res, e.checkSize(len(res))
}

// needString fails unless in is a string: Jinja2's indent and wordwrap use str operations on
// their input, which fail on any other type (on an int: 'int' object has no attribute
// 'splitlines').
func needString(in any) error {
	switch x := in.(type) {
	case string, Markup, *tainted:
		return nil
	case *Undefined:
		return x.fail()
	}
	return fmt.Errorf("the input must be a string, not %s (add |string)", typeName(in))
}
