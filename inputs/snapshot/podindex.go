package snapshot

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// indexThreshold is the number of ready pods in a namespace above which selection goes through
// a label index instead of testing every pod.
const indexThreshold = 64

// podIndex holds the ready pods by namespace and each service's selected pods. Through a
// PodCache it is kept from one Build to the next and brought up to date from the pods that
// changed (update), so that a Build after one pod's change does work in proportion to that
// change rather than to the cluster (issue 25). One Build at a time holds it (PodCache.take):
// it is one consistent generation, compared with the objects each Build is given.
//
// It is kept between syncs for a hundred thousand pods, so it holds them compactly (issue 25,
// 9 MB less at 10,000 services x 10 pods than with a map by pod and a pointer a pod in each
// list): one entry each in one slice, which every list names by its index (an int32: half a
// pointer, and nothing for the collector to trace). No map finds a pod's entry: a source
// gives its pods in the same order from one Build to the next, so the last Build's lists
// find them by position (align), and only the few that moved are looked up.
type podIndex struct {
	cache *PodCache // may be nil
	round uint64    // of update: what this Build found
	// entries are the pods given, ready or not, one for each place in the lists (a pod given
	// twice has two). A removed pod's entry is free for a new one.
	entries []podEntry
	free    []int32
	live    int      // entries in use
	found   []uint64 // of update: the entries found in this round's lists, a bit each
	// The namespaces' ready pods, and the services by name.
	byNamespace map[string]*namespacePods
	services    map[string]*svcState // by entry name
	gone        []int32              // typed pods update removed: their forms may serve again
	// The entries of the last Build's lists, at the places of their pods (nil pods left out):
	// where a gone pod's new version is found (a source replaces a changed object in its
	// place), without a lookup. Kept with a cache only.
	lastTyped []int32
	lastConv  []int32
	skipped   []int32 // of the last lists, not matched by position (see align)
}

type namespacePods struct {
	pods []int32 // entries, each at its pos
	// byLabel: label key -> value -> pods, each key's made on first use (a namespace's
	// selectors name few keys; its pods carry many more), then kept up to date.
	byLabel map[string]map[string][]int32
	// The services of the namespace by one equality requirement of their selector (key ->
	// value -> services), the others in svcAll: those a changed pod may concern.
	svcBy  map[string]map[string][]*svcState
	svcAll []*svcState
}

// svcState is a service entry as the last Build through the index made it.
type svcState struct {
	b        *builtService
	ns       string
	clusters []string
	nilPods  bool   // its selector selected no pod (see finish)
	regKey   string // the requirement it is registered under ("" and regAll: svcAll)
	regAll   bool
	round    uint64 // the last Build that had it
	affected uint64 // the last Build in which a pod it selects (or now selects) changed
}

// maxChanges: above this many changed pods, and a quarter of all, a new index costs less than
// updating the last one.
const maxChanges = 256

// newPodIndex is an index of the given pods made anew; a typed pod at the version it has in
// last (nil: none) keeps its template form.
func newPodIndex(typed []*corev1.Pod, converted []*Pod, cache *PodCache, last *podIndex) *podIndex {
	ix := &podIndex{cache: cache, round: 1, byNamespace: map[string]*namespacePods{}, services: map[string]*svcState{},
		entries: make([]podEntry, 0, len(typed)+len(converted))}
	var lastTyped, lastConv []int32
	if cache != nil {
		lastTyped, lastConv = make([]int32, 0, len(typed)), make([]int32, 0, len(converted))
	}
	tps := make([]typedPod, len(typed)) // one allocation for all
	for i, p := range typed {
		if p != nil {
			tps[i] = typedPod{pod: p, rv: p.ResourceVersion}
			ix.entries = append(ix.entries, podEntry{typed: &tps[i], ready: PodReady(p)})
			if cache != nil {
				lastTyped = append(lastTyped, int32(len(ix.entries)-1))
			}
		}
	}
	for _, p := range converted {
		if p != nil {
			ix.entries = append(ix.entries, podEntry{conv: p, ready: p.ready})
			if cache != nil {
				lastConv = append(lastConv, int32(len(ix.entries)-1))
			}
		}
	}
	ix.live = len(ix.entries)
	ix.lastTyped, ix.lastConv = lastTyped, lastConv
	ix.fillNamespaces()
	if last != nil {
		forms := map[podName]*typedPod{}
		for i := range last.entries {
			if e := &last.entries[i]; !e.removed && e.typed != nil && e.typed.obj != nil {
				forms[podName{e.typed.pod.Namespace, e.typed.pod.Name}] = e.typed
			}
		}
		for i := range ix.entries {
			ix.reuse(forms, &ix.entries[i])
		}
	}
	return ix
}

