package jinja

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Python's str() and repr() of every value, as Jinja2 prints them; the names of their types
// (typeName, for messages), and what an undefined value says when used.

// maxIntDigits is Python's limit on converting an int to a string (sys.int_info
// .default_max_str_digits): Jinja2 fails on a longer one, so does the engine.
const maxIntDigits = 4300

// str is Python's str(v), except that an undefined value is "" (as Jinja2 prints it) and a
// strict one fails. Marked text is noted (see plain), a secret inside a container too.
func (e *evaluator) str(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case *tainted:
		e.consume(x)
		return x.s, nil
	case Markup:
		return string(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case *Undefined:
		if x.err != nil {
			return "", x.err
		}
		return "", nil
	}
	// A container's repr, a module's output: marked when a secret is inside.
	if holdsSecret(v, 0) {
		e.taint.secret = true
	}
	return strOf(v)
}

// strOf is str() for values that are never tainted text themselves.
func strOf(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case *tainted:
		return x.s, nil
	case Markup:
		return string(x), nil
	case nil:
		return "None", nil
	case bool:
		if x {
			return "True", nil
		}
		return "False", nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int:
		return strconv.Itoa(x), nil
	case *big.Int:
		return bigString(x)
	case float64:
		return formatFloat(x), nil
	case *Undefined:
		if x.err != nil {
			return "", x.err
		}
		return "", nil
	case *module:
		return x.output, nil
	}
	return repr(v)
}

func bigString(b *big.Int) (string, error) {
	if b.BitLen() > maxIntDigits*33/10 { // more than ~4300 decimal digits: check exactly
		s := b.String()
		if n := len(strings.TrimPrefix(s, "-")); n > maxIntDigits {
			return "", fmt.Errorf("Exceeds the limit (%d digits) for integer string conversion: value has %d digits", maxIntDigits, n)
		}
		return s, nil
	}
	return b.String(), nil
}

// formatFloat is Python's repr(float): the shortest digits that read back the same, in
// positional notation between 1e-4 and 1e16, with ".0" when integral.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	if exp < -4 || exp >= 16 {
		b.WriteByte(digits[0])
		if len(digits) > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if exp < 0 {
			b.WriteByte('-')
			exp = -exp
		} else {
			b.WriteByte('+')
		}
		if exp < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.Itoa(exp))
		return b.String()
	}
	if exp < 0 {
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -exp-1))
		b.WriteString(digits)
		return b.String()
	}
	if len(digits) <= exp+1 {
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", exp+1-len(digits)))
		b.WriteString(".0")
		return b.String()
	}
	b.WriteString(digits[:exp+1])
	b.WriteByte('.')
	b.WriteString(digits[exp+1:])
	return b.String()
}

// reprString is Python's repr(str).
func reprString(s string) string {
	var b strings.Builder
	writeReprString(&b, s)
	return b.String()
}

func writeReprString(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(b, "\\x%02x", s[i])
			i++
			continue
		}
		i += size
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(b, "\\x%02x", r)
		case r < 0x7f:
			b.WriteRune(r)
		case isPrintable(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(b, "\\x%02x", r)
		case r <= 0xffff:
			fmt.Fprintf(b, "\\u%04x", r)
		default:
			fmt.Fprintf(b, "\\U%08x", r)
		}
	}
	b.WriteByte(q)
}

// isPrintable is Python's str.isprintable for one character.
func isPrintable(r rune) bool {
	if r == ' ' {
		return true
	}
	if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Cs, unicode.Co, unicode.Zl, unicode.Zp, unicode.Zs) {
		return false
	}
	return unicode.IsGraphic(r) || unicode.IsPrint(r) || unicode.In(r, unicode.M)
}

