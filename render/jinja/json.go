package jinja

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// toJSON is Python's json.dumps(v, sort_keys=True, indent=indent) as Jinja2's tojson calls
// it: ", " and ": " separators (with an indent: "," and ": "), non-ASCII as \uXXXX.
func (e *evaluator) toJSON(v any, indent int) (string, error) {
	var b strings.Builder
	if err := e.writeJSON(&b, v, indent, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (e *evaluator) writeJSON(b *strings.Builder, v any, indent, level int) error {
	if level > maxReprDepth {
		return fmt.Errorf("the value is nested more than %d deep (or contains itself)", maxReprDepth)
	}
	if b.Len() > e.maxSize {
		return e.sizeError()
	}
	if done, err := e.writeJSONScalar(b, v); done {
		return err
	}
	switch {
	case isList(v) || isTupleVal(v):
		return e.writeJSONList(b, listItems(v), indent, level)
	case isMapping(v):
		return e.writeJSONDict(b, v, indent, level)
	}
	if g, ok := v.(*group); ok {
		return e.writeJSON(b, Tuple{g.grouper, g.list}, indent, level)
	}
	return fmt.Errorf("Object of type %s is not JSON serializable", typeName(v))
}

// writeJSONScalar writes None, a bool, a string or a number; done is false for anything else.
func (e *evaluator) writeJSONScalar(b *strings.Builder, v any) (done bool, err error) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
		return true, nil
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
		return true, nil
	case string, Markup, *tainted:
		s, _ := strValue(x)
		e.plain(x)
		writeJSONString(b, s)
		return true, nil
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(formatFloat(x))
		}
		return true, nil
	}
	if n := toNum(v); n.kind == 'i' || n.kind == 'b' {
		s, err := strOf(v)
		if err != nil {
			return true, err
		}
		b.WriteString(s)
		return true, nil
	}
	return false, nil
}

// jsonNewline starts a line at level (with an indent; without one, everything is on one line).
func jsonNewline(b *strings.Builder, indent, level int) {
	if indent >= 0 {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(" ", indent*level))
	}
}

// jsonItemSep is what separates items: ", " on one line, "," before a newline.
func jsonItemSep(indent int) string {
	if indent >= 0 {
		return ","
	}
	return ", "
}

func (e *evaluator) writeJSONList(b *strings.Builder, items []any, indent, level int) error {
	if len(items) == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteString(jsonItemSep(indent))
		}
		jsonNewline(b, indent, level+1)
		if err := e.writeJSON(b, it, indent, level+1); err != nil {
			return err
		}
	}
	jsonNewline(b, indent, level)
	b.WriteByte(']')
	return nil
}

// writeJSONDict writes a dict with its keys sorted (sort_keys=True).
func (e *evaluator) writeJSONDict(b *strings.Builder, v any, indent, level int) error {
	type kv struct {
		k, v any
	}
	var items []kv
	eachItem(v, func(k, val any) bool {
		items = append(items, kv{k, val})
		return true
	})
	if len(items) == 0 {
		b.WriteString("{}")
		return nil
	}
	var serr error
	sort.SliceStable(items, func(i, j int) bool {
		c, err := compare(items[i].k, items[j].k, "<")
		if err != nil && serr == nil {
			serr = err
		}
		return c < 0
	})
	if serr != nil {
		return serr
	}
	b.WriteByte('{')
	for i, it := range items {
		if i > 0 {
			b.WriteString(jsonItemSep(indent))
		}
		jsonNewline(b, indent, level+1)
		key, err := e.jsonKey(it.k)
		if err != nil {
			return err
		}
		writeJSONString(b, key)
		b.WriteString(": ")
		if err := e.writeJSON(b, it.v, indent, level+1); err != nil {
			return err
		}
	}
	jsonNewline(b, indent, level)
	b.WriteByte('}')
	return nil
}

// jsonKey is a dict key as json.dumps writes it: keys that are not strings become strings.
func (e *evaluator) jsonKey(k any) (string, error) {
	switch k := k.(type) {
	case string, Markup, *tainted:
		key, _ := strValue(k)
		return key, nil
	case nil:
		return "null", nil
	case bool:
		return map[bool]string{true: "true", false: "false"}[k], nil
	case float64:
		var kb strings.Builder
		e.writeJSON(&kb, k, -1, 0)
		return kb.String(), nil
	}
	if n := toNum(k); n.kind != 0 {
		key, _ := strOf(k)
		return key, nil
	}
	return "", fmt.Errorf("keys must be str, int, float, bool or None, not %s", typeName(k))
}

func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || r == utf8.RuneError && size == 1:
				fmt.Fprintf(b, `\u%04x`, r)
			case r < 0x7f:
				b.WriteRune(r)
			case r < 0x10000:
				b.WriteString(`\u` + pad4(strconv.FormatInt(int64(r), 16)))
			default:
				r -= 0x10000
				b.WriteString(`\u` + pad4(strconv.FormatInt(int64(0xd800+(r>>10)), 16)))
				b.WriteString(`\u` + pad4(strconv.FormatInt(int64(0xdc00+(r&0x3ff)), 16)))
			}
		}
	}
	b.WriteByte('"')
}

func pad4(s string) string { return strings.Repeat("0", 4-len(s)) + s }

func fTojson(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("tojson", a, kw, "indent")
	if err != nil {
		return nil, err
	}
	indent := -1
	if i := argOr(p[0], nil); i != nil {
		n, ok := indexOf(i)
		if !ok {
			return nil, errors.New("tojson: indent must be an integer")
		}
		indent = int(n)
	}
	s, err := e.toJSON(in, indent)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(s, "<>&'") {
		s = jsonHTMLEscaper.Replace(s)
	}
	return Markup(s), nil
}

// jsonHTMLEscaper is what Jinja2's tojson escapes for HTML. One for all calls: a Replacer
// is safe for concurrent use and costs kilobytes to build (it was built per call: 128 MB over
// the first build of 20,000 backends in the ingress-nginx example).
var jsonHTMLEscaper = strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`, "'", `\u0027`)
