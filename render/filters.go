package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/flosch/pongo2/v6"

	"github.com/haproxy-sidecar/haproxy-sidecar/record"
)

// filterCall describes one application of a filter.
type filterCall struct {
	name  string
	pongo bool // written name:arg (pongo2 style)
	c     *pongo2.ExecutionContext
}

type filterFunc func(fc *filterCall, in any, args []any, kw map[string]any) (any, error)

type testFunc func(in any, args []any) (bool, error)

// filterTable holds our filters (Jinja2 semantics). A filter that is not here but exists in
// pongo2 (cut, ljust, stringformat, yesno, ...) is called through pongo2.ApplyFilter.
// Filled in init to break the initialization cycle through map/select.
var filterTable map[string]filterFunc

// bannedFilters would make every render different, so HAProxy would reload for nothing.
var bannedFilters = map[string]string{
	"random": "it makes every render different, so HAProxy would reload on every change",
}

func init() {
	filterTable = map[string]filterFunc{
		"abs":           fAbs,
		"attr":          fAttr,
		"batch":         fBatch,
		"capitalize":    strFilter(capitalize),
		"center":        fCenter,
		"count":         fLength,
		"d":             fDefault,
		"default":       fDefault,
		"dictsort":      fDictsort,
		"e":             fEscape,
		"escape":        fEscape,
		"first":         fFirst,
		"float":         fFloat,
		"forceescape":   fEscape,
		"format":        fFormat,
		"hquote":        fHquote,
		"indent":        fIndent,
		"int":           fInt,
		"integer":       fInt,
		"items":         fItems,
		"join":          fJoin,
		"last":          fLast,
		"length":        fLength,
		"list":          fList,
		"lower":         strFilter(strings.ToLower),
		"map":           fMap,
		"max":           fMinMax(1),
		"min":           fMinMax(-1),
		"re_escape":     strFilter(pyReEscape),
		"regex_replace": fRegexReplace,
		"reject":        fSelect(false, false),
		"rejectattr":    fSelect(false, true),
		"replace":       fReplace,
		"reverse":       fReverse,
		"round":         fRound,
		"safe":          fIdentity,
		"select":        fSelect(true, false),
		"selectattr":    fSelect(true, true),
		"sort":          fSort,
		"split":         fSplit,
		"string":        fString,
		"sum":           fSum,
		"title":         strFilter(title),
		"tojson":        fTojson,
		"trim":          fTrim,
		"unique":        fUnique,
		"upper":         strFilter(strings.ToUpper),
		"urlencode":     fURLEncode,
		"wordcount":     fWordcount,
	}
}

// filterMaxArgs is how many arguments (positional and keyword) each filter takes; absent:
// any number.
var filterMaxArgs = map[string]int{
	"abs": 0, "attr": 1, "batch": 2, "capitalize": 0, "center": 1, "count": 0, "d": 2,
	"default": 2, "dictsort": 3, "e": 0, "escape": 0, "first": 0, "float": 1, "forceescape": 0,
	"hquote": 0, "indent": 3, "int": 2, "integer": 2, "items": 0, "join": 2, "last": 0,
	"length": 0, "list": 0, "lower": 0, "max": 2, "min": 2, "re_escape": 0, "regex_replace": 2,
	"replace": 3, "reverse": 0, "round": 2, "safe": 0, "sort": 3, "split": 2, "string": 0,
	"sum": 2, "title": 0, "tojson": 1, "trim": 1, "unique": 2, "upper": 0, "urlencode": 0,
	"wordcount": 0,
}

// bindFilter resolves a filter name at compile time.
func bindFilter(f *filterNode) error {
	if why, banned := bannedFilters[f.name]; banned {
		return fmt.Errorf("filter %s is not allowed: %s", f.name, why)
	}
	if fn, ok := filterTable[f.name]; ok {
		if n, ok := filterMaxArgs[f.name]; ok && len(f.args)+len(f.kwVals) > n {
			return fmt.Errorf("filter %s takes %s, %d given", f.name, plural(n, "argument"), len(f.args)+len(f.kwVals))
		}
		f.fn = fn
		return nil
	}
	if pongo2.FilterExists(f.name) {
		if len(f.args) > 1 || len(f.kwVals) > 0 {
			return fmt.Errorf("filter %s (a pongo2 filter) takes at most one argument", f.name)
		}
		f.fn = fPongo
		return nil
	}
	return fmt.Errorf("unknown filter '%s'", f.name)
}

