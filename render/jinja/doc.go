// Package jinja is a Jinja2 template engine: templates render as Jinja2 3.1 renders them
// with its default Environment, or fail with an error that names the construct and its line.
//
// Two stages, as in text/template: the front end turns text into a tree of plain data, the
// evaluator walks the tree. Nodes have no behaviour; the evaluator switches on their type.
//
//	parse/            the front end, a package of its own (see its doc): lexer, parser, node
//	                  types; it knows the grammar only, not the built-ins: a filter or test
//	                  node holds its name (and its index among the tree's uses)
//	compile.go        Compile: a template set into a Program; each template's filters and
//	                  tests are resolved here, once (unknown or refused names fail here)
//	render.go         Program.Render: one evaluator per render, errors located in the template
//	eval.go           the evaluator: frames, budgets, output
//	exec*.go          statements: exec.go dispatches (execAll) and runs most; loops
//	                  (exec_for.go), extends, block, include, import (exec_template.go),
//	                  pongo2's (exec_pongo2.go)
//	eval*.go          expressions: eval_expr.go dispatches; calls and macros (eval_call.go)
//	access.go         obj.name, obj[key], seq[a:b:c]
//
// Values are Python's, on plain Go values (value.go): int (int64, then math/big), float,
// str, list, tuple, dict (the template's keep insertion order; the data's iterate in sorted
// key order), None and Undefined, with Python's operators (ops.go), iteration (iter.go),
// printing and repr (str.go, pprint.go, json.go for tojson). The built-ins, one family a file:
// methods (methods.go dispatches; methods_str.go, methods_list.go, methods_dict.go), %
// formatting (format_percent.go) and str.format (format_str.go), filters (filters.go finds
// them by name; filters_str.go, filters_html.go, filters_num.go, filters_seq.go,
// filters_items.go; textwrap.go for wordwrap), tests (tests.go) and globals (globals.go).
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
// variables and positions mapped back through the translation. So one parser and one
// evaluator, here, read both syntaxes directly, inside pongo2's execution.
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
