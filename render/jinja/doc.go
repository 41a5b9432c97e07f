// Package jinja is a Jinja2 template engine: templates render as Jinja2 3.1 renders them
// with its default Environment, or fail with an error that names the construct and its line.
//
// Two stages, as in text/template: the front end (package parse, render/jinja/parse) turns
// text into a tree of plain data, the evaluator here walks the tree. Nodes have no
// behaviour; the evaluator switches on their type. The parser knows the grammar, not the
// built-ins: a filter or test node holds its name (and its index among the tree's uses), and
// Compile resolves each name once per template, so that a render looks nothing up by name.
//
// The files, each using only those listed below it (but the statements and expressions of
// the walker, which recurse into one another):
//
//	compile.go        Compile: a template set into a Program, its filters and tests resolved
//	                  (an unknown name fails here, or where it runs when an if guards it)
//	render.go         Program.Render: one evaluator per render, errors located in the template
//	builtins.go       the built-ins by name: the tables of filters and tests, and those that
//	                  take names (map, select, reject..., the tests filter and test)
//	filters_*.go      the filters, one family a file (builtins.go's table names them): text
//	                  (filters_str.go), markup and URLs (filters_html.go), numbers
//	                  (filters_num.go), sequences and dicts (filters_seq.go), by attribute
//	                  (filters_items.go); pprint and tojson with their printers (pprint.go,
//	                  json.go); pongo2's own through pongo2 (pongo2.go); tests.go, the tests
//	exec*.go          the walker's statements: exec.go dispatches (execAll), runs most and
//	                  writes the output; loops (exec_for.go); extends, block, include, import
//	                  (exec_template.go); pongo2's tags (exec_pongo2.go)
//	eval*.go          its expressions: eval_expr.go dispatches and looks names up; calls and
//	                  macros (eval_call.go)
//	methods*.go       Python's methods: methods.go calls them; methods_str.go, methods_list.go,
//	                  methods_dict.go; globals.go: range, dict, namespace, cycler, joiner, lipsum
//	format_str.go     str.format
//	access.go         obj.name, obj[key], seq[a:b:c]; which names are methods; attribute paths
//	ops.go            Python's operators: arithmetic, comparisons, in, truth; % formatting
//	                  (format_percent.go)
//	iter.go           what a loop walks, and the items of any iterable
//	html.go           escaping (autoescape, Markup), unescaping, stripping tags
//	textwrap.go       Python's textwrap, for wordwrap
//	taint.go          strings from the data that must not be printed (below)
//	str.go            str(), repr(), the names of types
//	modules.go        modules shared between renders (Modules)
//	reuse*.go         what is kept from one render to the next (ModuleCache): modules
//	                  imported with context (reuse.go, reuse_loop.go), loops' iterations
//	                  (reuse_body.go, what a body reads: reuse_body_walk.go, compared and
//	                  hashed: reuse_body_same.go), loops' filters (reuse_filter.go),
//	                  selectattr's answers per map (reuse_select.go), sort's and unique's
//	                  last call per place, patched (reuse_sort.go)
//	eval.go           the evaluator's state, and what it holds: Program, Template, frames,
//	                  macros, loop objects, built-in functions; budgets and located errors
//	value.go          the values (below), and nothing else of the package
//	num.go, format.go numbers (ints of any size, floats, bools as ints); float formatting
//	args.go           binding a built-in's arguments as Python does
//	program.go        what Compile takes beside the sources, and the Error it and Render return
//
// Values are Python's, on plain Go values (value.go): int (int64, then math/big), float,
// str, list, tuple, dict (the template's keep insertion order; the data's iterate in sorted
// key order), None and Undefined, with Python's operators, iteration, printing and repr.
//
// pongo2. pongo2 is the engine templates run on: the renderer executes every render as a
// pongo2 template whose one tag runs a Program (render/host.go), and pongo2 hosts its filter
// library here: a filter written pongo2's way (|default:"x", |join:",") or one Jinja2 does
// not have (|floatformat, |cut, |yesno...) runs pongo2's own implementation through
// pongo2.ApplyFilter, so it behaves as pongo2 documents it (pongo2.go). Templates written
// for pongo2 keep working: the parser accepts pongo2's own syntax where it cannot mean
// anything else in Jinja2 (&&, ||, !, <>, forloop.Counter and the other forloop names,
// {% for x in y reversed %}, {% empty %}, pongo2's tags ifequal, firstof, cycle, ifchanged,
// widthratio, spaceless, templatetag, verbatim, comment). What pongo2 cannot do is parse
// Jinja2 expressions (s[1:], ~, **, filters with several arguments): translating templates
// into pongo2 tags meant per-compile state reaching those tags through process-wide
// variables and positions mapped back through the translation. So one parser (package parse)
// and one evaluator (here) read both syntaxes directly, inside pongo2's execution.
//
// No process-wide mutable state: a Program (a compiled template set) is read only and can be
// rendered by any number of goroutines at once; each render has its own evaluator; two
// templates compile in parallel. Errors are values, never panics: a recover guards each
// render and each call into pongo2 only to turn a bug into an error.
//
// Bounds: a render stops when its context is done, when it runs past its deadline, or when
// its output (or any string, list or captured block it builds) would pass its size budget
// (Limits). Loops check the clock every 256 iterations; operations that could build a huge
// value first (repetition, join, format widths, big-int powers, range) check the size first.
//
// Data cannot inject lines: a string from the data holding a newline, a carriage return or a
// NUL is an error when printed, unless marked |safe (taint.go).
package jinja
