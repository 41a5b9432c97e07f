package jinja

import (
	"hash/maphash"
	"sync"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A loop's iterations are kept from one render to the next (with a ModuleCache): the output
// of one run of a loop's body is a function of the body and of the values of the names it
// reads (the loop variables among them, and the loop's position when it reads loop.index and
// the like; see bodyReads), when the body changes nothing it was given and names no other
// template. So an iteration whose reads are the same (bodySame) as those of an iteration kept
// from an earlier render writes that iteration's output, without running the body: after a
// pod's change, of the default template's 10,000 backends only the changed service's is
// rendered again.
//
// An iteration is kept only when its reads can be compared (not a macro, a loop object, a
// cycler: they read the state of the render) and hashed, and when they are the same after
// the body ran (it changed no dict, list or namespace it read: those are kept as copies
// taken before it ran, and compared after). Its output is kept with the secret values'
// places in it, and with {% break %} or {% continue %} when it ended so. A loop inside an
// iteration being kept is not kept on its own (its output is in the outer one's). Not kept:
// while tracing (Trace), where output is dropped ({% extends %}), in a template set that
// tests which object a value is (sameas).
//
// Finding a kept iteration: first the one kept at the same place of the same run of the loop
// in the last render (the services in the same order: one comparison, of the same objects
// when the snapshot kept them), else by the hash of the reads; a hit by hash moves where the
// next iterations look (a service added or deleted shifts those after it), when it is one of
// the last render's (mayBeHint). Comparing: a kept read that is the very string, integer or
// bool read now is the same in one step (sameWord), and the keyed reads of a run's iterations
// compare through the diff of the records the run found last (bodyRun.diffs).

// bodyKey is one loop of one program.
type bodyKey struct {
	prog *Program
	node *parse.ForStmt
}

// bodyCache keeps the iterations of loops (in ModuleCache, which ends renders with Sweep).
type bodyCache struct {
	mu     sync.Mutex
	loops  map[bodyKey]*bodyLoop
	gen    uint64 // Sweeps so far
	hasher bodyHasher
	// differ: pairs of maps or records of the data found to differ since the last sweep (the
	// read, the kept one), by identity.
	differ map[[2]unsafe.Pointer][2]any
	// sameMaps: maps and records of the data found the same as a kept one since the last sweep, by
	// identity: the kept one (kept here, so that its address is not reused meanwhile).
	sameMaps map[unsafe.Pointer]any
	// diffs: what differs between pairs of large records read by key (the one a kept read was
	// last found the same in, the one read now), since the last sweep (reuse_body_diff.go).
	diffs recordDiffs
	// sealedSame: kept reads found the same as sealed (reuse_body_sealed.go), for tests.
	sealedSame int
	// hintsIndexed: runs whose hints were indexed by a map to realign them (placed.realign),
	// for tests.
	hintsIndexed int
	filters      map[bodyKey]*filterLoop   // loops' filters (reuse_filter.go)
	selects      map[selectKey]*selectLoop // selectattr's answers (reuse_select.go)
	selectKept   int                       // answers given as kept, for tests
	seqs         map[seqKey]*seqSite       // sort's and unique's calls (reuse_sort.go)
	seqPatched   int                       // calls of sort and unique patched, for tests
	seqScratch   *seqScratch               // lent to a call of sort or unique at a time
	strKept      strCounts                 // join's, split's and map's, for tests (reuse_join.go)
	prints       map[printKey]*printLoop   // print-only loops' runs (reuse_print.go)
	printCopied  int                       // their iterations written from the last run, for tests
	reused       int
	reusedAt     map[loopAt]int // by loop, for tests
	stretched    int            // iterations written by stretches (reuse_body_stretch.go), for tests
	sheetCopied  int            // iterations written from a run's sheet (reuse_body_sheet.go), for tests
	filterQuick  int            // loops' filter results taken by filterRun.quick, for tests
}

// loopAt is where a loop is: its template and line.
type loopAt struct {
	tmpl string
	line int
}

// bodyLoop is what is kept for one loop.
type bodyLoop struct {
	info             bodyInfo
	at               loopAt
	byHash           map[uint64]*bodyEntry // by the hash of their reads, chained by next
	n                int                   // entries in byHash
	usedNow          int                   // entries used or made since the last Sweep
	runs[*bodyEntry]                       // per run of the loop in a render: its iterations' entries (nil: not kept)
	refused          int                   // iterations refused in a row (maxRefused)
	poor             int                   // renders in a row that found few of its iterations kept (maxPoor)
	looked           int                   // this render's iterations that looked for a kept one (bodyRun)
	found            int                   // and found one
	off              bool                  // too many refused: the loop's iterations are not tried again
	reused           int                   // iterations reused since the last Sweep (bodyCache.reusedAt)
	sheet            sheetInfo             // whether its runs keep sheets (reuse_body_sheet.go)
	sheets           perRun[*runSheet]     // its runs' sheets
}

// turn ends a render for the loop's runs and their sheets; false when none ran.
func (lp *bodyLoop) turn() bool {
	if !lp.runs.turn() {
		return false
	}
	lp.sheets.turn()
	return true
}

// bodyEntry is one kept iteration. Kept to 64 bytes, the rare parts apart: a loop's
// iterations are kept by the ten thousand (the Ingress example's backends, served Ingresses
// and routes at 10,000 Ingresses).
type bodyEntry struct {
	vals []any      // what it read (copies taken before it ran), in info.names order, then the position
	out  string     // what it wrote
	used uint64     // the last generation it served or was made in
	next *bodyEntry // the next one of the same hash
	rare *bodyRare  // nil: no secret printed, and the body ended without break or continue
}

// bodyRare is what few kept iterations have.
type bodyRare struct {
	secret []int // spans of out printed from secret values: start, end, ...
	ctrl   error // errBreak, errContinue or nil: how it ended
}

// ended returns the spans of secret values in the entry's output and how its body ended.
func (ent *bodyEntry) ended() ([]int, error) {
	if ent.rare == nil {
		return nil, nil
	}
	return ent.rare.secret, ent.rare.ctrl
}

// bodyEval is one render's state of kept loops.
type bodyEval struct {
	recording int // iterations being run to be kept, one inside the other
	// modules: modules being computed to be kept for an import in a loop (reuse_loop.go),
	// one inside the other. Their loops' iterations are not kept: the module is kept whole
	// for the values it reads (one per route), and keeping its loops' iterations as well
	// would cost a second copy of each route's reads and output, for nothing.
	modules    int
	runs       map[*bodyLoop]int             // runs of each loop so far in this render
	info       map[bodyKey]*bodyLoop         // the loops met in this render
	filterRuns map[*filterLoop]int           // runs of each loop's filter so far in this render
	selectRuns map[*selectLoop]int           // calls of selectattr by attribute so far in this render
	seqCalls   map[*seqSite]int              // calls of sort and unique by site so far in this render
	printRuns  map[*printLoop]int            // runs of each print-only loop so far in this render
	printLoops map[*parse.ForStmt]*printLoop // the print-only loops met in this render
	free       []*bodyRun                    // runs done, to be used again
}

// off says whether loops', filters' and selectattr's answers are neither taken nor kept
// here: inside an iteration being kept (its output is kept whole), inside a module computed
// for an import in a loop (bodyEval.modules).
func (b *bodyEval) off() bool {
	return b != nil && (b.recording > 0 || b.modules > 0)
}

// bodyModules counts a module being computed for an import in a loop (d: 1 when it starts,
// -1 when it ends).
func (e *evaluator) bodyModules(d int) {
	e.bodyState().modules += d
}

// bodyRun is one run of a loop whose iterations may be kept.
type bodyRun struct {
	c                  *bodyCache
	lp                 *bodyLoop
	k                  int // which run of the loop in this render
	placed[*bodyEntry]     // in the entries of run k in the last render
	i                  int
	list               []*bodyEntry // this run's entries
	reads              []any
	names, plain       []any // scratch: the names' values (read), the reads not by key (exec)
	// chained: per read, the data it last followed its chain from, and what it found (read):
	// the iterations of a run read the same `resources`, whose chains give the same.
	chained [][2]any
	// diffs: per read, the diff between records its keyed reads were last compared through
	// (recordDiffs.keyedSameMemo).
	diffs []diffMemo
	// outer: per name of the body's reads, its value when the body's frame (outerIn) does not
	// name it, nil until looked up: what the frames around the loop's hold does not change while
	// it runs (a body sets names in its own frame), and a lookup walks them all (the Ingress
	// example's backends read resources and namespace, from the template's context and the
	// builtins, at each of 10,000 iterations).
	outer   []outerName
	outerIn *frame
	off     bool      // too many iterations refused: the others run as they are
	sheet   *sheetRun // the run's sheet (reuse_body_sheet.go); nil: none
	// looked, found: the iterations that looked for a kept one while the last render's run
	// had some (hints), and those that found one.
	looked, found int
}

// BodiesReused is how many iterations of loops took a kept iteration's output rather than
// running the body.
func (c *ModuleCache) BodiesReused() int {
	c.bodies.mu.Lock()
	defer c.bodies.mu.Unlock()
	return c.bodies.reused
}

// BodiesReusedAt is how many iterations of the loop of template name at line took a kept
// iteration's output.
func (c *ModuleCache) BodiesReusedAt(name string, line int) int {
	c.bodies.mu.Lock()
	defer c.bodies.mu.Unlock()
	at := loopAt{name, line}
	n := c.bodies.reusedAt[at]
	for _, lp := range c.bodies.loops {
		if lp.at == at {
			n += lp.reused
		}
	}
	return n
}

// bodyRun returns the run of loop s whose iterations may be kept and reused; nil when not.
func (e *evaluator) bodyRun(s *parse.ForStmt) *bodyRun {
	if e.shared == nil || e.shared.Across == nil || e.origins != nil || e.suppress || s.Recursive || e.bodies.off() {
		return nil
	}
	e.bodyState()
	key := bodyKey{e.prog, s}
	c := &e.shared.Across.bodies
	lp := e.bodies.info[key]
	if lp == nil {
		lp = c.loop(key, e.cur)
		e.bodies.info[key] = lp
	}
	if !lp.info.ok {
		return nil
	}
	k := e.bodies.runs[lp]
	e.bodies.runs[lp] = k + 1
	c.mu.Lock()
	if lp.off {
		c.mu.Unlock()
		return nil
	}
	hints := lp.hints(k)
	c.mu.Unlock()
	// The runs done in this render are used again (a loop inside another runs once per item
	// of the outer one: thousands of runs of a few iterations in the Ingress example).
	r := &bodyRun{}
	if n := len(e.bodies.free); n > 0 {
		r = e.bodies.free[n-1]
		e.bodies.free = e.bodies.free[:n-1]
		*r = bodyRun{reads: r.reads[:0], names: r.names[:0], plain: r.plain[:0], chained: r.chained[:0], outer: r.outer[:0], diffs: r.diffs[:0]}
	}
	r.c, r.lp, r.k, r.hints, r.list = c, lp, k, hints, make([]*bodyEntry, 0, len(hints))
	return r
}

// loop is what is kept for key, made when first met.
func (c *bodyCache) loop(key bodyKey, t *Template) *bodyLoop {
	c.mu.Lock()
	defer c.mu.Unlock()
	lp := c.loops[key]
	if lp == nil {
		info := bodyReads(key.node)
		if info.ok && key.prog.testsIdentity() {
			info = bodyInfo{}
		}
		lp = &bodyLoop{info: info, byHash: map[uint64]*bodyEntry{}}
		lp.sheet = sheetFor(key.node, &lp.info)
		if t != nil {
			lp.at.tmpl = t.name
			lp.at.line, _ = t.lineCol(key.node.Pos)
		}
		if c.loops == nil {
			c.loops = map[bodyKey]*bodyLoop{}
			c.hasher = bodyHasher{seed: maphash.MakeSeed()}
		}
		c.loops[key] = lp
	}
	lp.ran = true
	return lp
}

// exec runs one iteration of the loop's body, in the frame body, or writes the output of a
// kept one that read the same.
func (r *bodyRun) exec(e *evaluator, body []parse.Stmt, f *frame, loop *loopCtx) error {
	i := r.i
	r.i++
	if r.off || r.lp.info.loop && loop == nil {
		// (A body that reads the loop's position always has a loop object: UsesLoop.)
		r.list = append(r.list, nil)
		return e.execAll(body, f)
	}
	vals := r.read(e, f, loop)
	// A dict, list, namespace or tuple the template made is copied, kept and compared item by
	// item at each iteration: as dear as the body, or dearer (model.j2's backends dict, every
	// route's, read by each route's iteration: quadratic). Not tried again, but where the body
	// has loops of its own and reads a few such values (the HTTPRoute example's backend, its
	// refs and their Services' EndpointSlices): the body is the dearer there. Those are counted
	// (ownSmall) only when no kept iteration read the same: one that did was kept with values
	// of the same items, counted then (bodySame compares the template's own values item by item).
	own := r.readsOwn(vals)
	if own && !r.lp.info.loops {
		return r.giveUp(e, body, f)
	}
	ent := r.c.find(r, vals, i)
	if ent == nil && own && !ownSmall(r.unkeyed(vals)) {
		return r.giveUp(e, body, f)
	}
	if len(r.hints) > 0 {
		r.looked++
		if ent != nil {
			r.found++
		}
	}
	if ent != nil && len(e.out)+len(ent.out) <= e.maxSize {
		r.list = append(r.list, ent)
		start := len(e.out)
		e.out = append(e.out, ent.out...)
		secret, ctrl := ent.ended()
		for _, p := range secret {
			e.secret = append(e.secret, start+p)
		}
		return ctrl
	}
	snap, ok := copyReads(vals, r.lp.info.reads)
	var keys *keyRecorder
	if ok {
		keys = newKeyRecorder(e.shared.Across, r.lp.info.reads, r.lp.info.sites, nil, vals, snap)
	}
	start, sstart := len(e.out), len(e.secret)
	outerKeys := e.keys
	e.keys = keys // the body's own lookups (reuse_keyed.go)
	e.bodies.recording++
	err := e.execAll(body, f)
	e.bodies.recording--
	e.keys = outerKeys
	ent = nil
	if ok && (err == nil || err == errBreak || err == errContinue) && sameAfter(snap, vals) {
		secret := make([]int, len(e.secret)-sstart)
		for j, p := range e.secret[sstart:] {
			secret[j] = p - start
		}
		sealReads(snap, vals)
		ent = r.c.keep(r.lp, snap, string(e.out[start:]), secret, err)
	}
	if ent == nil && err == nil {
		r.off = r.c.refused(r.lp)
	}
	r.list = append(r.list, ent)
	return err
}

// giveUp runs the iteration's body as it is, and the loop's next iterations too, never to be
// kept again (bodyCache.giveUp).
func (r *bodyRun) giveUp(e *evaluator, body []parse.Stmt, f *frame) error {
	r.off = r.c.giveUp(r.lp)
	r.list = append(r.list, nil)
	return e.execAll(body, f)
}

// maxOwnRead is how much of the template's own values (dicts, lists, namespaces and tuples,
// counting each item, and the data they hold as one each) a kept iteration whose body has
// loops may read.
const maxOwnRead = 64

// ownSmall says whether the template's own values in vals hold maxOwnRead items or fewer.
func ownSmall(vals []any) bool {
	budget := maxOwnRead
	for _, v := range vals {
		if !ownFits(v, &budget, 0) {
			return false
		}
	}
	return true
}

// ownFits counts v's items against budget (the template's own values are walked, the
// data's are one item); false once it is spent.
func ownFits(v any, budget *int, depth int) bool {
	*budget--
	if *budget < 0 || depth > maxCallDepth {
		return false
	}
	if items, ok := templateItems(v); ok {
		for _, e := range items {
			if !ownFits(e, budget, depth+1) {
				return false
			}
		}
		return true
	}
	switch x := v.(type) {
	case *Namespace:
		return ownFits(x.attrs, budget, depth+1)
	case *Dict:
		for i := range x.keys {
			if !ownFits(x.keys[i], budget, depth+1) || !ownFits(x.vals[i], budget, depth+1) {
				return false
			}
		}
	}
	return true
}

// minNestedKept is how many items a loop running inside another loop must have for its
// iterations to be kept: the Ingress example's loops over an object's rules and paths run
// thousands of times over one to three items, and what keeping costs per run (the run, its
// list of entries, the reads looked up and compared) was more than what it saved.
const minNestedKept = 4

// maxRefused is how many iterations of a loop in a row may be refused before it is no longer
// tried: a loop that appends to a list or counts in a namespace would copy and compare what
// it changes at each iteration, for nothing.
const maxRefused = 16

// refused counts an iteration that could not be kept; true when the loop is no longer tried.
func (c *bodyCache) refused(lp *bodyLoop) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	lp.refused++
	lp.off = lp.off || lp.refused >= maxRefused
	return lp.off
}

