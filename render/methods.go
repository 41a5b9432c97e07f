package render

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// callMethod implements the Python methods Jinja2 templates call: str.startswith(),
// dict.items() / iteritems() / itervalues() (Python 2 forms included), list.index(), and
// loop.cycle(). handled is false when obj has no such method.
func callMethod(obj any, name string, args []any, kw map[string]any) (v any, handled bool, err error) {
	switch o := obj.(type) {
	case nil:
		// Undefined: like pongo2, calling a method on nothing gives nothing.
		if _, known := dictMethods[name]; known {
			return nil, true, nil
		}
		if _, known := stringMethods[name]; known {
			return nil, true, nil
		}
		return nil, false, nil
	case unsetPassword:
		if _, known := stringMethods[name]; known {
			return nil, true, errStatsPassword
		}
	case string:
		if m, ok := stringMethods[name]; ok {
			v, err := m(o, args, kw)
			return v, true, err
		}
		return nil, true, fmt.Errorf("a string has no method %s()", name)
	case *LoopInfo:
		if name == "cycle" {
			if len(args) == 0 {
				return nil, true, errors.New("loop.cycle() needs at least one argument")
			}
			return args[o.Counter0%len(args)], true, nil
		}
		return nil, true, fmt.Errorf("loop.%s() is not supported (loop has: %s)", name, loopAttrList)
	}
	if isMap(obj) {
		if m, ok := dictMethods[name]; ok {
			v, err := m(obj, args)
			return v, true, err
		}
		return nil, false, nil
	}
	if isSequence(obj) {
		l, _ := asList(obj)
		switch name {
		case "index":
			if len(args) != 1 {
				return nil, true, errors.New("index() needs one argument")
			}
			for i, e := range l {
				if equal(e, args[0]) {
					return int64(i), true, nil
				}
			}
			return nil, true, errors.New("index(): value is not in the list")
		case "count":
			if len(args) != 1 {
				return nil, true, errors.New("count() needs one argument")
			}
			n := int64(0)
			for _, e := range l {
				if equal(e, args[0]) {
					n++
				}
			}
			return n, true, nil
		}
		return nil, true, fmt.Errorf("a list has no method %s()", name)
	}
	return nil, false, nil
}

var dictMethods = map[string]func(m any, args []any) (any, error){
	"items":      dictView1(viewItems),
	"iteritems":  dictView1(viewItems),
	"keys":       dictView1(viewKeys),
	"iterkeys":   dictView1(viewKeys),
	"values":     dictView1(viewValues),
	"itervalues": dictView1(viewValues),
	"get": func(m any, args []any) (any, error) {
		if len(args) < 1 || len(args) > 2 {
			return nil, errors.New("get() needs a key and an optional default")
		}
		if mapHas(m, args[0]) {
			return mapGet(m, args[0]), nil
		}
		if len(args) == 2 {
			return args[1], nil
		}
		return nil, nil
	},
	"has_key": func(m any, args []any) (any, error) {
		if len(args) != 1 {
			return nil, errors.New("has_key() needs one argument")
		}
		return mapHas(m, args[0]), nil
	},
	"copy": func(m any, args []any) (any, error) { return m, nil },
}

func dictView1(kind byte) func(m any, args []any) (any, error) {
	return func(m any, args []any) (any, error) {
		if len(args) != 0 {
			return nil, errors.New("takes no arguments")
		}
		if m == nil {
			return nil, nil
		}
		return &dictView{m: m, kind: kind}, nil
	}
}

type strMethod func(s string, args []any, kw map[string]any) (any, error)

var stringMethods map[string]strMethod

