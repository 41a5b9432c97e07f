package parse

// The tree a template parses into. Statements (Stmt) run and write output; expressions (Expr)
// evaluate to values. Every node keeps the byte offset it starts at, so that an error names
// the line and column of the template the operator wrote.

// Stmt is a statement: template text, a {{ print }}, or a {% tag %} with its body.
type Stmt interface {
	Position() int
	stmtNode()
}

// Expr is an expression.
type Expr interface {
	Position() int
	exprNode()
}

type (
	// TextStmt is template text, written as is.
	TextStmt struct {
		Pos  int
		Text string
	}

	// PrintStmt is {{ x }} (or {% print x %}).
	PrintStmt struct {
		Pos int
		X   Expr
	}

	IfStmt struct {
		Pos    int
		Conds  []Expr
		Bodies [][]Stmt // one body per condition
		Else   []Stmt
	}

	ForStmt struct {
		Pos       int
		IterPos   int // where the iterable's expression starts
		Target    Target
		Iter      Expr
		Filter    Expr // for ... if filter
		Body      []Stmt
		Else      []Stmt
		Recursive bool
		Reversed  bool // pongo2: for x in y reversed
		Sorted    bool // pongo2: for x in y sorted
		UsesLoop  bool // the body reads loop/forloop or includes a template (that may)
		KeepsLoop bool // the loop object may outlive an iteration (stored, passed, printed)
	}

	// SetStmt is {% set target = x %}.
	SetStmt struct {
		Pos    int
		Target Target
		X      Expr
	}

	// SetBlockStmt is {% set target | filters %}body{% endset %}.
	SetBlockStmt struct {
		Pos     int
		Target  Target
		Filters *FilterExpr // innermost filter has in == nil; may be nil
		Body    []Stmt
	}

	WithStmt struct {
		Pos     int
		Targets []Target
		Values  []Expr
		Body    []Stmt
	}

	MacroStmt struct {
		Pos   int
		Macro *MacroDef
	}

	// CallBlockStmt is {% call(params) m(args) %}body{% endcall %}: m is called with a caller()
	// that renders body.
	CallBlockStmt struct {
		Pos    int
		Call   *CallExpr
		Caller *MacroDef
	}

	FilterBlockStmt struct {
		Pos     int
		Filters *FilterExpr // innermost filter has in == nil
		Body    []Stmt
	}

	IncludeStmt struct {
		Pos           int
		Key           string
		KeyPos        int
		IgnoreMissing bool
		WithContext   bool
		Vars          []KwArg // pongo2: {% include "x" with a=1 %}
	}

	ImportStmt struct {
		Pos         int
		Key         string
		KeyPos      int
		As          string
		WithContext bool
	}

	FromImportStmt struct {
		Pos         int
		Key         string
		KeyPos      int
		Names       []ImportName
		WithContext bool
	}

	ExtendsStmt struct {
		Pos    int
		Key    string
		KeyPos int
	}

	BlockStmt struct {
		Pos      int
		Name     string
		Body     []Stmt
		Scoped   bool
		Required bool
	}

	AutoescapeStmt struct {
		Pos  int
		On   Expr
		Body []Stmt
	}

	// LoopControlStmt is {% break %} or {% continue %} (jinja2.ext.loopcontrols).
	LoopControlStmt struct {
		Pos   int
		Break bool
	}

	// DoStmt is {% do x %} (jinja2.ext.do): evaluate and drop the value.
	DoStmt struct {
		Pos int
		X   Expr
	}

	// CycleStmt is pongo2's {% cycle a b c %} (inside a loop, one value per iteration).
	CycleStmt struct {
		Pos    int
		Values []Expr
		As     string // {% cycle ... as name %}: store instead of print (and print unless silent)
		Silent bool
	}

	// FirstofStmt is pongo2's {% firstof a b c %}: the first true value.
	FirstofStmt struct {
		Pos    int
		Values []Expr
	}

	// IfchangedStmt is pongo2's {% ifchanged %}: the body (or the values given) when they
	// differ from the previous iteration's.
	IfchangedStmt struct {
		Pos    int
		Values []Expr
		Body   []Stmt
		Else   []Stmt
	}

	// WidthratioStmt is pongo2's {% widthratio value max width %}.
	WidthratioStmt struct {
		Pos              int
		Value, Max, Size Expr
	}

	// SpacelessStmt is pongo2's {% spaceless %}: whitespace between HTML tags removed.
	SpacelessStmt struct {
		Pos  int
		Body []Stmt
	}
)