// isPySpace is Python's str.isspace for one character.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// repr is Python's repr(v). Values whose repr shows a memory address (functions, generators)
// cannot be printed: that would make every render differ.
func repr(v any) (string, error) {
	var b strings.Builder
	if err := writeRepr(&b, v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

const maxReprDepth = 100

func writeRepr(b *strings.Builder, v any, depth int) error {
	if depth > maxReprDepth {
		return fmt.Errorf("the value is nested more than %d deep (or contains itself)", maxReprDepth)
	}
	switch x := v.(type) {
	case string:
		writeReprString(b, x)
	case *tainted:
		writeReprString(b, x.s)
	case Markup:
		b.WriteString("Markup(")
		writeReprString(b, string(x))
		b.WriteByte(')')
	case *Undefined:
		b.WriteString("Undefined")
	case *List:
		return writeSeq(b, "[", "]", x.items, depth, false)
	case []any:
		return writeReprItems(b, "[", "]", x, depth)
	case []string:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeReprString(b, e)
		}
		b.WriteByte(']')
	case []map[string]any:
		return writeReprItems(b, "[", "]", x, depth)
	case Tuple:
		return writeSeq(b, "(", ")", x, depth, true)
	case *Dict, map[string]any, map[string]string, *record.Record:
		return writeDictRepr(b, v, depth)
	case *rangeVal:
		if x.step == 1 {
			fmt.Fprintf(b, "range(%d, %d)", x.start, x.stop)
		} else {
			fmt.Fprintf(b, "range(%d, %d, %d)", x.start, x.stop, x.step)
		}
	case *dictView:
		name := map[byte]string{viewItems: "dict_items", viewKeys: "dict_keys", viewValues: "dict_values"}[x.kind]
		b.WriteString(name)
		return writeReprItems(b, "([", "])", viewItemsOf(x), depth)
	case *group:
		return writeSeq(b, "(", ")", []any{x.grouper, x.list}, depth, true)
	case nil, bool, int64, int, *big.Int, float64:
		s, err := strOf(v)
		if err != nil {
			return err
		}
		b.WriteString(s)
	default:
		return writeObjectRepr(b, v, depth)
	}
	return nil
}

// writeReprItems writes items separated by ", " between open and close.
func writeReprItems[T any](b *strings.Builder, open, close string, items []T, depth int) error {
	b.WriteString(open)
	for i, e := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		if err := writeRepr(b, e, depth+1); err != nil {
			return err
		}
	}
	b.WriteString(close)
	return nil
}

// writeObjectRepr writes the repr of the engine's own objects; those Jinja2 prints with
// their memory address are an error (the output would change every render).
func writeObjectRepr(b *strings.Builder, v any, depth int) error {
	switch x := v.(type) {
	case *Namespace:
		b.WriteString("<Namespace ")
		if err := writeDictRepr(b, x.attrs, depth+1); err != nil {
			return err
		}
		b.WriteByte('>')
	case *loopCtx:
		n, err := x.count()
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "<LoopContext %d/%d>", x.index0+1, n)
	case *Macro:
		fmt.Fprintf(b, "<Macro %s>", reprString(x.def.Name))
	case *module:
		fmt.Fprintf(b, "<TemplateModule %s>", reprString(x.name))
	case *generator:
		return fmt.Errorf("a generator cannot be printed (Jinja2 prints its memory address): add |list")
	case *builtin:
		return fmt.Errorf("the function %s cannot be printed (Jinja2 prints its memory address): call it", x.name)
	case *boundMethod:
		return fmt.Errorf("the method %s of a %s cannot be printed (Jinja2 prints its memory address): call it with ()", x.name, typeName(x.obj))
	case *cycler, *joiner, *selfRef, *blockRef:
		return fmt.Errorf("a %s cannot be printed (Jinja2 prints its memory address)", typeName(v))
	default:
		return fmt.Errorf("a value of Go type %T cannot be printed", v)
	}
	return nil
}

func writeSeq(b *strings.Builder, open, close string, items []any, depth int, tuple bool) error {
	b.WriteString(open)
	for i, e := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		if err := writeRepr(b, e, depth+1); err != nil {
			return err
		}
	}
	if tuple && len(items) == 1 {
		b.WriteByte(',')
	}
	b.WriteString(close)
	return nil
}

