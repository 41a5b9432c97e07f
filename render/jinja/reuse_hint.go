package jinja

// An import in a loop (reuse_loop.go) looks first at the module the import at the same place
// of the last render took or made: the n-th import of route.j2 in a render is the n-th
// route, the same route as in the last render unless routes were added or deleted before it.
// That module serves when it read the same (compared as any kept module is), without hashing
// what the import reads; else the kept modules are looked up by that hash, and a module found
// there that the last render's imports had at another place moves where the next imports
// look (a route added shifts those after it).

// placed is where the items of a run look first in the last render's run (hints): item i at
// hints[i+offset]. An item found elsewhere (by hash) moves where the next look (realign): a
// loop's kept iterations (bodyRun) and a module's imports in loops (importRun).
type placed[E comparable] struct {
	hints  []E
	pos    map[E]int // places in hints, made when first needed
	offset int
}

// at is the hint for item i, if there is one.
func (p *placed[E]) at(i int) (E, bool) {
	var zero E
	if j := i + p.offset; j >= 0 && j < len(p.hints) && p.hints[j] != zero {
		return p.hints[j], true
	}
	return zero, false
}

// realignWindow is how far from where item i looked a found item is first looked for in
// the hints, before they are indexed: an item added or deleted shifts those after it by one,
// and indexing 10,000 hints (a map of them) cost more than the loop's kept iterations saved
// in the render that added one Ingress.
const realignWindow = 8

// realign makes the items after item i look in the hints after e, when e is one of them;
// true when it indexed the hints for that (a map of them made).
func (p *placed[E]) realign(e E, i int) (indexed bool) {
	if len(p.hints) == 0 {
		return false
	}
	if j, ok := p.near(e, i+p.offset); ok {
		p.offset = j - i
		return false
	}
	if p.pos == nil {
		indexed = true
		var zero E
		p.pos = make(map[E]int, len(p.hints))
		for j, h := range p.hints {
			if _, dup := p.pos[h]; h != zero && !dup {
				p.pos[h] = j
			}
		}
	}
	if j, ok := p.pos[e]; ok {
		p.offset = j - i
	}
	return indexed
}

// near is the place of e in the hints within realignWindow of at (the first such); false
// when it is not there. The hints are only where items look first (what is found there is
// compared), so a nearer place of an item that is twice in them serves as well.
func (p *placed[E]) near(e E, at int) (int, bool) {
	var zero E
	if e == zero {
		return 0, false // (an item not kept is nil in the hints: never where e is)
	}
	lo, hi := max(at-realignWindow, 0), min(at+realignWindow+1, len(p.hints))
	for j := lo; j < hi; j++ {
		if p.hints[j] == e {
			return j, true
		}
	}
	return 0, false
}

// importRun is one render's imports of a module in loops, in order.
type importRun struct {
	list               []*loopEntry // the module each took or made (nil: none kept)
	placed[*loopEntry]              // in the last render's imports (hints loaded: taken from the cache)
	loaded             bool
}

// load takes the last render's imports of key as r's hints, once (c.mu held).
func (r *importRun) load(c *ModuleCache, key string) {
	if !r.loaded {
		r.hints, r.loaded = c.hints[key], true
	}
}

// importRun is e's run of imports of key.
func (e *evaluator) importRun(key string) *importRun {
	r := e.imports[key]
	if r == nil {
		if e.imports == nil {
			e.imports = map[string]*importRun{}
		}
		r = &importRun{}
		e.imports[key] = r
	}
	return r
}

// hinted returns the module the import at the same place of the last render had, when it
// read vals and e may take it; nil otherwise.
func (c *ModuleCache) hinted(key, src string, run *importRun, vals []any, f *frame, e *evaluator) (*module, *loopEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	run.load(c, key)
	le, ok := run.at(len(run.list))
	if !ok || !le.serves(key, src, vals, e) {
		return nil, nil
	}
	c.touch(key, e)
	m := c.takeEntry(le, key, f, e)
	if m == nil {
		return nil, nil
	}
	c.hintedN++
	return m, le
}

// LoopHinted is how many imports in loops took the module the import at the same place of
// the last render had (LoopReused counts them too).
func (c *ModuleCache) LoopHinted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hintedN
}

// realign makes the next imports look after le in the last render's, when le is there.
func (r *importRun) realign(c *ModuleCache, key string, le *loopEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.load(c, key)
	r.placed.realign(le, len(r.list))
}

// putHints keeps a render's imports in loops as where the next render's look first.
func (c *ModuleCache) putHints(runs map[string]*importRun) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hints == nil {
		c.hints = map[string][]*loopEntry{}
	}
	for key, r := range runs {
		c.hints[key] = r.list
	}
}
