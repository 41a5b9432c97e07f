package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/flosch/pongo2/v6"

	"github.com/haproxy-sidecar/haproxy-sidecar/record"
)

// Values inside the evaluator are plain Go values: nil (undefined or None), bool, int64 (any Go
// integer is accepted), float64, string, []any, map[string]any, map[string]string,
// *record.Record (a read-only dict: the Snapshot's pods), tuple, and a few of our own types.
// Data from the Snapshot is used as is, never copied.

// tuple is a Python tuple: printed as (a, b), unpacked by for/set.
type tuple []any

// dictView is what d.items(), d.keys(), d.values() (and the iter* forms) return: iterated in
// sorted key order without building a list first.
type dictView struct {
	m    any // map[string]any, map[string]string, *record.Record or another map
	kind byte
}

const (
	viewItems  = 'i'
	viewKeys   = 'k'
	viewValues = 'v'
)

// namespace is Jinja2's namespace(): a mutable object that {% set ns.attr = ... %} can change
// from inside a loop.
type namespace struct{ m map[string]any }

// unsetPassword is stats.password when STATISTICS_PASSWORD is not set: false in a condition,
// an error when printed. It is an int kind so pongo2's own truthiness also sees it as false,
// and its String method panics (recovered as a render error) if pongo2's own code prints it.
type unsetPassword int

const statsPasswordUnset unsetPassword = 0

var errStatsPassword = errors.New("the template uses stats.password but no statistics password is set: set STATISTICS_PASSWORD (there is no built-in default password), or guard the stats section with {% if stats.password %}")

func (unsetPassword) String() string { panic(errStatsPassword) }

// unwrap turns pongo2 values into plain ones.
func unwrap(v any) any {
	if pv, ok := v.(*pongo2.Value); ok {
		if pv == nil {
			return nil
		}
		return pv.Interface()
	}
	return v
}

func isUndefined(v any) bool {
	switch v.(type) {
	case nil, unsetPassword:
		return true
	}
	return false
}

// truthy is Python's bool().
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, unsetPassword:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case int64:
		return x != 0
	case int:
		return x != 0
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	case map[string]string:
		return len(x) > 0
	case *record.Record:
		return x.Len() > 0
	case tuple:
		return len(x) > 0
	case []string:
		return len(x) > 0
	case []map[string]any:
		return len(x) > 0
	case *dictView:
		return lenOf(x.m) > 0
	case json.Number:
		f, _ := x.Float64()
		return f != 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Map, reflect.Array, reflect.String:
		return rv.Len() > 0
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int() != 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint() != 0
	case reflect.Float32:
		return rv.Float() != 0
	case reflect.Pointer, reflect.Interface:
		return !rv.IsNil()
	}
	return true
}

// number classifies v as an integer or a float. Integral floats (JSON numbers decoded into
// float64) count as integers, so ports from the services ConfigMap print as 8080.
func number(v any) (i int64, f float64, isInt, ok bool) {
	switch x := v.(type) {
	case int64:
		return x, float64(x), true, true
	case int:
		return int64(x), float64(x), true, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), x, true, true
		}
		return 0, x, false, true
	case bool:
		if x {
			return 1, 1, true, true
		}
		return 0, 0, true, true
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, float64(n), true, true
		}
		if g, err := x.Float64(); err == nil {
			return number(g)
		}
		return 0, 0, false, false
	case int32:
		return int64(x), float64(x), true, true
	case uint:
		return int64(x), float64(x), true, true
	case nil, string, unsetPassword:
		return 0, 0, false, false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), float64(rv.Int()), true, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(rv.Uint()), float64(rv.Uint()), true, true
	case reflect.Float32, reflect.Float64:
		return number(rv.Float())
	}
	return 0, 0, false, false
}

// isFloatValue is true for a float that is not integral.
func isFloatValue(v any) bool {
	_, _, isInt, ok := number(v)
	return ok && !isInt
}

