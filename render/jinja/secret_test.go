package jinja

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// secretLines renders src (key "t", with "inc" and "lib" beside it) with pw a secret value
// and returns the output and the 1-based lines the output records as holding secret bytes.
func secretLines(t *testing.T, src string) (string, []int) {
	t.Helper()
	srcs := map[string]string{
		"t":   src,
		"inc": "inc {{ stats.password|upper }}",
		"lib": "{% macro wrap(v) %}<{{ v }}>{% endmacro %}{% macro plain() %}<none>{% endmacro %}",
	}
	p, err := Compile(srcs, "t", Options{})
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	vars := map[string]any{
		"stats": map[string]any{"username": "stats", "password": Secret("S3cret-Pass_word")},
		"env":   map[string]any{"KEY": Secret("k3y-v4lue-x"), "PLAIN": "plain-value"},
		"names": []any{"a", "b"},
	}
	res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, nil, false)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	out := string(res.Bytes)
	var lines []int
	for i := 0; i < len(res.Secret); i += 2 {
		first := strings.Count(out[:res.Secret[i]], "\n") + 1
		last := strings.Count(out[:res.Secret[i+1]-1], "\n") + 1
		for l := first; l <= last; l++ {
			if len(lines) == 0 || lines[len(lines)-1] != l {
				lines = append(lines, l)
			}
		}
	}
	return out, lines
}

// TestSecretMarkFollowsEveryOperation: a value derived from a secret by any string operation
// is recorded where it is printed (the line between "a" and "c"), and so is its own text
// however transformed; what is derived from other values is not.
func TestSecretMarkFollowsEveryOperation(t *testing.T) {
	pw := "{% set pw = stats.password %}"
	for _, expr := range []string{
		"{{ stats.password }}", "{{ pw|reverse }}", "{{ pw[:10] }}", "{{ pw[::-1] }}", "{{ pw[3] }}",
		"{{ pw.replace('-', '_') }}", "{{ pw|replace('-', '_') }}", "{{ pw|upper }}", "{{ pw.upper() }}",
		"{{ pw|lower|title }}", "{{ pw|capitalize }}", "{{ pw ~ '!' }}", "{{ 'x' ~ pw ~ 'y' }}", "{{ pw + 'x' }}",
		"{{ pw * 2 }}", "{{ '%s!' % pw }}", "{{ '%r' % (pw,) }}", "{{ '{}!'.format(pw) }}", "{{ '%s'|format(pw) }}",
		"{{ pw|list|join }}", "{{ pw.split('-')|join('+') }}", "{{ [pw, 'x']|join(',') }}", "{{ pw|list|first }}",
		"{{ pw|first }}", "{{ pw|last }}", "{{ pw|string }}", "{{ pw|trim }}", "{{ pw|center(40) }}", "{{ pw|truncate(9) }}",
		"{{ pw|e }}", "{{ pw|safe }}", "{{ pw|tojson }}", "{{ pw|urlencode }}", "{{ pw|indent(2) }}", "{{ pw|striptags }}",
		"{{ pw|pprint }}", "{{ [pw] }}", "{{ {'k': pw} }}", "{{ (pw, 1) }}", "{{ stats }}", "{{ env }}", "{{ env.KEY[1:] }}",
		"{{ pw|map('upper')|join }}", "{{ pw|batch(3)|map('join')|join('.') }}", "{{ pw|sort|join }}", "{{ pw|unique|join }}",
		"{{ pw|min }}{{ pw|max }}", "{{ pw|attr('upper')() }}", "{{ pw.swapcase()|wordwrap(80) }}",
		"{% for c in pw %}{{ c }}{% endfor %}", "{% for c in pw|reverse %}{{ c }}{% endfor %}",
		"{% set x %}{{ pw }}{% endset %}{{ x|reverse }}", "{% set x %}[{{ pw|lower }}]{% endset %}{{ x }}",
		"{% filter upper %}{{ pw }}{% endfilter %}", "{% from 'lib' import wrap %}{{ wrap(pw)|upper }}",
		"{% macro m() %}{{ pw }}{% endmacro %}{{ m()[2:] }}", "{% macro c() %}{{ caller() }}{% endmacro %}{% call c() %}{{ pw }}{% endcall %}",
		"{% set ns = namespace(v=pw) %}{{ ns.v|upper }}", "{{ dict(a=pw).a }}", "{{ (pw if true else 'x')|upper }}",
		"{% include 'inc' %}", "{{ pw|cut:'-' }}", "{{ pw|default:'x' }}", "{{ pw|stringformat:'%s' }}",
		"{% if true %}{% for i in [1] %}{{ pw|replace('S', '5') }}{% endfor %}{% endif %}",
		"{% set parts = [] %}{% do parts.append(pw) %}{{ parts|join('/') }}", "{{ pw|string|reverse|upper|replace('_', '') }}",
	} {
		out, lines := secretLines(t, pw+"a\n"+expr+"\nc\n")
		if len(lines) != 1 || lines[0] != 2 {
			t.Errorf("%s: secret lines %v, want [2]; output:\n%s", expr, lines, out)
		}
	}
	for _, expr := range []string{
		"{{ pw|length }}", "{{ pw == 'x' }}", "{{ 'abc'|upper }}", "{{ env.PLAIN|reverse }}", "{{ names|join }}",
		"{% from 'lib' import plain %}{{ plain() }}", "{% set x %}{{ env.PLAIN }}{% endset %}{{ x }}", "{{ 'S3cret-Pass_word' }}",
	} {
		if out, lines := secretLines(t, pw+"a\n"+expr+"\nc\n"); len(lines) != 0 {
			t.Errorf("%s: secret lines %v, want none; output:\n%s", expr, lines, out)
		}
	}
}