// giveUp turns the loop's keeping off for good (a body reading the template's own values); true.
func (c *bodyCache) giveUp(lp *bodyLoop) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	lp.off = true
	return true
}

// copyReads copies what an iteration read, before it runs: what it is kept with, and what
// the reads must still be once it ran. ok is false when one cannot be copied. Keyed reads
// (reads) are left nil: what their lookups find is copied as the body looks (keyRecorder).
func copyReads(vals []any, reads []freeRead) (out []any, ok bool) {
	var c *copier // made for the template's own values only: most reads are the data's
	out = make([]any, len(vals))
	for i, v := range vals {
		if i < len(reads) && reads[i].keyed {
			if _, ok := v.(notSet); ok {
				out[i] = v
			}
			continue
		}
		switch v.(type) {
		case notSet, nil, bool, int64, string, map[string]any, []any, *record.Record:
			out[i] = v
			continue
		}
		if c == nil {
			c = &copier{seen: map[any]any{}}
		}
		cv, ok := c.copy(v)
		if !ok {
			return nil, false
		}
		out[i] = cv
	}
	return out, true
}

// read is what the iteration reads: the names' values as f shows them (or, with info.reads,
// those reads of them: the chains read by key), then the loop's position when the body reads
// it, and whether output is escaped.
func (r *bodyRun) read(e *evaluator, f *frame, loop *loopCtx) []any {
	vals := r.reads[:0]
	names := vals
	if r.lp.info.reads != nil {
		names = r.names[:0]
	}
	for j, n := range r.lp.info.names {
		names = append(names, r.lookup(e, f, j, n))
	}
	if r.lp.info.reads == nil {
		vals = names
	} else {
		r.names = names
		for j, rd := range r.lp.info.reads {
			v := names[rd.name]
			if rd.chain != nil {
				v = r.chainValue(e, j, v, rd.chain)
			}
			vals = append(vals, v)
		}
	}
	if r.lp.info.loop && loop != nil {
		vals = append(vals, int64(loop.index0), int64(loop.length), int64(loop.depth0))
	}
	vals = append(vals, e.autoescape)
	r.reads = vals
	return vals
}