// toStr is Python's str(), except that None/undefined are "" (as pongo2 and Jinja2's
// Undefined print). It fails for an unset stats.password.
func toStr(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "", nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int:
		return strconv.Itoa(x), nil
	case unsetPassword:
		return "", errStatsPassword
	case bool:
		if x {
			return "True", nil
		}
		return "False", nil
	case float64:
		return formatFloat(x), nil
	case json.Number:
		return x.String(), nil
	case *pongo2.Value:
		return toStr(unwrap(x))
	case *LoopInfo:
		return "<loop>", nil
	case *macro:
		return "<macro " + x.spec.name + ">", nil
	case *record.Record:
		// A dict: printed as Python prints it, like a map (not its String, which is JSON).
	case fmt.Stringer:
		return x.String(), nil
	}
	if _, _, _, ok := number(v); ok {
		i, f, isInt, _ := number(v)
		if isInt {
			return strconv.FormatInt(i, 10), nil
		}
		return formatFloat(f), nil
	}
	var b strings.Builder
	if err := writeRepr(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// formatFloat prints like Python's repr(float), except that integral values print without
// ".0" (see number).
func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "inf"
	}
	if math.IsInf(f, -1) {
		return "-inf"
	}
	if math.IsNaN(f) {
		return "nan"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatInt(int64(f), 10)
	}
	exp := 0
	if f != 0 {
		exp = int(math.Floor(math.Log10(math.Abs(f))))
	}
	if exp < -4 || exp >= 16 {
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// reprStr is Python's repr() of a string.
func reprStr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func repr(v any) (string, error) {
	var b strings.Builder
	err := writeRepr(&b, v)
	return b.String(), err
}

// writeRepr writes Python's repr() of v (lists and dicts print as Jinja2 would).
func writeRepr(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
		return nil
	case string:
		b.WriteString(reprStr(x))
		return nil
	case unsetPassword:
		return errStatsPassword
	case tuple:
		b.WriteByte('(')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeRepr(b, e); err != nil {
				return err
			}
		}
		if len(x) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
		return nil
	case *namespace:
		b.WriteString("<Namespace ")
		err := writeRepr(b, x.m)
		b.WriteByte('>')
		return err
	}
	if isMap(v) {
		keys := sortedMapKeys(v)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeRepr(b, k); err != nil {
				return err
			}
			b.WriteString(": ")
			if err := writeRepr(b, mapGet(v, k)); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	}
	if l, ok := asList(v); ok {
		b.WriteByte('[')
		for i, e := range l {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeRepr(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	}
	s, err := toStrScalar(v)
	b.WriteString(s)
	return err
}

func toStrScalar(v any) (string, error) {
	switch v.(type) {
	case bool, int64, int, float64, json.Number, *LoopInfo, *macro:
		return toStr(v)
	}
	if _, _, _, ok := number(v); ok {
		return toStr(v)
	}
	if s, ok := v.(fmt.Stringer); ok {
		return s.String(), nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.String {
		return reprStr(rv.String()), nil
	}
	return fmt.Sprintf("%v", v), nil
}

// writeValue prints v the way {{ v }} does.
func writeValue(w pongo2.TemplateWriter, v any) error {
	switch x := v.(type) {
	case string:
		_, err := w.WriteString(x)
		return err
	case nil:
		return nil
	case int64:
		return writeInt(w, x)
	case int:
		return writeInt(w, int64(x))
	}
	s, err := toStr(v)
	if err != nil {
		return err
	}
	_, err = w.WriteString(s)
	return err
}

func writeInt(w pongo2.TemplateWriter, n int64) error {
	if bb, ok := w.(*bytes.Buffer); ok {
		_, err := bb.Write(strconv.AppendInt(bb.AvailableBuffer(), n, 10))
		return err
	}
	_, err := w.WriteString(strconv.FormatInt(n, 10))
	return err
}

// aType is typeName with an article: "an int", "a string", "undefined".
func aType(v any) string {
	n := typeName(v)
	switch {
	case n == "undefined":
		return n
	case strings.IndexByte("aeiou", n[0]) >= 0:
		return "an " + n
	}
	return "a " + n
}

// typeName is the Python-ish name of v's type, for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "undefined"
	case string:
		return "string"
	case bool:
		return "bool"
	case tuple:
		return "tuple"
	case *LoopInfo:
		return "loop"
	case *macro:
		return "macro"
	case *namespace:
		return "namespace"
	case *dictView:
		return "dict view"
	case unsetPassword:
		return "unset password"
	}
	if _, _, isInt, ok := number(v); ok {
		if isInt {
			return "int"
		}
		return "float"
	}
	if isMap(v) {
		return "dict"
	}
	if _, ok := asList(v); ok {
		return "list"
	}
	return fmt.Sprintf("%T", v)
}

func isMap(v any) bool {
	switch v.(type) {
	case map[string]any, map[string]string, *record.Record:
		return true
	case nil, string, []any, tuple, int64, bool, float64:
		return false
	}
	return reflect.ValueOf(v).Kind() == reflect.Map
}

func isSequence(v any) bool {
	switch v.(type) {
	case []any, tuple, []string, []map[string]any, *dictView:
		return true
	case nil, string, map[string]any, map[string]string, *record.Record, int64, bool, float64:
		return false
	}
	k := reflect.ValueOf(v).Kind()
	return k == reflect.Slice || k == reflect.Array
}