// fillNamespaces puts each ready pod in its namespace's pods, each list made at its size: a
// namespace of 1,000 pods grown by appends would hold room for 1,000 more.
func (ix *podIndex) fillNamespaces() {
	count := map[*namespacePods]int{}
	var (
		ns   *namespacePods
		name string
	)
	at := func(e *podEntry) *namespacePods {
		// A source gives a namespace's pods together, or a service's at least: a lookup a run.
		if n := e.namespace(); ns == nil || n != name {
			ns, name = ix.namespace(n), n
		}
		return ns
	}
	for i := range ix.entries {
		if e := &ix.entries[i]; e.ready {
			count[at(e)]++
		}
	}
	for ns, n := range count {
		ns.pods = make([]int32, 0, n)
	}
	for i := range ix.entries {
		if e := &ix.entries[i]; e.ready {
			ns := at(e)
			e.pos = int32(len(ns.pods))
			ns.pods = append(ns.pods, int32(i))
		}
	}
}

func (ix *podIndex) namespace(name string) *namespacePods {
	ns := ix.byNamespace[name]
	if ns == nil {
		ns = &namespacePods{}
		ix.byNamespace[name] = ns
	}
	return ns
}

// add makes e an entry, a free one if there is one, and puts it in its namespace when ready.
func (ix *podIndex) add(e podEntry) int32 {
	var i int32
	if n := len(ix.free); n > 0 {
		i, ix.free = ix.free[n-1], ix.free[:n-1]
		ix.entries[i] = e
	} else {
		i = int32(len(ix.entries))
		ix.entries = append(ix.entries, e)
	}
	ix.live++
	if e.ready {
		ix.nsAdd(ix.namespace(e.namespace()), i)
	}
	return i
}

// update brings the index of the last Build's pods to these: the pods no longer given leave
// it, those new (a new object, or a new resourceVersion) enter it, and the services either
// version concerns are marked affected. It returns false, and leaves the index unusable,
// when so many changed that a new one costs less, or when a typed pod is the same object with
// another (or no) resourceVersion: changed in place, its old labels cannot be known.
func (ix *podIndex) update(typed []*corev1.Pod, converted []*Pod) bool {
	ix.round++
	ix.found = slices.Grow(ix.found[:0], (len(ix.entries)+63)/64)[:(len(ix.entries)+63)/64]
	clear(ix.found)
	ix.skipped = ix.skipped[:0]
	atT, foundT, addT, ok := diffList(ix, typed, ix.lastTyped, typedPodOf, sameVersion)
	if !ok {
		return false
	}
	atC, foundC, addC, _ := diffList(ix, converted, ix.lastConv, convPodOf, func(*Pod, *podEntry) bool { return true })
	gone := ix.live - foundT - foundC
	if n := gone + addT + addC; n > maxChanges && n > (len(typed)+len(converted))/4 {
		return false
	}
	ix.gone = ix.gone[:0]
	ix.removeSkipped()
	var added []int32 // the typed ones
	ix.lastTyped = place(ix, atT, typed, func(i int) podEntry {
		p := typed[i]
		return podEntry{typed: &typedPod{pod: p, rv: p.ResourceVersion}, ready: PodReady(p)}
	}, &added)
	ix.lastConv = place(ix, atC, converted, func(i int) podEntry {
		return podEntry{conv: converted[i], ready: converted[i].ready}
	}, nil)
	if len(ix.gone) > 0 && len(added) > 0 {
		forms := make(map[podName]*typedPod, len(ix.gone))
		for _, i := range ix.gone {
			tp := ix.entries[i].typed
			forms[podName{tp.pod.Namespace, tp.pod.Name}] = tp
		}
		for _, i := range added {
			ix.reuse(forms, &ix.entries[i])
		}
	}
	for _, i := range ix.gone { // free now, not to keep the old versions alive
		ix.entries[i] = podEntry{removed: true}
		ix.free = append(ix.free, i)
	}
	ix.gone = ix.gone[:0]
	clear(ix.skipped)
	ix.skipped = ix.skipped[:0]
	return true
}

