package jinja

import (
	"fmt"
	"regexp"
	"strings"
)

// Jinja2's filters of markup and URLs: escape, forceescape, safe, striptags, xmlattr,
// urlencode (HTML escaping itself is html.go's).

func fEscape(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("escape", a, kw); err != nil {
		return nil, err
	}
	if m, ok := in.(Markup); ok {
		return m, nil
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	return Markup(escapeString(s)), nil
}

func fForceescape(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("forceescape", a, kw); err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	return Markup(escapeString(s)), nil
}

var ()

func fStriptags(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("striptags", a, kw); err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	return stripTags(s), nil
}

func fSafe(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("safe", a, kw); err != nil {
		return nil, err
	}
	if m, ok := in.(Markup); ok {
		return m, nil
	}
	s, err := e.str(in)
	return Markup(s), err
}

// urlQuote is Python's urllib.parse.quote with safe "/" (or "" and + for spaces: forQS).
func urlQuote(s string, forQS bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-', c == '~':
			b.WriteByte(c)
		case c == '/' && !forQS:
			b.WriteByte(c)
		case c == ' ' && forQS:
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func fURLEncode(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("urlencode", a, kw); err != nil {
		return nil, err
	}
	if s, ok := strValue(in); ok {
		e.plain(in)
		return urlQuote(s, false), nil
	}
	var pairs []any
	switch {
	case isMapping(in):
		pairs = viewItemsOf(&dictView{d: in, kind: viewItems})
	default:
		items, err := e.iterate(in)
		if err != nil {
			s, err := e.str(in)
			if err != nil {
				return nil, err
			}
			return urlQuote(s, false), nil
		}
		pairs = items
	}
	parts := make([]string, 0, len(pairs))
	for _, p := range pairs {
		kv, err := e.unpack(p, 2)
		if err != nil {
			return nil, err
		}
		k, err := e.str(kv[0])
		if err != nil {
			return nil, err
		}
		v, err := e.str(kv[1])
		if err != nil {
			return nil, err
		}
		parts = append(parts, urlQuote(k, true)+"="+urlQuote(v, true))
	}
	return strings.Join(parts, "&"), nil
}

var attrKeyRE = regexp.MustCompile(`[\s/>=]`)

func fXmlattr(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("xmlattr", a, kw, "autospace")
	if err != nil {
		return nil, err
	}
	if !isMapping(in) {
		return nil, fmt.Errorf("'%s' object has no attribute 'items'", typeName(in))
	}
	var parts []string
	eachItem(in, func(k, v any) bool {
		if v == nil {
			return true
		}
		if _, ok := v.(*Undefined); ok {
			return true
		}
		ks, kerr := e.str(k)
		if kerr != nil {
			err = kerr
			return false
		}
		if attrKeyRE.MatchString(ks) {
			err = fmt.Errorf("Invalid character in attribute name: %s", reprString(ks))
			return false
		}
		vs, verr := e.escapeValue(v)
		if verr != nil {
			err = verr
			return false
		}
		parts = append(parts, escapeString(ks)+`="`+string(vs)+`"`)
		return true
	})
	if err != nil {
		return nil, err
	}
	rv := strings.Join(parts, " ")
	if truthy(argOr(p[0], true)) && rv != "" {
		rv = " " + rv
	}
	if e.autoescape {
		return Markup(rv), nil
	}
	return rv, nil
}
