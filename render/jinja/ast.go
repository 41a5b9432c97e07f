package jinja

// The tree a template parses into. Statements (stmt) run and write output; expressions (expr)
// evaluate to values. Every node keeps the byte offset it starts at, so that an error names
// the line and column of the template the operator wrote.

// stmt is a statement: template text, a {{ print }}, or a {% tag %} with its body.
type stmt interface {
	position() int
	stmtNode()
}

// expr is an expression.
type expr interface {
	position() int
	exprNode()
}

type (
	// textStmt is template text, written as is.
	textStmt struct {
		pos  int
		text string
	}

	// printStmt is {{ x }} (or {% print x %}).
	printStmt struct {
		pos int
		x   expr
	}

	ifStmt struct {
		pos    int
		conds  []expr
		bodies [][]stmt // one body per condition
		els    []stmt
	}

	forStmt struct {
		pos       int
		iterPos   int // where the iterable's expression starts
		target    target
		iter      expr
		filter    expr // for ... if filter
		body      []stmt
		els       []stmt
		recursive bool
		reversed  bool // pongo2: for x in y reversed
		sorted    bool // pongo2: for x in y sorted
		usesLoop  bool // the body reads loop/forloop or includes a template (that may)
		keepsLoop bool // the loop object may outlive an iteration (stored, passed, printed)
	}

	// setStmt is {% set target = x %}.
	setStmt struct {
		pos    int
		target target
		x      expr
	}

	// setBlockStmt is {% set target | filters %}body{% endset %}.
	setBlockStmt struct {
		pos     int
		target  target
		filters *filterExpr // innermost filter has in == nil; may be nil
		body    []stmt
	}

	withStmt struct {
		pos     int
		targets []target
		values  []expr
		body    []stmt
	}

	macroStmt struct {
		pos   int
		macro *macroDef
	}

	// callBlockStmt is {% call(params) m(args) %}body{% endcall %}: m is called with a caller()
	// that renders body.
	callBlockStmt struct {
		pos    int
		call   *callExpr
		caller *macroDef
	}

	filterBlockStmt struct {
		pos     int
		filters *filterExpr // innermost filter has in == nil
		body    []stmt
	}

	includeStmt struct {
		pos           int
		key           string
		keyPos        int
		ignoreMissing bool
		withContext   bool
		vars          []kwArg // pongo2: {% include "x" with a=1 %}
	}

	importStmt struct {
		pos         int
		key         string
		keyPos      int
		as          string
		withContext bool
	}

	fromImportStmt struct {
		pos         int
		key         string
		keyPos      int
		names       []importName
		withContext bool
	}

	extendsStmt struct {
		pos    int
		key    string
		keyPos int
	}

	blockStmt struct {
		pos      int
		name     string
		body     []stmt
		scoped   bool
		required bool
	}

	autoescapeStmt struct {
		pos  int
		on   expr
		body []stmt
	}

	// loopControlStmt is {% break %} or {% continue %} (jinja2.ext.loopcontrols).
	loopControlStmt struct {
		pos int
		brk bool
	}

	// doStmt is {% do x %} (jinja2.ext.do): evaluate and drop the value.
	doStmt struct {
		pos int
		x   expr
	}

	// cycleStmt is pongo2's {% cycle a b c %} (inside a loop, one value per iteration).
	cycleStmt struct {
		pos    int
		values []expr
		as     string // {% cycle ... as name %}: store instead of print (and print unless silent)
		silent bool
	}

	// firstofStmt is pongo2's {% firstof a b c %}: the first true value.
	firstofStmt struct {
		pos    int
		values []expr
	}

	// ifchangedStmt is pongo2's {% ifchanged %}: the body (or the values given) when they
	// differ from the previous iteration's.
	ifchangedStmt struct {
		pos    int
		values []expr
		body   []stmt
		els    []stmt
	}

	// widthratioStmt is pongo2's {% widthratio value max width %}.
	widthratioStmt struct {
		pos              int
		value, max, size expr
	}

	// spacelessStmt is pongo2's {% spaceless %}: whitespace between HTML tags removed.
	spacelessStmt struct {
		pos  int
		body []stmt
	}
)