// lookup is name n's value (j: its index in the body's names) as f shows it, notSet{} when it
// is not set: looked up once per run when f does not name it (bodyRun.outer); taken from
// where f named it at the iteration before when it still does (a loop variable: f's names
// are the same at each iteration before its body runs, each once).
func (r *bodyRun) lookup(e *evaluator, f *frame, j int, n string) any {
	if f != r.outerIn {
		clear(r.outer)
		r.outer, r.outerIn = r.outer[:0], f
	}
	for len(r.outer) <= j {
		r.outer = append(r.outer, outerName{})
	}
	o := r.outer[j]
	if o.ok {
		return o.v
	}
	if k := o.at - 1; k >= 0 && k < len(f.names) && f.names[k] == n {
		if v := f.vals[k]; !isUnset(v) {
			return v
		}
	}
	v, ok := e.lookup(f, n)
	if !ok {
		v = notSet{}
	}
	if k := lastIndex(f.names, n); k < 0 {
		r.outer[j] = outerName{v: v, ok: true}
	} else {
		r.outer[j].at = k + 1
	}
	return v
}

// isUnset says whether v marks a name not set yet (bindUnset): e.lookup looks past it.
func isUnset(v any) bool {
	_, unset := v.(unsetName)
	return unset
}

// lastIndex is the index of n's last place in names (the one e.lookup finds), -1 when none.
func lastIndex(names []string, n string) int {
	for k := len(names) - 1; k >= 0; k-- {
		if names[k] == n {
			return k
		}
	}
	return -1
}

