package jinja

import "unsafe"

// str.split(sep) keeps, per call site, what it gave for each string it split in the last
// render it ran in, by the string's identity (its bytes' address and length: a string held
// cannot change, nor its bytes be another's). The Ingress example splits the uids it joins
// (join: reuse_join.go gives its last string again when the uids are the same, as after an
// Ingress's paths changed) in four levels, each splitting the parts of the one above (the
// same strings when the uids are): each is then found, not scanned again.

// minSplitKept is how long a string must be for what split gave to be kept.
const minSplitKept = 256

// splitKey is a string split, by identity, and the separator.
type splitKey struct {
	at  *byte
	n   int
	sep string
}

// splitEntry is what split gave for a string (held, so that its bytes are not another's).
type splitEntry struct {
	s     string
	parts []string
	used  int // the site's render it was last given in
}

// splitSite is what a site of split keeps: what it gave in the last render it ran in, and
// what it gives in this one.
type splitSite struct {
	ents map[splitKey]*splitEntry
	gen  int  // renders it ran in, before this one
	ran  bool // in this render
}

// splitKept is strings.Split(s, sep) (splitAll), given again when the site split the same
// string in the last render it ran in. The parts are strings: the caller makes a list of its
// own of them.
func (e *evaluator) splitKept(s, sep string) []string {
	at := e.callAt
	if len(s) < minSplitKept || at == nil || e.shared == nil || e.shared.Across == nil || e.shared.Apart {
		return splitAll(s, sep)
	}
	key := splitKey{unsafe.StringData(s), len(s), sep}
	c := &e.shared.Across.bodies
	c.mu.Lock()
	sp := c.splitSite(e.prog, at)
	ent := sp.ents[key]
	if ent != nil {
		ent.used = sp.gen
		c.strKept.splitsFound++
	}
	c.mu.Unlock()
	if ent != nil {
		return ent.parts
	}
	parts := splitAll(s, sep)
	c.mu.Lock()
	sp = c.splitSite(e.prog, at) // the same, unless swept meanwhile
	if sp.ents == nil {
		sp.ents = map[splitKey]*splitEntry{}
	}
	sp.ents[key] = &splitEntry{s: s, parts: parts, used: sp.gen}
	c.mu.Unlock()
	return parts
}

// splitSite is the site of split at at in prog (c.mu held).
func (c *bodyCache) splitSite(prog *Program, at any) *splitSite {
	s := c.site(prog, at)
	if s.split == nil {
		s.split = &splitSite{}
	}
	s.split.ran = true
	return s.split
}

// sweep ends a render for the site: when it ran, what it did not give in it is forgotten.
func (sp *splitSite) sweep() {
	if !sp.ran {
		return
	}
	for key, ent := range sp.ents {
		if ent.used < sp.gen {
			delete(sp.ents, key)
		}
	}
	sp.gen++
	sp.ran = false
}

// SplitsFound is how many calls of split gave what they gave in the last render.
func (c *ModuleCache) SplitsFound() int {
	c.bodies.mu.Lock()
	defer c.bodies.mu.Unlock()
	return c.bodies.strKept.splitsFound
}