type importName struct{ name, as string }

// macroDef is a macro or a call block's caller.
type macroDef struct {
	pos      int
	name     string
	params   []string
	defaults []expr // for the last len(defaults) params
	body     []stmt
	// What the body reads, which decides what the macro accepts (as Jinja2 decides it).
	usesVarargs, usesKwargs, usesCaller bool
}

// target is where a for loop, set or with stores: a name, a tuple of targets, or a
// namespace attribute (ns.attr).
type target struct {
	pos   int
	name  string   // a name
	attr  string   // with name: ns.attr
	items []target // a tuple
	tuple bool
}

type kwArg struct {
	name string
	x    expr
}

// args are the arguments of a call, a filter or a test.
type args struct {
	pos     int
	list    []expr
	kw      []kwArg
	star    expr  // *args
	starKw  expr  // **kwargs
	present bool  // written with parentheses
	consts  []any // when every argument is a literal: their values, shared by every call (read only)
}

type (
	constExpr struct {
		pos int
		v   any
	}
	nameExpr struct {
		pos  int
		name string
	}
	attrExpr struct {
		pos  int
		obj  expr
		name string
	}
	itemExpr struct {
		pos      int
		obj, key expr
	}
	sliceExpr struct {
		pos               int
		obj, lo, hi, step expr
	}
	callExpr struct {
		pos  int
		fn   expr
		args args
	}
	filterExpr struct {
		pos    int
		in     expr // nil for the innermost filter of a filter block
		name   string
		args   args
		pongo2 bool // written name:arg (pongo2's syntax): pongo2's own filter
		use    int  // its index in the template's uses
	}
	testExpr struct {
		pos    int
		in     expr
		name   string
		args   args
		negate bool
		use    int // its index in the template's uses
	}
	binExpr struct {
		pos  int
		op   string // + - * / // % **
		a, b expr
	}
	concatExpr struct {
		pos   int
		items []expr
	}
	compareExpr struct {
		pos   int
		first expr
		ops   []cmpOp
	}
	andExpr struct {
		pos  int
		a, b expr
	}
	orExpr struct {
		pos  int
		a, b expr
	}
	notExpr struct {
		pos int
		x   expr
	}
	negExpr struct {
		pos int
		x   expr
		neg bool // false: unary plus
	}
	condExpr struct {
		pos       int
		test      expr
		then, els expr // els may be nil
	}
	listExpr struct {
		pos   int
		items []expr
	}
	tupleExpr struct {
		pos   int
		items []expr
	}
	dictExpr struct {
		pos        int
		keys, vals []expr
	}
)

// use is a filter or a test that a template names, where the parser met it. The compiler
// resolves each to its function once (Template.filters, Template.tests, by index).
type use struct {
	test   bool // a test; else a filter
	name   string
	pos    int  // where the name stands
	pongo2 bool // a filter written name:arg
	// In an if statement's test or branches, or in a conditional expression: a name no one
	// has is an error only when the template runs it (guarded filters, as Ansible writes).
	// Elsewhere it fails the compile, as in Jinja2.
	soft bool
}

type cmpOp struct {
	pos int
	op  string // == != < > <= >= in notin
	x   expr
}

