package parse

import (
	"errors"
	"fmt"
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

// Error is a syntax error: where, and what.
type Error struct {
	Pos       int // byte offset in Tree.Src
	Line, Col int // 1-based; the column in characters
	Msg       string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d column %d: %s", e.Line, e.Col, e.Msg) }

// Parse parses one template's source, its line endings normalized first as Jinja2 does. A
// syntax error is an *Error; with it comes a tree that holds only the source and the uses
// met before the error (a caller that refuses some names can tell which came first).
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
		return t, t.locate(err)
	}
	p := &parser{toks: toks, tree: t, names: map[string]string{}, blocks: map[string]*BlockStmt{}}
	body, err := p.parseTemplate()
	t.Uses = p.uses
	if err != nil {
		return t, t.locate(err)
	}
	t.Body, t.Blocks, t.Extends, t.Refs = body, p.blocks, p.extends, p.refs
	return t, nil
}

// locate gives a syntax error its line and column.
func (t *Tree) locate(err error) error {
	var se *Error
	if errors.As(err, &se) {
		se.Line, se.Col = t.LineCol(se.Pos)
	}
	return err
}

// LineCol returns the 1-based line and column (in characters) of a byte offset of Src.
func (t *Tree) LineCol(pos int) (int, int) {
	line := sort.Search(len(t.lines), func(i int) bool { return t.lines[i] > pos }) // first line after
	start := t.lines[line-1]
	if pos > len(t.Src) {
		pos = len(t.Src)
	}
	return line, utf8.RuneCountInString(t.Src[start:pos]) + 1
}