func typedPodOf(e *podEntry) *corev1.Pod { return e.typed.pod }
func convPodOf(e *podEntry) *Pod         { return e.conv }

// sameVersion: typed pod p, the object of e, is at e's version; not when it has none.
func sameVersion(p *corev1.Pod, e *podEntry) bool {
	return p.ResourceVersion != "" && e.typed.rv == p.ResourceVersion
}

// diffList finds the entries of list (this Build's pods of one kind) among last (the entries
// of the last Build's list of that kind): by position (align), then those that moved by a
// lookup among the entries align skipped, which it adds to ix.skipped. It returns each pod's
// entry at its place in list (-1: a pod to add, or nil), the entries found (marked in
// ix.found) and the pods to add. Not ok when same says a found pod is not at its entry's
// version (a typed pod changed in place).
func diffList[T comparable](ix *podIndex, list []T, last []int32, pod func(*podEntry) T,
	same func(T, *podEntry) bool) (at []int32, found, add int, ok bool) {
	var none T
	at = make([]int32, len(list))
	ok = true
	take := func(i int, e int32) {
		if ix.found[e/64]&(1<<(e%64)) != 0 { // given twice, a place each: the other's
			at[i] = -1
			add++
			return
		}
		if !same(list[i], &ix.entries[e]) {
			ok = false
		}
		ix.found[e/64] |= 1 << (e % 64)
		at[i] = e
		found++
	}
	var others []int
	start := len(ix.skipped)
	align(len(list), len(last),
		func(i, j int) bool { return list[i] == pod(&ix.entries[last[j]]) },
		func(i, j int) { take(i, last[j]) },
		func(i int) { others = append(others, i) },
		func(j int) { ix.skipped = append(ix.skipped, last[j]) })
	if len(others) == 0 {
		return at, found, add, ok
	}
	moved := make(map[T]int32, len(ix.skipped)-start)
	for _, e := range ix.skipped[start:] {
		moved[pod(&ix.entries[e])] = e
	}
	for _, i := range others {
		at[i] = -1
		if list[i] == none {
			continue
		}
		if e, ok := moved[list[i]]; ok {
			take(i, e)
		} else {
			add++
		}
	}
	return at, found, add, ok
}

// align walks a list against last, the last Build's list, as a source gives them (sorted, or
// in the same order): same(i, j) when the list's pod i is last's pod j itself (eq), found by
// position, a pod deleted or added in between skipped; other(i) for the others, and skip(j)
// for the last Build's that no position matched. It is a guess, never a judgement: what other
// and skip are given is looked up.
func align(n, m int, eq func(i, j int) bool, same func(i, j int), other func(i int), skip func(j int)) {
	j := 0
	for i := range n {
		switch {
		case j < m && eq(i, j):
		case j+1 < m && eq(i, j+1): // last[j] deleted
			skip(j)
			j++
		default:
			other(i)
			// Replaced in place, unless the next is last[j] (list[i] inserted before it).
			if j < m && !(i+1 < n && eq(i+1, j)) {
				skip(j)
				j++
			}
			continue
		}
		same(i, j)
		j++
	}
	for ; j < m; j++ {
		skip(j)
	}
}

