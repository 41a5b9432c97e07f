package parse

import (
	"strings"
	"testing"
)

// parsed parses src; on an error it fails the test and returns nil.
func parsed(t *testing.T, src string) *Tree {
	t.Helper()
	tr, err := Parse(src)
	if err != nil {
		t.Errorf("%q: %v", src, err)
		return nil
	}
	return tr
}

// mustParse parses src, or stops the test.
func mustParse(t *testing.T, src string) *Tree {
	t.Helper()
	tr := parsed(t, src)
	if tr == nil {
		t.FailNow()
	}
	return tr
}

// wantTrees checks that each source parses into the statements given as an S-expression.
func wantTrees(t *testing.T, cases map[string]string) {
	t.Helper()
	for src, want := range cases {
		if tr := parsed(t, src); tr != nil {
			if got := sexpr(tr.Body); got != want {
				t.Errorf("%q\n got %s\nwant %s", src, got, want)
			}
		}
	}
}

// wantErrors checks that each source fails to parse with an *Error that says what is given
// (its line and column first, when given).
func wantErrors(t *testing.T, cases map[string]string) {
	t.Helper()
	for src, want := range cases {
		_, err := Parse(src)
		if _, ok := err.(*Error); !ok || !strings.Contains(err.Error(), want) {
			t.Errorf("%.60q: got %v, want %s", src, err, want)
		}
	}
}
