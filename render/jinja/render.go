package jinja

import (
	"context"
	"errors"
	"fmt"
	"time"
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
func (p *Program) Render(ctx context.Context, vars map[string]any, lim Limits, buf []byte) (out []byte, err error) {
	return p.RenderSharing(ctx, vars, lim, buf, nil)
}

// RenderSharing is Render, with the modules imported with context at the top of a template
// shared with the other renders given mods (see Modules; nil: none shared).
func (p *Program) RenderSharing(ctx context.Context, vars map[string]any, lim Limits, buf []byte, mods *Modules) (out []byte, err error) {
	e := &evaluator{ctx: ctx, deadline: lim.Deadline, prog: p, vars: vars, out: buf[:0], maxSize: lim.MaxOutput, shared: mods}
	if e.maxSize <= 0 {
		e.maxSize = DefaultMaxOutput
	}
	e.maxItems = max(e.maxSize/16, 1024)
	defer func() {
		// A last resort: a bug in the engine must fail the render, not the process.
		if r := recover(); r != nil {
			out, err = nil, p.locate(e, fmt.Errorf("internal error in the template engine (please report it): %v", r))
		}
	}()
	if err := e.checkTime(); err != nil {
		return nil, p.locate(e, err)
	}
	t := p.templates[p.main]
	root := &frame{ctx: vars}
	e.top = root
	if err := e.runTemplate(t, root); err != nil {
		if err == errBreak || err == errContinue {
			err = errors.New("{% break %} or {% continue %} outside a loop")
		}
		var le *LimitError
		if errors.As(err, &le) && le.Kind == "time" {
			le.Limit = lim.Budget
		}
		return nil, p.locate(e, err)
	}
	return e.out, nil
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