// place adds the pods of list that at (diffList's) has no entry for, made by entry, and
// returns the entries of list's pods in its order (nil pods left out), in at's own array:
// the next update's last list. The entries added are appended to added, when given.
func place[T comparable](ix *podIndex, at []int32, list []T, entry func(i int) podEntry, added *[]int32) []int32 {
	var none T
	out := at[:0] // behind i: each place written once read
	for i, e := range at {
		if e < 0 {
			if list[i] == none {
				continue
			}
			e = ix.add(entry(i))
			ix.touch(e)
			if added != nil {
				*added = append(*added, e)
			}
		}
		out = append(out, e)
	}
	return slices.Clip(out)
}

// removeSkipped removes the last Build's pods align skipped that this round did not find:
// each of the last Build's entries was at one place of its lists, so these are all that are
// gone.
func (ix *podIndex) removeSkipped() {
	for _, i := range ix.skipped {
		e := &ix.entries[i]
		if ix.found[i/64]&(1<<(i%64)) != 0 || e.removed {
			continue
		}
		ix.remove(i)
		e.removed = true
		ix.live--
		if e.typed != nil {
			ix.gone = append(ix.gone, i) // freed once its form had its chance (update)
		} else {
			*e = podEntry{removed: true}
			ix.free = append(ix.free, i)
		}
	}
}

func (ix *podIndex) remove(i int32) {
	e := &ix.entries[i]
	if !e.ready {
		return
	}
	ix.touch(i)
	ix.nsRemove(ix.byNamespace[e.namespace()], i)
}

// touch marks the services of entry i's namespace that select it affected.
func (ix *podIndex) touch(i int32) {
	e := &ix.entries[i]
	ns := ix.byNamespace[e.namespace()]
	if ns == nil {
		return
	}
	for key, byValue := range ns.svcBy {
		if v, ok := e.Lookup(key); ok {
			for _, s := range byValue[v] {
				if s.b.sel.Matches(e) {
					s.affected = ix.round
				}
			}
		}
	}
	for _, s := range ns.svcAll {
		if s.b.sel.Matches(e) {
			s.affected = ix.round
		}
	}
}

func (ix *podIndex) nsAdd(ns *namespacePods, i int32) {
	e := &ix.entries[i]
	e.pos = int32(len(ns.pods))
	ns.pods = append(ns.pods, i)
	for key, byValue := range ns.byLabel {
		if v, ok := e.Lookup(key); ok {
			byValue[v] = append(byValue[v], i)
		}
	}
}

func (ix *podIndex) nsRemove(ns *namespacePods, i int32) {
	e := &ix.entries[i]
	last := len(ns.pods) - 1
	moved := ns.pods[last]
	ns.pods[e.pos], ix.entries[moved].pos = moved, e.pos
	ns.pods = ns.pods[:last]
	for key, byValue := range ns.byLabel {
		v, ok := e.Lookup(key)
		if !ok {
			continue
		}
		list := byValue[v]
		if k := slices.Index(list, i); k >= 0 {
			list[k] = list[len(list)-1]
			list = list[:len(list)-1]
		}
		if len(list) == 0 {
			delete(byValue, v)
		} else {
			byValue[v] = list
		}
	}
}

// indexReq is the requirement of sel a service is registered under: its first equality.
func indexReq(sel labels.Selector) (labels.Requirement, bool) {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			return r, true
		}
	}
	return labels.Requirement{}, false
}

// register makes s one of the services a changed pod of its namespace may concern.
func (ix *podIndex) register(s *svcState) {
	ns := ix.namespace(s.ns)
	r, ok := indexReq(s.b.sel)
	if !ok {
		s.regAll = true
		ns.svcAll = append(ns.svcAll, s)
		return
	}
	s.regKey = r.Key()
	if ns.svcBy == nil {
		ns.svcBy = map[string]map[string][]*svcState{}
	}
	byValue := ns.svcBy[s.regKey]
	if byValue == nil {
		byValue = map[string][]*svcState{}
		ns.svcBy[s.regKey] = byValue
	}
	for _, v := range r.ValuesUnsorted() {
		byValue[v] = append(byValue[v], s)
	}
}