func lookupFilter(name string) (filterFunc, error) {
	if why, banned := bannedFilters[name]; banned {
		return nil, fmt.Errorf("filter %s is not allowed: %s", name, why)
	}
	if fn, ok := filterTable[name]; ok {
		return fn, nil
	}
	if pongo2.FilterExists(name) {
		return fPongo, nil
	}
	return nil, fmt.Errorf("unknown filter '%s'", name)
}

func fPongo(fc *filterCall, in any, args []any, kw map[string]any) (any, error) {
	if in == unsetPassword(0) {
		return nil, errStatsPassword
	}
	var param *pongo2.Value
	if len(args) == 1 {
		if args[0] == unsetPassword(0) {
			return nil, errStatsPassword
		}
		param = pongo2.AsValue(record.Plain(args[0]))
	}
	// pongo2's own filters know Go maps, not records.
	r, err := pongo2.ApplyFilter(fc.name, pongo2.AsValue(record.Plain(in)), param)
	if err != nil {
		if err.OrigError != nil {
			return nil, err.OrigError
		}
		return nil, err
	}
	return unwrap(r), nil
}

func argOr(args []any, kw map[string]any, i int, name string, def any) any {
	if i < len(args) {
		return args[i]
	}
	if v, ok := kw[name]; ok {
		return v
	}
	return def
}

func strFilter(fn func(string) string) filterFunc {
	return func(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
		s, err := toStr(in)
		if err != nil {
			return nil, err
		}
		return fn(s), nil
	}
}

func fIdentity(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) { return in, nil }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r := []rune(strings.ToLower(s))
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

func title(s string) string {
	r := []rune(s)
	prevLetter := false
	for i, c := range r {
		if unicode.IsLetter(c) {
			if prevLetter {
				r[i] = unicode.ToLower(c)
			} else {
				r[i] = unicode.ToUpper(c)
			}
			prevLetter = true
		} else {
			prevLetter = unicode.IsDigit(c) || c == '\''
		}
	}
	return string(r)
}

func fAbs(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
	i, f, isInt, ok := number(in)
	if !ok {
		return nil, fmt.Errorf("needs a number, not %s", aType(in))
	}
	if isInt {
		if i < 0 {
			return -i, nil
		}
		return i, nil
	}
	return math.Abs(f), nil
}

// getPath follows a dotted attribute path (Jinja2's attribute='a.b.0').
func getPath(v any, path string) any {
	for path != "" {
		part, rest, _ := strings.Cut(path, ".")
		path = rest
		if part != "" && isDigit(part[0]) && !isMap(v) {
			if n, err := strconv.ParseInt(part, 10, 64); err == nil {
				v, _ = getItem(v, n)
				continue
			}
		}
		v, _ = getAttr(v, part)
	}
	return v
}

func fAttr(_ *filterCall, in any, args []any, _ map[string]any) (any, error) {
	if len(args) != 1 {
		return nil, errors.New("needs one argument: the attribute name")
	}
	name, err := toStr(args[0])
	if err != nil {
		return nil, err
	}
	// Like Jinja2, attr() reads attributes only, never dict keys.
	if isMap(in) {
		return nil, nil
	}
	return getAttr(in, name)
}

func fBatch(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	l, ok := asList(in)
	if !ok {
		return nil, fmt.Errorf("needs a list, not %s", aType(in))
	}
	n, ok := toInt(argOr(args, kw, 0, "linecount", nil))
	if !ok || n <= 0 {
		return nil, errors.New("needs a positive line count")
	}
	fill, hasFill := args, len(args) > 1
	out := []any{}
	for i := 0; i < len(l); i += int(n) {
		end := min(i+int(n), len(l))
		row := append([]any{}, l[i:end]...)
		for hasFill && len(row) < int(n) {
			row = append(row, fill[1])
		}
		out = append(out, row)
	}
	return out, nil
}