// outerName is a name's value from the frames around a loop (ok: looked up), or where the
// body's frame names it (at: 1 + its index; 0: not known).
type outerName struct {
	v  any
	ok bool
	at int
}

// chainValue is e.chainValue(v, chain) for read j: what the iteration before found when v is
// the same data it started from (the data never changes: the chain gives the same).
func (r *bodyRun) chainValue(e *evaluator, j int, v any, chain []string) any {
	for len(r.chained) <= j {
		r.chained = append(r.chained, [2]any{})
	}
	id, ok := dataID(v)
	if last, ok2 := dataID(r.chained[j][0]); ok && ok2 && id == last {
		return r.chained[j][1]
	}
	w := e.chainValue(v, chain)
	if ok {
		r.chained[j] = [2]any{v, w}
	} else {
		r.chained[j] = [2]any{}
	}
	return w
}

// readsOwn is readsOwn(r.unkeyed(vals)), without making that.
func (r *bodyRun) readsOwn(vals []any) bool {
	reads := r.lp.info.reads
	for i, v := range vals {
		switch v.(type) {
		case *Dict, *List, *Namespace, Tuple:
			if i >= len(reads) || !reads[i].keyed {
				return true
			}
		}
	}
	return false
}

// unkeyed are the iteration's reads but those by key (a dict looked up by key is not read
// whole: it is neither copied nor compared whole).
func (r *bodyRun) unkeyed(vals []any) []any {
	reads := r.lp.info.reads
	if reads == nil {
		return vals
	}
	out := r.plain[:0]
	for i, v := range vals {
		if i >= len(reads) || !reads[i].keyed {
			out = append(out, v)
		}
	}
	r.plain = out
	return out
}

