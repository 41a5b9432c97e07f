package jinja

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// The evaluator's state, and the objects a render works with: the compiled Program and its
// Templates, the evaluator with its frames, and what templates make and keep (macros, loop
// objects, built-in functions, the modules renders share). One evaluator serves one render:
// it holds the output, the variables in scope (frames), the budgets, and nothing that
// outlives the render. Here too are its bookkeeping (frames and loop objects reused, budgets)
// and its errors; what evaluates is above: exec*.go, eval*.go and the built-ins.

// Program is a compiled template set: the main template and every template it can reach by
// a quoted key ({% include %}, {% import %}, {% from %}, {% extends %}). A Program is read
// only once compiled: any number of renders may share it.
type Program struct {
	main      string
	templates map[string]*Template
	errs      map[string]error // keys that do not compile: the error is raised where they are used
	keys      []string         // every key of the set, for error messages
	filters   map[string]Filter
}

// Template is one compiled template (one key of a template set): its tree, and the
// filters and tests the tree names.
type Template struct {
	name string
	tree *parse.Tree
	// The filters and tests of Tree.Uses, by index (FilterExpr.Use, TestExpr.Use), resolved
	// once when compiling; nil: no one has the name (an error when it runs).
	filters []filterFunc
	tests   []testFunc
	// readOnly: the template names no method that changes a dict or list and sets no
	// namespace's attribute (readsOnly): what it imports it only reads.
	readOnly bool
	// scopes: the names its frames (its top level, its loops' and macros' bodies...) set
	// before mentioning them, undefined until set (scanScopes, exec_scope.go).
	scopes scopes
	// facts: what a module cache reads of it in its program (Program.facts).
	facts moduleFacts
}

// lineCol returns the 1-based line and column (in characters) of a byte offset.
func (t *Template) lineCol(pos int) (int, int) {
	if t == nil {
		return 0, 0
	}
	return t.tree.LineCol(pos)
}

func (p *Program) missing(key string) error {
	return fmt.Errorf("there is no template key %q (keys: %s)", key, strings.Join(p.keys, ", "))
}

// filterFunc is a filter: the value, the positional and the keyword arguments.
type filterFunc func(e *evaluator, in any, a []any, kw map[string]any) (any, error)

// testFunc is a test: the value, the positional and the keyword arguments.
type testFunc func(e *evaluator, in any, a []any, kw map[string]any) (bool, error)

