package render

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// pyFormat is Python's `format % args`: args is a tuple (positional), a dict (for %(name)s),
// or a single value.
func pyFormat(format string, args any) (string, error) {
	var pos []any
	var mapping any
	switch a := args.(type) {
	case tuple:
		pos = a
	default:
		if isMap(a) {
			mapping = a
		}
		pos = []any{a}
	}
	var b strings.Builder
	argi := 0
	nextArg := func() (any, error) {
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
			return "", errors.New("incomplete format")
		}
		if format[i] == '%' {
			b.WriteByte('%')
			continue
		}
		var key *string
		if format[i] == '(' {
			end := strings.IndexByte(format[i:], ')')
			if end < 0 {
				return "", errors.New("incomplete format key")
			}
			k := format[i+1 : i+end]
			key = &k
			i += end + 1
		}
		flags := ""
		for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
			flags += string(format[i])
			i++
		}
		width := ""
		if i < len(format) && format[i] == '*' {
			v, err := nextArg()
			if err != nil {
				return "", err
			}
			n, _ := toInt(v)
			width = strconv.FormatInt(n, 10)
			i++
		}
		for i < len(format) && isDigit(format[i]) {
			width += string(format[i])
			i++
		}
		prec := ""
		hasPrec := false
		if i < len(format) && format[i] == '.' {
			hasPrec = true
			i++
			if i < len(format) && format[i] == '*' {
				v, err := nextArg()
				if err != nil {
					return "", err
				}
				n, _ := toInt(v)
				prec = strconv.FormatInt(n, 10)
				i++
			}
			for i < len(format) && isDigit(format[i]) {
				prec += string(format[i])
				i++
			}
			if prec == "" {
				prec = "0"
			}
		}
		for i < len(format) && strings.IndexByte("hlL", format[i]) >= 0 {
			i++
		}
		if i >= len(format) {
			return "", errors.New("incomplete format")
		}
		conv := format[i]
		var v any
		if key != nil {
			if mapping == nil {
				return "", errors.New("format requires a mapping")
			}
			usedMapping = true
			v = mapGet(mapping, *key)
		} else {
			var err error
			if v, err = nextArg(); err != nil {
				return "", err
			}
		}
		spec := "%" + flags + width
		if hasPrec {
			spec += "." + prec
		}
		switch conv {
		case 'd', 'i', 'u':
			n, ok := toIntStrict(v)
			if !ok {
				return "", fmt.Errorf("%%%c format: a number is required, not %s", conv, typeName(v))
			}
			b.WriteString(fmt.Sprintf(spec+"d", n))
		case 'x', 'X', 'o':
			n, ok := toIntStrict(v)
			if !ok {
				return "", fmt.Errorf("%%%c format: an integer is required, not %s", conv, typeName(v))
			}
			b.WriteString(fmt.Sprintf(spec+string(conv), n))
		case 'e', 'E', 'f', 'F', 'g', 'G':
			_, f, _, ok := number(v)
			if !ok {
				return "", fmt.Errorf("%%%c format: a number is required, not %s", conv, typeName(v))
			}
			if !hasPrec && conv != 'g' && conv != 'G' {
				spec += ".6"
			}
			if conv == 'F' {
				conv = 'f'
			}
			b.WriteString(fmt.Sprintf(spec+string(conv), f))
		case 's', 'r', 'a':
			var s string
			var err error
			if conv == 's' {
				s, err = toStr(v)
			} else {
				s, err = repr(v)
			}
			if err != nil {
				return "", err
			}
			b.WriteString(fmt.Sprintf(spec+"s", s))
		case 'c':
			if n, ok := toIntStrict(v); ok {
				b.WriteString(fmt.Sprintf(spec+"c", rune(n)))
			} else {
				s, err := toStr(v)
				if err != nil {
					return "", err
				}
				b.WriteString(fmt.Sprintf(spec+"s", s))
			}
		default:
			return "", fmt.Errorf("unsupported format character '%c'", conv)
		}
	}
	if argi < len(pos) && !usedMapping && mapping == nil {
		return "", errors.New("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

func toIntStrict(v any) (int64, bool) {
	i, f, isInt, ok := number(v)
	if !ok {
		return 0, false
	}
	if isInt {
		return i, true
	}
	return int64(f), true
}

// strFormat is Python's str.format() for the common cases: {} {0} {name} with an optional
// [[fill]align][sign][0][width][.precision][type] spec.
func strFormat(format string, args []any, kw map[string]any) (string, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c == '}' {
			if i+1 < len(format) && format[i+1] == '}' {
				i++
			}
			b.WriteByte('}')
			continue
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
		end := strings.IndexByte(format[i:], '}')
		if end < 0 {
			return "", errors.New("single '{' encountered in format string")
		}
		field := format[i+1 : i+end]
		i += end
		name, spec, _ := strings.Cut(field, ":")
		name, _, _ = strings.Cut(name, "!")
		var v any
		switch {
		case name == "":
			if auto >= len(args) {
				return "", errors.New("not enough arguments for format()")
			}
			v = args[auto]
			auto++
		case isDigit(name[0]):
			n, _ := strconv.Atoi(name)
			if n >= len(args) {
				return "", fmt.Errorf("format() index %d out of range", n)
			}
			v = args[n]
		default:
			head, rest, _ := strings.Cut(name, ".")
			v = kw[head]
			if rest != "" {
				v = getPath(v, rest)
			}
		}
		s, err := formatSpec(v, spec)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

func formatSpec(v any, spec string) (string, error) {
	if spec == "" {
		return toStr(v)
	}
	fill, align := " ", byte(0)
	if len(spec) >= 2 && strings.IndexByte("<>^=", spec[1]) >= 0 {
		fill, align, spec = spec[:1], spec[1], spec[2:]
	} else if len(spec) >= 1 && strings.IndexByte("<>^=", spec[0]) >= 0 {
		align, spec = spec[0], spec[1:]
	}
	sign := ""
	if spec != "" && strings.IndexByte("+- ", spec[0]) >= 0 {
		sign, spec = spec[:1], spec[1:]
	}
	if spec != "" && spec[0] == '0' {
		fill, spec = "0", spec[1:]
		if align == 0 {
			align = '='
		}
	}
	j := 0
	for j < len(spec) && isDigit(spec[j]) {
		j++
	}
	width, _ := strconv.Atoi(spec[:j])
	spec = spec[j:]
	prec := -1
	if spec != "" && spec[0] == '.' {
		j = 1
		for j < len(spec) && isDigit(spec[j]) {
			j++
		}
		prec, _ = strconv.Atoi(spec[1:j])
		spec = spec[j:]
	}
	typ := byte(0)
	if spec != "" {
		typ = spec[0]
	}
	var s string
	numeric := false
	switch typ {
	case 'd', 'x', 'X', 'o', 'b':
		n, ok := toIntStrict(v)
		if !ok {
			return "", fmt.Errorf("format code '%c' needs a number, not %s", typ, typeName(v))
		}
		base := map[byte]int{'d': 10, 'x': 16, 'X': 16, 'o': 8, 'b': 2}[typ]
		s = strconv.FormatInt(n, base)
		if typ == 'X' {
			s = strings.ToUpper(s)
		}
		numeric = true
	case 'f', 'F', 'e', 'E', 'g', 'G', '%':
		_, f, _, ok := number(v)
		if !ok {
			return "", fmt.Errorf("format code '%c' needs a number, not %s", typ, typeName(v))
		}
		if prec < 0 {
			prec = 6
		}
		if typ == '%' {
			s = strconv.FormatFloat(f*100, 'f', prec, 64) + "%"
		} else {
			t := typ
			if t == 'F' {
				t = 'f'
			}
			s = strconv.FormatFloat(f, t, prec, 64)
		}
		numeric = true
	case 0, 's':
		var err error
		if s, err = toStr(v); err != nil {
			return "", err
		}
		if _, _, _, ok := number(v); ok && typ == 0 {
			numeric = true
		}
		if prec >= 0 && !numeric {
			if r := []rune(s); len(r) > prec {
				s = string(r[:prec])
			}
		}
	default:
		return "", fmt.Errorf("unsupported format code '%c'", typ)
	}
	if numeric && sign == "+" && !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	if align == 0 {
		align = '<'
		if numeric {
			align = '>'
		}
	}
	pad := width - len([]rune(s))
	if pad <= 0 {
		return s, nil
	}
	p := strings.Repeat(fill, pad)
	switch align {
	case '<':
		return s + p, nil
	case '^':
		l := strings.Repeat(fill, pad/2)
		return l + s + strings.Repeat(fill, pad-pad/2), nil
	case '=':
		if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
			return s[:1] + p + s[1:], nil
		}
	}
	return p + s, nil
}
