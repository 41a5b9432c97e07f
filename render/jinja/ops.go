package jinja

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Python's operators: arithmetic with ints that grow beyond 64 bits (math/big), true
// division, floor division and modulo with Python's signs, equality across int/float/bool,
// ordering that refuses to compare a str with an int.

func opTypeError(op string, a, b any) error {
	return fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(a), typeName(b))
}

// arith applies + - * / // % ** to two values.
func (e *evaluator) arith(op string, a, b any) (any, error) {
	if u, ok := a.(*Undefined); ok {
		return nil, u.fail()
	}
	if u, ok := b.(*Undefined); ok {
		return nil, u.fail()
	}
	x, y := toNum(a), toNum(b)
	if x.kind != 0 && y.kind != 0 {
		return numArith(op, x, y)
	}
	switch op {
	case "+":
		return e.addValues(a, b)
	case "*":
		if y.kind != 0 && x.kind == 0 {
			return e.repeat(a, y, b)
		}
		if x.kind != 0 && y.kind == 0 {
			return e.repeat(b, x, a)
		}
	case "%":
		if s, ok := e.plain(a).(string); ok {
			return e.percentFormat(s, b)
		}
		if m, ok := a.(Markup); ok {
			out, err := e.percentFormat(string(m), escapeArgs(b))
			if err != nil {
				return nil, err
			}
			return Markup(out.(string)), nil
		}
	}
	return nil, opTypeError(op, a, b)
}

func numArith(op string, x, y num) (any, error) {
	if x.kind == 'f' || y.kind == 'f' {
		a, err := x.float()
		if err != nil {
			return nil, err
		}
		b, err := y.float()
		if err != nil {
			return nil, err
		}
		return floatArith(op, a, b)
	}
	if x.kind == 'i' && y.kind == 'i' {
		if v, done, err := intArith(op, x.i, y.i); done {
			return v, err
		}
	}
	return bigArith(op, x, y)
}

// intArith is the arithmetic of two int64s; done is false when the result does not fit
// (big ints take over).
func intArith(op string, a, b int64) (v any, done bool, err error) {
	switch op {
	case "+":
		if s := a + b; (s > a) == (b > 0) {
			return s, true, nil
		}
	case "-":
		if s := a - b; (s < a) == (b > 0) {
			return s, true, nil
		}
	case "*":
		if a == 0 || b == 0 {
			return int64(0), true, nil
		}
		if p := a * b; p/b == a && !(a == -1 && b == math.MinInt64) && !(b == -1 && a == math.MinInt64) {
			return p, true, nil
		}
	case "/":
		if b == 0 {
			return nil, true, errors.New("division by zero")
		}
		return float64(a) / float64(b), true, nil
	case "//":
		if b == 0 {
			return nil, true, errors.New("integer division or modulo by zero")
		}
		if !(a == math.MinInt64 && b == -1) {
			q := a / b
			if (a%b != 0) && ((a < 0) != (b < 0)) {
				q--
			}
			return q, true, nil
		}
	case "%":
		if b == 0 {
			return nil, true, errors.New("integer modulo by zero")
		}
		if b == -1 {
			return int64(0), true, nil
		}
		m := a % b
		if m != 0 && ((m < 0) != (b < 0)) {
			m += b
		}
		return m, true, nil
	case "**":
		if b < 0 {
			if a == 0 {
				return nil, true, errors.New("0.0 cannot be raised to a negative power")
			}
			return math.Pow(float64(a), float64(b)), true, nil
		}
		if r, ok := powInt(a, b); ok {
			return r, true, nil
		}
	}
	return nil, false, nil
}

