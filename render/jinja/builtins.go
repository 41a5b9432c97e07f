package jinja

import (
	"errors"
	"fmt"
	"strings"
)

// The built-ins by name. Jinja2's filters (jinja2/filters.py) and tests (jinja2/tests.py),
// with Python's argument binding (args.go): positional and keyword arguments by the names
// Jinja2 gives them. Here: the tables that find a filter or a test by name (Compile resolves
// each name a template uses once, compile.go), and the built-ins that take the names of
// others (map, select, reject, selectattr, rejectattr; the tests filter and test) or that
// the evaluator knows by name (default). The others are by family: filters_str.go (text),
// filters_html.go (markup, URLs), filters_num.go (numbers), filters_seq.go (sequences,
// dicts), filters_items.go (by attribute), tests.go; pprint and tojson are with their
// printers (pprint.go, json.go); pongo2's own filters run through pongo2.go.

// lookupFilter finds a filter when compiling: the extras given to Compile, Jinja2's, then
// pongo2's own (pongo2's filter:arg syntax always means pongo2's filter). It returns nil for
// a name no filter has (an error where it is used: see resolve), an error for the filters
// that are not allowed.
func (p *Program) lookupFilter(name string, pongo2 bool) (filterFunc, error) {
	switch name {
	case "random":
		return nil, errors.New("filter random is not allowed: every render would differ and HAProxy would reload for nothing")
	case "urlize":
		return nil, errors.New("filter urlize is not supported (it makes HTML links)")
	}
	if fn, ok := p.filters[name]; ok {
		return func(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
			plain := make([]any, len(a)) // a may be the call's shared constant arguments
			for i, x := range a {
				plain[i] = e.plain(x)
			}
			return fn(e.plain(in), plain, kw)
		}, nil
	}
	if pongo2 && pongo2Has(name) {
		return pongo2Filter(name), nil
	}
	if fn := jinjaFilter(name); fn != nil {
		return fn, nil
	}
	if pongo2Has(name) {
		return pongo2Filter(name), nil
	}
	return nil, nil
}

// jinjaFilter finds one of Jinja2's filters by name. map, select and reject look built-ins up
// by name themselves: in the table, the table would refer to itself.
func jinjaFilter(name string) filterFunc {
	switch name {
	case "map":
		return fMap
	case "select":
		return fSelect(true, false)
	case "selectattr":
		return fSelect(true, true)
	case "reject":
		return fSelect(false, false)
	case "rejectattr":
		return fSelect(false, true)
	}
	return jinjaFilters[name]
}

// jinjaFilters are Jinja2's filters by name, but those that look built-ins up by name
// themselves (map, select, reject...: see jinjaFilter). Read only.
var jinjaFilters = map[string]filterFunc{
	"abs":            fAbs,
	"attr":           fAttr,
	"batch":          fBatch,
	"capitalize":     strFilter("capitalize", pyCapitalize),
	"center":         fCenter,
	"count":          fLength,
	"d":              fDefault,
	"default":        fDefault,
	"dictsort":       fDictsort,
	"e":              fEscape,
	"escape":         fEscape,
	"filesizeformat": fFilesizeformat,
	"first":          fFirst,
	"float":          fFloat,
	"forceescape":    fForceescape,
	"format":         fFormat,
	"groupby":        fGroupby,
	"indent":         fIndent,
	"int":            fInt,
	"items":          fItems,
	"join":           fJoin,
	"last":           fLast,
	"length":         fLength,
	"list":           fList,
	"lower":          strFilter("lower", strings.ToLower),
	"max":            fMinMax(1),
	"min":            fMinMax(-1),
	"pprint":         fPprint,
	"replace":        fReplace,
	"reverse":        fReverse,
	"round":          fRound,
	"safe":           fSafe,
	"slice":          fSlice,
	"sort":           fSort,
	"string":         fString,
	"striptags":      fStriptags,
	"sum":            fSum,
	"title":          strFilter("title", jinjaTitle),
	"tojson":         fTojson,
	"trim":           fTrim,
	"truncate":       fTruncate,
	"unique":         fUnique,
	"upper":          strFilter("upper", strings.ToUpper),
	"urlencode":      fURLEncode,
	"wordcount":      fWordcount,
	"wordwrap":       fWordwrap,
	"xmlattr":        fXmlattr,
}

// lookupTest finds a test by name: filter and test here, the others in tests.go.
func lookupTest(name string) testFunc {
	switch name {
	case "filter":
		return tFilter
	case "test":
		return tTest
	}
	return jinjaTest(name)
}

func fDefault(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("default", a, kw, "default_value", "boolean")
	if err != nil {
		return nil, err
	}
	_, undef := in.(*Undefined)
	if undef || (truthy(argOr(p[1], false)) && !truthy(in)) {
		return argOr(p[0], ""), nil
	}
	return in, nil
}

