package jinja

import "unsafe"

// selectattr and rejectattr without a test ({{ services|selectattr("path")|list }}) keep, per
// item, whether its attribute is true, from one render to the next (with a ModuleCache): an
// item that is the same map or record of the data as the one at the same place of the same
// call in the last render (the snapshot kept the service) gives the same answer, which is
// read without reading the item. Data is never changed (see copier), so the same map or
// record has the same attribute. Only those are kept (a dict the template made may change;
// other data is cheap to read); the kept items are held, so that no other takes their address.

// selectKey is one attribute path selected on in one program.
type selectKey struct {
	prog *Program
	attr string
}

// selectLoop is what is kept for one selectKey.
type selectLoop struct {
	runs[selectEntry] // per call in a render: each item and its answer
}

type selectEntry struct {
	item unsafe.Pointer // the identity of a map or record of the data (dataID), which it holds; nil: not kept
	ok   bool
}

// selectRun is one call of selectattr or rejectattr.
type selectRun struct {
	c      *bodyCache
	sl     *selectLoop
	k      int
	hints  []selectEntry
	offset int
	list   []selectEntry
	kept   int // answers given as kept
}

// selectRun returns the call's run, whose answers are kept; nil when not.
func (e *evaluator) selectRun(attr any) *selectRun {
	s, ok := strValue(attr)
	if !ok || e.shared == nil || e.shared.Across == nil || e.bodies.off() {
		return nil
	}
	e.bodyState()
	c := &e.shared.Across.bodies
	c.mu.Lock()
	defer c.mu.Unlock()
	key := selectKey{e.prog, s}
	sl := c.selects[key]
	if sl == nil {
		sl = &selectLoop{}
		if c.selects == nil {
			c.selects = map[selectKey]*selectLoop{}
		}
		c.selects[key] = sl
	}
	sl.ran = true
	if e.bodies.selectRuns == nil {
		e.bodies.selectRuns = map[*selectLoop]int{}
	}
	k := e.bodies.selectRuns[sl]
	e.bodies.selectRuns[sl] = k + 1
	hints := sl.hints(k)
	return &selectRun{c: c, sl: sl, k: k, hints: hints, list: make([]selectEntry, 0, len(hints))}
}

// truthy is attrTruthy(item, parts), kept.
func (r *selectRun) truthy(e *evaluator, item any, parts []any) (bool, error) {
	id, kept := dataID(item)
	if kept {
		i := len(r.list)
		for _, d := range [...]int{0, 1, -1} {
			j := i + r.offset + d
			if j >= 0 && j < len(r.hints) && r.hints[j].item != nil && r.hints[j].item == id {
				r.offset += d
				r.list = append(r.list, r.hints[j])
				r.kept++
				return r.hints[j].ok, nil
			}
		}
	}
	ok, err := e.attrTruthy(item, parts)
	if err != nil {
		return ok, err
	}
	if kept {
		r.list = append(r.list, selectEntry{item: id, ok: ok})
	} else {
		r.list = append(r.list, selectEntry{})
	}
	return ok, nil
}

// done ends the call: its answers are where the same call of the next render looks.
func (r *selectRun) done() {
	if r == nil {
		return
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.sl.put(r.k, r.list)
	r.c.selectKept += r.kept
}

// sweepSelects ends a render for selectattr's answers: an attribute not selected on since the
// last sweep is forgotten.
func (c *bodyCache) sweepSelects() {
	for key, sl := range c.selects {
		if !sl.turn() {
			delete(c.selects, key)
		}
	}
}