// bigArith is the arithmetic of ints beyond 64 bits.
func bigArith(op string, x, y num) (any, error) {
	a, b := x.big(), y.big()
	switch op {
	case "+":
		return checkBits(new(big.Int).Add(a, b))
	case "-":
		return checkBits(new(big.Int).Sub(a, b))
	case "*":
		if a.BitLen()+b.BitLen() > maxIntBits+1 {
			return nil, errIntTooLarge
		}
		return checkBits(new(big.Int).Mul(a, b))
	case "/":
		if b.Sign() == 0 {
			return nil, errors.New("division by zero")
		}
		q, _ := new(big.Rat).SetFrac(a, b).Float64()
		if math.IsInf(q, 0) {
			return nil, errors.New("integer division result too large for a float")
		}
		return q, nil
	case "//", "%":
		if b.Sign() == 0 {
			if op == "//" {
				return nil, errors.New("integer division or modulo by zero")
			}
			return nil, errors.New("integer modulo by zero")
		}
		q, m := new(big.Int).DivMod(a, b, new(big.Int)) // Euclidean: m >= 0
		if m.Sign() != 0 && b.Sign() < 0 {
			// Python: the remainder has the sign of the divisor.
			m.Add(m, b)
			q.Add(q, big.NewInt(1))
		}
		if op == "//" {
			return normBig(q), nil
		}
		return normBig(m), nil
	case "**":
		if b.Sign() < 0 {
			fa, err := x.float()
			if err != nil {
				return nil, err
			}
			fb, err := y.float()
			if err != nil {
				return nil, err
			}
			if fa == 0 {
				return nil, errors.New("0.0 cannot be raised to a negative power")
			}
			return math.Pow(fa, fb), nil
		}
		if a.CmpAbs(big.NewInt(1)) <= 0 {
			// 0, 1, -1 to any power.
			if a.Sign() == 0 {
				if b.Sign() == 0 {
					return int64(1), nil
				}
				return int64(0), nil
			}
			if a.Sign() > 0 || b.Bit(0) == 0 {
				return int64(1), nil
			}
			return int64(-1), nil
		}
		if !b.IsInt64() || int64(a.BitLen()-1)*b.Int64() > maxIntBits {
			return nil, errIntTooLarge
		}
		return checkBits(new(big.Int).Exp(a, b, nil))
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

// powInt is a**b for b >= 0 when it fits in an int64.
func powInt(a, b int64) (int64, bool) {
	r := int64(1)
	for b > 0 {
		if b&1 == 1 {
			p := r * a
			if a != 0 && (p/a != r || (a == -1 && r == math.MinInt64)) {
				return 0, false
			}
			r = p
		}
		b >>= 1
		if b > 0 {
			sq := a * a
			if a != 0 && (sq/a != a || sq < 0) {
				return 0, false
			}
			a = sq
		}
	}
	return r, true
}

func floatArith(op string, a, b float64) (any, error) {
	switch op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return nil, errors.New("float division by zero")
		}
		return a / b, nil
	case "//":
		if b == 0 {
			return nil, errors.New("float floor division by zero")
		}
		return math.Floor(a / b), nil
	case "%":
		if b == 0 {
			return nil, errors.New("float modulo")
		}
		m := math.Mod(a, b)
		if m != 0 && ((m < 0) != (b < 0)) {
			m += b
		}
		return m, nil
	case "**":
		if a == 0 && b < 0 {
			return nil, errors.New("0.0 cannot be raised to a negative power")
		}
		r := math.Pow(a, b)
		if a < 0 && b != math.Trunc(b) {
			return nil, errors.New("a negative number cannot be raised to a fractional power (the result is complex)")
		}
		if math.IsInf(r, 0) && !math.IsInf(a, 0) {
			return nil, errors.New("(34, 'Numerical result out of range')")
		}
		return r, nil
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

// addValues is + for sequences and strings.
func (e *evaluator) addValues(a, b any) (any, error) {
	switch x := a.(type) {
	case Markup:
		s, err := e.escapeValue(b)
		if err != nil {
			return nil, err
		}
		return Markup(string(x) + string(s)), nil
	case string, *tainted:
		s := e.plain(a).(string)
		switch y := b.(type) {
		case string:
			return e.joinStr(s, y)
		case *tainted:
			return e.joinStr(s, e.plain(y).(string))
		case Markup:
			es := escapeString(s)
			return Markup(es + string(y)), nil
		}
	case Tuple:
		if y, ok := b.(Tuple); ok {
			if err := e.checkItems(len(x) + len(y)); err != nil {
				return nil, err
			}
			return append(append(Tuple{}, x...), y...), nil
		}
	}
	if isList(a) && isList(b) {
		la, lb := listItems(a), listItems(b)
		if err := e.checkItems(len(la) + len(lb)); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(la)+len(lb))
		out = append(out, la...)
		out = append(out, lb...)
		return &List{items: out}, nil
	}
	return nil, opTypeError("+", a, b)
}

func (e *evaluator) joinStr(a, b string) (any, error) {
	if err := e.checkSize(len(a) + len(b)); err != nil {
		return nil, err
	}
	return a + b, nil
}

// repeat is str * int, list * int, tuple * int.
func (e *evaluator) repeat(seq any, n num, orig any) (any, error) {
	if n.kind == 'f' {
		return nil, fmt.Errorf("can't multiply sequence by non-int of type 'float'")
	}
	count := int64(0)
	if n.kind == 'i' {
		count = n.i
	} else if n.b.Sign() > 0 {
		count = math.MaxInt64
	}
	if count < 0 {
		count = 0
	}
	switch x := seq.(type) {
	case string, *tainted:
		s := e.plain(seq).(string)
		if count > 0 && int64(len(s)) > int64(e.maxSize)/count {
			return nil, e.sizeError()
		}
		return strings.Repeat(s, int(count)), nil
	case Markup:
		if count > 0 && int64(len(x)) > int64(e.maxSize)/count {
			return nil, e.sizeError()
		}
		return Markup(strings.Repeat(string(x), int(count))), nil
	case Tuple:
		if count > 0 && int64(len(x)) > int64(e.maxItems)/count {
			return nil, e.sizeError()
		}
		out := make(Tuple, 0, int64(len(x))*count)
		for i := int64(0); i < count; i++ {
			out = append(out, x...)
		}
		return out, nil
	}
	if isList(seq) {
		items := listItems(seq)
		if count > 0 && int64(len(items)) > int64(e.maxItems)/count {
			return nil, e.sizeError()
		}
		out := make([]any, 0, int64(len(items))*count)
		for i := int64(0); i < count; i++ {
			out = append(out, items...)
		}
		return &List{items: out}, nil
	}
	return nil, opTypeError("*", seq, orig)
}

// isList: a list made by the template or from the data.
func isList(v any) bool {
	switch v.(type) {
	case *List, []any, []string, []map[string]any:
		return true
	}
	return false
}

// templateItems returns the items of a list or tuple the templates made, without a copy (false
// for any other value): what a loop target unpacks and what kept iterations walk.
func templateItems(v any) ([]any, bool) {
	switch x := v.(type) {
	case *List:
		return x.items, true
	case Tuple:
		return x, true
	}
	return nil, false
}

// listItems returns the items of a list (data strings checked, see fromData). The result
// must not be changed when the list comes from the template (it is its own storage).
func listItems(v any) []any {
	if items, ok := templateItems(v); ok {
		return items
	}
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromData(e)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromData(e)
		}
		return out
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	}
	return nil
}