func init() {
	stringMethods = map[string]strMethod{
		"startswith": affixMethod(strings.HasPrefix),
		"endswith":   affixMethod(strings.HasSuffix),
		"lower":      noArg(strings.ToLower),
		"upper":      noArg(strings.ToUpper),
		"title":      noArg(title),
		"capitalize": noArg(capitalize),
		"swapcase": noArg(func(s string) string {
			return strings.Map(func(r rune) rune {
				if unicode.IsUpper(r) {
					return unicode.ToLower(r)
				}
				return unicode.ToUpper(r)
			}, s)
		}),
		"strip":  stripMethod(strings.Trim, strings.TrimSpace),
		"lstrip": stripMethod(strings.TrimLeft, func(s string) string { return strings.TrimLeftFunc(s, unicode.IsSpace) }),
		"rstrip": stripMethod(strings.TrimRight, func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }),
		"split": func(s string, args []any, kw map[string]any) (any, error) {
			return splitPy(s, argOr(args, kw, 0, "sep", nil), argOr(args, kw, 1, "maxsplit", int64(-1)))
		},
		"rsplit": func(s string, args []any, kw map[string]any) (any, error) {
			sepV := argOr(args, kw, 0, "sep", nil)
			maxSplit, _ := toInt(argOr(args, kw, 1, "maxsplit", int64(-1)))
			if sepV == nil || maxSplit < 0 {
				return splitPy(s, sepV, int64(-1))
			}
			sep, err := toStr(sepV)
			if err != nil || sep == "" {
				return nil, errors.New("bad separator")
			}
			var parts []string
			rest := s
			for k := int64(0); k < maxSplit; k++ {
				i := strings.LastIndex(rest, sep)
				if i < 0 {
					break
				}
				parts = append([]string{rest[i+len(sep):]}, parts...)
				rest = rest[:i]
			}
			parts = append([]string{rest}, parts...)
			out := make([]any, len(parts))
			for i, p := range parts {
				out[i] = p
			}
			return out, nil
		},
		"splitlines": func(s string, args []any, kw map[string]any) (any, error) {
			lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
			if len(lines) > 0 && lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1]
			}
			out := make([]any, len(lines))
			for i, l := range lines {
				out[i] = l
			}
			return out, nil
		},
		"replace": func(s string, args []any, kw map[string]any) (any, error) {
			return fReplace(nil, s, args, kw)
		},
		"join": func(s string, args []any, kw map[string]any) (any, error) {
			if len(args) != 1 {
				return nil, errors.New("join() needs one argument")
			}
			return fJoin(nil, args[0], []any{s}, nil)
		},
		"find": func(s string, args []any, kw map[string]any) (any, error) {
			sub, err := oneStr(args)
			if err != nil {
				return nil, err
			}
			i := strings.Index(s, sub)
			if i < 0 {
				return int64(-1), nil
			}
			return int64(len([]rune(s[:i]))), nil
		},
		"rfind": func(s string, args []any, kw map[string]any) (any, error) {
			sub, err := oneStr(args)
			if err != nil {
				return nil, err
			}
			i := strings.LastIndex(s, sub)
			if i < 0 {
				return int64(-1), nil
			}
			return int64(len([]rune(s[:i]))), nil
		},
		"count": func(s string, args []any, kw map[string]any) (any, error) {
			sub, err := oneStr(args)
			if err != nil {
				return nil, err
			}
			return int64(strings.Count(s, sub)), nil
		},
		"isdigit": isMethod(unicode.IsDigit),
		"isalpha": isMethod(unicode.IsLetter),
		"isalnum": isMethod(func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }),
		"isspace": isMethod(unicode.IsSpace),
		"islower": func(s string, _ []any, _ map[string]any) (any, error) {
			return strings.ToLower(s) == s && strings.ToUpper(s) != s, nil
		},
		"isupper": func(s string, _ []any, _ map[string]any) (any, error) {
			return strings.ToUpper(s) == s && strings.ToLower(s) != s, nil
		},
		"format": func(s string, args []any, kw map[string]any) (any, error) {
			return strFormat(s, args, kw)
		},
		"zfill": func(s string, args []any, kw map[string]any) (any, error) {
			w, _ := toInt(argOr(args, kw, 0, "width", int64(0)))
			sign := ""
			if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
				sign, s = s[:1], s[1:]
			}
			for int64(len(sign)+len(s)) < w {
				s = "0" + s
			}
			return sign + s, nil
		},
		"ljust":  justMethod('<'),
		"rjust":  justMethod('>'),
		"center": justMethod('^'),
	}
}

func oneStr(args []any) (string, error) {
	if len(args) < 1 {
		return "", errors.New("needs an argument")
	}
	return toStr(args[0])
}

func noArg(fn func(string) string) strMethod {
	return func(s string, args []any, _ map[string]any) (any, error) {
		if len(args) != 0 {
			return nil, errors.New("takes no arguments")
		}
		return fn(s), nil
	}
}

func affixMethod(fn func(s, affix string) bool) strMethod {
	return func(s string, args []any, _ map[string]any) (any, error) {
		if len(args) != 1 {
			return nil, errors.New("needs one argument")
		}
		if t, ok := args[0].(tuple); ok {
			for _, e := range t {
				a, err := toStr(e)
				if err != nil {
					return nil, err
				}
				if fn(s, a) {
					return true, nil
				}
			}
			return false, nil
		}
		a, err := toStr(args[0])
		if err != nil {
			return nil, err
		}
		return fn(s, a), nil
	}
}

func stripMethod(withChars func(string, string) string, plain func(string) string) strMethod {
	return func(s string, args []any, _ map[string]any) (any, error) {
		if len(args) == 0 || args[0] == nil {
			return plain(s), nil
		}
		cs, err := toStr(args[0])
		if err != nil {
			return nil, err
		}
		return withChars(s, cs), nil
	}
}

func isMethod(pred func(rune) bool) strMethod {
	return func(s string, _ []any, _ map[string]any) (any, error) {
		if s == "" {
			return false, nil
		}
		for _, r := range s {
			if !pred(r) {
				return false, nil
			}
		}
		return true, nil
	}
}

func justMethod(align byte) strMethod {
	return func(s string, args []any, kw map[string]any) (any, error) {
		w, _ := toInt(argOr(args, kw, 0, "width", int64(0)))
		fill := " "
		if f := argOr(args, kw, 1, "fillchar", nil); f != nil {
			fill, _ = toStr(f)
		}
		return formatSpec(s, fill+string(align)+fmt.Sprint(w))
	}
}
