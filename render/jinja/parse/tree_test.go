package parse

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// uses lists a tree's uses as "filter f", "test t~" (~: soft).
func uses(tr *Tree) []string {
	var out []string
	for _, u := range tr.Uses {
		s := "filter " + u.Name
		if u.Test {
			s = "test " + u.Name
		}
		if u.Pongo2 {
			s += ":"
		}
		if u.Soft {
			s += "~"
		}
		out = append(out, s)
	}
	return out
}

// TestUses: the tree lists the filters and tests a template names, by name only, in the order
// the parser met them (arguments before the filter they are given to). Those in an if
// statement's test or branches, or anywhere in a conditional expression, are soft: a name no
// one has is an error there only when it runs, as in Jinja2. A statement with a scope of its
// own (a loop, a macro, a block, a filter or set block) is not soft, even inside an if.
func TestUses(t *testing.T) {
	for src, want := range map[string][]string{
		"{{ a|f(b|g) is t }}": {"filter g", "filter f", "test t"},
		"{% if a|f %}{{ b|g }}{% else %}{{ c is t }}{% endif %}":           {"filter f~", "filter g~", "test t~"},
		"{{ a|f if b is t else c|g }}{{ d|h }}":                            {"filter f~", "test t~", "filter g~", "filter h"},
		"{% if x %}{% for i in a|f %}{{ i|g }}{% endfor %}{% endif %}":     {"filter f~", "filter g"},
		"{% if x %}{% macro m(a=b|f) %}{{ a|g }}{% endmacro %}{% endif %}": {"filter f", "filter g"},
		"{% ifequal a|f b %}{{ c|g }}{% endifequal %}":                     {"filter f~", "filter g~"},
		"{% filter upper|f %}x{% endfilter %}{% set s | g %}y{% endset %}": {"filter upper", "filter f", "filter g"},
		"{{ a|default:'x'|join(',') }}":                                    {"filter default:", "filter join"},
	} {
		tr := parsed(t, src)
		if tr == nil {
			continue
		}
		if got := uses(tr); !reflect.DeepEqual(got, want) {
			t.Errorf("%s\n got %q\nwant %q", src, got, want)
		}
	}
	// A node holds its index among the uses, not a function.
	tr := mustParse(t, "{{ a|f is t }}")
	test := tr.Body[0].(*PrintStmt).X.(*TestExpr)
	filter := test.In.(*FilterExpr)
	if tr.Uses[filter.Use].Name != "f" || tr.Uses[test.Use].Name != "t" || !tr.Uses[test.Use].Test {
		t.Errorf("filter %d, test %d: %+v", filter.Use, test.Use, tr.Uses)
	}
}

// TestUsesBeforeASyntaxError: with a syntax error comes a tree with the uses met before it, so
// that a caller refusing a name can report it first, as a parser that knew the names would.
func TestUsesBeforeASyntaxError(t *testing.T) {
	tr, err := Parse("{{ a|f }}\n{% if b|g %}{{ 1 + }}{{ c|h }}{% endif %}")
	var se *Error
	if !errors.As(err, &se) || se.Line != 2 || se.Msg != "expected an expression, got the end of the tag" {
		t.Fatalf("got %v", err)
	}
	if got := uses(tr); !reflect.DeepEqual(got, []string{"filter f", "filter g~"}) {
		t.Errorf("uses %q", got)
	}
}

// TestTreeOfATemplate: the blocks it defines, whether it extends another, the keys it names.
func TestTreeOfATemplate(t *testing.T) {
	tr := mustParse(t, `{% extends "base" %}{% import 'm' as m %}{% from "f" import a as b, c %}`+
		`{% block head %}{% include 'h' ignore missing %}{% block inner scoped %}{% endblock %}{% endblock %}`)
	var blocks []string
	for name := range tr.Blocks {
		blocks = append(blocks, name)
	}
	if !tr.Extends || !reflect.DeepEqual(tr.Refs, []string{"base", "m", "f", "h"}) || len(blocks) != 2 ||
		tr.Blocks["head"] == nil || !tr.Blocks["inner"].Scoped {
		t.Errorf("extends %v refs %q blocks %q", tr.Extends, tr.Refs, blocks)
	}
	wantErrors(t, map[string]string{
		"{% include name %}": `line 1 column 12: {% include %} needs the template key as a quoted string`,
		"{% block a %}{% endblock %}{% block a %}{% endblock %}": `line 1 column 37: block "a" defined twice`,
		"{% block b-c %}{% endblock %}":                          "block names have to be valid Python identifiers",
		"{% block r required %}x{% endblock %}":                  "required blocks can only contain comments or whitespace",
	})
}