// listLen is the length of a list isList or isTupleVal reports.
func listLen(v any) int {
	switch x := v.(type) {
	case *List:
		return len(x.items)
	case []any:
		return len(x)
	case []string:
		return len(x)
	case []map[string]any:
		return len(x)
	case Tuple:
		return len(x)
	}
	return 0
}

// listWindow is listItems(v)[lo:hi+1] (hi clamped to the list's end; lo >= 0), converting only
// those items: a slice of a resource's 10,000 objects (a block of them) costs its own length,
// not the list's.
func listWindow(v any, lo, hi int64) []any {
	n := int64(listLen(v))
	lo, hi = max(lo, 0), min(hi+1, n)
	if lo >= hi {
		return nil
	}
	switch x := v.(type) {
	case *List:
		return x.items[lo:hi]
	case []any:
		return listItems(x[lo:hi])
	case []string:
		return listItems(x[lo:hi])
	case []map[string]any:
		return listItems(x[lo:hi])
	case Tuple:
		return x[lo:hi]
	}
	return nil
}

// unaryOp is unary minus (and plus).
func unaryOp(v any, minus bool) (any, error) {
	if u, ok := v.(*Undefined); ok {
		return nil, u.fail()
	}
	n := toNum(v)
	switch n.kind {
	case 'i':
		if !minus {
			return n.i, nil
		}
		if n.i == math.MinInt64 {
			return new(big.Int).Neg(big.NewInt(n.i)), nil
		}
		return -n.i, nil
	case 'f':
		if !minus {
			return n.f, nil
		}
		return -n.f, nil
	case 'b':
		if !minus {
			return n.b, nil
		}
		return normBig(new(big.Int).Neg(n.b)), nil
	}
	op := "-"
	if !minus {
		op = "+"
	}
	return nil, fmt.Errorf("bad operand type for unary %s: '%s'", op, typeName(v))
}

