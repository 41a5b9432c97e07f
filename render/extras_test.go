package render

import (
	"fmt"
	"sync"
	"testing"
)

// TestRegexReplaceAsPython: regex_replace is Python's re.sub with Go's syntax: groups named
// \1 or \g<name> in the replacement, a $ printed as it is, no replacement taking the match
// out, a bad pattern an error.
func TestRegexReplaceAsPython(t *testing.T) {
	rc := &regexCache{}
	for _, tc := range []struct {
		in, pat string
		repl    any
		want    string
	}{
		{"web-1", `^(\w+)-(\d)`, `\2_\1`, "1_web"},
		{"web-1", `^(?P<n>\w+)-(?P<i>\d)`, `\g<i>.\g<n>`, "1.web"},
		{"a.b", `\.`, `$1$`, "a$1$b"},
		{"10.0.0.1/24", `^[0-9.]+(/[0-9]{1,3})?$`, nil, ""},
		{"abc", `b`, "x", "axc"},
	} {
		args := []any{tc.pat}
		if tc.repl != nil {
			args = append(args, tc.repl)
		}
		for range 2 { // compiled, then from the cache
			got, err := rc.replace(tc.in, args, nil)
			if err != nil || got != tc.want {
				t.Errorf("%q|regex_replace(%q, %v) = %v, %v; want %q", tc.in, tc.pat, tc.repl, got, err, tc.want)
			}
		}
	}
	if _, err := rc.replace("x", []any{"("}, nil); err == nil {
		t.Error("a pattern that does not compile is no error")
	}
}

// TestRegexReplaceCompilesOnce: a pattern used for each of thousands of objects is compiled
// once, not at every call.
func TestRegexReplaceCompilesOnce(t *testing.T) {
	rc := &regexCache{}
	args := []any{`^[A-Za-z0-9_.-]+$`, ""}
	if _, err := rc.replace("cookie", args, nil); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() { _, _ = rc.replace("cookie", args, nil) })
	if allocs > 4 { // the result's box and the matcher's own; compiling makes dozens
		t.Errorf("%v allocations a call with a pattern seen before", allocs)
	}
}

// TestRegexCacheBounded: patterns made from the data do not grow the cache without end, and
// concurrent renders share it safely (go test -race).
func TestRegexCacheBounded(t *testing.T) {
	rc := &regexCache{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 3 * regexCacheMax / 4 {
				pat := fmt.Sprintf("^%d-%d$", w, i)
				got, err := rc.replace(fmt.Sprintf("%d-%d", w, i), []any{pat, `\g<0>!`}, nil)
				if err != nil || got != fmt.Sprintf("%d-%d!", w, i) {
					t.Errorf("%s: %v, %v", pat, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := len(rc.re); n > regexCacheMax || n == 0 {
		t.Errorf("%d patterns kept, at most %d", n, regexCacheMax)
	}
}