func (x *constExpr) position() int   { return x.pos }
func (x *nameExpr) position() int    { return x.pos }
func (x *attrExpr) position() int    { return x.pos }
func (x *itemExpr) position() int    { return x.pos }
func (x *sliceExpr) position() int   { return x.pos }
func (x *callExpr) position() int    { return x.pos }
func (x *filterExpr) position() int  { return x.pos }
func (x *testExpr) position() int    { return x.pos }
func (x *binExpr) position() int     { return x.pos }
func (x *concatExpr) position() int  { return x.pos }
func (x *compareExpr) position() int { return x.pos }
func (x *andExpr) position() int     { return x.pos }
func (x *orExpr) position() int      { return x.pos }
func (x *notExpr) position() int     { return x.pos }
func (x *negExpr) position() int     { return x.pos }
func (x *condExpr) position() int    { return x.pos }
func (x *listExpr) position() int    { return x.pos }
func (x *tupleExpr) position() int   { return x.pos }
func (x *dictExpr) position() int    { return x.pos }

func (s *textStmt) position() int        { return s.pos }
func (s *printStmt) position() int       { return s.pos }
func (s *ifStmt) position() int          { return s.pos }
func (s *forStmt) position() int         { return s.pos }
func (s *setStmt) position() int         { return s.pos }
func (s *setBlockStmt) position() int    { return s.pos }
func (s *withStmt) position() int        { return s.pos }
func (s *macroStmt) position() int       { return s.pos }
func (s *callBlockStmt) position() int   { return s.pos }
func (s *filterBlockStmt) position() int { return s.pos }
func (s *includeStmt) position() int     { return s.pos }
func (s *importStmt) position() int      { return s.pos }
func (s *fromImportStmt) position() int  { return s.pos }
func (s *extendsStmt) position() int     { return s.pos }
func (s *blockStmt) position() int       { return s.pos }
func (s *autoescapeStmt) position() int  { return s.pos }
func (s *loopControlStmt) position() int { return s.pos }
func (s *doStmt) position() int          { return s.pos }
func (s *cycleStmt) position() int       { return s.pos }
func (s *firstofStmt) position() int     { return s.pos }
func (s *ifchangedStmt) position() int   { return s.pos }
func (s *widthratioStmt) position() int  { return s.pos }
func (s *spacelessStmt) position() int   { return s.pos }

func (*constExpr) exprNode()   {}
func (*nameExpr) exprNode()    {}
func (*attrExpr) exprNode()    {}
func (*itemExpr) exprNode()    {}
func (*sliceExpr) exprNode()   {}
func (*callExpr) exprNode()    {}
func (*filterExpr) exprNode()  {}
func (*testExpr) exprNode()    {}
func (*binExpr) exprNode()     {}
func (*concatExpr) exprNode()  {}
func (*compareExpr) exprNode() {}
func (*andExpr) exprNode()     {}
func (*orExpr) exprNode()      {}
func (*notExpr) exprNode()     {}
func (*negExpr) exprNode()     {}
func (*condExpr) exprNode()    {}
func (*listExpr) exprNode()    {}
func (*tupleExpr) exprNode()   {}
func (*dictExpr) exprNode()    {}

func (*textStmt) stmtNode()        {}
func (*printStmt) stmtNode()       {}
func (*ifStmt) stmtNode()          {}
func (*forStmt) stmtNode()         {}
func (*setStmt) stmtNode()         {}
func (*setBlockStmt) stmtNode()    {}
func (*withStmt) stmtNode()        {}
func (*macroStmt) stmtNode()       {}
func (*callBlockStmt) stmtNode()   {}
func (*filterBlockStmt) stmtNode() {}
func (*includeStmt) stmtNode()     {}
func (*importStmt) stmtNode()      {}
func (*fromImportStmt) stmtNode()  {}
func (*extendsStmt) stmtNode()     {}
func (*blockStmt) stmtNode()       {}
func (*autoescapeStmt) stmtNode()  {}
func (*loopControlStmt) stmtNode() {}
func (*doStmt) stmtNode()          {}
func (*cycleStmt) stmtNode()       {}
func (*firstofStmt) stmtNode()     {}
func (*ifchangedStmt) stmtNode()   {}
func (*widthratioStmt) stmtNode()  {}
func (*spacelessStmt) stmtNode()   {}