type ImportName struct{ Name, As string }

// MacroDef is a macro or a call block's caller.
type MacroDef struct {
	Pos      int
	Name     string
	Params   []string
	Defaults []Expr // for the last len(defaults) params
	Body     []Stmt
	// What the body reads, which decides what the macro accepts (as Jinja2 decides it).
	UsesVarargs, UsesKwargs, UsesCaller bool
}

// Target is where a for loop, set or with stores: a name, a tuple of targets, or a
// namespace attribute (ns.attr).
type Target struct {
	Pos   int
	Name  string   // a name
	Attr  string   // with name: ns.attr
	Items []Target // a tuple
	Tuple bool
}

type KwArg struct {
	Name string
	X    Expr
}

// Args are the arguments of a call, a filter or a test.
type Args struct {
	Pos     int
	List    []Expr
	Kw      []KwArg
	Star    Expr  // *args
	StarKw  Expr  // **kwargs
	Present bool  // written with parentheses
	Consts  []any // when every argument is a literal: their values, shared by every call (read only)
}

type (
	ConstExpr struct {
		Pos   int
		Value any
	}
	NameExpr struct {
		Pos  int
		Name string
	}
	AttrExpr struct {
		Pos  int
		Obj  Expr
		Name string
	}
	ItemExpr struct {
		Pos      int
		Obj, Key Expr
	}
	SliceExpr struct {
		Pos               int
		Obj, Lo, Hi, Step Expr
	}
	CallExpr struct {
		Pos  int
		Fn   Expr
		Args Args
	}
	FilterExpr struct {
		Pos    int
		In     Expr // nil for the innermost filter of a filter block
		Name   string
		Args   Args
		Pongo2 bool // written name:arg (pongo2's syntax): pongo2's own filter
		Use    int  // its index in Tree.Uses
	}
	TestExpr struct {
		Pos    int
		In     Expr
		Name   string
		Args   Args
		Negate bool
		Use    int // its index in Tree.Uses
	}
	BinExpr struct {
		Pos  int
		Op   string // + - * / // % **
		A, B Expr
	}
	ConcatExpr struct {
		Pos   int
		Items []Expr
	}
	CompareExpr struct {
		Pos   int
		First Expr
		Ops   []CmpOp
	}
	AndExpr struct {
		Pos  int
		A, B Expr
	}
	OrExpr struct {
		Pos  int
		A, B Expr
	}
	NotExpr struct {
		Pos int
		X   Expr
	}
	NegExpr struct {
		Pos int
		X   Expr
		Neg bool // false: unary plus
	}
	CondExpr struct {
		Pos        int
		Test       Expr
		Then, Else Expr // els may be nil
	}
	ListExpr struct {
		Pos   int
		Items []Expr
	}
	TupleExpr struct {
		Pos   int
		Items []Expr
	}
	DictExpr struct {
		Pos          int
		Keys, Values []Expr
	}
)

// Use is a filter or a test that a template names, where the parser met it. A FilterExpr or
// a TestExpr holds its index in Tree.Uses: what runs the tree resolves each name once, by
// index, rather than by name at every call.
type Use struct {
	Test   bool // a test; else a filter
	Name   string
	Pos    int  // where the name stands
	Pongo2 bool // a filter written name:arg
	// In an if statement's test or branches, or in a conditional expression: a name no one
	// has is an error only when the template runs it (guarded filters, as Ansible writes).
	// Elsewhere it fails the compile, as in Jinja2.
	Soft bool
}

type CmpOp struct {
	Pos int
	Op  string // == != < > <= >= in notin
	X   Expr
}