func (ix *podIndex) unregister(s *svcState) {
	if s.b.sel == nil {
		return
	}
	ns := ix.byNamespace[s.ns]
	if s.regAll {
		ns.svcAll = slices.DeleteFunc(ns.svcAll, func(x *svcState) bool { return x == s })
		return
	}
	r, _ := indexReq(s.b.sel) // as register found it
	byValue := ns.svcBy[s.regKey]
	for _, v := range r.ValuesUnsorted() {
		if list := slices.DeleteFunc(byValue[v], func(x *svcState) bool { return x == s }); len(list) > 0 {
			byValue[v] = list
		} else {
			delete(byValue, v)
		}
	}
}

// selectPods returns the ready pods of namespace that sel matches (nil: none): entries of ix,
// good until the next update.
func (ix *podIndex) selectPods(namespace string, sel labels.Selector) []*podEntry {
	ns := ix.byNamespace[namespace]
	if ns == nil {
		return nil
	}
	candidates, all := ix.candidates(ns, sel)
	var out []*podEntry
	if all {
		candidates = ns.pods
	} else {
		out = make([]*podEntry, 0, len(candidates)) // most match: no list grown five times
	}
	for _, i := range candidates {
		if e := &ix.entries[i]; sel.Matches(e) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil // none: a service with a "service" routes to its endpoints (finish)
	}
	return out
}

// index is the pods of ns by their value of label key, made on first use: each value's list
// at its size, all in one allocation.
func (ix *podIndex) index(ns *namespacePods, key string) map[string][]int32 {
	if byValue, ok := ns.byLabel[key]; ok {
		return byValue
	}
	if ns.byLabel == nil {
		ns.byLabel = map[string]map[string][]int32{}
	}
	count := map[string]int{}
	n := 0
	for _, i := range ns.pods {
		if v, ok := ix.entries[i].Lookup(key); ok {
			count[v]++
			n++
		}
	}
	all := make([]int32, n)
	byValue := make(map[string][]int32, len(count))
	for _, i := range ns.pods {
		v, ok := ix.entries[i].Lookup(key)
		if !ok {
			continue
		}
		list, made := byValue[v]
		if !made {
			c := count[v]
			list, all = all[:0:c], all[c:] // a new pod's append gets it a list of its own
		}
		byValue[v] = append(list, i)
	}
	ns.byLabel[key] = byValue
	return byValue
}

// candidates narrows the pods of ns to test with the most selective equality requirement of
// sel; all means test them all.
func (ix *podIndex) candidates(ns *namespacePods, sel labels.Selector) (best []int32, all bool) {
	if len(ns.pods) <= indexThreshold {
		return nil, true
	}
	reqs, ok := sel.Requirements()
	if !ok || len(reqs) == 0 {
		return nil, true
	}
	found := false
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		// A pod has one value per key, so the lists for different values are disjoint.
		byValue := ix.index(ns, r.Key())
		vals := r.ValuesUnsorted()
		var c []int32
		if len(vals) == 1 {
			c = byValue[vals[0]]
		} else {
			for _, v := range vals {
				c = append(c, byValue[v]...)
			}
		}
		if !found || len(c) < len(best) {
			best, found = c, true
		}
	}
	return best, !found
}

// reuse gives e, a typed pod without a template form, the form of the pod of its name in
// forms when that is the same version (UID and resourceVersion): a source that lists again
// gives the same pods as new objects.
func (ix *podIndex) reuse(forms map[podName]*typedPod, e *podEntry) {
	tp := e.typed
	if tp == nil || tp.obj != nil || tp.rv == "" {
		return
	}
	if old := forms[podName{tp.pod.Namespace, tp.pod.Name}]; old != nil && old.obj != nil && old.rv == tp.rv && old.pod.UID == tp.pod.UID {
		tp.obj = old.obj
	}
}
