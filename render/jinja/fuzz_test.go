package jinja

import (
	"context"
	"strings"
	"testing"
	"time"
)

// FuzzTemplate: no template text makes the engine crash or hang; compile and render errors
// are errors. (go test -fuzz FuzzTemplate ./jinja)
func FuzzTemplate(f *testing.F) {
	for _, seed := range []string{
		"{{ x }}", "{% for a, b in d.items() if b %}{{ loop.index }}{% else %}-{% endfor %}",
		"{% macro m(a, b=1) %}{{ caller() }}{% endmacro %}{% call m(1) %}x{% endcall %}",
		"{{ '%s %d' % (a, 1) }}{{ '{:>5}'.format(1) }}", "{% raw %}{{{% endraw %}",
		"{%- if 1 -%}{#- c -#}{%+ endif %}", "{{ [1, (2,), {'a': none}][1:] }}",
		"{% extends 'p' %}{% block b %}{{ super() }}{% endblock %}", "{{ x|default:'y'|join:',' }}",
		"{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}",
	} {
		f.Add(seed)
	}
	vars := map[string]any{"x": "s", "d": map[string]any{"k": int64(1)}, "a": []any{"q"}}
	f.Fuzz(func(t *testing.T, src string) {
		start := time.Now()
		defer func() {
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("%q took %v", src, d)
			}
		}()
		p, err := Compile(map[string]string{"t": src, "p": "{% block b %}p{% endblock %}"}, "t", Options{})
		if err != nil {
			if !strings.Contains(err.Error(), "template") {
				t.Errorf("compile error without a location: %v", err)
			}
			return
		}
		_, err = p.Render(context.Background(), vars, Limits{Deadline: time.Now().Add(time.Second), MaxOutput: 1 << 20}, nil)
		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Errorf("%q: %v", src, err)
		}
	})
}