// equal is Python's ==.
func equal(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	switch x := a.(type) {
	case *Undefined:
		_, ok := b.(*Undefined)
		return ok
	case string:
		if s, ok := strValue(b); ok {
			return x == s
		}
		return false
	case Markup:
		if s, ok := strValue(b); ok {
			return string(x) == s
		}
		return false
	case *tainted:
		if s, ok := strValue(b); ok {
			return x.s == s
		}
		return false
	}
	if _, ok := b.(*Undefined); ok {
		return false
	}
	if x, y := toNum(a), toNum(b); x.kind != 0 || y.kind != 0 {
		if x.kind == 0 || y.kind == 0 {
			return false
		}
		return numCompare(x, y) == 0
	}
	if isList(a) || isList(b) {
		if !isList(a) || !isList(b) {
			return false
		}
		return seqEqual(listItems(a), listItems(b))
	}
	if ta, ok := a.(Tuple); ok {
		tb, ok := b.(Tuple)
		return ok && seqEqual(ta, tb)
	}
	if isMapping(a) || isMapping(b) {
		if !isMapping(a) || !isMapping(b) || mapLen(a) != mapLen(b) {
			return false
		}
		same := true
		eachItem(a, func(k, v any) bool {
			w, ok, _ := mapGet(b, k)
			if !ok || !equal(v, w) {
				same = false
			}
			return same
		})
		return same
	}
	if ra, ok := a.(*rangeVal); ok {
		rb, ok := b.(*rangeVal)
		return ok && ra.len() == rb.len() && (ra.len() == 0 || (ra.start == rb.start && (ra.len() == 1 || ra.step == rb.step)))
	}
	if ra, ok := a.(*record.Record); ok {
		return ra == b
	}
	return a == b
}

