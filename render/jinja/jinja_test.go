package jinja

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func render(t *testing.T, srcs map[string]string, vars map[string]any, opts Options) (string, error) {
	t.Helper()
	p, err := Compile(srcs, "t", opts)
	if err != nil {
		return "", err
	}
	out, err := p.Render(context.Background(), vars, Limits{}, nil)
	return string(out), err
}

// TestCompileInParallel: compiling and rendering share no state between templates, so
// different templates compile and render at the same time (run with -race).
func TestCompileInParallel(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				src := fmt.Sprintf("{%% macro m(x) %%}[{{ x }}]{%% endmacro %%}{%% for i in range(%d) %%}{{ m(i ~ '%d') }}{%% endfor %%}", i%5, g)
				p, err := Compile(map[string]string{"t": src}, "t", Options{Filters: map[string]Filter{
					"tag": func(v any, a []any, kw map[string]any) (any, error) { return fmt.Sprintf("%d:%v", g, v), nil },
				}})
				if err != nil {
					errs <- err
					return
				}
				out, err := p.Render(context.Background(), nil, Limits{}, nil)
				if err != nil {
					errs <- err
					return
				}
				if want := strings.Count(string(out), "["); want != i%5 {
					errs <- fmt.Errorf("goroutine %d: %q", g, out)
					return
				}
			}
		}(g)
	}
	// One program rendered by many goroutines at once.
	p, err := Compile(map[string]string{"t": "{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}|{{ 1|tag }}"}, "t",
		Options{Filters: map[string]Filter{"tag": func(v any, a []any, kw map[string]any) (any, error) { return "T", nil }}})
	if err != nil {
		t.Fatal(err)
	}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				out, err := p.Render(context.Background(), map[string]any{"xs": []any{int64(1), int64(2), int64(3)}}, Limits{}, nil)
				if err != nil || string(out) != "6|T" {
					errs <- fmt.Errorf("shared program: %q %v", out, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestFiltersArePerProgram: filters given to Compile belong to that program only.
func TestFiltersArePerProgram(t *testing.T) {
	a := Options{Filters: map[string]Filter{"x": func(v any, _ []any, _ map[string]any) (any, error) { return "A", nil }}}
	if out, err := render(t, map[string]string{"t": "{{ 1|x }}"}, nil, a); err != nil || out != "A" {
		t.Fatalf("got %q %v", out, err)
	}
	if _, err := render(t, map[string]string{"t": "{{ 1|x }}"}, nil, Options{}); err == nil || !strings.Contains(err.Error(), "unknown filter 'x'") {
		t.Errorf("a filter of another program is visible: %v", err)
	}
}

// TestInternalErrorIsAnError: a bug (a panic) in a filter fails the render with an error
// located at the template; it does not crash the process.
func TestInternalErrorIsAnError(t *testing.T) {
	opts := Options{Filters: map[string]Filter{"boom": func(any, []any, map[string]any) (any, error) { panic("boom") }}}
	_, err := render(t, map[string]string{"t": "line\n{{ 1|boom }}"}, nil, opts)
	var je *Error
	if !errors.As(err, &je) || !strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), "boom") {
		t.Errorf("got %v", err)
	}
	// pongo2's wordwrap panics on some inputs: its filters are guarded too.
	if _, err := render(t, map[string]string{"t": "{{ 'a b c'|wordwrap:'x' }}"}, nil, Options{}); err != nil && !strings.Contains(err.Error(), "pongo2") {
		t.Errorf("got %v", err)
	}
}

