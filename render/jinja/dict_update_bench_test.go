package jinja

import (
	"context"
	"fmt"
	"testing"
)

// mergeBlocks are n dicts of per string keys each (block i's keys k-i-j, and the first key
// of the next block's, as the HTTPRoute example's blocks name a backend of the next block).
func mergeBlocks(n, per int) []any {
	blocks := make([]any, n)
	for i := range blocks {
		d := map[string]any{}
		for j := range per {
			d[fmt.Sprintf("k-%03d-%03d", i, j)] = int64(j)
		}
		d[fmt.Sprintf("k-%03d-%03d", i+1, 0)] = int64(-1)
		blocks[i] = d
	}
	return blocks
}

// mergeTemplate merges the blocks as the HTTPRoute example's model merges its blocks' dicts.
const mergeTemplate = `{%- set into = {} %}{% for b in blocks %}{% do into.update(b) %}{% endfor %}
{{- into|length }} {{ into["k-010-003"] }} {{ into["k-011-000"] }}`

// BenchmarkDictUpdateMerge: 47 dicts of 64 keys merged into one with update, as the HTTPRoute
// example's model merges its blocks at 3,000 routes each sync.
func BenchmarkDictUpdateMerge(b *testing.B) {
	p, err := Compile(map[string]string{"t": mergeTemplate}, "t", Options{})
	if err != nil {
		b.Fatal(err)
	}
	blocks := toDicts(mergeBlocks(47, 64))
	vars := map[string]any{"blocks": blocks}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Render(context.Background(), vars, Limits{}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// toDicts are the blocks as a template's dicts (as a module's values are), in key order.
func toDicts(blocks []any) []any {
	out := make([]any, len(blocks))
	for i, x := range blocks {
		m := x.(map[string]any)
		d := newDict(len(m))
		for _, k := range sortedKeys(m) {
			_ = d.set(k, m[k])
		}
		out[i] = d
	}
	return out
}
