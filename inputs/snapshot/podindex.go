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
type podIndex struct {
	cache *PodCache // may be nil
	round uint64    // of update: what this Build found
	// Every pod given, ready or not, by identity: a source replaces an object that changes.
	typed       map[*corev1.Pod]*genPod
	conv        map[*Pod]*genPod
	byNamespace map[string]*namespacePods
	services    map[string]*svcState // by entry name
	gone        []*genPod            // typed pods update removed: their forms may serve again
	// The lists of the last Build, to find a gone pod where its new version now is (a source
	// replaces a changed object in its place) instead of through every pod.
	lastTyped   []*corev1.Pod
	lastTypedGP []*genPod // each pod's entry
	lastConv    []*Pod
	lastConvGP  []*genPod
	skipped     []*genPod // of the last lists, not matched by position (see align)
}

// genPod is a pod of the index at the version given; e is in its namespace's pods when ready.
type genPod struct {
	e       podEntry
	rv      string
	round   uint64
	ready   bool
	removed bool
}

type namespacePods struct {
	pods []*podEntry // each at its pos
	// byLabel: label key -> value -> pods, each key's made on first use (a namespace's
	// selectors name few keys; its pods carry many more), then kept up to date.
	byLabel map[string]map[string][]*podEntry
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
	ix := &podIndex{cache: cache, round: 1,
		typed: make(map[*corev1.Pod]*genPod, len(typed)), conv: make(map[*Pod]*genPod, len(converted)),
		byNamespace: map[string]*namespacePods{}, services: map[string]*svcState{}}
	gps := make([]genPod, len(typed)+len(converted)) // one allocation for all
	n := 0
	for _, p := range typed {
		if p != nil && ix.typed[p] == nil {
			gp := &gps[n]
			n++
			ix.addTyped(p, gp)
		}
	}
	for _, p := range converted {
		if p != nil && ix.conv[p] == nil {
			gp := &gps[n]
			n++
			ix.addConverted(p, gp)
		}
	}
	if cache != nil {
		ix.remember(typed, make([]*genPod, len(typed)), converted, make([]*genPod, len(converted)))
	}
	if last != nil {
		forms := make(map[podName]*genPod, len(last.typed))
		for _, gp := range last.typed {
			forms[podName{gp.e.typed.Namespace, gp.e.typed.Name}] = gp
		}
		ix.reuse(forms, typed)
	}
	return ix
}

func (ix *podIndex) addTyped(p *corev1.Pod, gp *genPod) {
	*gp = genPod{rv: p.ResourceVersion, round: ix.round, ready: PodReady(p)}
	gp.e.typed = p
	ix.typed[p] = gp
	if gp.ready {
		ix.namespace(p.Namespace).add(&gp.e)
	}
}

