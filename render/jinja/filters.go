package jinja

import (
	"errors"
	"strings"
)

// Jinja2's filters (jinja2/filters.py), with Python's argument binding: positional and
// keyword arguments by the names Jinja2 gives them. This file finds a filter by name and
// holds default, pprint and tojson; the others are by family: filters_str.go (text),
// filters_html.go (markup, URLs), filters_num.go (numbers), filters_seq.go (sequences,
// dicts), filters_items.go (by attribute: map, select, groupby...). pongo2's own filters run
// through pongo2.go.

// lookupFilter finds a filter when compiling: the extras given to Compile, Jinja2's, then
// pongo2's own (pongo2's filter:arg syntax always means pongo2's filter). It returns nil for
// a name no filter has (an error where it is used, see parser.unknown), an error for the
// filters that are not allowed.
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

func jinjaFilter(name string) filterFunc {
	switch name {
	case "abs":
		return fAbs
	case "attr":
		return fAttr
	case "batch":
		return fBatch
	case "capitalize":
		return strFilter("capitalize", capitalize)
	case "center":
		return fCenter
	case "count", "length":
		return fLength
	case "d", "default":
		return fDefault
	case "dictsort":
		return fDictsort
	case "e", "escape":
		return fEscape
	case "filesizeformat":
		return fFilesizeformat
	case "first":
		return fFirst
	case "float":
		return fFloat
	case "forceescape":
		return fForceescape
	case "format":
		return fFormat
	case "groupby":
		return fGroupby
	case "indent":
		return fIndent
	case "int":
		return fInt
	case "join":
		return fJoin
	case "last":
		return fLast
	case "list":
		return fList
	case "lower":
		return strFilter("lower", strings.ToLower)
	case "upper":
		return strFilter("upper", strings.ToUpper)
	case "items":
		return fItems
	case "map":
		return fMap
	case "min":
		return fMinMax(-1)
	case "max":
		return fMinMax(1)
	case "pprint":
		return fPprint
	case "reject":
		return fSelect(false, false)
	case "rejectattr":
		return fSelect(false, true)
	case "select":
		return fSelect(true, false)
	case "selectattr":
		return fSelect(true, true)
	case "replace":
		return fReplace
	case "reverse":
		return fReverse
	case "round":
		return fRound
	case "safe":
		return fSafe
	case "slice":
		return fSlice
	case "sort":
		return fSort
	case "string":
		return fString
	case "striptags":
		return fStriptags
	case "sum":
		return fSum
	case "title":
		return strFilter("title", jinjaTitle)
	case "trim":
		return fTrim
	case "truncate":
		return fTruncate
	case "unique":
		return fUnique
	case "urlencode":
		return fURLEncode
	case "wordcount":
		return fWordcount
	case "wordwrap":
		return fWordwrap
	case "xmlattr":
		return fXmlattr
	case "tojson":
		return fTojson
	}
	return nil
}

func fDefault(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("default", a, kw, "default_value", "boolean")
	if err != nil {
		return nil, err
	}
	_, undef := in.(*Undefined)
	if undef || (truthy(or(p[1], false)) && !truthy(in)) {
		return or(p[0], ""), nil
	}
	return in, nil
}

func fPprint(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("pprint", a, kw); err != nil {
		return nil, err
	}
	return pformat(in)
}

func fTojson(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("tojson", a, kw, "indent")
	if err != nil {
		return nil, err
	}
	indent := -1
	if i := or(p[0], nil); i != nil {
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
	s = strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`, "'", `\u0027`).Replace(s)
	return Markup(s), nil
}
