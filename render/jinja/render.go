package jinja

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// Rendering a Program: the budgets, the evaluator of one render, and errors located in the
// template that raised them.

// Limits are a render's budgets.
type Limits struct {
	// Deadline: past it, the render stops with a *LimitError of kind "time". Zero: none.
	Deadline time.Time
	// Budget names the time budget in the error ("10s").
	Budget string
	// MaxOutput bounds the output, and any string, list or captured block built on the way
	// (a list counts 16 bytes an item). Zero: 64 MiB.
	MaxOutput int
}

// DefaultMaxOutput is the output budget when Limits.MaxOutput is zero.
const DefaultMaxOutput = 64 << 20

// Render renders the main template with vars as its context, appending the output to buf.
// It stops when ctx is done or a budget is exceeded. Errors are *Error (located), wrapping
// *LimitError, *UnsafeValueError, *UndefinedError or a plain error.
func (p *Program) Render(ctx context.Context, vars map[string]any, lim Limits, buf []byte) ([]byte, error) {
	out, err := p.RenderSharing(ctx, vars, lim, buf, nil, false)
	return out.Bytes, err
}

// Output is what a render wrote, and what is known of where its bytes came from.
type Output struct {
	Bytes []byte
	// Secret are the spans of Bytes printed from values derived from a secret value (see
	// Secret), as offsets: start, end, start, end..., in order.
	Secret []int
	// origins, when the render was traced: from which offset on which statement wrote.
	origins []origin
}

// origin says that stmt, of tmpl, wrote the output from offset off on (until the next one).
type origin struct {
	off  int
	tmpl *Template
	stmt parse.Stmt
}

// note records that s writes the output from here on (tracing only).
func (e *evaluator) note(s parse.Stmt) {
	*e.origins = append(*e.origins, origin{off: len(e.out), tmpl: e.cur, stmt: s})
}

// Origin is the template key and line that wrote the byte at offset of the output: the line of
// the template text it is part of, or of the {{ print }} (the call of a macro, the {% set %}
// block...) that printed it. ok is false when the render was not traced.
func (o *Output) Origin(offset int) (key string, line int, ok bool) {
	i := sort.Search(len(o.origins), func(i int) bool { return o.origins[i].off > offset }) - 1
	if i < 0 {
		return "", 0, false
	}
	or := o.origins[i]
	pos := or.stmt.Position()
	if t, isText := or.stmt.(*parse.TextStmt); isText {
		pos += min(offset-or.off, len(t.Text))
	}
	line, _ = or.tmpl.lineCol(pos)
	return or.tmpl.name, line, true
}

// RenderSharing is Render, with the modules imported with context at the top of a template
// shared with the other renders given mods (see Modules; nil: none shared), and what is known
// of where the output's bytes came from: the spans printed from secret values always, the
// statement that wrote each part when trace is set (Output.Origin; it costs a record per
// statement run, so it is meant for explaining an output already made).
func (p *Program) RenderSharing(ctx context.Context, vars map[string]any, lim Limits, buf []byte, mods *Modules, trace bool) (res Output, err error) {
	e := &evaluator{ctx: ctx, deadline: lim.Deadline, prog: p, vars: vars, out: buf[:0], maxSize: lim.MaxOutput, shared: mods}
	if e.maxSize <= 0 {
		e.maxSize = DefaultMaxOutput
	}
	e.maxItems = max(e.maxSize/16, 1024)
	if trace {
		e.origins = &res.origins
	}
	defer func() {
		if len(e.grown) > 0 {
			// How much room the next render's extends make; first: its lists are all its own
			// until it releases what it was lent.
			mods.Across.noteGrown(e.grown)
		}
		if len(e.lent) > 0 {
			mods.Across.release(e.lent) // the kept modules it had to itself
		}
		if len(e.keptLent) > 0 {
			mods.Across.releaseKept(e)
		}
		if len(e.imports) > 0 && err == nil && !mods.Apart {
			mods.Across.putHints(e.imports) // where the next render's imports look first
		}
		// A last resort: a bug in the engine must fail the render, not the process.
		if r := recover(); r != nil {
			res, err = Output{}, p.locate(e, fmt.Errorf("internal error in the template engine (please report it): %v", r))
		}
	}()
	if err := e.checkTime(); err != nil {
		return Output{}, p.locate(e, err)
	}
	t := p.templates[p.main]
	root := &frame{ctx: vars, top: true}
	e.top = root
	if err := e.runTemplate(t, root); err != nil {
		if err == errBreak || err == errContinue {
			err = errors.New("{% break %} or {% continue %} outside a loop")
		}
		var le *LimitError
		if errors.As(err, &le) && le.Kind == "time" {
			le.Limit = lim.Budget
		}
		return Output{}, p.locate(e, err)
	}
	res.Bytes, res.Secret = e.out, e.secret
	return res, nil
}

// locate turns an evaluation error into an *Error.
func (p *Program) locate(e *evaluator, err error) error {
	var te *Error
	if errors.As(err, &te) {
		return te
	}
	var pe *posError
	if errors.As(err, &pe) {
		line, col := pe.tmpl.lineCol(pe.pos)
		name := p.main
		if pe.tmpl != nil {
			name = pe.tmpl.name
		}
		return &Error{Template: name, Line: line, Col: col, Err: pe.err}
	}
	name := p.main
	if e.cur != nil {
		name = e.cur.name
	}
	return &Error{Template: name, Err: err}
}
