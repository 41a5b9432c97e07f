package jinja

import (
	"strings"
	"testing"
)

// The deliberate differences from Jinja2 (docs/templates.md) that the differential corpus
// cannot check, since Jinja2 does otherwise.

// TestForDictPairs: {% for k, v in dict %} gives the dict's (key, value) pairs whatever its
// keys, as pongo2 does: Jinja2 unpacks each key, which works only when every key has as many
// characters as there are names.
func TestForDictPairs(t *testing.T) {
	dicts := map[string]map[string]any{
		"1-char keys": {"a": int64(1), "b": int64(2)},
		"2-char keys": {"ab": int64(1), "cd": int64(2)},
		"3-char keys": {"abc": int64(1), "def": int64(2)},
	}
	want := map[string]string{
		"1-char keys": "a=1;b=2;",
		"2-char keys": "ab=1;cd=2;",
		"3-char keys": "abc=1;def=2;",
	}
	for name, d := range dicts {
		vars := map[string]any{"d": d}
		for _, src := range []string{
			"{% for k, v in d %}{{ k }}={{ v }};{% endfor %}",
			"{% for (k, v) in d %}{{ k }}={{ v }};{% endfor %}",
			"{% for k, v in d if v %}{{ k }}={{ v }};{% endfor %}",
			"{% for k, v in d %}{{ k }}={{ v }};{% if loop.last %}{% endif %}{% endfor %}",
			"{% for k, v in dict(d) %}{{ k }}={{ v }};{% endfor %}",
			"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
		} {
			got, err := render(t, map[string]string{"t": src}, vars, Options{})
			if w := want[name]; err != nil || got != w {
				t.Errorf("%s: %s: got %q, %v; want %q", name, src, got, err, w)
			}
		}
		// One name: the keys, as in Jinja2.
		got, err := render(t, map[string]string{"t": "{% for k in d %}{{ k }};{% endfor %}"}, vars, Options{})
		if w := strings.Join(sortedKeys(d), ";") + ";"; err != nil || got != w {
			t.Errorf("%s: one name: got %q, %v; want %q", name, got, err, w)
		}
		// Three names: a pair does not unpack into three, whatever the keys.
		_, err = render(t, map[string]string{"t": "{% for a, b, c in d %}{{ a }}{% endfor %}"}, vars, Options{})
		if err == nil || !strings.Contains(err.Error(), "unpacks each (key, value) pair") || !strings.Contains(err.Error(), "expected 3, got 2") {
			t.Errorf("%s: three names: %v", name, err)
		}
	}
	// The template's own dicts too, and a value unpacked further.
	for src, w := range map[string]string{
		"{% for k, v in {'ab': 1, 'c': 2} %}{{ k }}={{ v }};{% endfor %}":          "ab=1;c=2;",
		"{% for k, (a, b) in {'xy': [1, 2]} %}{{ k }}:{{ a }},{{ b }}{% endfor %}": "xy:1,2",
		"{% for k, v in {} %}{{ k }}{% else %}empty{% endfor %}":                   "empty",
		"{% for a, b, c in {} %}{{ a }}{% else %}empty{% endfor %}":                "empty",
	} {
		got, err := render(t, map[string]string{"t": src}, nil, Options{})
		if err != nil || got != w {
			t.Errorf("%s: got %q, %v; want %q", src, got, err, w)
		}
	}
}

// TestNamedEscape: Python's \N{name} escape is an error here (Jinja2 decodes the name).
func TestNamedEscape(t *testing.T) {
	_, err := Compile(map[string]string{"t": "x\n{{ 'a\\N{LATIN SMALL LETTER E WITH ACUTE}' }}"}, "t", Options{})
	if want := `template "t" line 2 column 6: \N{...} escapes (Unicode character names) are not supported in strings: write the character itself or \uXXXX`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestIncludeSeesLoop: a template included, or imported with context, in a loop sees the
// loop, as Jinja2's loop and as pongo2's forloop, whether the loop's body names loop or not
// (Jinja2 passes loop only when the body names it; the earlier, pongo2-hosted renderer did).
func TestIncludeSeesLoop(t *testing.T) {
	srcs := map[string]string{
		"t":   "{% for x in ['a', 'b'] %}{% include 'inc' %}{% endfor %}",
		"inc": "{{ forloop.Counter }}{{ x }}{{ loop.index }}/{{ loop.length }} ",
		"t2":  "{% for x in ['a', 'b'] %}{% import 'm' as m with context %}{{ m.v }}{% from 'm' import f with context %}{{ f() }} {% endfor %}",
		"m":   "{% set v = loop.index %}{% macro f() %}{{ loop.length }}{% endmacro %}",
	}
	if got, err := render(t, srcs, nil, Options{}); err != nil || got != "1a1/2 2b2/2 " {
		t.Errorf("include: got %q, %v", got, err)
	}
	srcs["t"] = srcs["t2"]
	if got, err := render(t, srcs, nil, Options{}); err != nil || got != "12 22 " {
		t.Errorf("import: got %q, %v", got, err)
	}
}