// sameAfter says whether what an iteration read (vals) is still what it read before it ran
// (snap; keyed reads: what each lookup found).
func sameAfter(snap, vals []any) bool {
	for i, v := range vals {
		if k, ok := snap[i].(*keyedRead); ok {
			if !k.same(v) {
				return false
			}
		} else if !bodySame(snap[i], v) {
			return false
		}
	}
	return len(snap) == len(vals)
}

// done ends the run: its entries are where the same run of the next render looks first.
func (r *bodyRun) done(e *evaluator) {
	if r == nil {
		return
	}
	defer func() { e.bodies.free = append(e.bodies.free, r) }()
	sh := r.sheetEnd(e)
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.lp.put(r.k, r.list)
	r.lp.sheets.put(r.k, sh)
	r.lp.looked += r.looked
	r.lp.found += r.found
}

// judge counts, at the end of a render, whether the loop found few of its iterations kept.
func (lp *bodyLoop) judge() {
	if lp.looked >= minPoorLooked {
		lp.poor++
		if lp.found*4 >= lp.looked {
			lp.poor = 0
		}
		lp.off = lp.off || lp.poor >= maxPoor
	}
	lp.looked, lp.found = 0, 0
}

// A loop that found fewer than a quarter of its iterations kept, in maxPoor renders in a row
// of at least minPoorLooked iterations each (its runs together: a loop inside another runs
// once per item of the outer), is no longer tried: keeping its iterations costs
// more than it saves. The HTTPRoute example's loop over the backends reads the whole of
// `resources`, which any change makes anew: none of its iterations is ever found, while
// keeping them (copies, hashes, comparisons) made each sync after a pod's change 60% dearer
// at 3,000 routes. One render in which most of the default template's services changed (a
// value all of them read) does not turn its loops off.
const (
	maxPoor       = 2
	minPoorLooked = 16
)