func (x *ConstExpr) Position() int   { return x.Pos }
func (x *NameExpr) Position() int    { return x.Pos }
func (x *AttrExpr) Position() int    { return x.Pos }
func (x *ItemExpr) Position() int    { return x.Pos }
func (x *SliceExpr) Position() int   { return x.Pos }
func (x *CallExpr) Position() int    { return x.Pos }
func (x *FilterExpr) Position() int  { return x.Pos }
func (x *TestExpr) Position() int    { return x.Pos }
func (x *BinExpr) Position() int     { return x.Pos }
func (x *ConcatExpr) Position() int  { return x.Pos }
func (x *CompareExpr) Position() int { return x.Pos }
func (x *AndExpr) Position() int     { return x.Pos }
func (x *OrExpr) Position() int      { return x.Pos }
func (x *NotExpr) Position() int     { return x.Pos }
func (x *NegExpr) Position() int     { return x.Pos }
func (x *CondExpr) Position() int    { return x.Pos }
func (x *ListExpr) Position() int    { return x.Pos }
func (x *TupleExpr) Position() int   { return x.Pos }
func (x *DictExpr) Position() int    { return x.Pos }

func (s *TextStmt) Position() int        { return s.Pos }
func (s *PrintStmt) Position() int       { return s.Pos }
func (s *IfStmt) Position() int          { return s.Pos }
func (s *ForStmt) Position() int         { return s.Pos }
func (s *SetStmt) Position() int         { return s.Pos }
func (s *SetBlockStmt) Position() int    { return s.Pos }
func (s *WithStmt) Position() int        { return s.Pos }
func (s *MacroStmt) Position() int       { return s.Pos }
func (s *CallBlockStmt) Position() int   { return s.Pos }
func (s *FilterBlockStmt) Position() int { return s.Pos }
func (s *IncludeStmt) Position() int     { return s.Pos }
func (s *ImportStmt) Position() int      { return s.Pos }
func (s *FromImportStmt) Position() int  { return s.Pos }
func (s *ExtendsStmt) Position() int     { return s.Pos }
func (s *BlockStmt) Position() int       { return s.Pos }
func (s *AutoescapeStmt) Position() int  { return s.Pos }
func (s *LoopControlStmt) Position() int { return s.Pos }
func (s *DoStmt) Position() int          { return s.Pos }
func (s *CycleStmt) Position() int       { return s.Pos }
func (s *FirstofStmt) Position() int     { return s.Pos }
func (s *IfchangedStmt) Position() int   { return s.Pos }
func (s *WidthratioStmt) Position() int  { return s.Pos }
func (s *SpacelessStmt) Position() int   { return s.Pos }

func (*ConstExpr) exprNode()   {}
func (*NameExpr) exprNode()    {}
func (*AttrExpr) exprNode()    {}
func (*ItemExpr) exprNode()    {}
func (*SliceExpr) exprNode()   {}
func (*CallExpr) exprNode()    {}
func (*FilterExpr) exprNode()  {}
func (*TestExpr) exprNode()    {}
func (*BinExpr) exprNode()     {}
func (*ConcatExpr) exprNode()  {}
func (*CompareExpr) exprNode() {}
func (*AndExpr) exprNode()     {}
func (*OrExpr) exprNode()      {}
func (*NotExpr) exprNode()     {}
func (*NegExpr) exprNode()     {}
func (*CondExpr) exprNode()    {}
func (*ListExpr) exprNode()    {}
func (*TupleExpr) exprNode()   {}
func (*DictExpr) exprNode()    {}

func (*TextStmt) stmtNode()        {}
func (*PrintStmt) stmtNode()       {}
func (*IfStmt) stmtNode()          {}
func (*ForStmt) stmtNode()         {}
func (*SetStmt) stmtNode()         {}
func (*SetBlockStmt) stmtNode()    {}
func (*WithStmt) stmtNode()        {}
func (*MacroStmt) stmtNode()       {}
func (*CallBlockStmt) stmtNode()   {}
func (*FilterBlockStmt) stmtNode() {}
func (*IncludeStmt) stmtNode()     {}
func (*ImportStmt) stmtNode()      {}
func (*FromImportStmt) stmtNode()  {}
func (*ExtendsStmt) stmtNode()     {}
func (*BlockStmt) stmtNode()       {}
func (*AutoescapeStmt) stmtNode()  {}
func (*LoopControlStmt) stmtNode() {}
func (*DoStmt) stmtNode()          {}
func (*CycleStmt) stmtNode()       {}
func (*FirstofStmt) stmtNode()     {}
func (*IfchangedStmt) stmtNode()   {}
func (*WidthratioStmt) stmtNode()  {}
func (*SpacelessStmt) stmtNode()   {}
