package jinja

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Jinja2's filters of numbers: abs, float, int, round, filesizeformat; and Python's
// parsing of numbers from strings (float('1_0.5'), int('0x1f', 0)).

func fAbs(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("abs", a, kw); err != nil {
		return nil, err
	}
	n := toNum(in)
	switch n.kind {
	case 'i':
		if n.i < 0 {
			return unaryOp(n.i, true)
		}
		return n.i, nil
	case 'f':
		return math.Abs(n.f), nil
	case 'b':
		return normBig(new(big.Int).Abs(n.b)), nil
	}
	if u, ok := in.(*Undefined); ok {
		return nil, u.fail()
	}
	return nil, fmt.Errorf("bad operand type for abs(): '%s'", typeName(in))
}

func fFilesizeformat(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("filesizeformat", a, kw, "binary")
	if err != nil {
		return nil, err
	}
	b, err := toFloat(e, in)
	if err != nil {
		return nil, err
	}
	binary := truthy(argOr(p[0], false))
	base := 1000.0
	prefixes := []string{"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"}
	if binary {
		base = 1024
		prefixes = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"}
	}
	switch {
	case b == 1:
		return "1 Byte", nil
	case b < base:
		return fmt.Sprintf("%d Bytes", int64(b)), nil
	}
	var unit float64
	var prefix string
	for i, pfx := range prefixes {
		unit = math.Pow(base, float64(i+2))
		prefix = pfx
		if b < unit {
			break
		}
	}
	return strconv.FormatFloat(base*b/unit, 'f', 1, 64) + " " + prefix, nil
}

// toFloat is Python's float(v).
func toFloat(e *evaluator, v any) (float64, error) {
	n := toNum(v)
	if n.kind != 0 {
		return n.float()
	}
	if s, ok := strValue(v); ok {
		e.plain(v)
		return parsePyFloat(s)
	}
	if u, ok := v.(*Undefined); ok {
		return 0, u.fail()
	}
	return 0, fmt.Errorf("float() argument must be a string or a real number, not '%s'", typeName(v))
}

func parsePyFloat(s string) (float64, error) {
	t := strings.TrimFunc(s, isPySpace)
	l := strings.ToLower(strings.TrimLeft(t, "+-"))
	switch l {
	case "inf", "infinity", "nan":
		f, _ := strconv.ParseFloat(strings.Replace(t, "infinity", "inf", 1), 64)
		if l == "nan" {
			return math.NaN(), nil
		}
		if strings.HasPrefix(t, "-") {
			return math.Inf(-1), nil
		}
		_ = f
		return math.Inf(1), nil
	}
	if !validUnderscores(t) {
		return 0, fmt.Errorf("could not convert string to float: %s", reprString(s))
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil && !isRangeErr(err) || strings.ContainsAny(t, "xXpP") {
		return 0, fmt.Errorf("could not convert string to float: %s", reprString(s))
	}
	return f, nil
}

// isRangeErr: the number is out of float64's range (Python makes it inf, as ParseFloat does).
func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// validUnderscores: Python allows _ only between digits.
func validUnderscores(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && (i == 0 || i == len(s)-1 || !isDigitByte(s[i-1]) || !isDigitByte(s[i+1])) {
			return false
		}
	}
	return true
}

func fFloat(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("float", a, kw, "default")
	if err != nil {
		return nil, err
	}
	if u, ok := in.(*Undefined); ok {
		return nil, u.fail()
	}
	f, err := toFloat(e, in)
	if err != nil {
		return argOr(p[0], 0.0), nil
	}
	return f, nil
}

func fInt(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("int", a, kw, "default", "base")
	if err != nil {
		return nil, err
	}
	def := argOr(p[0], int64(0))
	if u, ok := in.(*Undefined); ok {
		return nil, u.fail()
	}
	base := int64(10)
	if b, ok := indexOf(argOr(p[1], int64(10))); ok {
		base = b
	}
	if s, ok := strValue(in); ok {
		e.plain(in)
		if v, err := parsePyInt(s, int(base)); err == nil {
			return v, nil
		}
		if f, err := parsePyFloat(s); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return floatToInt(f), nil
		}
		return def, nil
	}
	n := toNum(in)
	switch n.kind {
	case 'i':
		return n.i, nil
	case 'b':
		return n.b, nil
	case 'f':
		if math.IsInf(n.f, 0) || math.IsNaN(n.f) {
			return def, nil
		}
		return floatToInt(n.f), nil
	}
	return def, nil
}