// find returns a kept iteration of the loop that read vals, for iteration i of the run.
func (c *bodyCache) find(r *bodyRun, vals []any, i int) *bodyEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ent, ok := r.at(i); ok && c.sameIn(r, ent.vals, vals) {
		c.use(r.lp, ent)
		return ent
	}
	c.hasher.budget = maxBodyHashed
	h, ok := c.hasher.reads(vals, r.lp.info.reads)
	if !ok {
		return nil
	}
	for ent := r.lp.byHash[h]; ent != nil; ent = ent.next {
		if !c.sameIn(r, ent.vals, vals) {
			continue
		}
		hinted := c.mayBeHint(ent)
		c.use(r.lp, ent)
		if hinted && r.realign(ent, i) {
			c.hintsIndexed++
		}
		return ent
	}
	return nil
}

// mayBeHint says whether ent may be among the hints of a run of its loop, before it serves:
// the hints are the entries the last render's runs used or made (their generation then; this
// render's once used again), and a sweep turns them all. One older (a service's version of two
// syncs ago, back again) is not: where it is found does not realign the run's next iterations,
// and looking for it in the hints would index all of them, in vain, at each such iteration.
func (c *bodyCache) mayBeHint(ent *bodyEntry) bool {
	return ent.used+1 >= c.gen
}

