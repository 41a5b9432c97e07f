package parse

import (
	"errors"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/jinja2test"
)

// jinja2Result is what the real Jinja2 makes of a template (testdata/jinja2_parse.py).
type jinja2Result struct {
	Err  string `json:"err"` // "": it parses
	Type string `json:"type"`
	Line int    `json:"line"` // where Jinja2 reports Err (0: nowhere)
}

// parseWithJinja2 parses each source with the real Jinja2.
func parseWithJinja2(t *testing.T, srcs []string) []jinja2Result {
	t.Helper()
	results, version := jinja2test.Results[jinja2Result](t, "testdata/jinja2_parse.py", srcs, len(srcs))
	t.Logf("Jinja2 %s", version)
	return results
}

// TestUnclosedTagsWhereTheyOpen: a tag, block, comment or raw section that is never closed is
// reported at the line and column where it opens, naming it and what would close it. Jinja2
// fails on each too (python3-jinja2 checks it), at the same line or, more often, further on:
// where it noticed (the end of the template, or the next token).
func TestUnclosedTagsWhereTheyOpen(t *testing.T) {
	cases := []struct {
		name, src string
		line, col int
		msg       []string
	}{
		{"if", "a\n  {% if x %}\nb\n", 2, 6, []string{"{% if %} is never closed", "{% endif %}"}},
		{"the outer if, the inner one closed", "a\n  {% if x %}\n  {% if y %}\nb{% endif %}\n", 2, 6, []string{"{% if %} is never closed"}},
		{"for", "a\n\n   {% for x in y %}{{ x }}\n", 3, 7, []string{"{% for %} is never closed", "{% endfor %}"}},
		{"block", "{% block b %}\nb\n", 1, 4, []string{"{% block %} is never closed", "{% endblock %}"}},
		{"macro", "x\n{% macro m() %}\nb\n", 2, 4, []string{"{% macro %} is never closed", "{% endmacro %}"}},
		{"filter", "x\n {% filter upper %}\nb\n", 2, 5, []string{"{% filter %} is never closed", "{% endfilter %}"}},
		{"raw", "x\n  {% raw %}\nb\n", 2, 3, []string{"{% raw %} is never closed by {% endraw %}"}},
		{"comment", "x\n  {# note\nb\n", 2, 3, []string{"{# comment #} is never closed"}},
		{"{{ at the end", "x\n  {{ x \nb\n", 2, 3, []string{`this {{ is never closed: expected "}}" before the end of the template`}},
		{"{{ before the next tag", "x\n  {{ x \nb {{ y }}\n", 2, 3, []string{`this {{ is never closed: expected "}}" before the next tag, at line 3 column 3`}},
		{"{% if before the next tag", "x\n  {% if x \nb {% endif %}\n", 2, 3, []string{`this {% if is never closed: expected "%}" before the next tag, at line 3 column 3`}},
	}
	var srcs []string
	for _, tc := range cases {
		srcs = append(srcs, tc.src)
	}
	jinja2 := parseWithJinja2(t, srcs)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.src)
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if se.Line != tc.line || se.Col != tc.col {
				t.Errorf("at line %d column %d, want line %d column %d (%v)", se.Line, se.Col, tc.line, tc.col, err)
			}
			for _, m := range tc.msg {
				if !strings.Contains(se.Msg, m) {
					t.Errorf("%q does not say %q", se.Msg, m)
				}
			}
			j := jinja2[i]
			if j.Type != "TemplateSyntaxError" {
				t.Fatalf("Jinja2: %s %q, want a TemplateSyntaxError", j.Type, j.Err)
			}
			if j.Line < tc.line {
				t.Errorf("Jinja2 reports line %d, before where the tag opens (%d): %s", j.Line, tc.line, j.Err)
			}
			t.Logf("Jinja2: line %d: %s", j.Line, j.Err)
		})
	}
}
