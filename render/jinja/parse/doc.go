// Package parse turns the text of a Jinja2 template (and pongo2's syntax, where it cannot
// mean anything else) into a tree of plain data, as text/template/parse does for Go's
// templates. It knows the grammar only: the nodes hold the names of the filters and tests
// they apply, never their functions, and nothing here evaluates anything.
//
//	lex.go     template text -> tokens (text, {% %}, {{ }}, names, literals, operators);
//	           comments, {% raw %} and whitespace control are resolved here
//	parse.go   tokens -> tree: the parser, its helpers and the statement dispatch
//	stmt.go    Jinja2's statements and the targets that set, for and with assign to
//	pongo2.go  pongo2's own tags
//	expr.go    expressions: one function climbs the precedence levels (parseLevel)
//	node.go    the node types: statements (Stmt) and expressions (Expr)
//	tree.go    Parse, Tree (the body, blocks, template keys and filter and test uses) and
//	           Error (a syntax error with its line and column)
//
// Every node keeps the byte offset it starts at (Tree.LineCol turns it into a line and a
// column). The parser bounds nesting (200 deep), so that a hostile template cannot exhaust
// the stack of the parser or of whatever walks the tree.
package parse
