package jinja

import "github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"

// A loop whose body reads nothing but its one loop variable (the default template's
// backends and use_backend rules: `for service in services`) writes, at an iteration, what
// the kept iteration at the same place of the last render's run wrote when that one read the
// very item read now: the same record of the data (which templates cannot change), string,
// number or bool, with output escaped alike. bodyRun.exec finds such an iteration too, at a
// cost per iteration (the reads looked up, the cache locked, the reads compared, the
// counters) that at 10,000 services x 3 loops was most of a render after one pod's change;
// a stretch of such iterations, one after another, is taken here in one pass. An iteration
// whose item is another object (the changed service, one added) or whose kept one ended by
// break or continue or printed a secret goes the way of bodyRun.exec, which may realign where
// the next ones look.

// stretchable says whether r's loop may take stretches: its body reads its one plain loop
// variable only (not the loop's position, nor anything by key).
func (r *bodyRun) stretchable(s *parse.ForStmt) bool {
	info := &r.lp.info
	v := plainLoopVar(s.Target)
	return !r.off && v != "" && !info.loop && info.reads == nil && len(info.names) == 1 && info.names[0] == v &&
		len(r.hints) > 0
}

// stretchItems gives iteration j's item: ok false when there is none (the loop ends), or,
// with eval false, when knowing it would run the loop's filter.
type stretchItems func(j int, eval bool) (item any, ok bool, err error)

// stretch writes, from iteration i on, the kept output of each iteration that reads the very
// item its place in the last render's run read (sameItem: a kept iteration read no dict or
// list of the template: those are copied), one after another; it returns the iteration after
// them (i: none). The cache is locked while the kept iterations are read (another render may
// be comparing them), not while the filter runs (which locks it too).
func (r *bodyRun) stretch(e *evaluator, i int, items stretchItems) (int, error) {
	for j := i; ; {
		it, ok, err := items(j, true) // the filter run as far as j, when it must
		if err != nil || !ok {
			return j, err
		}
		next, more, err := r.stretchLocked(e, i, j, it, items)
		if err != nil || !more {
			return next, err
		}
		j = next
	}
}

// stretchLocked is stretch from iteration j (its item it) through the items known without
// running the filter, with the cache locked; it returns the iteration after those written,
// and more: true when it stopped at an item it could not know without the filter.
func (r *bodyRun) stretchLocked(e *evaluator, i, j int, it any, items stretchItems) (next int, more bool, err error) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	for r.i == j {
		ent, ok := r.at(j)
		if !ok || ent.rare != nil || len(ent.vals) != 2 || ent.vals[1] != any(e.autoescape) ||
			!sameItem(ent.vals[0], it) || len(e.out)+len(ent.out) > e.maxSize {
			return j, false, nil
		}
		if j > i {
			if err := e.tick(); err != nil {
				return j, false, err
			}
		}
		e.out = append(e.out, ent.out...)
		r.list = append(r.list, ent)
		r.i++
		r.looked++
		r.found++
		r.c.stretched++
		r.c.use(r.lp, ent)
		j++
		var known bool
		if it, known, _ = items(j, false); !known {
			return j, true, nil
		}
	}
	return j, false, nil
}
