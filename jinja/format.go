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

// Python's string formatting: "fmt" % args and "fmt".format(...).

// percentFormat is Python's format % args: args is a tuple (positional), a dict (for
// %(name)s) or a single value.
func (e *evaluator) percentFormat(format string, args any) (any, error) {
	var pos []any
	var mapping any
	switch a := args.(type) {
	case Tuple:
		pos = a
	default:
		if isMapping(a) {
			mapping = a
		}
		pos = []any{a}
	}
	var b strings.Builder
	argi := 0
	next := func() (any, error) {
		if argi >= len(pos) {
			return nil, errors.New("not enough arguments for format string")
		}
		v := pos[argi]
		argi++
		return v, nil
	}
	usedMapping := false
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			return nil, errors.New("incomplete format")
		}
		var key *string
		if format[i] == '(' {
			depth, j := 1, i+1
			for ; j < len(format) && depth > 0; j++ {
				switch format[j] {
				case '(':
					depth++
				case ')':
					depth--
				}
			}
			if depth > 0 {
				return nil, errors.New("incomplete format key")
			}
			k := format[i+1 : j-1]
			key = &k
			i = j
		}
		var spec fmtSpec
		for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
			spec.flags += string(format[i])
			i++
		}
		if i < len(format) && format[i] == '*' {
			v, err := next()
			if err != nil {
				return nil, err
			}
			n, ok := indexOf(v)
			if !ok {
				return nil, errors.New("* wants int")
			}
			if n < 0 {
				spec.flags += "-"
				n = -n
			}
			spec.width = int(n)
			i++
		}
		for i < len(format) && isDigitByte(format[i]) {
			spec.width = spec.width*10 + int(format[i]-'0')
			if spec.width > e.maxSize {
				return nil, e.sizeError()
			}
			i++
		}
		spec.prec = -1
		if i < len(format) && format[i] == '.' {
			spec.prec = 0
			i++
			if i < len(format) && format[i] == '*' {
				v, err := next()
				if err != nil {
					return nil, err
				}
				n, _ := indexOf(v)
				spec.prec = int(max(n, 0))
				i++
			}
			for i < len(format) && isDigitByte(format[i]) {
				spec.prec = spec.prec*10 + int(format[i]-'0')
				if spec.prec > e.maxSize {
					return nil, e.sizeError()
				}
				i++
			}
		}
		for i < len(format) && strings.IndexByte("hlL", format[i]) >= 0 {
			i++
		}
		if i >= len(format) {
			return nil, errors.New("incomplete format")
		}
		spec.conv = format[i]
		if spec.conv == '%' {
			b.WriteByte('%')
			continue
		}
		var v any
		if key != nil {
			if mapping == nil {
				return nil, errors.New("format requires a mapping")
			}
			usedMapping = true
			var ok bool
			var err error
			if v, ok, err = mapGet(mapping, *key); err != nil {
				return nil, err
			} else if !ok {
				return nil, fmt.Errorf("KeyError: %s", reprString(*key))
			}
		} else {
			var err error
			if v, err = next(); err != nil {
				return nil, err
			}
		}
		s, err := e.formatOne(v, spec)
		if err != nil {
			return nil, err
		}
		if b.Len()+len(s) > e.maxSize {
			return nil, e.sizeError()
		}
		b.WriteString(s)
	}
	if argi < len(pos) && !usedMapping && mapping == nil {
		return nil, errors.New("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

type fmtSpec struct {
	flags string
	width int
	prec  int
	conv  byte
}

func (s fmtSpec) has(f byte) bool { return strings.IndexByte(s.flags, f) >= 0 }

// formatOne formats one % conversion.
func (e *evaluator) formatOne(v any, spec fmtSpec) (string, error) {
	var body string
	numeric := false
	neg := false
	switch spec.conv {
	case 's', 'r', 'a':
		var err error
		if spec.conv == 's' {
			body, err = e.str(v)
		} else {
			body, err = repr(v)
		}
		if err != nil {
			return "", err
		}
		if spec.conv == 'a' {
			body = asciiEscape(body)
		}
		if spec.prec >= 0 {
			if r := []rune(body); len(r) > spec.prec {
				body = string(r[:spec.prec])
			}
		}
	case 'd', 'i', 'u', 'x', 'X', 'o':
		n := toNum(v)
		if n.kind == 0 {
			if s, ok := strValue(v); ok {
				_ = s
			}
			what := "a real number"
			if spec.conv == 'x' || spec.conv == 'X' || spec.conv == 'o' {
				what = "an integer"
			}
			return "", fmt.Errorf("%%%c format: %s is required, not %s", spec.conv, what, typeName(v))
		}
		var bi *big.Int
		switch n.kind {
		case 'f':
			if spec.conv == 'x' || spec.conv == 'X' || spec.conv == 'o' {
				return "", fmt.Errorf("%%%c format: an integer is required, not float", spec.conv)
			}
			if math.IsInf(n.f, 0) || math.IsNaN(n.f) {
				return "", errors.New("cannot convert float infinity or NaN to integer")
			}
			bi, _ = new(big.Float).SetFloat64(math.Trunc(n.f)).Int(nil)
		default:
			bi = n.big()
		}
		neg = bi.Sign() < 0
		abs := new(big.Int).Abs(bi)
		switch spec.conv {
		case 'x':
			body = abs.Text(16)
			if spec.has('#') {
				body = "0x" + body
			}
		case 'X':
			body = strings.ToUpper(abs.Text(16))
			if spec.has('#') {
				body = "0X" + body
			}
		case 'o':
			body = abs.Text(8)
			if spec.has('#') {
				body = "0o" + body
			}
		default:
			body = abs.String()
		}
		if spec.prec > len(body) {
			body = strings.Repeat("0", spec.prec-len(body)) + body
		}
		numeric = true
	case 'e', 'E', 'f', 'F', 'g', 'G':
		n := toNum(v)
		if n.kind == 0 {
			return "", fmt.Errorf("must be real number, not %s", typeName(v))
		}
		f, err := n.float()
		if err != nil {
			return "", err
		}
		neg = math.Signbit(f) && !math.IsNaN(f)
		prec := spec.prec
		if prec < 0 {
			prec = 6
		}
		body = formatFloatSpec(math.Abs(f), spec.conv, prec, spec.has('#'))
		numeric = true
	case 'c':
		if n := toNum(v); n.kind == 'i' {
			body = string(rune(n.i))
		} else if s, ok := strValue(v); ok && utf8.RuneCountInString(s) == 1 {
			body = s
		} else {
			return "", errors.New("%c requires int or char")
		}
	default:
		return "", fmt.Errorf("unsupported format character '%c' (0x%x)", spec.conv, spec.conv)
	}
	sign := ""
	if numeric {
		switch {
		case neg:
			sign = "-"
		case spec.has('+'):
			sign = "+"
		case spec.has(' '):
			sign = " "
		}
	}
	pad := spec.width - utf8.RuneCountInString(sign+body)
	if pad <= 0 {
		return sign + body, nil
	}
	switch {
	case spec.has('-'):
		return sign + body + strings.Repeat(" ", pad), nil
	case spec.has('0') && numeric:
		if strings.HasPrefix(body, "0x") || strings.HasPrefix(body, "0X") || strings.HasPrefix(body, "0o") {
			return sign + body[:2] + strings.Repeat("0", pad) + body[2:], nil
		}
		return sign + strings.Repeat("0", pad) + body, nil
	}
	return strings.Repeat(" ", pad) + sign + body, nil
}

// formatFloatSpec formats a non-negative float for %e %f %g (and format()'s e f g).
func formatFloatSpec(f float64, conv byte, prec int, alt bool) string {
	upper := conv == 'E' || conv == 'F' || conv == 'G'
	switch {
	case math.IsInf(f, 0):
		if upper {
			return "INF"
		}
		return "inf"
	case math.IsNaN(f):
		if upper {
			return "NAN"
		}
		return "nan"
	}
	var s string
	switch conv {
	case 'e', 'E':
		s = strconv.FormatFloat(f, 'e', prec, 64)
	case 'f', 'F':
		s = strconv.FormatFloat(f, 'f', prec, 64)
	case 'g', 'G':
		if prec == 0 {
			prec = 1
		}
		exp := 0
		if f != 0 {
			d := strconv.FormatFloat(f, 'e', prec-1, 64)
			exp, _ = strconv.Atoi(d[strings.IndexByte(d, 'e')+1:])
		}
		if exp < -4 || exp >= prec {
			s = strconv.FormatFloat(f, 'e', prec-1, 64)
			if !alt {
				m, ex, _ := strings.Cut(s, "e")
				if strings.Contains(m, ".") {
					m = strings.TrimRight(strings.TrimRight(m, "0"), ".")
				}
				s = m + "e" + ex
			}
		} else {
			s = strconv.FormatFloat(f, 'f', max(prec-1-exp, 0), 64)
			if !alt && strings.Contains(s, ".") {
				s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
			}
		}
	}
	if alt && !strings.Contains(s, ".") {
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			s = s[:i] + "." + s[i:]
		} else {
			s += "."
		}
	}
	if upper {
		s = strings.ToUpper(s)
	}
	return s
}

// strFormat is Python's str.format(*args, **kw).
func (e *evaluator) strFormat(format string, args []any, kw map[string]any) (any, error) {
	var b strings.Builder
	auto := 0
	manual := false
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
		field := format[i+1 : j-1]
		i = j - 1
		name, spec, _ := strings.Cut(field, ":")
		conv := byte(0)
		if k := strings.IndexByte(name, '!'); k >= 0 {
			if k+2 != len(name) {
				return nil, errors.New("expected ':' after conversion specifier")
			}
			conv = name[k+1]
			name = name[:k]
		}
		// The first part of the name: a position or a keyword; then .attr and [key].
		end := strings.IndexAny(name, ".[")
		if end < 0 {
			end = len(name)
		}
		head, rest := name[:end], name[end:]
		var v any
		switch {
		case head == "":
			if manual {
				return nil, errors.New("cannot switch from manual field specification to automatic field numbering")
			}
			if auto >= len(args) {
				return nil, fmt.Errorf("Replacement index %d out of range for positional args tuple", auto)
			}
			v = args[auto]
			auto++
		case isDigitByte(head[0]):
			manual = true
			n, err := strconv.Atoi(head)
			if err != nil || n >= len(args) {
				return nil, fmt.Errorf("Replacement index %s out of range for positional args tuple", head)
			}
			v = args[n]
		default:
			var ok bool
			if v, ok = kw[head]; !ok {
				return nil, fmt.Errorf("KeyError: %s", reprString(head))
			}
		}
		for rest != "" {
			if rest[0] == '.' {
				k := strings.IndexAny(rest[1:], ".[")
				if k < 0 {
					k = len(rest) - 1
				}
				attr := rest[1 : k+1]
				rest = rest[k+1:]
				if isMapping(v) && !isDictMethod(attr) {
					// format() reads Python attributes: a dict's keys are not attributes.
					return nil, fmt.Errorf("'%s' object has no attribute %s", typeName(v), reprString(attr))
				}
				nv, err := e.getAttr(v, attr)
				if err != nil {
					return nil, err
				}
				if u, ok := nv.(*Undefined); ok {
					return nil, errors.New(u.message())
				}
				v = nv
				continue
			}
			k := strings.IndexByte(rest, ']')
			if k < 0 {
				return nil, errors.New("Missing ']' in format string")
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
					return nil, err
				}
			} else if i, ok := kv.(int64); ok {
				nv, found = e.index(v, i)
			}
			if !found {
				r, _ := repr(kv)
				return nil, fmt.Errorf("%s not found in %s", r, typeName(v))
			}
			v = nv
		}
		switch conv {
		case 'r', 'a':
			r, err := repr(v)
			if err != nil {
				return nil, err
			}
			if conv == 'a' {
				r = asciiEscape(r)
			}
			v = r
		case 's':
			s, err := e.str(v)
			if err != nil {
				return nil, err
			}
			v = s
		case 0:
		default:
			return nil, fmt.Errorf("Unknown conversion specifier %c", conv)
		}
		if strings.Contains(spec, "{") {
			sv, err := e.strFormat(spec, args[min(auto, len(args)):], kw)
			if err != nil {
				return nil, err
			}
			spec = sv.(string)
		}
		s, err := e.formatSpec(v, spec)
		if err != nil {
			return nil, err
		}
		if b.Len()+len(s) > e.maxSize {
			return nil, e.sizeError()
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// formatSpec is Python's format(v, spec):
// [[fill]align][sign][z][#][0][width][grouping][.precision][type].
func (e *evaluator) formatSpec(v any, spec string) (string, error) {
	if spec == "" {
		return e.str(v)
	}
	orig := spec
	fill, align := " ", byte(0)
	if r, n := utf8.DecodeRuneInString(spec); n > 0 && n < len(spec) && strings.IndexByte("<>^=", spec[n]) >= 0 {
		fill, align, spec = string(r), spec[n], spec[n+1:]
	} else if spec != "" && strings.IndexByte("<>^=", spec[0]) >= 0 {
		align, spec = spec[0], spec[1:]
	}
	sign := byte('-')
	if spec != "" && strings.IndexByte("+- ", spec[0]) >= 0 {
		sign, spec = spec[0], spec[1:]
	}
	alt := false
	if spec != "" && spec[0] == '#' {
		alt, spec = true, spec[1:]
	}
	if spec != "" && spec[0] == '0' {
		if align == 0 {
			fill, align = "0", '='
		}
		spec = spec[1:]
	}
	j := 0
	for j < len(spec) && isDigitByte(spec[j]) {
		j++
	}
	width, _ := strconv.Atoi(spec[:j])
	if width > e.maxSize {
		return "", e.sizeError()
	}
	spec = spec[j:]
	grouping := byte(0)
	if spec != "" && (spec[0] == ',' || spec[0] == '_') {
		grouping, spec = spec[0], spec[1:]
	}
	prec := -1
	if spec != "" && spec[0] == '.' {
		j = 1
		for j < len(spec) && isDigitByte(spec[j]) {
			j++
		}
		if j == 1 {
			return "", errors.New("Format specifier missing precision")
		}
		prec, _ = strconv.Atoi(spec[1:j])
		spec = spec[j:]
	}
	typ := byte(0)
	if len(spec) == 1 {
		typ = spec[0]
	} else if spec != "" {
		return "", fmt.Errorf("Invalid format specifier '%s' for object of type '%s'", orig, typeName(v))
	}
	n := toNum(v)
	_, isBool := v.(bool)
	var body string
	neg := false
	numeric := n.kind != 0 && typ != 's' && !(isBool && typ == 0)
	switch {
	case typ == 's' || (n.kind == 0 && typ == 0) || (isBool && typ == 0):
		if n.kind != 0 && typ == 's' && !isBool {
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
		if prec >= 0 {
			if r := []rune(s); len(r) > prec {
				s = string(r[:prec])
			}
		}
		body = s
		numeric = false
	case n.kind == 0:
		return "", fmt.Errorf("Unknown format code '%c' for object of type '%s'", typ, typeName(v))
	case typ == 'd' || typ == 'x' || typ == 'X' || typ == 'o' || typ == 'b' || typ == 'c' || typ == 'n' || (typ == 0 && n.kind != 'f'):
		if n.kind == 'f' {
			return "", fmt.Errorf("Unknown format code '%c' for object of type 'float'", typ)
		}
		bi := n.big()
		neg = bi.Sign() < 0
		abs := new(big.Int).Abs(bi)
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
		if grouping != 0 {
			body = group3(body, grouping)
		}
		if alt && typ != 0 && typ != 'd' && typ != 'n' && typ != 'c' {
			body = "0" + string(typ) + body
		}
	default:
		f, err := n.float()
		if err != nil {
			return "", err
		}
		neg = math.Signbit(f) && !math.IsNaN(f)
		f = math.Abs(f)
		switch typ {
		case 0:
			if prec < 0 {
				body = formatFloat(f)
			} else {
				body = formatFloatSpec(f, 'g', max(prec, 1), alt)
				if !strings.ContainsAny(body, ".e") && !math.IsInf(f, 0) && !math.IsNaN(f) {
					body += ".0"
				}
			}
		case '%':
			if prec < 0 {
				prec = 6
			}
			body = formatFloatSpec(f*100, 'f', prec, alt) + "%"
		case 'e', 'E', 'f', 'F', 'g', 'G':
			if prec < 0 {
				prec = 6
			}
			body = formatFloatSpec(f, typ, prec, alt)
		default:
			return "", fmt.Errorf("Unknown format code '%c' for object of type 'float'", typ)
		}
		if grouping != 0 {
			intPart, frac, _ := strings.Cut(body, ".")
			if !strings.ContainsAny(intPart, "einfa") {
				body = group3(intPart, grouping)
				if frac != "" || strings.Contains(body, ".") {
					body += "." + frac
				}
			}
		}
	}
	signStr := ""
	if numeric {
		switch {
		case neg:
			signStr = "-"
		case sign == '+':
			signStr = "+"
		case sign == ' ':
			signStr = " "
		}
	}
	if align == 0 {
		align = '<'
		if numeric {
			align = '>'
		}
	}
	pad := width - utf8.RuneCountInString(signStr+body)
	if pad <= 0 {
		return signStr + body, nil
	}
	p := strings.Repeat(fill, pad)
	switch align {
	case '<':
		return signStr + body + p, nil
	case '^':
		l := pad / 2
		return strings.Repeat(fill, l) + signStr + body + strings.Repeat(fill, pad-l), nil
	case '=':
		return signStr + p + body, nil
	}
	return p + signStr + body, nil
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

// asciiEscape turns a repr into Python's ascii(): non-ASCII characters escaped.
func asciiEscape(r string) string {
	var b strings.Builder
	for _, c := range r {
		switch {
		case c < 0x80:
			b.WriteRune(c)
		case c <= 0xff:
			fmt.Fprintf(&b, "\\x%02x", c)
		case c <= 0xffff:
			fmt.Fprintf(&b, "\\u%04x", c)
		default:
			fmt.Fprintf(&b, "\\U%08x", c)
		}
	}
	return b.String()
}