// TestSecretLinesSpanWhatItCovers: a secret printed across lines marks each of them; two prints
// on one line mark it once; lines around stay unmarked.
func TestSecretLinesSpanWhatItCovers(t *testing.T) {
	out, lines := secretLines(t, "a\n{{ stats.password|wordwrap(4, true, '\n') }}\nc {{ stats.password }} {{ env.KEY }}\nd\n")
	if want := []int{2, 3, 4, 5, 6}; !equalInts(lines, want) {
		t.Errorf("lines %v, want %v; output:\n%s", lines, want, out)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSecretNeverInAnError: an operation on a secret that fails says what failed, not the
// value (Python's messages quote it); a missing key derived from it is not quoted either.
func TestSecretNeverInAnError(t *testing.T) {
	for _, src := range []string{
		"{{ stats.password|int(base=2) }}x{{ stats.password|float|int // 0 }}",
		"{{ {'a': 1}.pop(stats.password|reverse) }}",
		"{{ [1].index(stats.password[:8]) }}",
		"{{ {'a': 1}[stats.password|upper].x }}",
		"{{ '{0[' ~ stats.password ~ ']}'.format({}) }}",
		"{{ stats.password ~ '\n' }}{{ (stats.password ~ x)|safe }}",
	} {
		p, err := Compile(map[string]string{"t": src}, "t", Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Render(context.Background(), map[string]any{"stats": map[string]any{"password": Secret("S3cret-Pass_word\n")}}, Limits{}, nil)
		if err == nil {
			t.Errorf("%s: no error", src)
			continue
		}
		for _, leak := range []string{"S3cret", "s3cret", "S3CRET", "drow_", "DROW_", "0123"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("%s: the error quotes the secret: %v", src, err)
			}
		}
		var uv *UnsafeValueError
		if errors.As(err, &uv) && !uv.Secret {
			t.Errorf("%s: the unsafe value is not known to be a secret", src)
		}
	}
}

// TestOrigins: a traced render says which template key and line wrote each byte: template
// text by its own line, a print by its line, an include by the included key's line.
func TestOrigins(t *testing.T) {
	srcs := map[string]string{
		"t":   "global\n  maxconn 10\n{% for n in names %}\nbackend {{ n }}\n  server {{ n }} 10.0.0.1:80\n{% endfor %}\n{% include 'inc' %}\n{% macro m() %}x\ny{% endmacro %}{{ m() }}",
		"inc": "# included\n  option {{ names|join }}",
	}
	p, err := Compile(srcs, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.RenderSharing(context.Background(), map[string]any{"names": []any{"a", "b"}}, Limits{}, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Bytes)
	for _, tc := range []struct {
		find string
		key  string
		line int
	}{
		{"maxconn", "t", 2}, {"backend a", "t", 4}, {"server b", "t", 5}, {"b 10.0.0.1", "t", 5},
		{"# included", "inc", 1}, {"option ab", "inc", 2}, {"ab\n", "inc", 2}, {"x\ny", "t", 9},
	} {
		i := strings.Index(out, tc.find)
		if i < 0 {
			t.Fatalf("%q not in the output:\n%s", tc.find, out)
		}
		key, line, ok := res.Origin(i)
		if !ok || key != tc.key || line != tc.line {
			t.Errorf("%q: from %s line %d (%v), want %s line %d", tc.find, key, line, ok, tc.key, tc.line)
		}
	}
	untraced, _ := p.RenderSharing(context.Background(), map[string]any{"names": []any{"a"}}, Limits{}, nil, nil, false)
	if _, _, ok := untraced.Origin(0); ok {
		t.Error("an untraced render knows origins")
	}
}
