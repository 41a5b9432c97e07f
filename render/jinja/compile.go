package jinja

import (
	"errors"
	"fmt"
	"sort"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// Compile parses srcs[main] and the templates it reaches. A syntax error in the main
// template is returned; one in a template it reaches is returned when a render uses it, as
// Jinja2 does.
func Compile(srcs map[string]string, main string, opts Options) (prog *Program, err error) {
	defer func() {
		// A last resort: a bug in the parser must fail the compile, not the process.
		if r := recover(); r != nil {
			prog, err = nil, &Error{Template: main, Err: fmt.Errorf("internal error in the template engine (please report it): %v", r)}
		}
	}()
	p := &Program{main: main, templates: map[string]*Template{}, errs: map[string]error{}, filters: opts.Filters}
	for k := range srcs {
		p.keys = append(p.keys, k)
	}
	sort.Strings(p.keys)
	src, ok := srcs[main]
	if !ok {
		return nil, &Error{Template: main, Err: p.missing(main)}
	}
	queue := []string{main}
	refs := map[string]bool{main: true}
	for len(queue) > 0 {
		key := queue[0]
		queue = queue[1:]
		src = srcs[key]
		t, err := p.parse(key, src)
		if err != nil {
			if key == main {
				return nil, err
			}
			p.errs[key] = err
			continue
		}
		p.templates[key] = t
		for _, r := range t.tree.Refs {
			if _, exists := srcs[r]; exists && !refs[r] {
				refs[r] = true
				queue = append(queue, r)
			}
		}
	}
	return p, nil
}

// parse parses one template and resolves the filters and tests it names.
func (p *Program) parse(name, src string) (*Template, error) {
	tr, err := parse.Parse(src)
	t := &Template{name: name, tree: tr}
	// Errors in the order a reader meets them: a name that is not allowed (random, urlize)
	// before a syntax error further on (the tree keeps the uses met before that error), the
	// syntax error, then a name no one has, which Jinja2 too reports once the template parsed.
	refused, unknown := p.resolve(t)
	switch {
	case refused != nil:
		return nil, refused
	case err != nil:
		return nil, t.syntaxError(err)
	case unknown != nil:
		return nil, unknown
	}
	t.readOnly = readsOnly(tr)
	t.scopes = scanScopes(tr.Body)
	return t, nil
}

// resolve finds the filters and tests the template names (t.filters, t.tests). It returns
// the first name that is not allowed, and the first that no one has where that fails the
// compile (not soft).
func (p *Program) resolve(t *Template) (refused, unknown error) {
	uses := t.tree.Uses
	t.filters = make([]filterFunc, len(uses))
	t.tests = make([]testFunc, len(uses))
	for i, u := range uses {
		what := "filter"
		if u.Test {
			what = "test"
			t.tests[i] = lookupTest(u.Name)
		} else {
			fn, err := p.lookupFilter(u.Name, u.Pongo2)
			if err != nil {
				return t.errorAt(u.Pos, err.Error()), nil
			}
			t.filters[i] = fn
		}
		if t.filters[i] == nil && t.tests[i] == nil && !u.Soft && unknown == nil {
			unknown = t.errorAt(u.Pos, fmt.Sprintf("unknown %s '%s'", what, u.Name))
		}
	}
	return nil, unknown
}

// syntaxError is the parser's error, located in the template.
func (t *Template) syntaxError(err error) error {
	var se *parse.Error
	if errors.As(err, &se) {
		return &Error{Template: t.name, Line: se.Line, Col: se.Col, Err: errors.New(se.Msg)}
	}
	return &Error{Template: t.name, Err: err}
}

// errorAt is an error at a byte offset of the template.
func (t *Template) errorAt(pos int, msg string) error {
	line, col := t.lineCol(pos)
	return &Error{Template: t.name, Line: line, Col: col, Err: errors.New(msg)}
}