func fCenter(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	w, _ := toInt(argOr(args, kw, 0, "width", int64(80)))
	pad := int(w) - len([]rune(s))
	if pad <= 0 {
		return s, nil
	}
	left := pad / 2
	if pad%2 == 1 && len([]rune(s))%2 == 1 {
		left++
	}
	return strings.Repeat(" ", left) + s + strings.Repeat(" ", pad-left), nil
}

func fLength(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
	if in == unsetPassword(0) {
		return nil, errStatsPassword
	}
	n := lenOf(in)
	if n < 0 {
		return nil, fmt.Errorf("%s has no length", aType(in))
	}
	return int64(n), nil
}

// fDefault: Jinja2's default(value, boolean=false) replaces an undefined value (or any false
// value with boolean=true); pongo2's default:value replaces any false value.
func fDefault(fc *filterCall, in any, args []any, kw map[string]any) (any, error) {
	def := argOr(args, kw, 0, "default_value", "")
	boolean := fc.pongo || truthy(argOr(args, kw, 1, "boolean", false))
	if isUndefined(in) || (boolean && !truthy(in)) {
		return def, nil
	}
	return in, nil
}

func fDictsort(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	if !isMap(in) {
		if in == nil {
			return []any{}, nil
		}
		return nil, fmt.Errorf("needs a dict, not %s", aType(in))
	}
	caseSensitive := truthy(argOr(args, kw, 0, "case_sensitive", false))
	by, _ := toStr(argOr(args, kw, 1, "by", "key"))
	reverse := truthy(argOr(args, kw, 2, "reverse", false))
	keys := sortedMapKeys(in)
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = tuple{k, mapGet(in, k)}
	}
	idx := 0
	if by == "value" {
		idx = 1
	} else if by != "key" {
		return nil, errors.New("by must be 'key' or 'value'")
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].(tuple)[idx], out[j].(tuple)[idx]
		c := compareFold(a, b, caseSensitive)
		if reverse {
			return c > 0
		}
		return c < 0
	})
	return out, nil
}

func compareFold(a, b any, caseSensitive bool) int {
	if !caseSensitive {
		if sa, ok := a.(string); ok {
			if sb, ok := b.(string); ok {
				return strings.Compare(strings.ToLower(sa), strings.ToLower(sb))
			}
		}
	}
	return compareValues(a, b)
}

func fEscape(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	return html.EscapeString(s), nil
}

func fFirst(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) { return listEnd(in, false) }

func fLast(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) { return listEnd(in, true) }

// listEnd is the first (or last) item of a list; undefined for an empty list or undefined input.
func listEnd(in any, last bool) (any, error) {
	l, ok := asList(in)
	if !ok {
		if in == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("needs a list, not %s", aType(in))
	}
	switch {
	case len(l) == 0:
		return nil, nil
	case last:
		return l[len(l)-1], nil
	}
	return l[0], nil
}

func fFloat(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	def := argOr(args, kw, 0, "default", 0.0)
	if _, f, _, ok := number(in); ok {
		return f, nil
	}
	if s, ok := in.(string); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f, nil
		}
	}
	return def, nil
}

func fInt(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	def := argOr(args, kw, 0, "default", int64(0))
	base, _ := toInt(argOr(args, kw, 1, "base", int64(10)))
	if s, ok := in.(string); ok && base != 10 {
		s = strings.TrimSpace(strings.ToLower(s))
		for _, p := range []string{"0x", "0o", "0b"} {
			s = strings.TrimPrefix(s, p)
		}
		if n, err := strconv.ParseInt(s, int(base), 64); err == nil {
			return n, nil
		}
		return def, nil
	}
	if n, ok := toInt(in); ok {
		return n, nil
	}
	return def, nil
}

func fFormat(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	if len(kw) > 0 {
		return pyFormat(s, kw)
	}
	return pyFormat(s, tuple(args))
}

