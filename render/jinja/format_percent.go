package jinja

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"unicode/utf8"
)

// Python's printf-style formatting: "fmt" % args.

// percentFormat is Python's format % args: args is a tuple (positional), a dict (for
// %(name)s) or a single value.
func (e *evaluator) percentFormat(format string, args any) (any, error) {
	pa := &percentArgs{}
	switch a := args.(type) {
	case Tuple:
		pa.pos = a
	default:
		if isMapping(a) {
			pa.mapping = a
		}
		pa.pos = []any{a}
	}
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		key, spec, next, err := e.parsePercentSpec(format, i+1, pa)
		if err != nil {
			return nil, err
		}
		i = next
		if spec.conv == '%' {
			b.WriteByte('%')
			continue
		}
		v, err := pa.value(key)
		if err != nil {
			return nil, err
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
	if pa.argi < len(pa.pos) && !pa.usedMapping && pa.mapping == nil {
		return nil, errors.New("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

// percentArgs are the values a % format consumes: positional ones in order, or a mapping's
// by %(key)s.
type percentArgs struct {
	pos         []any
	argi        int // the next positional value
	mapping     any
	usedMapping bool
}

func (pa *percentArgs) next() (any, error) {
	if pa.argi >= len(pa.pos) {
		return nil, errors.New("not enough arguments for format string")
	}
	v := pa.pos[pa.argi]
	pa.argi++
	return v, nil
}

// value is the value of one conversion: the mapping's key, or the next positional value.
func (pa *percentArgs) value(key *string) (any, error) {
	if key == nil {
		return pa.next()
	}
	if pa.mapping == nil {
		return nil, errors.New("format requires a mapping")
	}
	pa.usedMapping = true
	v, ok, err := mapGet(pa.mapping, *key)
	if err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("KeyError: %s", reprString(*key))
	}
	return v, nil
}

// parsePercentSpec parses one conversion after its '%', starting at i:
// [(key)][flags][width|*][.precision|*][length]conversion. It returns the key (nil: none),
// the spec, and the offset of the conversion character. A * takes its number from pa.
func (e *evaluator) parsePercentSpec(format string, i int, pa *percentArgs) (*string, fmtSpec, int, error) {
	var spec fmtSpec
	if i >= len(format) {
		return nil, spec, i, errors.New("incomplete format")
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
			return nil, spec, i, errors.New("incomplete format key")
		}
		k := format[i+1 : j-1]
		key = &k
		i = j
	}
	for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
		spec.flags += string(format[i])
		i++
	}
	if i < len(format) && format[i] == '*' {
		v, err := pa.next()
		if err != nil {
			return nil, spec, i, err
		}
		n, ok := indexOf(v)
		if !ok {
			return nil, spec, i, errors.New("* wants int")
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
			return nil, spec, i, e.sizeError()
		}
		i++
	}
	spec.prec = -1
	if i < len(format) && format[i] == '.' {
		spec.prec = 0
		i++
		if i < len(format) && format[i] == '*' {
			v, err := pa.next()
			if err != nil {
				return nil, spec, i, err
			}
			n, _ := indexOf(v)
			spec.prec = int(max(n, 0))
			i++
		}
		for i < len(format) && isDigitByte(format[i]) {
			spec.prec = spec.prec*10 + int(format[i]-'0')
			if spec.prec > e.maxSize {
				return nil, spec, i, e.sizeError()
			}
			i++
		}
	}
	for i < len(format) && strings.IndexByte("hlL", format[i]) >= 0 {
		i++
	}
	if i >= len(format) {
		return nil, spec, i, errors.New("incomplete format")
	}
	spec.conv = format[i]
	return key, spec, i, nil
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
	var err error
	numeric := false
	neg := false
	switch spec.conv {
	case 's', 'r', 'a':
		body, err = e.percentString(v, spec)
	case 'd', 'i', 'u', 'x', 'X', 'o':
		body, neg, err = percentInt(v, spec)
		numeric = true
	case 'e', 'E', 'f', 'F', 'g', 'G':
		body, neg, err = percentFloat(v, spec)
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
	if err != nil {
		return "", err
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

// percentString is %s, %r and %a.
func (e *evaluator) percentString(v any, spec fmtSpec) (string, error) {
	var body string
	var err error
	if spec.conv == 's' {
		body, err = e.str(v)
	} else {
		if holdsSecret(v, 0) {
			e.taint.secret = true
		}
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
	return body, nil
}

// percentInt is %d, %i, %u, %x, %X and %o: the digits of the absolute value, and its sign.
func percentInt(v any, spec fmtSpec) (string, bool, error) {
	n := toNum(v)
	if n.kind == 0 {
		what := "a real number"
		if spec.conv == 'x' || spec.conv == 'X' || spec.conv == 'o' {
			what = "an integer"
		}
		return "", false, fmt.Errorf("%%%c format: %s is required, not %s", spec.conv, what, typeName(v))
	}
	var bi *big.Int
	switch n.kind {
	case 'f':
		if spec.conv == 'x' || spec.conv == 'X' || spec.conv == 'o' {
			return "", false, fmt.Errorf("%%%c format: an integer is required, not float", spec.conv)
		}
		if math.IsInf(n.f, 0) || math.IsNaN(n.f) {
			return "", false, errors.New("cannot convert float infinity or NaN to integer")
		}
		bi, _ = new(big.Float).SetFloat64(math.Trunc(n.f)).Int(nil)
	default:
		bi = n.big()
	}
	neg := bi.Sign() < 0
	abs := new(big.Int).Abs(bi)
	var body string
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
	return body, neg, nil
}

// percentFloat is %e, %E, %f, %F, %g and %G: the absolute value formatted, and its sign.
func percentFloat(v any, spec fmtSpec) (string, bool, error) {
	n := toNum(v)
	if n.kind == 0 {
		return "", false, fmt.Errorf("must be real number, not %s", typeName(v))
	}
	f, err := n.float()
	if err != nil {
		return "", false, err
	}
	neg := math.Signbit(f) && !math.IsNaN(f)
	prec := spec.prec
	if prec < 0 {
		prec = 6
	}
	return formatFloatSpec(math.Abs(f), spec.conv, prec, spec.has('#')), neg, nil
}