func writeDictRepr(b *strings.Builder, m any, depth int) error {
	b.WriteByte('{')
	first := true
	var err error
	eachItem(m, func(k, v any) bool {
		if !first {
			b.WriteString(", ")
		}
		first = false
		if err = writeRepr(b, k, depth+1); err != nil {
			return false
		}
		b.WriteString(": ")
		err = writeRepr(b, v, depth+1)
		return err == nil
	})
	if err != nil {
		return err
	}
	b.WriteByte('}')
	return nil
}

// eachItem calls fn for each key and value of a dict of any kind, in its iteration order.
func eachItem(m any, fn func(k, v any) bool) {
	switch d := m.(type) {
	case *Dict:
		for i := 0; i < len(d.keys); i++ {
			if !fn(d.keys[i], d.vals[i]) {
				return
			}
		}
	case *record.Record:
		for i := range d.Len() {
			if !fn(fromData(d.Key(i)), fromData(d.Value(i))) {
				return
			}
		}
	default:
		for _, k := range mapKeys(m) {
			v, _, _ := mapGet(m, k)
			if !fn(k, v) {
				return
			}
		}
	}
}

// viewItemsOf lists what a dict view iterates over.
func viewItemsOf(v *dictView) []any {
	var out []any
	eachItem(v.d, func(k, val any) bool {
		switch v.kind {
		case viewItems:
			out = append(out, Tuple{k, val})
		case viewKeys:
			out = append(out, k)
		default:
			out = append(out, val)
		}
		return true
	})
	return out
}

// typeName is Python's type(v).__name__.
func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, int, *big.Int:
		return "int"
	case float64:
		return "float"
	case string, *tainted:
		return "str"
	case Markup:
		return "Markup"
	case *List, []any, []string, []map[string]any:
		return "list"
	case Tuple:
		return "tuple"
	case *Dict, map[string]any, map[string]string, *record.Record:
		return "dict"
	case *Undefined:
		return "Undefined"
	case *rangeVal:
		return "range"
	case *generator:
		return "generator"
	case *dictView:
		switch x.kind {
		case viewItems:
			return "dict_items"
		case viewKeys:
			return "dict_keys"
		}
		return "dict_values"
	case *loopCtx:
		return "LoopContext"
	case *Namespace:
		return "Namespace"
	case *Macro:
		return "Macro"
	case *builtin:
		return "builtin_function_or_method"
	case *boundMethod:
		return "builtin_function_or_method"
	case *cycler:
		return "Cycler"
	case *joiner:
		return "Joiner"
	case *module:
		return "TemplateModule"
	}
	return reflect.TypeOf(v).String()
}

func aTypeName(v any) string {
	n := typeName(v)
	switch n[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + n
	}
	return "a " + n
}

func objectTypeRepr(v any) string {
	if v == nil {
		return "None"
	}
	switch v.(type) {
	case *loopCtx:
		return "jinja2.runtime.LoopContext object"
	case *Namespace:
		return "jinja2.utils.Namespace object"
	case *Macro:
		return "jinja2.runtime.Macro object"
	case *Undefined:
		return "jinja2.runtime.Undefined object"
	case Markup:
		return "markupsafe.Markup object"
	case *cycler:
		return "jinja2.utils.Cycler object"
	case *joiner:
		return "jinja2.utils.Joiner object"
	case *module:
		return "jinja2.environment.TemplateModule object"
	}
	return typeName(v) + " object"
}

func (u *Undefined) message() string {
	switch {
	case u.hint != "":
		return u.hint
	case !u.hasObj:
		return fmt.Sprintf("%s is undefined", pyReprOrName(u.name))
	}
	if _, ok := u.name.(string); !ok {
		return fmt.Sprintf("%s has no element %s", objectTypeRepr(u.obj), pyReprOrName(u.name))
	}
	return fmt.Sprintf("%s has no attribute %s", reprString(objectTypeRepr(u.obj)), pyReprOrName(u.name))
}

func pyReprOrName(v any) string {
	if t, ok := v.(*tainted); ok && t.secret {
		return withheldValue
	}
	s, err := repr(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return s
}

// fail is the error of using u.
func (u *Undefined) fail() error {
	if u.err != nil {
		return u.err
	}
	return &UndefinedError{Msg: u.message(), Of: u.obj, Name: u.name}
}
