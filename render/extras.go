package render

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja"
)

// Filters beside Jinja2's, for HAProxy configurations and the original project's templates.
// Each call gives regex_replace a cache of its own (one per compiled template set).
func extraFilters() map[string]jinja.Filter {
	rc := &regexCache{}
	return map[string]jinja.Filter{
		"hquote":        hquote,
		"regex_replace": rc.replace,
		"re_escape":     reEscape,
		"split":         split,
	}
}

// str reads a filter's string input (ints and floats are written as Python prints them).
func str(v any, what string) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case jinja.Markup:
		return string(x), nil
	case int64, float64, bool:
		return fmt.Sprint(x), nil
	}
	return "", fmt.Errorf("%s must be a string, not %T", what, v)
}

// hquote quotes a value as one HAProxy argument: "..." with \ " and $ escaped.
func hquote(v any, args []any, kw map[string]any) (any, error) {
	if len(args) > 0 || len(kw) > 0 {
		return nil, errors.New("hquote takes no arguments")
	}
	s, err := str(v, "the value")
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

func arg(args []any, kw map[string]any, i int, name string) (any, bool) {
	if i < len(args) {
		return args[i], true
	}
	v, ok := kw[name]
	return v, ok
}

// groupRef is a group named in regex_replace's replacement: \1 or \g<name>.
var groupRef = regexp.MustCompile(`\\(\d+)|\\g<(\w+)>`)

// regexCache keeps regex_replace's compiled patterns and rewritten replacements: a template
// validates a value with the same pattern for each of thousands of objects (the ingress-nginx
// example's annotations), and compiling it each time cost more than the match. Safe for
// concurrent renders.
type regexCache struct {
	mu    sync.Mutex
	re    map[string]*regexp.Regexp
	repls map[string]string
}

// regexCacheMax bounds each map: patterns built from the data could otherwise grow it without
// end (a full map is emptied and starts again).
const regexCacheMax = 512

func (c *regexCache) compile(pat string) (*regexp.Regexp, error) {
	c.mu.Lock()
	re := c.re[pat]
	c.mu.Unlock()
	if re != nil {
		return re, nil
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.re == nil || len(c.re) >= regexCacheMax {
		c.re = map[string]*regexp.Regexp{}
	}
	c.re[pat] = re
	c.mu.Unlock()
	return re, nil
}

// replacement is repl in Go's syntax: $ escaped, \1 and \g<name> as ${1} and ${name}.
func (c *regexCache) replacement(repl string) string {
	if !strings.ContainsAny(repl, "$\\") {
		return repl
	}
	c.mu.Lock()
	out, ok := c.repls[repl]
	c.mu.Unlock()
	if ok {
		return out
	}
	out = groupRef.ReplaceAllString(strings.ReplaceAll(repl, "$", "$$"), "$${$1$2}")
	c.mu.Lock()
	if c.repls == nil || len(c.repls) >= regexCacheMax {
		c.repls = map[string]string{}
	}
	c.repls[repl] = out
	c.mu.Unlock()
	return out
}

// replace is regex_replace(pattern, replacement): Python's re.sub with Go's regexp syntax; \1
// and \g<name> in the replacement refer to groups.
func (c *regexCache) replace(v any, args []any, kw map[string]any) (any, error) {
	s, err := str(v, "the value")
	if err != nil {
		return nil, err
	}
	p, _ := arg(args, kw, 0, "pattern")
	pat, err := str(p, "the pattern")
	if err != nil {
		return nil, err
	}
	rp, ok := arg(args, kw, 1, "replacement")
	if !ok {
		rp = ""
	}
	repl, err := str(rp, "the replacement")
	if err != nil {
		return nil, err
	}
	re, err := c.compile(pat)
	if err != nil {
		return nil, err
	}
	return re.ReplaceAllString(s, c.replacement(repl)), nil
}

// reEscape is Python 3's re.escape (the original project's filter).
func reEscape(v any, args []any, kw map[string]any) (any, error) {
	s, err := str(v, "the value")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, r := range s {
		if r < 128 && strings.ContainsRune("()[]{}?*+-|^$\\.&~# \t\n\r\v\f", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String(), nil
}

// split is Python's str.split(sep=None, maxsplit=-1) as a filter.
func split(v any, args []any, kw map[string]any) (any, error) {
	s, err := str(v, "the value")
	if err != nil {
		return nil, err
	}
	sep, _ := arg(args, kw, 0, "sep")
	maxV, ok := arg(args, kw, 1, "maxsplit")
	n := -1
	if ok {
		m, isInt := maxV.(int64)
		if !isInt {
			return nil, errors.New("split: maxsplit must be an integer")
		}
		n = int(m)
	}
	var parts []string
	switch {
	case sep == nil && n < 0:
		parts = strings.Fields(s)
	case sep == nil:
		rest := strings.TrimLeft(s, " \t\n\r\v\f")
		for ; n > 0 && rest != ""; n-- {
			i := strings.IndexAny(rest, " \t\n\r\v\f")
			if i < 0 {
				break
			}
			parts = append(parts, rest[:i])
			rest = strings.TrimLeft(rest[i:], " \t\n\r\v\f")
		}
		if rest != "" {
			parts = append(parts, rest)
		}
	default:
		sepStr, err := str(sep, "the separator")
		if err != nil {
			return nil, err
		}
		if sepStr == "" {
			return nil, errors.New("empty separator")
		}
		if n < 0 {
			parts = strings.Split(s, sepStr)
		} else {
			parts = strings.SplitN(s, sepStr, n+1)
		}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return jinja.NewList(out), nil
}