func floatToInt(f float64) any {
	t := math.Trunc(f)
	if t >= -9.2e18 && t <= 9.2e18 {
		return int64(t)
	}
	b, _ := new(big.Float).SetFloat64(t).Int(nil)
	return normBig(b)
}

// parsePyInt is Python's int(s, base).
func parsePyInt(s string, base int) (any, error) {
	t := strings.TrimFunc(s, isPySpace)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	if base == 0 || base == 16 || base == 8 || base == 2 {
		lower := strings.ToLower(t)
		switch {
		case strings.HasPrefix(lower, "0x") && (base == 0 || base == 16):
			t, base = t[2:], 16
		case strings.HasPrefix(lower, "0o") && (base == 0 || base == 8):
			t, base = t[2:], 8
		case strings.HasPrefix(lower, "0b") && (base == 0 || base == 2):
			t, base = t[2:], 2
		case base == 0:
			base = 10
			if len(t) > 1 && t[0] == '0' && strings.Trim(t, "0_") != "" {
				return nil, errors.New("invalid literal")
			}
		}
		t = strings.TrimPrefix(t, "_")
	}
	if t == "" || !validUnderscores(t) || base < 2 || base > 36 {
		return nil, fmt.Errorf("invalid literal for int() with base %d: %s", base, reprString(s))
	}
	b, ok := new(big.Int).SetString(strings.ReplaceAll(t, "_", ""), base)
	if !ok {
		return nil, fmt.Errorf("invalid literal for int() with base %d: %s", base, reprString(s))
	}
	if neg {
		b.Neg(b)
	}
	return normBig(b), nil
}

func fRound(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("round", a, kw, "precision", "method")
	if err != nil {
		return nil, err
	}
	method, _ := strValue(argOr(p[1], "common"))
	if method != "common" && method != "ceil" && method != "floor" {
		return nil, errors.New("method must be common, ceil or floor")
	}
	prec, ok := indexOf(argOr(p[0], int64(0)))
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(p[0]))
	}
	if u, ok := in.(*Undefined); ok {
		return nil, u.fail()
	}
	n := toNum(in)
	if n.kind == 0 {
		return nil, fmt.Errorf("type %s doesn't define __round__ method", typeName(in))
	}
	if method == "common" {
		if n.kind != 'f' {
			if prec >= 0 {
				if n.kind == 'b' {
					return n.b, nil
				}
				return n.i, nil
			}
			// round(int, -n): to a multiple of 10**n, half to even.
			f, _ := n.float()
			return floatToInt(roundHalfEven(f, prec)), nil
		}
		return roundHalfEven(n.f, prec), nil
	}
	f, err := n.float()
	if err != nil {
		return nil, err
	}
	scale := math.Pow(10, float64(prec))
	if method == "ceil" {
		return math.Ceil(f*scale) / scale, nil
	}
	return math.Floor(f*scale) / scale, nil
}

// roundHalfEven is Python's round(f, n): the decimal closest to the exact value of f, ties to
// even.
func roundHalfEven(f float64, n int64) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return f
	}
	if n >= 0 {
		if n > 330 {
			return f
		}
		r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(n), 64), 64)
		return r
	}
	if n < -330 {
		return 0 * f
	}
	p := new(big.Float).SetPrec(2000).SetFloat64(f)
	scale := new(big.Float).SetPrec(2000).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(-n), nil))
	q := new(big.Float).SetPrec(2000).Quo(p, scale)
	qs := q.Text('f', 0) // rounds half to even
	qi, _ := new(big.Float).SetPrec(2000).SetString(qs)
	r, _ := qi.Mul(qi, scale).Float64()
	return r
}