// TestStatements: the statements' trees, Jinja2's and pongo2's.
func TestStatements(t *testing.T) {
	wantTrees(t, map[string]string{
		"a{% if x %}b{% elif y %}c{% else %}d{% endif %}":                           `"a" (if x ["b"] y ["c"] else ["d"])`,
		"{% for k, (a, b) in d|items if k %}{{ k }}{% else %}-{% endfor %}":         `(for (k (a b)) (|items d) k [{{k}}] else ["-"])`,
		"{% set ns.n = n + 1 %}{% set a, b = 1, 2 %}":                               `(set ns.n (+ n 1)) (set (a b) (tuple 1 2))`,
		"{% macro m(a, b=1) %}{{ a }}{% endmacro %}":                                `(macro m(a b) [{{a}}])`,
		"{% ifequal a 1 %}y{% else %}n{% endifequal %}":                             `(if (cmp a == 1) ["y"] else ["n"])`,
		"{% print a, b %}{% templatetag openblock %}{% comment %}x{% endcomment %}": `{{(~ a b)}} "{%"`,
		"{% raw %}{{ x }}{% endraw %}{% verbatim %}{% y %}{% endverbatim %}":        `"{{ x }}" "{% y %}"`,
	})
}

// TestLoopAndMacroNeeds: the parser notes what a loop body or a macro body needs, so that the
// evaluator makes a loop object, keeps it, or lets a macro take extra arguments only then.
func TestLoopAndMacroNeeds(t *testing.T) {
	for src, want := range map[string]string{
		"{% for x in y %}{{ x }}{% endfor %}":                                 "loop false kept false",
		"{% for x in y %}{{ loop.index }}{{ loop.cycle(1, 2) }}{% endfor %}":  "loop true kept false",
		"{% for x in y %}{{ forloop.Counter }}{% endfor %}":                   "loop true kept false",
		"{% for x in y %}{% set l = loop %}{% endfor %}":                      "loop true kept true",
		"{% for x in y %}{{ m(loop) }}{% endfor %}":                           "loop true kept true",
		"{% for x in y %}{% include 'i' %}{% endfor %}":                       "loop true kept true",
		"{% for x in y %}{% cycle 'a' 'b' %}{% endfor %}":                     "loop true kept false",
		"{% for x in y %}{% macro m() %}{{ loop }}{% endmacro %}{% endfor %}": "loop false kept false",
	} {
		tr := parsed(t, src)
		if tr == nil {
			continue
		}
		f := tr.Body[0].(*ForStmt)
		if got := fmt.Sprintf("loop %v kept %v", f.UsesLoop, f.KeepsLoop); got != want {
			t.Errorf("%s: %s, want %s", src, got, want)
		}
	}
	tr := mustParse(t, "{% macro m() %}{{ caller() }}{{ varargs }}{% endmacro %}{% macro n() %}{{ kwargs }}{% endmacro %}")
	m, n := tr.Body[0].(*MacroStmt).Macro, tr.Body[1].(*MacroStmt).Macro
	if !m.UsesCaller || !m.UsesVarargs || m.UsesKwargs || n.UsesCaller || n.UsesVarargs || !n.UsesKwargs {
		t.Errorf("m %+v n %+v", m, n)
	}
}

// TestStatementErrors: nesting mistakes and tags that are not statements here.
func TestStatementErrors(t *testing.T) {
	wantErrors(t, map[string]string{
		"{% endfor %}":               "line 1 column 4: unexpected {% endfor %}: no statement is open",
		"{% if x %}\n  {% endfor %}": "line 2 column 6: {% endfor %} does not match {% if %} opened at line 1 column 4: expected {% elif %} or {% else %} or {% endif %}",
		"{% trans %}x{% endtrans %}": "unknown tag {% trans %}: i18n ({% trans %}) is not enabled",
		"{% frobnicate %}":           "line 1 column 4: unknown tag {% frobnicate %}",
		"{% break %}":                "{% break %} outside a for loop",
		"{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}": "{% continue %} outside a for loop",
		"{% now 'Y' %}":                       "{% now %} is not allowed",
		"{% set true = 1 %}":                  "can't assign to true",
		"{% macro m(a=1, b) %}{% endmacro %}": "non-default argument follows default argument",
		"{% from 'm' import _private %}":      "names starting with an underline can not be imported",
		"{% widthratio 1 2 %}":                "{% widthratio %} takes 3 arguments (value, maximum, width), 2 given",
		nest("{% spaceless %}", 201):          "statements are nested more than 200 deep",
	})
}

// TestPositions: positions are byte offsets of the source with its line endings normalized;
// LineCol counts columns in characters.
func TestPositions(t *testing.T) {
	tr := mustParse(t, "é\r\n\rà {{ x }}\n")
	if tr.Src != "é\n\nà {{ x }}" {
		t.Errorf("source %q", tr.Src)
	}
	x := tr.Body[1].(*PrintStmt).X
	if line, col := tr.LineCol(x.Position()); line != 3 || col != 6 {
		t.Errorf("x at line %d column %d", line, col)
	}
}
