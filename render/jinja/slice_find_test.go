package jinja

import (
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestSliceOfAListAsOfAString: a list sliced, whatever its kind (the inputs' []any and
// []string, a list or a tuple the template made), has the items a string of the same
// characters sliced alike has, for bounds and steps of both signs, out of range and none.
func TestSliceOfAListAsOfAString(t *testing.T) {
	src := `{%- set bounds = [none, -9, -7, -3, -1, 0, 1, 3, 5, 6, 9] %}
{%- for lo in bounds %}{% for hi in bounds %}{% for st in [none, -3, -2, -1, 1, 2, 4] %}
{%- for l in [data, strs, data|list, data|list|batch(99)|first|list, tup] %}
{%- if l[lo:hi:st]|join != s[lo:hi:st] %}[{{ lo }}:{{ hi }}:{{ st }}] {{ l[lo:hi:st]|join }} != {{ s[lo:hi:st] }}
{% endif %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}`
	vars := map[string]any{"s": "abcdef", "data": []any{"a", "b", "c", "d", "e", "f"},
		"strs": []string{"a", "b", "c", "d", "e", "f"}}
	out, err := render(t, map[string]string{"t": `{%- set tup = ("a", "b", "c", "d", "e", "f") %}` + src}, vars, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if out != "" {
		t.Errorf("slices differ:\n%s", out)
	}
}

// TestSliceOfAListCostsItsLength: a few items sliced out of the inputs' list of 100,000
// allocate about the slice, not a copy of the list (a block of a resource's objects).
func TestSliceOfAListCostsItsLength(t *testing.T) {
	data := make([]any, 100000)
	for i := range data {
		data[i] = strings.Repeat("x", i%3)
	}
	p, err := Compile(map[string]string{"t": `{% for i in range(10) %}{{ data[i * 100:i * 100 + 3]|length }}{% endfor %}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := p.Render(context.Background(), map[string]any{"data": data}, Limits{}, nil)
	runtime.ReadMemStats(&after)
	if err != nil || string(out) != strings.Repeat("3", 10) {
		t.Fatalf("%q, %v", out, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("10 slices of 3 items allocated %d bytes", alloc)
	}
}

// TestFindOverTheWholeStringAsWithBounds: find, rfind, index, rindex and count without
// bounds (searched in the string as it is) answer as with bounds that cover it (searched in
// its characters), in characters, multi-byte ones too.
func TestFindOverTheWholeStringAsWithBounds(t *testing.T) {
	src := `{%- for s in ["", "a,b,,c", "é,à,€,,x€", "€€€"] %}{% for x in ["", ",", "€", ",,", "x€", "z"] %}
{%- for m, whole, bounded in [("find", s.find(x), s.find(x, 0, 99)), ("rfind", s.rfind(x), s.rfind(x, 0, 99)), ("count", s.count(x), s.count(x, 0, 99))] %}
{%- if whole != bounded %}{{ s }}.{{ m }}({{ x }}): {{ whole }} != {{ bounded }}
{% endif %}{% endfor %}
{%- if x in s and (s.index(x) != s.index(x, 0, 99) or s.rindex(x) != s.rindex(x, 0, 99)) %}{{ s }}.index({{ x }}) differs
{% endif %}{% endfor %}{% endfor %}`
	out, err := render(t, map[string]string{"t": src}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if out != "" {
		t.Errorf("find differs:\n%s", out)
	}
}
