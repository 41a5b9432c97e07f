package objstatus

import "bytes"

// declCache reads the declarations of one rendering after another as Parse does, but parses
// only the lines whose text the last rendering it read did not have: a route change changes a
// line or two of thousands, and moves the rest (their numbers, which are set per line, are
// all that changes of them). The zero value is ready; the Writer owns one.
type declCache struct {
	lines map[string]*parsedLine // by the line's text (from its #)
	round uint64                 // the rendering being read: the lines it has are marked with it
	count int                    // the declarations of the last rendering, to size the next
}

// declAt is a declaration of a rendering: what its line declares (Line unset: shared by the
// renderings that have the line) and the line's number.
type declAt struct {
	decl *Declaration
	line int
}

// parsedLine is what a line's text declares: a Declaration without its Line, or why not.
type parsedLine struct {
	decl  Declaration
	err   error
	round uint64
}

// parse is Parse(cfg) for the next rendering. The Declarations share their slices with those
// of the renderings before (and with their Wants): they are read, never written.
func (c *declCache) parse(cfg []byte) (decls []Declaration, problems []error) {
	at, problems := c.parseAt(cfg)
	decls = make([]Declaration, len(at))
	for i, a := range at {
		decls[i] = *a.decl
		decls[i].Line = a.line
	}
	return decls, problems
}

// parseAt is parse, each declaration the cache's own (its Line unset) with its line's number:
// 16 bytes a declaration rather than a copy of 250 (2.5 MB per rendering at 10,000 Ingresses).
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
			p = &parsedLine{decl: d, err: err}
			c.lines[text] = p
		}
		p.round = c.round
		if p.err != nil {
			problems = append(problems, lineProblem(n, string(b), p.err))
			return
		}
		decls = append(decls, declAt{decl: &p.decl, line: n})
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
