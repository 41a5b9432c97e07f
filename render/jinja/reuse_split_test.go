package jinja

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// splitKept's decisions: what a call gives again, and when it splits.
func TestSplitKeptDecisions(t *testing.T) {
	long := strings.Repeat("ab,00cd,40ef,", 40)
	p := &Program{}
	at, other := &parse.CallExpr{}, &parse.CallExpr{}
	for _, c := range []struct {
		name  string
		next  func(*ModuleCache) (s, sep string, at *parse.CallExpr)
		given bool // the first call's parts given again
	}{
		{"the same string", func(*ModuleCache) (string, string, *parse.CallExpr) { return long, ",00", at }, true},
		{"the same string after a render the site did not run in", func(c *ModuleCache) (string, string, *parse.CallExpr) {
			c.Sweep()
			return long, ",00", at
		}, true},
		{"the same string after a render the site split another in", func(c *ModuleCache) (string, string, *parse.CallExpr) {
			e := &evaluator{prog: p, shared: &Modules{Across: c}, callAt: at}
			e.splitKept(strings.Clone(long), ",00")
			c.Sweep()
			return long, ",00", at
		}, false},
		{"an equal string, another", func(*ModuleCache) (string, string, *parse.CallExpr) {
			return strings.Clone(long), ",00", at
		}, false},
		{"a part of the string", func(*ModuleCache) (string, string, *parse.CallExpr) { return long[:len(long)-1], ",00", at }, false},
		{"another separator", func(*ModuleCache) (string, string, *parse.CallExpr) { return long, ",40", at }, false},
		{"another site", func(*ModuleCache) (string, string, *parse.CallExpr) { return long, ",00", other }, false},
		{"a short string", func(*ModuleCache) (string, string, *parse.CallExpr) { return long[:100], ",00", at }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cache ModuleCache
			e := &evaluator{prog: p, shared: &Modules{Across: &cache}, callAt: at}
			first := e.splitKept(long, ",00")
			if c.name == "a short string" {
				first = e.splitKept(long[:100], ",00")
			}
			cache.Sweep()
			s, sep, site := c.next(&cache)
			e = &evaluator{prog: p, shared: &Modules{Across: &cache}, callAt: site}
			got := e.splitKept(s, sep)
			if !slices.Equal(got, strings.Split(s, sep)) {
				t.Fatalf("split %q, want %q", got, strings.Split(s, sep))
			}
			if given := unsafe.SliceData(got) == unsafe.SliceData(first); given != c.given {
				t.Errorf("the first call's parts given again: %v, want %v", given, c.given)
			}
		})
	}
}

// split, given again for the strings split in the last render (the uids joined, then split
// level by level, as the Ingress example does), renders every step as afresh.
func TestSplitKeptRendersAsAfresh(t *testing.T) {
	tmpl := `{% set uids = recs|join(",", attribute="uid") %}` +
		`{% for a in uids.split(",0") %}{% for b in a.split(",4") %}{% for c in b.split(",8") %}` +
		`[{{ c.count(",") }} {{ c[:6] }}]{% endfor %}{% endfor %}{% endfor %}` +
		`{% set parts = uids.split(",c") %}{% do parts.append("x") %}{{ parts|length }} {{ recs|map(attribute="n")|join("") }}`
	p, err := Compile(map[string]string{"t": tmpl}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	next := 0
	rec := func(uid string) any {
		next++
		if uid == "" {
			uid = fmt.Sprintf("%x-%d-%s", rng.IntN(16), next, strings.Repeat("u", 300)) // long: kept at each level
		}
		return record.FromMap(nil, map[string]any{"uid": uid, "n": int64(next % 10)})
	}
	var recs []any
	for range 300 {
		recs = append(recs, rec(""))
	}
	k := newKeptRenders(t, renderOf(t, p))
	for i := range 150 {
		switch n := len(recs); rng.IntN(3) {
		case 0: // its uid the same: the uids' string given again by join
			j := rng.IntN(n)
			uid, _ := recs[j].(*record.Record).Get("uid")
			recs[j] = rec(uid.(string))
		case 1:
			recs = slices.Insert(recs, rng.IntN(n+1), rec(""))
		default:
			j := rng.IntN(n)
			recs = slices.Delete(recs, j, j+1)
		}
		k.step(map[string]any{"recs": slices.Clone(recs)}, "step %d", i)
	}
	if found := k.cache.SplitsFound(); found < 80 {
		t.Errorf("%d calls of split gave what they gave before, want many", found)
	}
	t.Logf("%d calls of split gave what they gave before", k.cache.SplitsFound())
}