type evaluator struct {
	ctx      context.Context
	deadline time.Time
	prog     *Program
	vars     map[string]any // the render context

	out      []byte    // where output goes now (the render's, or a capture's)
	secret   []int     // spans of out printed from secret-marked values: start, end, ...
	origins  *[]origin // while tracing (Trace) and writing the render's own output: who wrote what
	maxSize  int       // bytes: the output, and any string or capture built on the way
	maxItems int       // items: any list or dict built on the way
	steps    uint32
	depth    int // nested macro calls, includes, recursive loops

	autoescape bool
	taint      mark               // the marked text the current operation consumed (taint.go)
	kwOrder    []string           // the keyword arguments of the call being made, in order
	kwFree     map[string]any     // an empty keyword map a call gave back (recycleKw), for the next
	orderFree  []string           // and its order slice
	argsFree   [][]any            // argument lists method calls gave back (recycleArgs), a few
	blockIn    any                // the input of the innermost filter of a {% filter %} or {% set %} block
	filterAt   *parse.FilterExpr  // the filter being called, for sort and unique (reuse_sort.go)
	callAt     *parse.CallExpr    // the method being called, for extend (reuse_extend.go)
	grown      map[*seqSite]*List // the lists extend grew, by site, to note their lengths (reuse_extend.go)

	cur       *Template          // whose nodes run now (errors are located in it)
	root      *frame             // the current template's top-level frame
	blocks    map[string][]block // by name, the most derived definition first
	extending *Template          // {% extends %} ran: the child's top-level output is dropped
	suppress  bool
	blockCall []blockCall // blocks being rendered, for super()

	free      []*frame
	freeLoops []*loopCtx
	freeLazy  []*lazyFilter                 // loops' filters run as they advance (lazy_filter.go), for reuse
	lazyNames map[*parse.ForStmt]filterFree // the names loops' filters read (lazy_filter.go)
	scratch   [][]any
	modules   map[string]*module    // imports without context, once per render
	lent      []*loopEntry          // kept modules this render has to itself until it ends (reuse_loop.go)
	computing []*loopRead           // the imports in loops being computed, innermost last (reuse_nested.go)
	keptLent  []*keptModule         // and those kept for imports at a template's top (ModuleCache.take)
	valsFree  [][]any               // slices of the values imports read, for the next (freeVals)
	memo      map[any]*readMemo     // what imports found of the dicts, lists, namespaces they read
	prevReads map[string][]any      // by module: the dicts, lists, namespaces its last import read
	imports   map[string]*importRun // by module: its imports in loops so far (reuse_hint.go)
	keys      *keyRecorder          // the keyed reads of the module computed for an import in a loop
	shared    *Modules              // imports with context, shared with other renders (nil: none)
	top       *frame                // the main template's top-level frame
	bodies    *bodyEval             // loops' iterations kept across renders (reuse_body.go)
	forDepth  int                   // loops running, one inside the other (minNestedKept)
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
	// top: a template's top frame, or a block's: a lookup from within it passes over the
	// names the frames around it have not set yet (unsetName, exec_scope.go).
	top bool
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

// Macro is a macro (or a call block's caller) with the scope it was defined in.
type Macro struct {
	def     *parse.MacroDef
	closure *frame
	tmpl    *Template
	escape  bool // autoescape where it was defined (its prints escape or not as written there)
}

// loopCtx is the loop variable (and pongo2's forloop).
type loopCtx struct {
	index0, length int
	s              seq
	depth0         int
	parent         *loopCtx
	changedLast    []any
	changedSet     bool
	ifchanged      map[*parse.IfchangedStmt]string
	stmt           *parse.ForStmt // recursive loops: loop(x) runs stmt again
	frame          *frame
	tmpl           *Template   // whose nodes stmt is (loop(x) may be called from another template's macro)
	lf             *lazyFilter // the loop's filter, run as the loop advances (nil: none)
}

// builtin is a global function: range, dict, namespace, cycler, joiner.
type builtin struct {
	name string
	fn   func(e *evaluator, a []any, kw map[string]any) (any, error)
}

// Modules keeps the modules that the renders of several templates of one set, with one
// context, import with context (the files of one bundle: haproxy.cfg and its map files, each
// importing the same routes): a module imported at the top of a template, before anything is
// set there, sees nothing but the context, so one computation serves every such import.
// Each import sees the module's values as if computed for it: what one template does to them
// (dict.update, list.append, a namespace's attribute) is not seen by another. The module kept
// for the next render (ModuleCache) is one copy, lent to each import in turn (its dicts, lists
// and namespaces shared: a template that changes one spoils it, and the imports after compute
// the module again); another is given its own copy. Its macros are copied, with a copy of
// the module's top level in front of the importing template's frame: they see what that
// template sets, as they would had the module been computed for it (the HTTPRoute example's
// routes export macros). A module holding values it cannot copy (a macro of another module,
// a generator) is computed for each import, as without Modules.
//
// Create one per context: a Modules given another context computes again. Safe for
// concurrent use.
type Modules struct {
	// Across keeps the modules from one render to the next (nil: none kept); see ModuleCache.
	Across *ModuleCache
	// Apart says the render is beside those Across keeps modules for (a test in the config,
	// with objects of its own): it takes the modules kept and keeps those it computes for the
	// renders until the next Sweep, but what the other renders keep stays as it was (see
	// ModuleCache.EndApart).
	Apart bool

	mu   sync.Mutex
	vars uintptr // the context the modules were computed with (its map's identity)
	m    map[string]sharedModule
	last bool // the renders to come are the last: an import takes the kept module itself
}

type sharedModule struct {
	src    string // the module's source: the same key of another template set is another module
	mod    *module
	macros bool        // it holds macros
	kept   *keptModule // mod is the one ModuleCache keeps for the next render: lent or copied (get)
}

// maxCallDepth bounds nested macro calls, includes and recursive loops (Python's own
// recursion limit stops Jinja2 at a few hundred).
const maxCallDepth = 256

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
	f.names, f.vals, f.parent, f.ctx, f.top = f.names[:0], f.vals[:0], nil, nil, false
	e.free = append(e.free, f)
}

// keep marks f and its parents as kept by a macro.
func keep(f *frame) {
	for ; f != nil && !f.escaped; f = f.parent {
		f.escaped = true
	}
}

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