// TestErrorPositions: errors name the template key, line and column (in characters).
func TestErrorPositions(t *testing.T) {
	cases := []struct {
		srcs      map[string]string
		key       string
		line, col int
		msg       string
	}{
		{map[string]string{"t": "a\n  {{ x.y }}"}, "t", 2, 8, "'x' is undefined"},
		{map[string]string{"t": "é {{ 1 + }}"}, "t", 1, 10, "expected an expression"},
		{map[string]string{"t": "{% include 'p' %}", "p": "\n\n{{ 1 // 0 }}"}, "p", 3, 6, "integer division or modulo by zero"},
		{map[string]string{"t": "{% import 'm' as m %}{{ m.f() }}", "m": "{% macro f() %}\n{{ nope.x }}{% endmacro %}"}, "m", 2, 9, "'nope' is undefined"},
		{map[string]string{"t": "{% for x in 1 %}{% endfor %}"}, "t", 1, 13, "cannot loop over an int"},
		// A recursive loop's body, called back from another template's macro, is still its own template's.
		{map[string]string{"t": "{% from 'm' import walk %}{% for x in [[[]]] recursive %}{{ walk(loop, x) }}\n{{ 1 // 0 if loop.depth > 1 }}{% endfor %}",
			"m": "{% macro walk(l, kids) %}{% if kids %}{{ l(kids) }}{% endif %}{% endmacro %}"}, "t", 2, 6, "integer division or modulo by zero"},
	}
	for _, tc := range cases {
		_, err := render(t, tc.srcs, nil, Options{})
		var je *Error
		if !errors.As(err, &je) {
			t.Errorf("%v: error %v is not an *Error", tc.srcs, err)
			continue
		}
		if je.Template != tc.key || je.Line != tc.line || je.Col != tc.col || !strings.Contains(je.Err.Error(), tc.msg) {
			t.Errorf("%v: got %s line %d col %d %q, want %s line %d col %d %q", tc.srcs, je.Template, je.Line, je.Col, je.Err, tc.key, tc.line, tc.col, tc.msg)
		}
	}
}

