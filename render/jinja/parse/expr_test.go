package parse

import (
	"strings"
	"testing"
)

// printed parses {{ src }} and returns the tree of the printed expression.
func printed(t *testing.T, src string) string {
	t.Helper()
	tr := parsed(t, "{{ "+src+" }}")
	if tr == nil || len(tr.Body) != 1 {
		return "(not one print)"
	}
	return sexpr(tr.Body[0].(*PrintStmt).X)
}

// TestPrecedence: operators bind as in Jinja2 (jinja2/parser.py), loosest first: if-else, or,
// and, not, comparisons (chained), + -, ~, * / // %, ** (left associative, as in Jinja2), unary
// - +; filters and tests bind tighter than all of them. pongo2's spellings mean the same.
func TestPrecedence(t *testing.T) {
	for src, want := range map[string]string{
		"a or b and c":                    "(or a (and b c))",
		"a and b or c":                    "(or (and a b) c)",
		"a or b or c":                     "(or (or a b) c)",
		"not a == b":                      "(not (cmp a == b))",
		"not not a and b":                 "(and (not (not a)) b)",
		"a || b && !c":                    "(or a (and b (not c)))",
		"1 < x <= 3":                      "(cmp 1 < x <= 3)",
		"(1 < x) < 3":                     "(cmp (cmp 1 < x) < 3)",
		"a == b != c > d >= e":            "(cmp a == b != c > d >= e)",
		"a <> b":                          "(cmp a != b)",
		"a in b not in c":                 "(cmp a in b notin c)",
		"a + b == c * d":                  "(cmp (+ a b) == (* c d))",
		"a + b * c":                       "(+ a (* b c))",
		"a - b - c":                       "(- (- a b) c)",
		"a ~ b + c ~ d":                   "(+ (~ a b) (~ c d))",
		"a ~ b ~ c":                       "(~ a b c)",
		"a ~ (b ~ c) ~ d":                 "(~ a (~ b c) d)",
		"a * b ~ c":                       "(~ (* a b) c)",
		"a * b // c % d / e":              "(/ (% (// (* a b) c) d) e)",
		"2 ** 3 ** 2":                     "(** (** 2 3) 2)",
		"-2 ** 2":                         "(** (- 2) 2)",
		"a * -b":                          "(* a (- b))",
		"- - a":                           "(- (- a))",
		"+a":                              "(+ a)",
		"-x|abs":                          "(|abs (- x))",
		"x|upper ~ y|lower":               "(~ (|upper x) (|lower y))",
		"a + b|length":                    "(+ a (|length b))",
		"x is defined and y is not none":  "(and (is defined x) (is not none y))",
		"x is divisibleby 3 or x is odd":  "(or (is divisibleby x 3) (is odd x))",
		"x is sameas(y)":                  "(is sameas x y)",
		"a if b else c if d else e":       "(if b a (if d c e))",
		"a if b":                          "(if b a _)",
		"1 + 2 if x else 3":               "(if x (+ 1 2) 3)",
		"not x if y else z":               "(if y (not x) z)",
		"a or b if c or d else e and f":   "(if (or c d) (or a b) (and e f))",
		"(a, b) ~ c":                      "(~ (tuple a b) c)",
		"f(a)(b).c[d]":                    "([] (. (call (call f a) b) c) d)",
		"x|f(1)|g":                        "(|g (|f x 1))",
		"x|f.g":                           "(|f.g x)",
		"f(a, *b, c=1, **d)":              "(call f a *b c=1 **d)",
		"x|default:'a'|join:','":          "(|join: (|default: x 'a') ',')",
		"[1, (2,), {'a': none}, ()][1:]":  "([:] [1 (tuple 2) {'a': None} (tuple)] 1 _ _)",
		"x[::2] ~ x[a, b] ~ x.0.1":        "(~ ([:] x _ _ 2) ([] x (tuple a b)) ([] ([] x 0) 1))",
		"'a' 'b' ~ \"c\"":                 "(~ 'ab' 'c')",
		"true and True and false or None": "(or (and (and True True) False) None)",
	} {
		if got := printed(t, src); got != want {
			t.Errorf("{{ %s }}\n got %s\nwant %s", src, got, want)
		}
	}
}

// TestExpressionErrors: what the parser says, and where, about expressions it cannot read.
func TestExpressionErrors(t *testing.T) {
	wantErrors(t, map[string]string{
		"{{ 1 + }}":                      "line 1 column 8: expected an expression, got the end of the tag",
		"{{ a == }}":                     "line 1 column 9: expected an expression, got the end of the tag",
		"{{ x is defined is odd }}":      "line 1 column 17: you cannot chain multiple tests with is",
		"{{ f(a=1, b) }}":                "line 1 column 5: invalid syntax for function call expression",
		"{{ f(**a, *b) }}":               "line 1 column 5: invalid syntax for function call expression",
		"{{ x[1:2, 3] }}":                "line 1 column 5: slices inside a tuple subscript (x[a:b, c]) are not supported",
		"{{ x[] }}":                      "line 1 column 5: expected a subscript expression inside [ ]",
		"{{ x. }}":                       "line 1 column 7: expected a name or a number after '.', got the end of the tag",
		"{{ x|1 }}":                      "line 1 column 6: expected a name, got number 1",
		"{{ a b }}":                      "line 1 column 6: expected the end of the print statement ('}}'), got 'b'",
		"{{ " + nest("not ", 201) + "}}": "the expression is nested more than 200 deep",
		"{{ " + nest("(", 201) + "x" + nest(")", 201) + " }}": "the expression is nested more than 200 deep",
		"{{ " + nest("-", 201) + "x }}":                       "the expression is nested more than 200 deep",
	})
}

func nest(s string, n int) string { return strings.Repeat(s, n) }
