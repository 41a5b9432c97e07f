package jinja

import (
	"strings"
	"testing"
)

// d.setdefault(key, default) with a default made of constants does not make the default when
// key is there; what it gives, stores and fails with is as when it made it, and a default
// that is not made of constants (here one that changes a list) is made each time.
func TestSetdefaultConstantDefault(t *testing.T) {
	for _, c := range []struct{ name, src, want, err string }{
		{"there", `{% set d = {"a": [1]} %}{{ d.setdefault("a", []) }} {{ d }}`, "[1] {'a': [1]}", ""},
		{"not there", `{% set d = {} %}{{ d.setdefault("a", {"x": [1, (2, "y")]}) }} {{ d }}`, "{'x': [1, (2, 'y')]} {'a': {'x': [1, (2, 'y')]}}", ""},
		{"a default of its own per key", `{% set d = {} %}{% do d.setdefault("a", []).append(1) %}{% do d.setdefault("b", []).append(2) %}{% do d.setdefault("a", []).append(3) %}{{ d }}`, "{'a': [1, 3], 'b': [2]}", ""},
		{"a key from an expression, evaluated once", `{% set l = ["k", "j"] %}{% set d = {"j": 0} %}{{ d.setdefault(l.pop(), 5) }} {{ d.setdefault(l.pop(), 6) }} {{ l }} {{ d }}`, "0 6 [] {'j': 0, 'k': 6}", ""},
		{"a default that is not constant is made", `{% set l = [1, 2] %}{% set d = {"a": 0} %}{{ d.setdefault("a", l.pop()) }} {{ l }}`, "0 [1]", ""},
		{"none", `{% set d = {} %}{{ d.setdefault("a", none) }} {{ d }}`, "None {'a': None}", ""},
		{"an unhashable key", `{% set d = {} %}{{ d.setdefault([1], []) }}`, "", "unhashable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := render(t, map[string]string{"t": c.src}, nil, Options{})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("%q, want %q", got, c.want)
			}
		})
	}
}

// d.update({k: v, ...}) sets the keys without making the literal's dict: every key and value
// is evaluated before d changes (a value reading d reads it as it was), a key given twice
// takes the last value at the place of the first, and an unhashable key fails, changing
// nothing.
func TestUpdateWithDictLiteral(t *testing.T) {
	for _, c := range []struct{ name, src, want, err string }{
		{"new and old keys", `{% set d = {"a": 1} %}{% do d.update({"b": 2, "a": 3}) %}{{ d }}`, "{'a': 3, 'b': 2}", ""},
		{"a key twice", `{% set d = {} %}{% do d.update({"x": 1, "y": 2, "x": 3}) %}{{ d }}`, "{'x': 3, 'y': 2}", ""},
		{"a value that reads d", `{% set d = {"a": 1} %}{% do d.update({"a": 5, "b": d.a}) %}{{ d }}`, "{'a': 5, 'b': 1}", ""},
		{"computed keys", `{% set d = {} %}{% for i in range(3) %}{% do d.update({"k" ~ i: i * 2}) %}{% endfor %}{{ d }}`, "{'k0': 0, 'k1': 2, 'k2': 4}", ""},
		{"empty", `{% set d = {"a": 1} %}{{ d.update({}) }}{{ d }}`, "None{'a': 1}", ""},
		{"an unhashable key", `{% set d = {} %}{% do d.update({"a": 1, [2]: 3}) %}`, "", "unhashable"},
		{"data cannot change", `{% do data.update({"a": 1}) %}`, "", "input data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := render(t, map[string]string{"t": c.src}, map[string]any{"data": map[string]any{}}, Options{})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("%q, want %q", got, c.want)
			}
		})
	}
}