// TestLimits: the budgets hold whatever the template does.
func TestLimits(t *testing.T) {
	p, err := Compile(map[string]string{"t": "{% for i in range(10 ** 15) %}{{ i }}{% endfor %}"}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Render(context.Background(), nil, Limits{Deadline: time.Now().Add(50 * time.Millisecond), Budget: "50ms", MaxOutput: 1 << 40}, nil)
	var le *LimitError
	if !errors.As(err, &le) || le.Kind != "time" || le.Limit != "50ms" {
		t.Errorf("time: got %v", err)
	}
	_, err = p.Render(context.Background(), nil, Limits{MaxOutput: 1000}, nil)
	if !errors.As(err, &le) || le.Kind != "output" {
		t.Errorf("output: got %v", err)
	}
}

// TestPongo2Syntax: templates written for pongo2 keep working.
func TestPongo2Syntax(t *testing.T) {
	vars := map[string]any{"items": []any{"b", "a", "c"}, "n": int64(3), "empty": []any{}}
	cases := map[string]string{
		"{% for x in items %}{{ forloop.Counter }}{{ forloop.Counter0 }}{{ forloop.First }}{{ forloop.Last }}{{ forloop.Revcounter }}{% endfor %}":   "10TrueFalse321FalseFalse232FalseTrue1",
		"{{ true && false }} {{ true || false }} {{ !true }} {{ 1 <> 2 }}":                                                                           "False True False True",
		"{{ missing|default:'x' }} {{ ''|default:'x' }} {{ items|join:',' }} {{ 'a b'|cut:' ' }} {{ 3.14159|floatformat:2 }}":                        "x x b,a,c ab 3.14",
		"{% for x in items sorted %}{{ x }}{% endfor %}{% for x in items reversed %}{{ x }}{% endfor %}{% for x in empty %}{% empty %}-{% endfor %}": "abccab-",
		"{% ifequal n 3 %}eq{% endifequal %}{% ifnotequal n 3 %}ne{% else %}NE{% endifnotequal %} {% firstof missing '' n %}":                        "eqNE 3",
		"{% for x in items %}{% cycle 'o' 'e' %}{% ifchanged %}{{ x|length }}{% endifchanged %}{% endfor %}":                                         "o1eo",
		"{% widthratio 175 200 100 %} {% templatetag openblock %} {% verbatim %}{{ x }}{% endverbatim %}{% comment %}hidden{% endcomment %}":         "88 {% {{ x }}",
		"{% spaceless %}<a>  <b> x </b>\n</a>{% endspaceless %} {{ 'abc'|length_is:3 }} {{ n|yesno:'y,n' }}":                                         "<a><b> x </b></a> True y",
	}
	for src, want := range cases {
		if got, err := render(t, map[string]string{"t": src}, vars, Options{}); err != nil || got != want {
			t.Errorf("%s\n got %q %v\nwant %q", src, got, err, want)
		}
	}
}

// TestUnknownFilterWhenReached: a filter or test no one has, in a branch, fails when the branch
// runs, with the name, the template and the line; elsewhere it fails the compile (as Jinja2).
func TestUnknownFilterWhenReached(t *testing.T) {
	srcs := map[string]string{"t": "{% if on %}\n  {{ x|nosuchfilter }}{% endif %}{% if test %}\n\n{{ x is nosuchtest }}{% endif %}"}
	p, err := Compile(srcs, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		vars map[string]any
		want string
	}{
		{map[string]any{}, ""},
		{map[string]any{"on": true}, `template "t" line 2 column 8: unknown filter 'nosuchfilter'`},
		{map[string]any{"test": true}, `template "t" line 4 column 6: unknown test 'nosuchtest'`},
	} {
		out, err := p.Render(context.Background(), c.vars, Limits{}, nil)
		switch {
		case c.want == "" && (err != nil || len(out) != 0):
			t.Errorf("%v: %q, %v", c.vars, out, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%v: got %v, want %s", c.vars, err, c.want)
		}
	}
	for src, want := range map[string]string{
		"{{ x|nosuchfilter }}": `template "t" line 1 column 6: unknown filter 'nosuchfilter'`,
		"{% if x %}{% for i in x %}\n{{ i is nosuchtest }}{% endfor %}{% endif %}": `template "t" line 2 column 9: unknown test 'nosuchtest'`,
		// Not allowed is not unknown: an error when compiling, wherever it is.
		"{% if false %}{{ x|random }}{% endif %}": `template "t" line 1 column 20: filter random is not allowed: every render would differ and HAProxy would reload for nothing`,
		// The first error met reading the template: a name not allowed, or a syntax error; a
		// name no one has is found once the whole template is read.
		"{{ x|urlize }}\n{{ 1 + }}":            `template "t" line 1 column 6: filter urlize is not supported (it makes HTML links)`,
		"{{ 1 + }}\n{{ x|urlize }}":            `template "t" line 1 column 8: expected an expression, got the end of the tag`,
		"{{ x|nosuchfilter }}\n{{ 1 + }}":      `template "t" line 2 column 8: expected an expression, got the end of the tag`,
		"{{ x|nosuchfilter }}\n{{ y|random }}": `template "t" line 2 column 6: filter random is not allowed: every render would differ and HAProxy would reload for nothing`,
	} {
		if _, err := Compile(map[string]string{"t": src}, "t", Options{}); err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", src, err, want)
		}
	}
}

// TestStringFiltersNameTheType: indent and wordwrap fail on what is not a string, as in
// Jinja2, with the filter and the type.
func TestStringFiltersNameTheType(t *testing.T) {
	for src, want := range map[string]string{
		"{{ 8|indent }}":           `template "t" line 1 column 6: filter indent: the input must be a string, not int (add |string)`,
		"{{ 123456|wordwrap(3) }}": `template "t" line 1 column 11: filter wordwrap: the input must be a string, not int (add |string)`,
		"{{ 5|truncate }}":         `template "t" line 1 column 6: filter truncate: object of type 'int' has no len() (truncate takes a string: add |string)`,
	} {
		if _, err := render(t, map[string]string{"t": src}, nil, Options{}); err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", src, err, want)
		}
	}
}

// TestSumOfListsGrowsOneList: sum(start=[]) of n lists makes one list, not a copy of the total
// at each item (n²/2 items copied: 8 million for 4,000 lists, 128 MB), so that a template can
// merge the lists of thousands of objects with it.
func TestSumOfListsGrowsOneList(t *testing.T) {
	xs := make([]any, 4000)
	for i := range xs {
		xs[i] = []any{int64(i)}
	}
	p, err := Compile(map[string]string{"t": "{{ xs|sum(start=[])|length }} {{ (xs|sum(start=[]))[3999] }}"}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := p.Render(context.Background(), map[string]any{"xs": xs}, Limits{}, nil)
	runtime.ReadMemStats(&after)
	if err != nil || string(out) != "4000 3999" {
		t.Fatalf("%q, %v", out, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("the sums allocated %d bytes, want a few hundred kB (one list grown per sum)", alloc)
	}
}