func (ix *podIndex) addConverted(p *Pod, gp *genPod) {
	*gp = genPod{round: ix.round, ready: p.ready}
	gp.e.conv, gp.e.obj = p, p.obj
	ix.conv[p] = gp
	if gp.ready {
		ix.namespace(p.namespace).add(&gp.e)
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

// update brings the index of the last Build's pods to these: the pods no longer given leave
// it, those new (a new object, or a new resourceVersion) enter it, and the services either
// version concerns are marked affected. It returns false, and leaves the index unusable,
// when so many changed that a new one costs less, or when a typed pod is the same object with
// another (or no) resourceVersion: changed in place, its old labels cannot be known.
func (ix *podIndex) update(typed []*corev1.Pod, converted []*Pod) bool {
	ix.round++
	addT, gpT, foundT, ok := diffTyped(ix, typed)
	if !ok {
		return false
	}
	addC, gpC, foundC := diffConverted(ix, converted)
	gone := len(ix.typed) + len(ix.conv) - foundT - foundC
	if n := gone + len(addT) + len(addC); n > maxChanges && n > (len(typed)+len(converted))/4 {
		return false
	}
	ix.gone = ix.gone[:0]
	if gone > 0 && ix.removeSkipped() < gone {
		ix.sweep()
	}
	for _, p := range addT {
		if ix.typed[p] == nil {
			gp := &genPod{}
			ix.addTyped(p, gp)
			ix.touch(&gp.e)
		}
	}
	for _, p := range addC {
		if ix.conv[p] == nil {
			gp := &genPod{}
			ix.addConverted(p, gp)
			ix.touch(&gp.e)
		}
	}
	ix.remember(typed, gpT, converted, gpC)
	if len(ix.gone) > 0 && len(addT) > 0 {
		forms := make(map[podName]*genPod, len(ix.gone))
		for _, gp := range ix.gone {
			forms[podName{gp.e.typed.Namespace, gp.e.typed.Name}] = gp
		}
		ix.reuse(forms, addT)
	}
	clear(ix.gone) // not to keep the old versions alive
	ix.gone = ix.gone[:0]
	return true
}

// align walks list against last, the last Build's list, as a source gives them (sorted, or in
// the same order): same(i, j) when list[i] is last[j] itself, found by position, a pod
// deleted or added in between skipped; other(i) for the others, and skip(j) for the last
// Build's that no position matched. It is a guess, never a judgement: what other and skip
// are given is looked up.
func align[T comparable](list, last []T, same func(i, j int), other func(i int), skip func(j int)) {
	j := 0
	for i, p := range list {
		switch {
		case j < len(last) && last[j] == p:
		case j+1 < len(last) && last[j+1] == p: // last[j] deleted
			skip(j)
			j++
		default:
			other(i)
			// Replaced in place, unless the next is last[j] (list[i] inserted before it).
			if j < len(last) && !(i+1 < len(list) && list[i+1] == last[j]) {
				skip(j)
				j++
			}
			continue
		}
		same(i, j)
		j++
	}
	for ; j < len(last); j++ {
		skip(j)
	}
}

// diffTyped stamps the typed pods of the last Build still given, and returns the others, each
// pod's entry at its place in typed (nil for those to add), and how many were found. Not ok
// when a pod is the same object at another (or no) resourceVersion: changed in place.
func diffTyped(ix *podIndex, typed []*corev1.Pod) (add []*corev1.Pod, gps []*genPod, found int, ok bool) {
	gps = make([]*genPod, len(typed))
	ok = true
	ix.skipped = ix.skipped[:0]
	check := func(i int, gp *genPod) {
		p := typed[i]
		switch {
		case gp == nil:
			add = append(add, p)
		case gp.round == ix.round: // the same pod twice: once is what counts
			gps[i] = gp
		case p.ResourceVersion != "" && gp.rv == p.ResourceVersion:
			gp.round, gps[i] = ix.round, gp
			found++
		default:
			ok = false
		}
	}
	align(typed, ix.lastTyped,
		func(i, j int) { check(i, ix.lastTypedGP[j]) },
		func(i int) {
			if typed[i] != nil {
				check(i, ix.typed[typed[i]])
			}
		},
		func(j int) { ix.skipped = append(ix.skipped, ix.lastTypedGP[j]) })
	return add, gps, found, ok
}

// diffConverted is diffTyped for converted pods, which never change.
func diffConverted(ix *podIndex, converted []*Pod) (add []*Pod, gps []*genPod, found int) {
	gps = make([]*genPod, len(converted))
	check := func(i int, gp *genPod) {
		switch {
		case gp == nil:
			add = append(add, converted[i])
		case gp.round != ix.round:
			gp.round = ix.round
			found++
			fallthrough
		default:
			gps[i] = gp
		}
	}
	align(converted, ix.lastConv,
		func(i, j int) { check(i, ix.lastConvGP[j]) },
		func(i int) {
			if converted[i] != nil {
				check(i, ix.conv[converted[i]])
			}
		},
		func(j int) { ix.skipped = append(ix.skipped, ix.lastConvGP[j]) })
	return add, gps, found
}

// remember keeps the lists of this Build, with each pod's entry, for the next one's align.
func (ix *podIndex) remember(typed []*corev1.Pod, gpT []*genPod, converted []*Pod, gpC []*genPod) {
	for i, p := range typed {
		if gpT[i] == nil && p != nil {
			gpT[i] = ix.typed[p]
		}
	}
	for i, p := range converted {
		if gpC[i] == nil && p != nil {
			gpC[i] = ix.conv[p]
		}
	}
	ix.lastTyped, ix.lastTypedGP = append(ix.lastTyped[:0], typed...), gpT
	ix.lastConv, ix.lastConvGP = append(ix.lastConv[:0], converted...), gpC
	clear(ix.skipped)
	ix.skipped = ix.skipped[:0]
}

// removeSkipped removes the last Build's pods align skipped that this round did not find, and
// returns how many.
func (ix *podIndex) removeSkipped() int {
	n := 0
	for _, gp := range ix.skipped {
		if gp == nil || gp.round == ix.round || gp.removed {
			continue
		}
		gp.removed = true
		ix.remove(gp)
		if p := gp.e.typed; p != nil {
			ix.gone = append(ix.gone, gp)
			delete(ix.typed, p)
		} else {
			delete(ix.conv, gp.e.conv)
		}
		n++
	}
	return n
}

// sweep removes the pods this round did not find.
func (ix *podIndex) sweep() {
	for p, gp := range ix.typed {
		if gp.round != ix.round {
			ix.remove(gp)
			ix.gone = append(ix.gone, gp)
			delete(ix.typed, p)
		}
	}
	for p, gp := range ix.conv {
		if gp.round != ix.round {
			ix.remove(gp)
			delete(ix.conv, p)
		}
	}
}

func (ix *podIndex) remove(gp *genPod) {
	if !gp.ready {
		return
	}
	ix.touch(&gp.e)
	ix.byNamespace[gp.e.namespace()].remove(&gp.e)
}

// touch marks the services of e's namespace that select e affected.
func (ix *podIndex) touch(e *podEntry) {
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

func (ns *namespacePods) add(e *podEntry) {
	e.pos = int32(len(ns.pods))
	ns.pods = append(ns.pods, e)
	for key, byValue := range ns.byLabel {
		if v, ok := e.Lookup(key); ok {
			byValue[v] = append(byValue[v], e)
		}
	}
}

func (ns *namespacePods) remove(e *podEntry) {
	last := len(ns.pods) - 1
	moved := ns.pods[last]
	ns.pods[e.pos], moved.pos = moved, e.pos
	ns.pods[last] = nil
	ns.pods = ns.pods[:last]
	for key, byValue := range ns.byLabel {
		v, ok := e.Lookup(key)
		if !ok {
			continue
		}
		list := byValue[v]
		if i := slices.Index(list, e); i >= 0 {
			list[i] = list[len(list)-1]
			list[len(list)-1] = nil
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

// selectPods returns the ready pods of namespace that sel matches.
func (ix *podIndex) selectPods(namespace string, sel labels.Selector) []*podEntry {
	ns := ix.byNamespace[namespace]
	if ns == nil {
		return nil
	}
	candidates, all := ns.candidates(sel)
	if all {
		candidates = ns.pods
	}
	var out []*podEntry
	for _, p := range candidates {
		if sel.Matches(p) {
			out = append(out, p)
		}
	}
	return out
}

// index is the pods by their value of label key, made on first use.
func (ns *namespacePods) index(key string) map[string][]*podEntry {
	if byValue, ok := ns.byLabel[key]; ok {
		return byValue
	}
	if ns.byLabel == nil {
		ns.byLabel = map[string]map[string][]*podEntry{}
	}
	byValue := map[string][]*podEntry{}
	for _, p := range ns.pods {
		if v, ok := p.Lookup(key); ok {
			byValue[v] = append(byValue[v], p)
		}
	}
	ns.byLabel[key] = byValue
	return byValue
}

// candidates narrows the pods to test with the most selective equality requirement of sel;
// all means test them all.
func (ns *namespacePods) candidates(sel labels.Selector) (best []*podEntry, all bool) {
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
		byValue := ns.index(r.Key())
		vals := r.ValuesUnsorted()
		var c []*podEntry
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

// reuse gives each typed pod of pods without a template form the form of the pod of its name
// in forms when that is the same version (UID and resourceVersion): a source that lists again
// gives the same pods as new objects.
func (ix *podIndex) reuse(forms map[podName]*genPod, pods []*corev1.Pod) {
	for _, p := range pods {
		if p == nil {
			continue
		}
		gp := ix.typed[p]
		if gp.e.obj != nil || gp.rv == "" {
			continue
		}
		if old := forms[podName{p.Namespace, p.Name}]; old != nil && old.e.obj != nil && old.rv == gp.rv && old.e.typed.UID == p.UID {
			gp.e.obj = old.e.obj
		}
	}
}
