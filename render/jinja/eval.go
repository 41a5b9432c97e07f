package jinja

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// The evaluator runs a template's tree and writes its output. One evaluator serves one
// render: it holds the output, the variables in scope (frames), the budgets, and nothing that
// outlives the render.

type evaluator struct {
	ctx      context.Context
	deadline time.Time
	prog     *Program
	vars     map[string]any // the render context

	out      []byte // where output goes now (the render's, or a capture's)
	maxSize  int    // bytes: the output, and any string or capture built on the way
	maxItems int    // items: any list or dict built on the way
	steps    uint32
	depth    int // nested macro calls, includes, recursive loops

	autoescape bool
	taint      string   // the data string behind tainted text the current operation consumed
	kwOrder    []string // the keyword arguments of the call being made, in order
	blockIn    any      // the input of the innermost filter of a {% filter %} or {% set %} block

	cur       *Template          // whose nodes run now (errors are located in it)
	root      *frame             // the current template's top-level frame
	blocks    map[string][]block // by name, the most derived definition first
	extending *Template          // {% extends %} ran: the child's top-level output is dropped
	suppress  bool
	blockCall []blockCall // blocks being rendered, for super()

	free      []*frame
	freeLoops []*loopCtx
	scratch   [][]any
	modules   map[string]*module // imports without context, once per render
	shared    *Modules           // imports with context, shared with other renders (nil: none)
	top       *frame             // the main template's top-level frame
}

type blockCall struct {
	name string
	idx  int
}

// block is a definition of a block, and the template it is in (whose nodes its body are).
type block struct {
	def  *parse.BlockStmt
	tmpl *Template
}

// frame holds the variables of one scope: a template's top level, a loop body, a macro
// call, a with block. Lookups go from the innermost frame outwards.
type frame struct {
	parent  *frame
	names   []string
	vals    []any
	ctx     map[string]any // at a template's top level (with context): the render context
	escaped bool           // a macro keeps it: not reused
}

func (f *frame) set(name string, v any) {
	for i, n := range f.names {
		if n == name {
			f.vals[i] = v
			return
		}
	}
	f.names = append(f.names, name)
	f.vals = append(f.vals, v)
}

func (e *evaluator) lookup(f *frame, name string) (any, bool) {
	for fr := f; fr != nil; fr = fr.parent {
		for i := len(fr.names) - 1; i >= 0; i-- {
			// The parser interns names: equal names mostly share their bytes.
			if n := fr.names[i]; len(n) == len(name) && (unsafe.StringData(n) == unsafe.StringData(name) || n == name) {
				return fr.vals[i], true
			}
		}
		if fr.ctx != nil {
			if v, ok := fr.ctx[name]; ok {
				return fromData(v), true
			}
		}
	}
	if b := lookupBuiltin(name); b != nil {
		return b, true
	}
	return nil, false
}

// Loop objects and filtered item lists are reused from loop to loop when nothing can keep
// them (see ForStmt.KeepsLoop): loops run once per item of the data.
func (e *evaluator) getLoop() *loopCtx {
	if n := len(e.freeLoops); n > 0 {
		l := e.freeLoops[n-1]
		e.freeLoops = e.freeLoops[:n-1]
		return l
	}
	return &loopCtx{}
}

func (e *evaluator) putLoop(l *loopCtx) {
	*l = loopCtx{}
	e.freeLoops = append(e.freeLoops, l)
}

func (e *evaluator) getScratch() []any {
	if n := len(e.scratch); n > 0 {
		s := e.scratch[n-1]
		e.scratch = e.scratch[:n-1]
		return s[:0]
	}
	return nil
}

func (e *evaluator) putScratch(s []any) {
	if cap(s) == 0 || cap(s) > 1<<16 {
		return
	}
	clear(s)
	e.scratch = append(e.scratch, s[:0])
}

func (e *evaluator) newFrame(parent *frame) *frame {
	if n := len(e.free); n > 0 {
		f := e.free[n-1]
		e.free = e.free[:n-1]
		f.parent = parent
		return f
	}
	return &frame{parent: parent}
}

func (e *evaluator) release(f *frame) {
	if f.escaped {
		return
	}
	clear(f.vals)
	f.names, f.vals, f.parent, f.ctx = f.names[:0], f.vals[:0], nil, nil
	e.free = append(e.free, f)
}

// keep marks f and its parents as kept by a macro.
func keep(f *frame) {
	for ; f != nil && !f.escaped; f = f.parent {
		f.escaped = true
	}
}

// Errors.

// posError is an error at a position of a template.
type posError struct {
	tmpl *Template
	pos  int
	err  error
}

func (p *posError) Error() string { return p.err.Error() }
func (p *posError) Unwrap() error { return p.err }

var (
	errBreak    = errors.New("{% break %} outside a loop")
	errContinue = errors.New("{% continue %} outside a loop")
)

// at locates err at pos of the current template, unless it already has a place (small enough
// to inline: most calls have no error).
func (e *evaluator) at(pos int, err error) error {
	if err == nil {
		return nil
	}
	return e.locateAt(pos, err)
}

func (e *evaluator) locateAt(pos int, err error) error {
	if err == errBreak || err == errContinue {
		return err
	}
	var pe *posError
	var te *Error
	if errors.As(err, &pe) || errors.As(err, &te) {
		return err
	}
	return &posError{tmpl: e.cur, pos: pos, err: err}
}

// LimitError is a render that went over a budget.
type LimitError struct {
	Kind  string // "time" or "output"
	Limit string // the budget, as given
}

func (l *LimitError) Error() string {
	if l.Kind == "time" {
		return "the render took longer than its time budget of " + l.Limit
	}
	return "the render produced more than its output budget of " + l.Limit
}

func (e *evaluator) sizeError() error {
	return &LimitError{Kind: "output", Limit: formatSize(e.maxSize)}
}

func formatSize(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.Itoa(n>>30) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " bytes"
}

// checkSize fails if a string of n bytes would exceed the output budget.
func (e *evaluator) checkSize(n int) error {
	if n > e.maxSize {
		return e.sizeError()
	}
	return nil
}

// checkItems fails if a list or dict of n items would exceed the budget.
func (e *evaluator) checkItems(n int) error {
	if n > e.maxItems {
		return e.sizeError()
	}
	return nil
}

// tick counts a step (a loop iteration, a call) and, every so often, checks the time budget
// and the render's context.
func (e *evaluator) tick() error {
	e.steps++
	if e.steps&255 != 0 {
		return nil
	}
	return e.checkTime()
}

func (e *evaluator) checkTime() error {
	if err := e.ctx.Err(); err != nil {
		return fmt.Errorf("render stopped: %w", err)
	}
	if !e.deadline.IsZero() && time.Now().After(e.deadline) {
		return &LimitError{Kind: "time"}
	}
	return nil
}

// Output.

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
		return &UnsafeValueError{Value: x.s, Source: x.src}
	case *Undefined:
		if x.err != nil {
			return x.err
		}
		return nil
	}
	s, err := e.str(v)
	if err != nil {
		return err
	}
	if e.autoescape {
		s = escapeString(s)
	}
	return e.write(s)
}

// capture runs body with its output going to a string of its own.
func (e *evaluator) capture(body []parse.Stmt, f *frame) (string, error) {
	saved := e.out
	e.out = nil
	err := e.execAll(body, f)
	out := string(e.out)
	e.out = saved
	return out, err
}