// fHquote quotes a value for an HAProxy configuration argument: double quotes, with
// backslash, double quote and dollar escaped (HAProxy 2.x expands "${VAR}" inside quotes).
func fHquote(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '$':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n', '\r':
			return nil, errors.New("an HAProxy argument cannot contain a newline")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

func fIndent(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	prefix := "    "
	switch w := argOr(args, kw, 0, "width", int64(4)).(type) {
	case string:
		prefix = w
	default:
		n, _ := toInt(w)
		prefix = strings.Repeat(" ", int(max(n, 0)))
	}
	first := truthy(argOr(args, kw, 1, "first", false))
	blank := truthy(argOr(args, kw, 2, "blank", false))
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if i == 0 && !first {
			continue
		}
		if l == "" && !blank {
			continue
		}
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n"), nil
}

func fItems(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
	if in == nil {
		return []any{}, nil
	}
	if !isMap(in) {
		return nil, fmt.Errorf("needs a dict, not %s", aType(in))
	}
	return &dictView{m: in, kind: viewItems}, nil
}

func fJoin(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	if in == nil {
		return "", nil
	}
	l, ok := asList(in)
	if !ok {
		return nil, fmt.Errorf("needs a list, not %s", aType(in))
	}
	sep, err := toStr(argOr(args, kw, 0, "d", ""))
	if err != nil {
		return nil, err
	}
	attr, _ := argOr(args, kw, 1, "attribute", nil).(string)
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteString(sep)
		}
		if attr != "" {
			e = getPath(e, attr)
		}
		s, err := toStr(e)
		if err != nil {
			return nil, err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

func fList(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
	if in == nil {
		return []any{}, nil
	}
	l, ok := asList(in)
	if !ok {
		return nil, fmt.Errorf("%s cannot be turned into a list", aType(in))
	}
	return append([]any{}, l...), nil
}

// fMap: map('filter', args...) or map(attribute='a.b', default=x).
func fMap(fc *filterCall, in any, args []any, kw map[string]any) (any, error) {
	if in == nil {
		return []any{}, nil
	}
	l, ok := asList(in)
	if !ok {
		return nil, fmt.Errorf("needs a list, not %s", aType(in))
	}
	out := make([]any, len(l))
	if attr, ok := kw["attribute"]; ok {
		path, err := toStr(attr)
		if err != nil {
			return nil, err
		}
		def, hasDef := kw["default"]
		for i, e := range l {
			out[i] = getPath(e, path)
			if hasDef && out[i] == nil {
				out[i] = def
			}
		}
		return out, nil
	}
	if len(args) == 0 {
		return nil, errors.New("needs a filter name or attribute=")
	}
	name, err := toStr(args[0])
	if err != nil {
		return nil, err
	}
	fn, err := lookupFilter(name)
	if err != nil {
		return nil, err
	}
	sub := &filterCall{name: name, c: fc.c}
	for i, e := range l {
		v, err := fn(sub, e, args[1:], nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[i] = v
	}
	return out, nil
}

func fMinMax(sign int) filterFunc {
	return func(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
		l, ok := asList(in)
		if !ok {
			return nil, fmt.Errorf("needs a list, not %s", aType(in))
		}
		caseSensitive := truthy(argOr(args, kw, 0, "case_sensitive", false))
		attr, _ := argOr(args, kw, 1, "attribute", nil).(string)
		var best any
		var bestKey any
		for i, e := range l {
			k := e
			if attr != "" {
				k = getPath(e, attr)
			}
			if i == 0 || compareFold(k, bestKey, caseSensitive)*sign > 0 {
				best, bestKey = e, k
			}
		}
		return best, nil
	}
}

func fRegexReplace(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	pat, err := toStr(argOr(args, kw, 0, "pattern", ""))
	if err != nil {
		return nil, err
	}
	repl, err := toStr(argOr(args, kw, 1, "replacement", ""))
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, err
	}
	// Python's \1 and \g<name> backreferences become Go's ${1} and ${name}.
	repl = strings.ReplaceAll(repl, "$", "$$")
	repl = regexp.MustCompile(`\\(\d+)|\\g<(\w+)>`).ReplaceAllString(repl, "$${$1$2}")
	return re.ReplaceAllString(s, repl), nil
}

func fReplace(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	if len(args) < 2 {
		return nil, errors.New("needs two arguments: old and new")
	}
	old, err := toStr(args[0])
	if err != nil {
		return nil, err
	}
	nw, err := toStr(args[1])
	if err != nil {
		return nil, err
	}
	count := int64(-1)
	if c := argOr(args, kw, 2, "count", nil); c != nil {
		count, _ = toInt(c)
	}
	return strings.Replace(s, old, nw, int(count)), nil
}

func fReverse(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
	if s, ok := in.(string); ok {
		r := []rune(s)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return string(r), nil
	}
	l, ok := asList(in)
	if !ok {
		return nil, fmt.Errorf("%s cannot be reversed", aType(in))
	}
	out := make([]any, len(l))
	for i, e := range l {
		out[len(l)-1-i] = e
	}
	return out, nil
}

func fRound(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	_, f, _, ok := number(in)
	if !ok {
		return nil, fmt.Errorf("needs a number, not %s", aType(in))
	}
	prec, _ := toInt(argOr(args, kw, 0, "precision", int64(0)))
	method, _ := toStr(argOr(args, kw, 1, "method", "common"))
	p := math.Pow(10, float64(prec))
	switch method {
	case "common":
		return math.Round(f*p) / p, nil
	case "ceil":
		return math.Ceil(f*p) / p, nil
	case "floor":
		return math.Floor(f*p) / p, nil
	}
	return nil, errors.New("method must be common, ceil or floor")
}

// fSelect implements select, reject, selectattr and rejectattr.
func fSelect(keep, byAttr bool) filterFunc {
	return func(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
		if in == nil {
			return []any{}, nil
		}
		l, ok := asList(in)
		if !ok {
			return nil, fmt.Errorf("needs a list, not %s", aType(in))
		}
		attr := ""
		if byAttr {
			if len(args) == 0 {
				return nil, errors.New("needs an attribute name")
			}
			var err error
			if attr, err = toStr(args[0]); err != nil {
				return nil, err
			}
			args = args[1:]
		}
		var test testFunc
		var targs []any
		if len(args) > 0 {
			name, err := toStr(args[0])
			if err != nil {
				return nil, err
			}
			t, ok := tests[name]
			if !ok {
				return nil, fmt.Errorf("unknown test '%s'", name)
			}
			test, targs = t, args[1:]
		}
		out := []any{}
		for _, e := range l {
			v := e
			if byAttr {
				v = getPath(e, attr)
			}
			r := truthy(v)
			if test != nil {
				var err error
				if r, err = test(v, targs); err != nil {
					return nil, err
				}
			}
			if r == keep {
				out = append(out, e)
			}
		}
		return out, nil
	}
}

func fSort(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	if in == nil {
		return []any{}, nil
	}
	l, ok := asList(in)
	if !ok {
		return nil, fmt.Errorf("needs a list, not %s", aType(in))
	}
	reverse := truthy(argOr(args, kw, 0, "reverse", false))
	caseSensitive := truthy(argOr(args, kw, 1, "case_sensitive", false))
	attr, _ := argOr(args, kw, 2, "attribute", nil).(string)
	out := append([]any{}, l...)
	key := func(v any) any {
		if attr != "" {
			return getPath(v, attr)
		}
		return v
	}
	sort.SliceStable(out, func(i, j int) bool {
		c := compareFold(key(out[i]), key(out[j]), caseSensitive)
		if reverse {
			return c > 0
		}
		return c < 0
	})
	return out, nil
}

func fSplit(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	return splitPy(s, argOr(args, kw, 0, "sep", nil), argOr(args, kw, 1, "maxsplit", int64(-1)))
}

func splitPy(s string, sepV any, maxV any) (any, error) {
	maxSplit, _ := toInt(maxV)
	var parts []string
	if sepV == nil {
		parts = strings.Fields(s)
		if maxSplit >= 0 && len(parts) > int(maxSplit)+1 {
			// Re-split keeping the remainder intact.
			rest := s
			parts = parts[:0]
			for k := int64(0); k < maxSplit; k++ {
				rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
				i := strings.IndexFunc(rest, unicode.IsSpace)
				if i < 0 {
					break
				}
				parts = append(parts, rest[:i])
				rest = rest[i:]
			}
			if rest = strings.TrimLeftFunc(rest, unicode.IsSpace); rest != "" {
				parts = append(parts, rest)
			}
		}
	} else {
		sep, err := toStr(sepV)
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, errors.New("empty separator")
		}
		parts = strings.SplitN(s, sep, int(maxSplit+1))
		if maxSplit < 0 {
			parts = strings.Split(s, sep)
		}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func fString(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
	return toStr(in)
}

func fSum(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	l, ok := asList(in)
	if !ok {
		return nil, fmt.Errorf("needs a list, not %s", aType(in))
	}
	attr, _ := argOr(args, kw, 0, "attribute", nil).(string)
	total := argOr(args, kw, 1, "start", int64(0))
	for _, e := range l {
		if attr != "" {
			e = getPath(e, attr)
		}
		var err error
		if total, err = arith("+", total, e); err != nil {
			return nil, err
		}
	}
	return total, nil
}

func fTojson(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	if in == unsetPassword(0) {
		return nil, errStatsPassword
	}
	var b []byte
	var err error
	if ind := argOr(args, kw, 0, "indent", nil); ind != nil {
		n, _ := toInt(ind)
		b, err = json.MarshalIndent(jsonable(in), "", strings.Repeat(" ", int(n)))
	} else {
		b, err = json.Marshal(jsonable(in))
	}
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func jsonable(v any) any {
	switch x := v.(type) {
	case tuple:
		return []any(x)
	case *dictView:
		l, _ := asList(x)
		return jsonable(l)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonable(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonable(e)
		}
		return out
	case *record.Record:
		// Its values are plain JSON values and records: it marshals itself.
		return x
	case *namespace:
		return jsonable(x.m)
	case unsetPassword:
		return nil
	}
	return v
}

func fTrim(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	if c := argOr(args, kw, 0, "chars", nil); c != nil {
		cs, err := toStr(c)
		if err != nil {
			return nil, err
		}
		return strings.Trim(s, cs), nil
	}
	return strings.TrimSpace(s), nil
}

func fUnique(_ *filterCall, in any, args []any, kw map[string]any) (any, error) {
	l, ok := asList(in)
	if !ok {
		return nil, fmt.Errorf("needs a list, not %s", aType(in))
	}
	caseSensitive := truthy(argOr(args, kw, 0, "case_sensitive", false))
	attr, _ := argOr(args, kw, 1, "attribute", nil).(string)
	out := []any{}
	var seen []any
	for _, e := range l {
		k := e
		if attr != "" {
			k = getPath(e, attr)
		}
		if s, ok := k.(string); ok && !caseSensitive {
			k = strings.ToLower(s)
		}
		dup := false
		for _, s := range seen {
			if equal(s, k) {
				dup = true
				break
			}
		}
		if !dup {
			seen = append(seen, k)
			out = append(out, e)
		}
	}
	return out, nil
}

func fURLEncode(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
	if isMap(in) {
		q := url.Values{}
		for _, k := range sortedMapKeys(in) {
			ks, _ := toStr(k)
			vs, err := toStr(mapGet(in, k))
			if err != nil {
				return nil, err
			}
			q.Add(ks, vs)
		}
		return q.Encode(), nil
	}
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20"), nil
}

func fWordcount(_ *filterCall, in any, _ []any, _ map[string]any) (any, error) {
	s, err := toStr(in)
	if err != nil {
		return nil, err
	}
	return int64(len(strings.Fields(s))), nil
}

// tests are Jinja2's `is` tests.
var tests = map[string]testFunc{
	"defined":   func(in any, _ []any) (bool, error) { return !isUndefined(in), nil },
	"undefined": func(in any, _ []any) (bool, error) { return isUndefined(in), nil },
	"none":      func(in any, _ []any) (bool, error) { return in == nil, nil },
	"boolean":   func(in any, _ []any) (bool, error) { _, ok := in.(bool); return ok, nil },
	"true":      func(in any, _ []any) (bool, error) { b, ok := in.(bool); return ok && b, nil },
	"false":     func(in any, _ []any) (bool, error) { b, ok := in.(bool); return ok && !b, nil },
	"integer": func(in any, _ []any) (bool, error) {
		if _, ok := in.(bool); ok {
			return false, nil
		}
		_, _, isInt, ok := number(in)
		return ok && isInt, nil
	},
	"float": func(in any, _ []any) (bool, error) { return isFloatValue(in), nil },
	"number": func(in any, _ []any) (bool, error) {
		if _, ok := in.(bool); ok {
			return false, nil
		}
		_, _, _, ok := number(in)
		return ok, nil
	},
	"string":  func(in any, _ []any) (bool, error) { _, ok := in.(string); return ok, nil },
	"mapping": func(in any, _ []any) (bool, error) { return isMap(in), nil },
	"sequence": func(in any, _ []any) (bool, error) {
		_, ok := in.(string)
		return ok || isSequence(in) || isMap(in), nil
	},
	"iterable": func(in any, _ []any) (bool, error) {
		_, ok := in.(string)
		return ok || isSequence(in) || isMap(in), nil
	},
	"callable": func(in any, _ []any) (bool, error) {
		switch in.(type) {
		case *macro, *builtinFunc, func(...*pongo2.Value) (*pongo2.Value, error):
			return true, nil
		}
		return false, nil
	},
	"odd": func(in any, _ []any) (bool, error) {
		i, ok := toIntStrict(in)
		return ok && i%2 != 0, nil
	},
	"even": func(in any, _ []any) (bool, error) {
		i, ok := toIntStrict(in)
		return ok && i%2 == 0, nil
	},
	"divisibleby": func(in any, args []any) (bool, error) {
		if len(args) != 1 {
			return false, errors.New("needs one argument")
		}
		i, ok1 := toIntStrict(in)
		d, ok2 := toIntStrict(args[0])
		if !ok1 || !ok2 || d == 0 {
			return false, nil
		}
		return i%d == 0, nil
	},
	"eq":          cmpTest("=="),
	"equalto":     cmpTest("=="),
	"==":          cmpTest("=="),
	"ne":          cmpTest("!="),
	"!=":          cmpTest("!="),
	"lt":          cmpTest("<"),
	"lessthan":    cmpTest("<"),
	"<":           cmpTest("<"),
	"le":          cmpTest("<="),
	"<=":          cmpTest("<="),
	"gt":          cmpTest(">"),
	"greaterthan": cmpTest(">"),
	">":           cmpTest(">"),
	"ge":          cmpTest(">="),
	">=":          cmpTest(">="),
	"in": func(in any, args []any) (bool, error) {
		if len(args) != 1 {
			return false, errors.New("needs one argument")
		}
		return contains(args[0], in)
	},
	"sameas": func(in any, args []any) (bool, error) {
		if len(args) != 1 {
			return false, errors.New("needs one argument")
		}
		return equal(in, args[0]) && typeName(in) == typeName(args[0]), nil
	},
	"lower":   func(in any, _ []any) (bool, error) { s, ok := in.(string); return ok && strings.ToLower(s) == s, nil },
	"upper":   func(in any, _ []any) (bool, error) { s, ok := in.(string); return ok && strings.ToUpper(s) == s, nil },
	"escaped": func(in any, _ []any) (bool, error) { return false, nil },
	"filter": func(in any, _ []any) (bool, error) {
		s, _ := in.(string)
		_, err := lookupFilter(s)
		return err == nil, nil
	},
}

func init() {
	tests["test"] = func(in any, _ []any) (bool, error) { s, _ := in.(string); _, ok := tests[s]; return ok, nil }
}

func cmpTest(op string) testFunc {
	return func(in any, args []any) (bool, error) {
		if len(args) != 1 {
			return false, errors.New("needs one argument")
		}
		return compareOp(op, in, args[0])
	}
}

func testNames() []string {
	names := make([]string, 0, len(tests))
	for n := range tests {
		if isNameStart(n[0]) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// pyReEscape is Python 3.7+'s re.escape (the original project's re_escape filter).
func pyReEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && strings.ContainsRune("()[]{}?*+-|^$\\.&~# \t\n\r\v\f", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func plural(n int, word string) string {
	switch n {
	case 0:
		return "no " + word + "s"
	case 1:
		return "at most 1 " + word
	}
	return fmt.Sprintf("at most %d %ss", n, word)
}