func lenOf(v any) int {
	switch x := v.(type) {
	case string:
		return utf8.RuneCountInString(x)
	case []any:
		return len(x)
	case map[string]any:
		return len(x)
	case map[string]string:
		return len(x)
	case *record.Record:
		return x.Len()
	case tuple:
		return len(x)
	case []string:
		return len(x)
	case []map[string]any:
		return len(x)
	case *dictView:
		return lenOf(x.m)
	case nil:
		return 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Map, reflect.Array, reflect.String:
		return rv.Len()
	}
	return -1
}

// sortedMapKeys returns the keys of a map in sorted order (strings sort bytewise, numbers
// numerically).
func sortedMapKeys(m any) []any {
	switch x := m.(type) {
	case map[string]any:
		ks := sortedKeysAny(x)
		out := make([]any, len(ks))
		for i, k := range ks {
			out[i] = k
		}
		return out
	case map[string]string:
		ks := sortedKeysStr(x)
		out := make([]any, len(ks))
		for i, k := range ks {
			out[i] = k
		}
		return out
	case *record.Record:
		out := make([]any, x.Len())
		for i := range out {
			out[i] = x.Key(i)
		}
		return out
	}
	rv := reflect.ValueOf(m)
	if rv.Kind() != reflect.Map {
		return nil
	}
	keys := make([]any, 0, rv.Len())
	for _, k := range rv.MapKeys() {
		keys = append(keys, k.Interface())
	}
	sort.SliceStable(keys, func(i, j int) bool { return compareValues(keys[i], keys[j]) < 0 })
	return keys
}

func sortedKeysAny(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sortedKeysStr(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// mapGet looks up key k in map m; nil if absent.
func mapGet(m any, k any) any {
	switch x := m.(type) {
	case map[string]any:
		if s, ok := k.(string); ok {
			return x[s]
		}
		return nil
	case map[string]string:
		if s, ok := k.(string); ok {
			if v, ok := x[s]; ok {
				return v
			}
		}
		return nil
	case *record.Record:
		if s, ok := k.(string); ok {
			v, _ := x.Get(s)
			return v
		}
		return nil
	}
	rv := reflect.ValueOf(m)
	if rv.Kind() != reflect.Map || k == nil {
		return nil
	}
	kv := reflect.ValueOf(k)
	if !kv.Type().AssignableTo(rv.Type().Key()) {
		if kv.Type().ConvertibleTo(rv.Type().Key()) && kv.Kind() == rv.Type().Key().Kind() {
			kv = kv.Convert(rv.Type().Key())
		} else {
			return nil
		}
	}
	r := rv.MapIndex(kv)
	if !r.IsValid() {
		return nil
	}
	return r.Interface()
}

func mapHas(m any, k any) bool {
	switch x := m.(type) {
	case map[string]any:
		s, ok := k.(string)
		if !ok {
			return false
		}
		_, ok = x[s]
		return ok
	case map[string]string:
		s, ok := k.(string)
		if !ok {
			return false
		}
		_, ok = x[s]
		return ok
	case *record.Record:
		s, ok := k.(string)
		if !ok {
			return false
		}
		_, ok = x.Get(s)
		return ok
	}
	rv := reflect.ValueOf(m)
	if rv.Kind() != reflect.Map || k == nil {
		return false
	}
	kv := reflect.ValueOf(k)
	if !kv.Type().AssignableTo(rv.Type().Key()) {
		return false
	}
	return rv.MapIndex(kv).IsValid()
}

// asList returns the items of a sequence (a map gives its sorted keys, a string its
// characters, a dict view its items, keys or values). It copies only when it must.
func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case tuple:
		return x, true
	case nil:
		return nil, false
	case string:
		out := make([]any, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, true
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true
	case []map[string]any:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true
	case *dictView:
		keys := sortedMapKeys(x.m)
		if x.kind == viewKeys {
			return keys, true
		}
		out := make([]any, len(keys))
		for i, k := range keys {
			if x.kind == viewValues {
				out[i] = mapGet(x.m, k)
			} else {
				out[i] = tuple{k, mapGet(x.m, k)}
			}
		}
		return out, true
	case map[string]any, map[string]string, *record.Record:
		return sortedMapKeys(x), true
	case int64, bool, float64, *LoopInfo, unsetPassword:
		return nil, false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		return out, true
	case reflect.Map:
		return sortedMapKeys(v), true
	}
	return nil, false
}

// equal is Python's ==.
func equal(a, b any) bool {
	a, b = unwrap(a), unwrap(b)
	if isUndefined(a) || isUndefined(b) {
		return isUndefined(a) && isUndefined(b)
	}
	if sa, ok := a.(string); ok {
		sb, ok := b.(string)
		return ok && sa == sb
	}
	if _, ok := b.(string); ok {
		return false
	}
	ai, af, aInt, aok := number(a)
	bi, bf, bInt, bok := number(b)
	if aok || bok {
		if !aok || !bok {
			return false
		}
		if aInt && bInt {
			return ai == bi
		}
		return af == bf
	}
	if isMap(a) || isMap(b) {
		if !isMap(a) || !isMap(b) || lenOf(a) != lenOf(b) {
			return false
		}
		for _, k := range sortedMapKeys(a) {
			if !mapHas(b, k) || !equal(mapGet(a, k), mapGet(b, k)) {
				return false
			}
		}
		return true
	}
	la, aList := asList(a)
	lb, bList := asList(b)
	if aList || bList {
		if !aList || !bList || len(la) != len(lb) {
			return false
		}
		for i := range la {
			if !equal(la[i], lb[i]) {
				return false
			}
		}
		return true
	}
	ra, rb := reflect.ValueOf(a), reflect.ValueOf(b)
	if ra.Type() == rb.Type() && ra.Type().Comparable() {
		return a == b
	}
	return false
}

// compareValues orders values for sort and dictsort: numbers numerically, strings bytewise,
// otherwise by type name then printed form. It never fails.
func compareValues(a, b any) int {
	if c, err := compareStrict(a, b); err == nil {
		return c
	}
	ta, tb := typeName(a), typeName(b)
	if ta != tb {
		return strings.Compare(ta, tb)
	}
	sa, _ := toStr(a)
	sb, _ := toStr(b)
	return strings.Compare(sa, sb)
}

// compareStrict is Python's <, >: numbers with numbers, strings with strings, sequences
// element-wise.
func compareStrict(a, b any) (int, error) {
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok {
			return strings.Compare(sa, sb), nil
		}
	}
	ai, af, aInt, aok := number(a)
	bi, bf, bInt, bok := number(b)
	if aok && bok {
		if aInt && bInt {
			switch {
			case ai < bi:
				return -1, nil
			case ai > bi:
				return 1, nil
			}
			return 0, nil
		}
		switch {
		case af < bf:
			return -1, nil
		case af > bf:
			return 1, nil
		}
		return 0, nil
	}
	if isSequence(a) && isSequence(b) {
		la, _ := asList(a)
		lb, _ := asList(b)
		for i := 0; i < len(la) && i < len(lb); i++ {
			c, err := compareStrict(la[i], lb[i])
			if err != nil {
				return 0, err
			}
			if c != 0 {
				return c, nil
			}
		}
		return len(la) - len(lb), nil
	}
	return 0, fmt.Errorf("cannot compare %s with %s", typeName(a), typeName(b))
}