// same says whether the kept reads are vals. A map or record of the data found the same as
// the kept one takes its place in kept (the same data: the next render's snapshot may keep it,
// and the other loops reading it in this render find it in one step), and is noted as such
// until the next sweep: the default template's three loops over the services compare each one
// once. One found to differ from a kept one is noted too: the HTTPRoute example's loop over
// the backends reads the whole of `resources`, which any change makes anew; compared at each
// of its 3,000 iterations, that walked every EndpointSlice 3,000 times.
func (c *bodyCache) same(kept, vals []any) bool {
	return c.sameIn(nil, kept, vals)
}

// sameIn is same for an iteration of run r (nil: none), whose keyed reads compare through
// the diffs its iterations found before (bodyRun.diffs).
func (c *bodyCache) sameIn(r *bodyRun, kept, vals []any) bool {
	if len(kept) != len(vals) {
		return false
	}
	for i, v := range vals {
		if sameWord(kept[i], v) {
			continue
		}
		if k, ok := kept[i].(*keyedRead); ok {
			var memo *diffMemo
			if r != nil {
				memo = r.diffMemo(i)
			}
			if !c.diffs.keyedSameMemo(k, v, memo) {
				return false
			}
			continue
		}
		if s, ok := kept[i].(*sealedRead); ok {
			if s.holds(v) {
				c.sealedSame++
			} else if !bodySame(s.copy, v) {
				return false
			} else {
				s.reseal(v)
			}
			continue
		}
		x, ok := dataID(v)
		if !ok {
			if !bodySame(kept[i], v) {
				return false
			}
			continue
		}
		y, ok := dataID(kept[i])
		if !ok {
			return false
		}
		if x == y {
			continue
		}
		if m, ok := dataID(c.sameMaps[x]); ok && m == y {
			kept[i] = v
			continue
		}
		pair := [2]unsafe.Pointer{x, y}
		if _, differ := c.differ[pair]; differ {
			return false
		}
		if !bodySame(v, kept[i]) {
			if c.differ == nil {
				c.differ = map[[2]unsafe.Pointer][2]any{}
			}
			c.differ[pair] = [2]any{v, kept[i]} // both kept alive: their addresses are theirs until then
			return false
		}
		if c.sameMaps == nil {
			c.sameMaps = map[unsafe.Pointer]any{}
		}
		c.sameMaps[x] = kept[i] // kept alive: its address is not another's until then
		kept[i] = v
	}
	return true
}

// sameWord says whether a and b are one string, integer or bool (the same type and the same
// word: a pointer to one boxed value), compared without reading what they point to (a kept
// iteration's read of a name of the template's list, the one the loop reads again), or one
// built-in function (namespace, read by the Ingress example's backends), or both not set.
func sameWord(a, b any) bool {
	switch a.(type) {
	case string, int64, bool, *builtin, notSet:
		x, y := (*[2]unsafe.Pointer)(unsafe.Pointer(&a)), (*[2]unsafe.Pointer)(unsafe.Pointer(&b))
		return *x == *y
	}
	return false
}

// diffMemo is the memo of read i's diff (recordDiffs.keyedSameMemo).
func (r *bodyRun) diffMemo(i int) *diffMemo {
	for len(r.diffs) <= i {
		r.diffs = append(r.diffs, diffMemo{})
	}
	return &r.diffs[i]
}

// dataID is the identity of a map or record of the data; false for other values.
func dataID(v any) (unsafe.Pointer, bool) {
	switch x := v.(type) {
	case map[string]any:
		return mapID(x), true
	case *record.Record:
		return unsafe.Pointer(x), true
	}
	return nil, false
}

func (c *bodyCache) use(lp *bodyLoop, ent *bodyEntry) {
	if ent.used != c.gen {
		ent.used = c.gen
		lp.usedNow++
	}
	c.reused++
	lp.reused++ // into reusedAt at the sweep: not a map's update per iteration
}

