package jinja

import (
	"sort"
	"unicode/utf8"
)

// Tree is what the parser makes of one template: its statements, its blocks, the template
// keys and the filters and tests it names. Plain data, read only once parsed.
type Tree struct {
	Src     string // newline-normalized
	lines   []int  // byte offset of each line start
	Body    []Stmt
	Blocks  map[string]*BlockStmt
	Extends bool
	Refs    []string // the template keys it names (include, import, from, extends)
	Uses    []Use    // the filters and tests it names, in the order the parser met them
}

// Parse parses one template's source, its line endings normalized first as Jinja2 does. On
// a syntax error the tree holds only the source and the uses met before the error.
func Parse(src string) (*Tree, error) {
	src = normalizeSource(src)
	t := &Tree{Src: src, lines: []int{0}}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			t.lines = append(t.lines, i+1)
		}
	}
	toks, err := lex(src)
	if err != nil {
		return t, err
	}
	p := &parser{toks: toks, tree: t, names: map[string]string{}, blocks: map[string]*BlockStmt{}}
	body, err := p.parseTemplate()
	t.Uses = p.uses
	if err != nil {
		return t, err
	}
	t.Body, t.Blocks, t.Extends, t.Refs = body, p.blocks, p.extends, p.refs
	return t, nil
}

// lineCol returns the 1-based line and column (in characters) of a byte offset.
func (t *Tree) LineCol(pos int) (int, int) {
	line := sort.Search(len(t.lines), func(i int) bool { return t.lines[i] > pos }) // first line after
	start := t.lines[line-1]
	if pos > len(t.Src) {
		pos = len(t.Src)
	}
	return line, utf8.RuneCountInString(t.Src[start:pos]) + 1
}
