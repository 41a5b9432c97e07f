package objstatus

import (
	"bytes"
	"reflect"
)

// declCache reads the declarations of one rendering after another as Parse does, but parses
// only the lines whose text the last rendering it read did not have: a route change changes a
// line or two of thousands, and moves the rest (their numbers, which are set per line, are
// all that changes of them). The zero value is ready; the Writer owns one.
type declCache struct {
	lines map[string]*parsedLine // by the line's text (from its #)
	round uint64                 // the rendering being read: the lines it has are marked with it
	count int                    // the declarations of the last rendering, to size the next
}

// declAt is a declaration of a rendering: what its line declares (shared by the renderings
// that have the line) and the line's number.
type declAt struct {
	p    *parsedLine
	line int
}

// parsedLine is what a line's text declares: a Declaration without its Line, or why not. A
// declaration that says nothing but its object (an Ingress's "serves", nearly every line at
// 10,000 Ingresses) is kept as the object alone: 80 bytes a line rather than 288, the
// Declaration made again when read (declaration).
type parsedLine struct {
	obj   Object       // the declaration's object, when more is nil
	more  *Declaration // the declaration, when it says more than its object
	err   error
	round uint64
}

// newParsedLine keeps d (its Line unset) as compactly as it can.
func newParsedLine(d Declaration) *parsedLine {
	if plain(d) {
		return &parsedLine{obj: d.Object}
	}
	return &parsedLine{more: &d}
}

// plain says whether d says nothing but its object (its Line aside): every other field zero,
// checked by reflection so that a field added to Declaration is not forgotten (lines are
// parsed once, when new).
func plain(d Declaration) bool {
	d.Object, d.Line = Object{}, 0
	return reflect.ValueOf(d).IsZero()
}

// declaration is the Declaration p keeps (its Line unset).
func (p *parsedLine) declaration() Declaration {
	if p.more != nil {
		return *p.more
	}
	return Declaration{Object: p.obj}
}

// object is the object of p's declaration.
func (p *parsedLine) object() Object {
	if p.more != nil {
		return p.more.Object
	}
	return p.obj
}

// key is what p's declaration is of (keyOf), without making the declaration.
func (p *parsedLine) key() declKey {
	if p.more != nil {
		return keyOf(p.more)
	}
	return declKey{Object: p.obj}
}

// parse is Parse(cfg) for the next rendering. The Declarations share their slices with those
// of the renderings before (and with their Wants): they are read, never written.
func (c *declCache) parse(cfg []byte) (decls []Declaration, problems []error) {
	at, problems := c.parseAt(cfg)
	decls = make([]Declaration, len(at))
	for i, a := range at {
		decls[i] = a.p.declaration()
		decls[i].Line = a.line
	}
	return decls, problems
}

// parseAt is parse, each declaration the cache's own (its Line unset) with its line's number:
// 16 bytes a declaration rather than a copy of 240 (2.4 MB per rendering at 10,000 Ingresses).
// The declarations are read, never written.
func (c *declCache) parseAt(cfg []byte) (decls []declAt, problems []error) {
	if c.lines == nil {
		c.lines = map[string]*parsedLine{}
	}
	c.round++
	size := c.count + 16
	if c.count == 0 {
		size = bytes.Count(cfg, []byte(Prefix))
	}
	decls = make([]declAt, 0, size)
	declarationLines(cfg, func(n int, b []byte) {
		// Only the declaration lines become strings (a configuration of 10,000 backends has
		// hundreds of thousands of others), and no string is made for a line known.
		p := c.lines[string(b)]
		if p == nil {
			text := string(b)
			d, err := parseDeclaration(declarationText(text))
			p = &parsedLine{err: err}
			if err == nil {
				p = newParsedLine(d)
			}
			c.lines[text] = p
		}
		p.round = c.round
		if p.err != nil {
			problems = append(problems, lineProblem(n, string(b), p.err))
			return
		}
		decls = append(decls, declAt{p: p, line: n})
	})
	// Only the last rendering's lines are kept: those of a route deleted go with it.
	for text, p := range c.lines {
		if p.round != c.round {
			delete(c.lines, text)
		}
	}
	c.count = len(decls)
	return decls, problems
}
