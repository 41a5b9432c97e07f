package jinja

// An import in a loop (reuse_loop.go) looks first at the module the import at the same place
// of the last render took or made: the n-th import of route.j2 in a render is the n-th
// route, the same route as in the last render unless routes were added or deleted before it.
// That module serves when it read the same (compared as any kept module is), without hashing
// what the import reads; else the kept modules are looked up by that hash, and a module found
// there that the last render's imports had at another place moves where the next imports
// look (a route added shifts those after it).

// importRun is one render's imports of a module in loops, in order.
type importRun struct {
	list   []*loopEntry       // the module each took or made (nil: none kept)
	offset int                // where import i looks in the last render's: i+offset
	pos    map[*loopEntry]int // places in the last render's, made when first needed
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
	hints := c.hints[key]
	j := len(run.list) + run.offset
	if j < 0 || j >= len(hints) || hints[j] == nil || !hints[j].serves(key, src, vals, e) {
		return nil, nil
	}
	c.touch(key, e)
	le := hints[j]
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
	hints := c.hints[key]
	if len(hints) == 0 {
		return
	}
	if r.pos == nil {
		r.pos = make(map[*loopEntry]int, len(hints))
		for j, h := range hints {
			if _, dup := r.pos[h]; h != nil && !dup {
				r.pos[h] = j
			}
		}
	}
	if j, ok := r.pos[le]; ok {
		r.offset = j - len(r.list)
	}
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
