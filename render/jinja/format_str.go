package jinja

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Python's str.format(*args, **kw) and format(v, spec).

// strFormat is Python's str.format(*args, **kw).
func (e *evaluator) strFormat(format string, args []any, kw map[string]any) (any, error) {
	var b strings.Builder
	fa := &formatArgs{args: args, kw: kw}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c == '}' {
			if i+1 < len(format) && format[i+1] == '}' {
				b.WriteByte('}')
				i++
				continue
			}
			return nil, errors.New("Single '}' encountered in format string")
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(format) && format[i+1] == '{' {
			b.WriteByte('{')
			i++
			continue
		}
		// The field: up to the matching '}' (a spec may hold nested {fields}).
		depth, j := 1, i+1
		for ; j < len(format) && depth > 0; j++ {
			switch format[j] {
			case '{':
				depth++
			case '}':
				depth--
			}
		}
		if depth > 0 {
			return nil, errors.New("expected '}' before end of string")
		}
		s, err := e.formatField(format[i+1:j-1], fa)
		if err != nil {
			return nil, err
		}
		i = j - 1
		if b.Len()+len(s) > e.maxSize {
			return nil, e.sizeError()
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// formatArgs are the arguments of a str.format call: positional ones numbered automatically
// ({}) or by hand ({0}), never both, and keywords.
type formatArgs struct {
	args   []any
	kw     map[string]any
	auto   int
	manual bool
}

// formatField formats one replacement field: name[.attr|[key]...][!conv][:spec].
func (e *evaluator) formatField(field string, fa *formatArgs) (string, error) {
	name, spec, _ := strings.Cut(field, ":")
	conv := byte(0)
	if k := strings.IndexByte(name, '!'); k >= 0 {
		if k+2 != len(name) {
			return "", errors.New("expected ':' after conversion specifier")
		}
		conv = name[k+1]
		name = name[:k]
	}
	v, err := e.formatValue(name, fa)
	if err != nil {
		return "", err
	}
	switch conv {
	case 'r', 'a':
		if holdsSecret(v, 0) {
			e.taint.secret = true
		}
		r, err := repr(v)
		if err != nil {
			return "", err
		}
		if conv == 'a' {
			r = asciiEscape(r)
		}
		v = r
	case 's':
		s, err := e.str(v)
		if err != nil {
			return "", err
		}
		v = s
	case 0:
	default:
		return "", fmt.Errorf("Unknown conversion specifier %c", conv)
	}
	if strings.Contains(spec, "{") {
		sv, err := e.strFormat(spec, fa.args[min(fa.auto, len(fa.args)):], fa.kw)
		if err != nil {
			return "", err
		}
		spec = sv.(string)
	}
	return e.formatSpec(v, spec)
}

// formatValue finds the value a field names: a position or a keyword, then .attr and [key].
func (e *evaluator) formatValue(name string, fa *formatArgs) (any, error) {
	end := strings.IndexAny(name, ".[")
	if end < 0 {
		end = len(name)
	}
	head, rest := name[:end], name[end:]
	var v any
	switch {
	case head == "":
		if fa.manual {
			return nil, errors.New("cannot switch from manual field specification to automatic field numbering")
		}
		if fa.auto >= len(fa.args) {
			return nil, fmt.Errorf("Replacement index %d out of range for positional args tuple", fa.auto)
		}
		v = fa.args[fa.auto]
		fa.auto++
	case isDigitByte(head[0]):
		fa.manual = true
		n, err := strconv.Atoi(head)
		if err != nil || n >= len(fa.args) {
			return nil, fmt.Errorf("Replacement index %s out of range for positional args tuple", head)
		}
		v = fa.args[n]
	default:
		var ok bool
		if v, ok = fa.kw[head]; !ok {
			return nil, fmt.Errorf("KeyError: %s", reprString(head))
		}
	}
	for rest != "" {
		var err error
		if rest[0] == '.' {
			v, rest, err = e.formatAttr(v, rest)
		} else {
			v, rest, err = e.formatItem(v, rest)
		}
		if err != nil {
			return nil, err
		}
	}
	return v, nil
}

// formatAttr is .attr in a field name (rest starts with the dot): Python attributes only.
func (e *evaluator) formatAttr(v any, rest string) (any, string, error) {
	k := strings.IndexAny(rest[1:], ".[")
	if k < 0 {
		k = len(rest) - 1
	}
	attr := rest[1 : k+1]
	rest = rest[k+1:]
	if isMapping(v) && !isDictMethod(attr) {
		// format() reads Python attributes: a dict's keys are not attributes.
		return nil, "", fmt.Errorf("'%s' object has no attribute %s", typeName(v), reprString(attr))
	}
	nv, err := e.getAttr(v, attr)
	if err != nil {
		return nil, "", err
	}
	if u, ok := nv.(*Undefined); ok {
		return nil, "", errors.New(u.message())
	}
	return nv, rest, nil
}

// formatItem is [key] in a field name (rest starts with the bracket): digits are an index.
func (e *evaluator) formatItem(v any, rest string) (any, string, error) {
	k := strings.IndexByte(rest, ']')
	if k < 0 {
		return nil, "", errors.New("Missing ']' in format string")
	}
	key := rest[1:k]
	rest = rest[k+1:]
	var kv any = key
	if n, err := strconv.ParseInt(key, 10, 64); err == nil {
		kv = n
	}
	var nv any
	var found bool
	if isMapping(v) {
		var err error
		if nv, found, err = mapGet(v, kv); err != nil {
			return nil, "", err
		}
	} else if i, ok := kv.(int64); ok {
		nv, found = e.index(v, i)
	}
	if !found {
		return nil, "", fmt.Errorf("%s not found in %s", pyReprOrName(kv), typeName(v))
	}
	return nv, rest, nil
}

// specFields is a parsed format spec: [[fill]align][sign][z][#][0][width][grouping][.precision][type].
type specFields struct {
	fill     string
	align    byte // 0: the type's default
	sign     byte
	alt      bool
	width    int
	grouping byte
	prec     int // -1: none
	typ      byte
}

// parseFormatSpec parses a spec for v (v only names the type in errors).
func (e *evaluator) parseFormatSpec(v any, spec string) (specFields, error) {
	orig := spec
	sf := specFields{fill: " ", sign: '-', prec: -1}
	if r, n := utf8.DecodeRuneInString(spec); n > 0 && n < len(spec) && strings.IndexByte("<>^=", spec[n]) >= 0 {
		sf.fill, sf.align, spec = string(r), spec[n], spec[n+1:]
	} else if spec != "" && strings.IndexByte("<>^=", spec[0]) >= 0 {
		sf.align, spec = spec[0], spec[1:]
	}
	if spec != "" && strings.IndexByte("+- ", spec[0]) >= 0 {
		sf.sign, spec = spec[0], spec[1:]
	}
	if spec != "" && spec[0] == '#' {
		sf.alt, spec = true, spec[1:]
	}
	if spec != "" && spec[0] == '0' {
		if sf.align == 0 {
			sf.fill, sf.align = "0", '='
		}
		spec = spec[1:]
	}
	j := 0
	for j < len(spec) && isDigitByte(spec[j]) {
		j++
	}
	sf.width, _ = strconv.Atoi(spec[:j])
	if sf.width > e.maxSize {
		return sf, e.sizeError()
	}
	spec = spec[j:]
	if spec != "" && (spec[0] == ',' || spec[0] == '_') {
		sf.grouping, spec = spec[0], spec[1:]
	}
	if spec != "" && spec[0] == '.' {
		j = 1
		for j < len(spec) && isDigitByte(spec[j]) {
			j++
		}
		if j == 1 {
			return sf, errors.New("Format specifier missing precision")
		}
		sf.prec, _ = strconv.Atoi(spec[1:j])
		spec = spec[j:]
	}
	if len(spec) == 1 {
		sf.typ = spec[0]
	} else if spec != "" {
		return sf, fmt.Errorf("Invalid format specifier '%s' for object of type '%s'", orig, typeName(v))
	}
	return sf, nil
}

// formatSpec is Python's format(v, spec).
func (e *evaluator) formatSpec(v any, spec string) (string, error) {
	if spec == "" {
		return e.str(v)
	}
	sf, err := e.parseFormatSpec(v, spec)
	if err != nil {
		return "", err
	}
	typ := sf.typ
	n := toNum(v)
	_, isBool := v.(bool)
	var body string
	neg := false
	numeric := n.kind != 0 && typ != 's' && !(isBool && typ == 0)
	switch {
	case typ == 's' || (n.kind == 0 && typ == 0) || (isBool && typ == 0):
		body, err = e.formatSpecString(v, n, isBool, sf)
		numeric = false
	case n.kind == 0:
		return "", fmt.Errorf("Unknown format code '%c' for object of type '%s'", typ, typeName(v))
	case typ == 'd' || typ == 'x' || typ == 'X' || typ == 'o' || typ == 'b' || typ == 'c' || typ == 'n' || (typ == 0 && n.kind != 'f'):
		body, neg, err = formatSpecInt(n, sf)
	default:
		body, neg, err = formatSpecFloat(n, sf)
	}
	if err != nil {
		return "", err
	}
	return alignFormatted(body, neg, numeric, sf), nil
}

// formatSpecString formats v as a string (type s, or no type for a non-number or a bool).
func (e *evaluator) formatSpecString(v any, n num, isBool bool, sf specFields) (string, error) {
	if n.kind != 0 && sf.typ == 's' && !isBool {
		return "", fmt.Errorf("Unknown format code 's' for object of type '%s'", typeName(v))
	}
	s, err := e.str(v)
	if err != nil {
		return "", err
	}
	if n.kind == 0 {
		if _, ok := strValue(v); !ok {
			return "", fmt.Errorf("unsupported format string passed to %s.__format__", typeName(v))
		}
	}
	if sf.prec >= 0 {
		if r := []rune(s); len(r) > sf.prec {
			s = string(r[:sf.prec])
		}
	}
	return s, nil
}

// formatSpecInt formats an int (types d x X o b c n, or none): the absolute value, and its
// sign.
func formatSpecInt(n num, sf specFields) (string, bool, error) {
	typ := sf.typ
	if n.kind == 'f' {
		return "", false, fmt.Errorf("Unknown format code '%c' for object of type 'float'", typ)
	}
	bi := n.big()
	neg := bi.Sign() < 0
	abs := new(big.Int).Abs(bi)
	var body string
	switch typ {
	case 'x':
		body = abs.Text(16)
	case 'X':
		body = strings.ToUpper(abs.Text(16))
	case 'o':
		body = abs.Text(8)
	case 'b':
		body = abs.Text(2)
	case 'c':
		body = string(rune(bi.Int64()))
	default:
		body = abs.String()
	}
	if sf.grouping != 0 {
		body = group3(body, sf.grouping)
	}
	if sf.alt && typ != 0 && typ != 'd' && typ != 'n' && typ != 'c' {
		body = "0" + string(typ) + body
	}
	return body, neg, nil
}

// formatSpecFloat formats a float (types e E f F g G %, or none): the absolute value, and its
// sign.
func formatSpecFloat(n num, sf specFields) (string, bool, error) {
	f, err := n.float()
	if err != nil {
		return "", false, err
	}
	neg := math.Signbit(f) && !math.IsNaN(f)
	f = math.Abs(f)
	prec := sf.prec
	var body string
	switch sf.typ {
	case 0:
		if prec < 0 {
			body = formatFloat(f)
		} else {
			body = formatFloatSpec(f, 'g', max(prec, 1), sf.alt)
			if !strings.ContainsAny(body, ".e") && !math.IsInf(f, 0) && !math.IsNaN(f) {
				body += ".0"
			}
		}
	case '%':
		if prec < 0 {
			prec = 6
		}
		body = formatFloatSpec(f*100, 'f', prec, sf.alt) + "%"
	case 'e', 'E', 'f', 'F', 'g', 'G':
		if prec < 0 {
			prec = 6
		}
		body = formatFloatSpec(f, sf.typ, prec, sf.alt)
	default:
		return "", false, fmt.Errorf("Unknown format code '%c' for object of type 'float'", sf.typ)
	}
	if sf.grouping != 0 {
		intPart, frac, _ := strings.Cut(body, ".")
		if !strings.ContainsAny(intPart, "einfa") {
			body = group3(intPart, sf.grouping)
			if frac != "" || strings.Contains(body, ".") {
				body += "." + frac
			}
		}
	}
	return body, neg, nil
}

// alignFormatted adds the sign and pads body to the spec's width.
func alignFormatted(body string, neg, numeric bool, sf specFields) string {
	signStr := ""
	if numeric {
		switch {
		case neg:
			signStr = "-"
		case sf.sign == '+':
			signStr = "+"
		case sf.sign == ' ':
			signStr = " "
		}
	}
	align := sf.align
	if align == 0 {
		align = '<'
		if numeric {
			align = '>'
		}
	}
	pad := sf.width - utf8.RuneCountInString(signStr+body)
	if pad <= 0 {
		return signStr + body
	}
	p := strings.Repeat(sf.fill, pad)
	switch align {
	case '<':
		return signStr + body + p
	case '^':
		l := pad / 2
		return strings.Repeat(sf.fill, l) + signStr + body + strings.Repeat(sf.fill, pad-l)
	case '=':
		return signStr + p + body
	}
	return p + signStr + body
}

func group3(digits string, sep byte) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	first := len(digits) % 3
	if first > 0 {
		b.WriteString(digits[:first])
	}
	for i := first; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(sep)
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}