// contains is Python's `item in container`.
func contains(container, item any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' needs a string on the left, not %s", aType(item))
		}
		return strings.Contains(c, s), nil
	case map[string]any:
		s, ok := item.(string)
		if !ok {
			return false, nil
		}
		_, has := c[s]
		return has, nil
	case map[string]string:
		s, ok := item.(string)
		if !ok {
			return false, nil
		}
		_, has := c[s]
		return has, nil
	case *record.Record:
		s, ok := item.(string)
		if !ok {
			return false, nil
		}
		_, has := c.Get(s)
		return has, nil
	case []any:
		for _, e := range c {
			if equal(e, item) {
				return true, nil
			}
		}
		return false, nil
	case []string:
		s, ok := item.(string)
		if !ok {
			return false, nil
		}
		for _, e := range c {
			if e == s {
				return true, nil
			}
		}
		return false, nil
	case nil:
		return false, nil
	case *namespace:
		s, _ := item.(string)
		_, has := c.m[s]
		return has, nil
	}
	if isMap(container) {
		return mapHas(container, item), nil
	}
	if l, ok := asList(container); ok {
		for _, e := range l {
			if equal(e, item) {
				return true, nil
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("'in' needs a string, list or dict on the right, not %s", aType(container))
}

// toInt converts for int(), range() and indices.
func toInt(v any) (int64, bool) {
	i, f, isInt, ok := number(v)
	if ok {
		if isInt {
			return i, true
		}
		return int64(f), true
	}
	if s, ok := v.(string); ok {
		s = strings.TrimSpace(s)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
		if g, err := strconv.ParseFloat(s, 64); err == nil {
			return int64(g), true
		}
	}
	return 0, false
}