func seqEqual(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func numCompare(x, y num) int {
	if x.kind == 'i' && y.kind == 'i' {
		switch {
		case x.i < y.i:
			return -1
		case x.i > y.i:
			return 1
		}
		return 0
	}
	if x.kind == 'f' || y.kind == 'f' {
		if x.kind == 'f' && y.kind == 'f' {
			switch {
			case x.f < y.f:
				return -1
			case x.f > y.f:
				return 1
			}
			return 0
		}
		// Exact comparison of an int with a float, as Python does it.
		fx, fy := new(big.Float).SetPrec(2000), new(big.Float).SetPrec(2000)
		if x.kind == 'f' {
			if math.IsNaN(x.f) {
				return 2
			}
			fx.SetFloat64(x.f)
		} else {
			fx.SetInt(x.big())
		}
		if y.kind == 'f' {
			if math.IsNaN(y.f) {
				return 2
			}
			fy.SetFloat64(y.f)
		} else {
			fy.SetInt(y.big())
		}
		return fx.Cmp(fy)
	}
	return x.big().Cmp(y.big())
}

// compare is Python's ordering (<, >, ...): numbers with numbers, strings with strings,
// sequences item by item. It returns -1, 0, 1 (2: unordered, NaN).
func compare(a, b any, op string) (int, error) {
	if u, ok := a.(*Undefined); ok {
		return 0, u.fail()
	}
	if u, ok := b.(*Undefined); ok {
		return 0, u.fail()
	}
	if x, y := toNum(a), toNum(b); x.kind != 0 && y.kind != 0 {
		return numCompare(x, y), nil
	}
	if sa, ok := strValue(a); ok {
		if sb, ok := strValue(b); ok {
			return strings.Compare(sa, sb), nil
		}
	}
	if (isList(a) && isList(b)) || isTupleVal(a) && isTupleVal(b) {
		la, lb := listItems(a), listItems(b)
		for i := 0; i < len(la) && i < len(lb); i++ {
			if equal(la[i], lb[i]) {
				continue
			}
			return compare(la[i], lb[i], op)
		}
		switch {
		case len(la) < len(lb):
			return -1, nil
		case len(la) > len(lb):
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
}

func isTupleVal(v any) bool { _, ok := v.(Tuple); return ok }

// containsItem is Python's `item in container`.
func (e *evaluator) containsItem(container, item any) (bool, error) {
	switch c := container.(type) {
	case string, *tainted, Markup:
		s, _ := strValue(c)
		sub, ok := strValue(item)
		if !ok {
			if u, isU := item.(*Undefined); isU {
				return false, u.fail()
			}
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		return strings.Contains(s, sub), nil
	case *Undefined:
		if c.err != nil {
			return false, c.err
		}
		return false, nil
	case *rangeVal:
		n := toNum(item)
		if n.kind == 'f' {
			i, ok := floatAsInt(n.f)
			if !ok {
				return false, nil
			}
			n = num{kind: 'i', i: i}
		}
		if n.kind != 'i' {
			return false, nil
		}
		if c.step > 0 && (n.i < c.start || n.i >= c.stop) || c.step < 0 && (n.i > c.start || n.i <= c.stop) {
			return false, nil
		}
		return (n.i-c.start)%c.step == 0, nil
	case []string:
		s, ok := strValue(item)
		if !ok {
			return false, nil
		}
		for _, x := range c {
			if x == s {
				return true, nil
			}
		}
		return false, nil
	case []any:
		for _, x := range c {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	}
	if isMapping(container) {
		_, ok, err := mapGet(container, item)
		return ok, err
	}
	if dv, ok := container.(*dictView); ok {
		if dv.kind == viewKeys {
			_, ok, err := mapGet(dv.d, item)
			return ok, err
		}
		for _, x := range viewItemsOf(dv) {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	}
	items, err := e.readItems(container)
	if err != nil {
		return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(container))
	}
	for _, x := range items {
		if equal(x, item) {
			return true, nil
		}
	}
	return false, nil
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case int64:
		return x != 0
	case float64:
		return x != 0
	case *tainted:
		return x.s != ""
	case Markup:
		return x != ""
	case *Undefined:
		return false
	case *big.Int:
		return x.Sign() != 0
	case *List:
		return len(x.items) > 0
	case []any:
		return len(x) > 0
	case []string:
		return len(x) > 0
	case []map[string]any:
		return len(x) > 0
	case Tuple:
		return len(x) > 0
	case *Dict:
		return x.len() > 0
	case map[string]any:
		return len(x) > 0
	case map[string]string:
		return len(x) > 0
	case *record.Record:
		return x.Len() > 0
	case *rangeVal:
		return x.len() > 0
	case *dictView:
		return mapLen(x.d) > 0
	case int:
		return x != 0
	}
	return true
}

func (e *evaluator) compareOp(op string, a, b any) (bool, error) {
	switch op {
	case "==":
		return equal(a, b), nil
	case "!=":
		return !equal(a, b), nil
	case "in":
		return e.containsItem(b, a)
	case "notin":
		ok, err := e.containsItem(b, a)
		return !ok, err
	}
	c, err := compare(a, b, op)
	if err != nil {
		return false, err
	}
	if c == 2 { // NaN
		return false, nil
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	case ">=":
		return c >= 0, nil
	}
	return false, fmt.Errorf("unknown comparison %s", op)
}
