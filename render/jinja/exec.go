package jinja

import (
	"fmt"
	"strconv"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// Running statements: execAll switches on each statement's type; each kind has its function
// here, except loops (exec_for.go), the statements that reach other templates
// (exec_template.go) and pongo2's tags (exec_pongo2.go).

// execAll runs statements in order, switching on each one's type (here rather than in a
// function of its own: statements run once per item of the data, and a call fewer counts).
func (e *evaluator) execAll(body []parse.Stmt, f *frame) error {
	for _, s := range body {
		if e.origins != nil && !e.suppress {
			e.note(s)
		}
		var err error
		switch s := s.(type) {
		case *parse.TextStmt:
			// Text and prints are most statements: their common case here, without a call.
			if !e.suppress && len(e.out)+len(s.Text) <= e.maxSize {
				e.out = append(e.out, s.Text...)
				continue
			}
			err = e.execText(s, f)
		case *parse.PrintStmt:
			err = e.execPrint(s, f)
		case *parse.IfStmt:
			err = e.execIf(s, f)
		case *parse.ForStmt:
			err = e.execFor(s, f)
		case *parse.SetStmt:
			err = e.execSet(s, f)
		case *parse.SetBlockStmt:
			err = e.execSetBlock(s, f)
		case *parse.WithStmt:
			err = e.execWith(s, f)
		case *parse.MacroStmt:
			err = e.execMacro(s, f)
		case *parse.CallBlockStmt:
			err = e.execCallBlock(s, f)
		case *parse.FilterBlockStmt:
			err = e.execFilterBlock(s, f)
		case *parse.IncludeStmt:
			err = e.execInclude(s, f)
		case *parse.ImportStmt:
			err = e.execImport(s, f)
		case *parse.FromImportStmt:
			err = e.execFromImport(s, f)
		case *parse.ExtendsStmt:
			err = e.execExtends(s, f)
		case *parse.BlockStmt:
			err = e.execBlock(s, f)
		case *parse.AutoescapeStmt:
			err = e.execAutoescape(s, f)
		case *parse.LoopControlStmt:
			err = e.execLoopControl(s, f)
		case *parse.DoStmt:
			err = e.execDo(s, f)
		case *parse.CycleStmt:
			err = e.execCycle(s, f)
		case *parse.FirstofStmt:
			err = e.execFirstof(s, f)
		case *parse.IfchangedStmt:
			err = e.execIfchanged(s, f)
		case *parse.WidthratioStmt:
			err = e.execWidthratio(s, f)
		case *parse.SpacelessStmt:
			err = e.execSpaceless(s, f)
		default:
			err = e.at(s.Position(), fmt.Errorf("internal error: no evaluation for statement %T", s))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (e *evaluator) execText(s *parse.TextStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	if len(e.out)+len(s.Text) > e.maxSize {
		return e.at(s.Pos, e.sizeError())
	}
	e.out = append(e.out, s.Text...)
	return nil
}

func (e *evaluator) execPrint(s *parse.PrintStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	var v any
	if n, ok := s.X.(*parse.NameExpr); ok { // most prints print a name
		v = e.nameValue(n, f)
	} else {
		var err error
		if v, err = e.eval(s.X, f); err != nil {
			return err
		}
	}
	if str, ok := v.(string); ok && !e.autoescape && len(e.out)+len(str) <= e.maxSize {
		e.out = append(e.out, str...) // the common case, inline
		return nil
	}
	return e.at(s.Pos, e.print(v))
}

func (e *evaluator) write(s string) error {
	if len(e.out)+len(s) > e.maxSize {
		return e.sizeError()
	}
	e.out = append(e.out, s...)
	return nil
}

// print writes v as Jinja2 prints it ({{ v }}).
func (e *evaluator) print(v any) error {
	switch x := v.(type) {
	case string:
		if e.autoescape {
			return e.write(escapeString(x))
		}
		return e.write(x)
	case int64:
		if len(e.out)+20 > e.maxSize {
			return e.sizeError()
		}
		e.out = strconv.AppendInt(e.out, x, 10)
		return nil
	case Markup:
		return e.write(string(x))
	case *tainted:
		if x.src != "" {
			return &UnsafeValueError{Value: x.s, Source: x.src, Secret: x.secret}
		}
		s := x.s
		if e.autoescape && !x.markup {
			s = escapeString(s)
		}
		return e.writeText(s, true)
	case *Undefined:
		if x.err != nil {
			return x.err
		}
		return nil
	}
	outer := e.taint
	e.taint = mark{}
	s, err := e.str(v)
	secret := e.taint.secret // a container holding a secret, a module that printed one
	e.taint = outer
	if err != nil {
		return err
	}
	if e.autoescape {
		s = escapeString(s)
	}
	return e.writeText(s, secret)
}

// writeText writes s, noting where it lands when it holds bytes derived from a secret.
func (e *evaluator) writeText(s string, secret bool) error {
	start := len(e.out)
	if err := e.write(s); err != nil {
		return err
	}
	if secret && len(s) > 0 {
		e.secret = append(e.secret, start, len(e.out))
	}
	return nil
}

// A capture sends the output of a part of the template to a string of its own (a {% set %}
// or {% filter %} block, a macro call, a block rendered as a value, an import): the spans of
// secret text go with it (a capture that printed a secret is a secret-marked value), and the
// trace of who wrote what follows the render's own output only.
type captured struct {
	out     []byte
	secret  []int
	origins *[]origin
}

// startCapture puts the output aside; endCapture gives what was written since, and whether
// a secret was printed in it, and puts the output back.
func (e *evaluator) startCapture() captured {
	c := captured{out: e.out, secret: e.secret, origins: e.origins}
	e.out, e.secret, e.origins = nil, nil, nil
	return c
}

func (e *evaluator) endCapture(c captured) (string, bool) {
	out, secret := string(e.out), len(e.secret) > 0
	e.out, e.secret, e.origins = c.out, c.secret, c.origins
	return out, secret
}

// textValue is captured text as a value: Markup when markup, marked when it holds a secret.
func textValue(s string, secret, markup bool) any {
	if secret {
		return &tainted{s: s, secret: true, markup: markup}
	}
	if markup {
		return Markup(s)
	}
	return s
}

// capture runs body with its output going to a string of its own.
func (e *evaluator) capture(body []parse.Stmt, f *frame) (string, bool, error) {
	c := e.startCapture()
	err := e.execAll(body, f)
	out, secret := e.endCapture(c)
	return out, secret, err
}

func (e *evaluator) execIf(s *parse.IfStmt, f *frame) error {
	for i, c := range s.Conds {
		ok, err := e.cond(c, f)
		if err != nil {
			return err
		}
		if ok {
			return e.execAll(s.Bodies[i], f)
		}
	}
	return e.execAll(s.Else, f)
}

func (e *evaluator) execSet(s *parse.SetStmt, f *frame) error {
	v, err := e.eval(s.X, f)
	if err != nil {
		return err
	}
	return e.at(s.Pos, e.assign(f, s.Target, v))
}

func (e *evaluator) assign(f *frame, t parse.Target, v any) error {
	switch {
	case t.Tuple:
		items, err := e.unpack(v, len(t.Items))
		if err != nil {
			return err
		}
		for i, it := range t.Items {
			if err := e.assign(f, it, items[i]); err != nil {
				return err
			}
		}
		return nil
	case t.Attr != "":
		obj, _ := e.lookup(f, t.Name)
		ns, ok := obj.(*Namespace)
		if !ok {
			return fmt.Errorf("cannot set %s.%s: %s is not a namespace() (cannot assign attribute on non-namespace object)", t.Name, t.Attr, t.Name)
		}
		return ns.attrs.setStr(t.Attr, v)
	}
	f.set(t.Name, v)
	return nil
}

// execSetBlock runs the body, and the filters on what it wrote, in a frame of their own: as in
// Jinja2, what the body sets is not seen after the block (set ns.attr reaches ns).
func (e *evaluator) execSetBlock(s *parse.SetBlockStmt, f *frame) error {
	inner := e.newFrame(f)
	defer e.release(inner)
	bindUnset(inner, unsetIn(e.cur, s))
	out, secret, err := e.capture(s.Body, inner)
	if err != nil {
		return err
	}
	v := textValue(out, secret, e.autoescape)
	if s.Filters != nil {
		saved := e.blockIn
		e.blockIn = v
		v, err = e.eval(s.Filters, inner)
		e.blockIn = saved
		if err != nil {
			return err
		}
	}
	return e.at(s.Pos, e.assign(f, s.Target, v))
}

func (e *evaluator) execWith(s *parse.WithStmt, f *frame) error {
	vals := make([]any, len(s.Values))
	for i, x := range s.Values {
		v, err := e.eval(x, f)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	inner := e.newFrame(f)
	defer e.release(inner)
	for i, t := range s.Targets {
		if err := e.assign(inner, t, vals[i]); err != nil {
			return e.at(s.Pos, err)
		}
	}
	bindUnset(inner, unsetIn(e.cur, s))
	return e.execAll(s.Body, inner)
}

func (e *evaluator) execMacro(s *parse.MacroStmt, f *frame) error {
	keep(f)
	f.set(s.Macro.Name, &Macro{def: s.Macro, closure: f, tmpl: e.cur, escape: e.autoescape})
	return nil
}

func (e *evaluator) execCallBlock(s *parse.CallBlockStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	keep(f)
	caller := &Macro{def: s.Caller, closure: f, tmpl: e.cur, escape: e.autoescape}
	v, err := e.evalCallWith(s.Call, f, caller)
	if err != nil {
		return err
	}
	return e.at(s.Pos, e.print(v))
}

// execFilterBlock runs the body, and the filters on what it wrote, in a frame of their own:
// as in Jinja2, what the body sets is not seen after the block (set ns.attr reaches ns).
func (e *evaluator) execFilterBlock(s *parse.FilterBlockStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	inner := e.newFrame(f)
	defer e.release(inner)
	bindUnset(inner, unsetIn(e.cur, s))
	out, secret, err := e.capture(s.Body, inner)
	if err != nil {
		return err
	}
	in := textValue(out, secret, e.autoescape)
	saved := e.blockIn
	e.blockIn = in
	v, err := e.eval(s.Filters, inner)
	e.blockIn = saved
	if err != nil {
		return err
	}
	return e.at(s.Pos, e.print(v))
}

func (e *evaluator) execAutoescape(s *parse.AutoescapeStmt, f *frame) error {
	v, err := e.eval(s.On, f)
	if err != nil {
		return err
	}
	saved := e.autoescape
	e.autoescape = truthy(v)
	err = e.execInner(s.Body, f, unsetIn(e.cur, s))
	e.autoescape = saved
	return err
}

// execInner runs body in a frame of its own, inside f: what it sets is not seen after it, as
// in Jinja2's scopes ({% autoescape %}, a loop's else). unset: what body sets before any
// mention (scanScopes).
func (e *evaluator) execInner(body []parse.Stmt, f *frame, unset []string) error {
	inner := e.newFrame(f)
	bindUnset(inner, unset)
	err := e.execAll(body, inner)
	e.release(inner)
	return err
}

func (e *evaluator) execLoopControl(s *parse.LoopControlStmt, f *frame) error {
	if s.Break {
		return errBreak
	}
	return errContinue
}

func (e *evaluator) execDo(s *parse.DoStmt, f *frame) error {
	_, err := e.eval(s.X, f)
	return err
}
