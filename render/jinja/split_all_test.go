package jinja

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// splitAll splits as strings.Split (Python's str.split with a separator): at the leftmost
// occurrences, not overlapping, with empty parts at the ends and between adjacent ones.
func TestSplitAllSplitsAsSplit(t *testing.T) {
	cases := [][2]string{
		{"", ","}, {",", ","}, {"a", ","}, {"a,b,,c,", ","}, {",a", ","},
		{"aaaa", "aa"}, {"aaaaa", "aa"}, {"abababa", "aba"}, {"x,00a,00,00", ",00"},
		{"héllo wörld", "ö"}, {"no separator here", ",40"}, {",40,40", ",40"},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		var b strings.Builder
		for range rng.IntN(60) {
			b.WriteByte("ab,0"[rng.IntN(4)])
		}
		cases = append(cases, [2]string{b.String(), []string{",", ",0", "a,", ",00", "aa", "b,0a"}[rng.IntN(6)]})
	}
	for _, c := range cases {
		if got, want := splitAll(c[0], c[1]), strings.Split(c[0], c[1]); !slices.Equal(got, want) {
			t.Errorf("splitAll(%q, %q) = %q, want %q", c[0], c[1], got, want)
		}
	}
}