// keep keeps an iteration that read vals (copies taken before it ran) and wrote out.
func (c *bodyCache) keep(lp *bodyLoop, vals []any, out string, secret []int, ctrl error) *bodyEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hasher.budget = maxBodyHashed
	h, ok := c.hasher.reads(vals, lp.info.reads)
	if !ok {
		return nil
	}
	ent := &bodyEntry{vals: vals, out: out, used: c.gen}
	if len(secret) > 0 || ctrl != nil {
		ent.rare = &bodyRare{secret: secret, ctrl: ctrl}
	}
	lp.refused = 0
	// Last of its chain: the first kept of the same hash is found first, as before.
	if last := lp.byHash[h]; last == nil {
		lp.byHash[h] = ent
	} else {
		for last.next != nil {
			last = last.next
		}
		last.next = ent
	}
	lp.n++
	lp.usedNow++
	return ent
}

// sweep ends a render: of each loop that ran, the iterations that neither served nor were
// made since the last sweep are forgotten (a service deleted, an old version of one); a loop
// that did not run is forgotten.
func (c *bodyCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, lp := range c.loops {
		if lp.reused > 0 {
			if c.reusedAt == nil {
				c.reusedAt = map[loopAt]int{}
			}
			c.reusedAt[lp.at] += lp.reused
			lp.reused = 0
		}
		if !lp.turn() {
			delete(c.loops, key)
			continue
		}
		lp.judge()
		// The iterations not used are dropped when they are a sixteenth of the loop's: not
		// after each pod change (one service's old iteration), which would walk them all.
		if lp.n-lp.usedNow > lp.n/16+16 {
			for h, ent := range lp.byHash {
				if first := usedIn(ent, c.gen); first == nil {
					delete(lp.byHash, h)
				} else {
					lp.byHash[h] = first
				}
			}
			lp.n = lp.usedNow
		}
		lp.usedNow = 0
	}
	c.sweepFilters()
	c.sweepSelects()
	c.sweepSeqs()
	c.sweepPrints()
	c.gen++
	clear(c.sameMaps)
	clear(c.differ)
	c.diffs.sweep()
}

// endCut ends a render cut short (ModuleCache.EndCut): the generation goes on into the next
// render, so that what the cut one used or made counts as the next one's, and what it did
// not reach stays as it was. Only the notes of what was found the same or different go:
// they hold the render's data alive, and the next render finds them again.
func (c *bodyCache) endCut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.sameMaps)
	clear(c.differ)
	c.diffs.sweep()
}

// usedIn returns the chain from ent of the entries used in generation gen, in their order;
// nil when none was.
func usedIn(ent *bodyEntry, gen uint64) *bodyEntry {
	var first, last *bodyEntry
	for ; ent != nil; ent = ent.next {
		if ent.used != gen {
			continue
		}
		if last == nil {
			first = ent
		} else {
			last.next = ent
		}
		last = ent
	}
	if last != nil {
		last.next = nil
	}
	return first
}

// runs is what a loop, its filter or a selectattr call kept, per run in a render: the k-th
// run of a render looks where the k-th run of the last render put its entries (hints).
type runs[E any] struct {
	ran   bool
	lists perRun[[]E]
}

// hints are the entries the k-th run of the last render made.
func (r *runs[E]) hints(k int) []E { return r.lists.at(k) }

// put keeps list as the k-th run's entries of this render.
func (r *runs[E]) put(k int, list []E) { r.lists.put(k, list) }

// turn ends a render: this render's runs become the last; false when none ran (forget them).
func (r *runs[E]) turn() bool {
	if !r.ran {
		return false
	}
	r.ran = false
	r.lists.turn()
	return true
}

// perRun is a value per run of a loop in a render: the last render's and this one's.
type perRun[T any] struct{ last, cur []T }

// at is the k-th run's of the last render (the zero T: none).
func (p *perRun[T]) at(k int) T {
	if k < len(p.last) {
		return p.last[k]
	}
	var none T
	return none
}

// put keeps v as the k-th run's of this render.
func (p *perRun[T]) put(k int, v T) {
	for len(p.cur) <= k {
		var none T
		p.cur = append(p.cur, none)
	}
	p.cur[k] = v
}

// turn ends a render: this render's become the last.
func (p *perRun[T]) turn() { p.last, p.cur = p.cur, nil }

// bodyState is what this render keeps of its loops (e.bodies), made at its first use.
func (e *evaluator) bodyState() *bodyEval {
	if e.bodies == nil {
		e.bodies = &bodyEval{runs: map[*bodyLoop]int{}, info: map[bodyKey]*bodyLoop{}}
	}
	return e.bodies
}