func fMap(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if !truthy(in) {
		if _, ok := in.(*generator); !ok {
			return &generator{}, nil
		}
	}
	// By attribute, the items are read at once (readItems: no template code runs meanwhile):
	// no copy of a list (the HTTPRoute model maps its 3,000 routes four times per sync).
	read := e.iterate
	if len(a) == 0 {
		read = e.readItems
	}
	items, err := read(in)
	if err != nil {
		return nil, err
	}
	if len(a) == 0 {
		attr, ok := kw["attribute"]
		if !ok {
			return nil, errors.New("map requires a filter argument")
		}
		def := kw["default"]
		for k := range kw {
			if k != "attribute" && k != "default" {
				return nil, fmt.Errorf("Unexpected keyword argument %s", reprString(k))
			}
		}
		parts := attrParts(attr)
		if kept, ok := e.mapKept(items, attr, def, parts); ok {
			return &generator{items: kept}, nil
		}
		out := make([]any, len(items))
		for i, it := range items {
			if out[i], err = e.attrPath(it, parts, def); err != nil {
				return nil, err
			}
		}
		return &generator{items: out}, nil
	}
	name, ok := strValue(a[0])
	if !ok {
		return nil, fmt.Errorf("map: the filter name must be a string, not %s", typeName(a[0]))
	}
	fn := jinjaFilter(name)
	if fn == nil && name == "re_escape" || fn == nil {
		if ext, ok := e.prog.filters[name]; ok {
			fn = func(e *evaluator, in any, a []any, kw map[string]any) (any, error) { return ext(e.plain(in), a, kw) }
		} else if pongo2Has(name) && name != "random" {
			fn = pongo2Filter(name)
		} else {
			return nil, fmt.Errorf("No filter named %s.", reprString(name))
		}
	}
	out := make([]any, len(items))
	for i, it := range items {
		var kwc map[string]any
		if len(kw) > 0 {
			kwc = make(map[string]any, len(kw))
			for k, v := range kw {
				kwc[k] = v
			}
		}
		if out[i], err = fn(e, it, append([]any(nil), a[1:]...), kwc); err != nil {
			return nil, err
		}
	}
	return &generator{items: out}, nil
}

func fSelect(keep, byAttr bool) filterFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
		if !truthy(in) {
			if _, ok := in.(*generator); !ok {
				return &generator{}, nil
			}
		}
		items, err := e.iterate(in)
		if err != nil {
			return nil, err
		}
		off := 0
		var attr any
		if byAttr {
			if len(a) == 0 {
				return nil, errors.New("Missing parameter for attribute name")
			}
			attr, off = a[0], 1
		}
		var test testFunc
		var targs []any
		if len(a) > off {
			name, ok := strValue(a[off])
			if !ok {
				return nil, fmt.Errorf("the test name must be a string, not %s", typeName(a[off]))
			}
			if test = lookupTest(name); test == nil {
				return nil, fmt.Errorf("No test named %s.", reprString(name))
			}
			targs = a[off+1:]
		}
		parts := attrParts(attr)
		out := make([]any, 0, len(items))
		var sel *selectRun // the answers kept across renders (reuse_select.go)
		if byAttr && test == nil {
			sel = e.selectRun(attr)
			defer sel.done()
		}
		for _, it := range items {
			var ok bool
			if sel != nil {
				if ok, err = sel.truthy(e, it, parts); err != nil {
					return nil, err
				}
				if ok == keep {
					out = append(out, it)
				}
				continue
			}
			if byAttr && test == nil {
				if ok, err = e.attrTruthy(it, parts); err != nil {
					return nil, err
				}
				if ok == keep {
					out = append(out, it)
				}
				continue
			}
			v := it
			if byAttr {
				if v, err = e.attrPath(it, parts, nil); err != nil {
					return nil, err
				}
			}
			if test != nil {
				if ok, err = test(e, v, targs, kw); err != nil {
					return nil, err
				}
			} else {
				ok = truthy(v)
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return &generator{items: out}, nil
	}
}

// attrTruthy is bool(attrPath(item, parts)) without making an Undefined for a missing key.
func (e *evaluator) attrTruthy(item any, parts []any) (bool, error) {
	for _, part := range parts {
		if s, ok := part.(string); ok && isMapping(item) && !isDictMethod(s) {
			v, found, _ := mapGetStr(item, s)
			if !found {
				return false, nil
			}
			item = v
			continue
		}
		v, err := e.getItem(item, part)
		if err != nil {
			return false, err
		}
		item = v
	}
	return truthy(item), nil
}

// tFilter is `name is filter`: Jinja2's filters and the extras given to Compile.
func tFilter(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
	if _, err := bind("filter", a, kw); err != nil {
		return false, err
	}
	name, ok := strValue(in)
	if !ok {
		return false, nil
	}
	_, extra := e.prog.filters[name]
	return extra || jinjaFilter(name) != nil, nil
}

func tTest(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
	name, ok := strValue(in)
	return ok && lookupTest(name) != nil, nil
}
