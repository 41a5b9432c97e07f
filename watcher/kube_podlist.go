package watcher

import (
	"cmp"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// objName is a pod's or EndpointSlice's place in the lists: namespace, then name (not the
// "ns/name" key, whose order is not that one: "a-b/x" < "a/x").
type objName struct{ ns, name string }

func (a objName) compare(b objName) int {
	return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.name, b.name))
}

func nameOf(o metav1.Object) objName { return objName{o.GetNamespace(), o.GetName()} }

// byName orders objects as the lists hold them.
func byName[T metav1.Object](a, b T) int { return nameOf(a).compare(nameOf(b)) }

// maxChanged: above this many changed objects a watch records none (changed.all) and the next
// read sorts everything, which then costs less than finding each change (the first list).
const maxChanged = 4096

// changedNames are the objects of one informer that changed since the last read took them.
type changedNames struct {
	names map[objName]struct{}
	all   bool // more than maxChanged: the next read lists the store again
}

// record notes that obj changed (added, updated or deleted) in w's informer; pods says which.
// Called by the informers' handlers, after their store holds the change.
func (w *podWatch) record(obj any, pods bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pods {
		w.changedPods.note(obj)
	} else {
		w.changedSlices.note(obj)
	}
}

// note adds obj (an informer's object, or its tombstone) to c, or gives up on the names (all)
// past maxChanged or for an object without a key.
func (c *changedNames) note(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	switch {
	case c.all:
	case err != nil || len(c.names) >= maxChanged:
		c.all, c.names = true, nil
	default:
		if c.names == nil {
			c.names = map[objName]struct{}{}
		}
		c.names[objName{ns, name}] = struct{}{}
	}
}

// takeChanged returns what changed in w's informers since the last call, and forgets it.
func (w *podWatch) takeChanged() (pods, slices changedNames) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pods, slices = w.changedPods, w.changedSlices
	w.changedPods, w.changedSlices = changedNames{}, changedNames{}
	return pods, slices
}

// podList keeps the pods and EndpointSlices of the last read, in name order, and the watches
// they came from, so that the next read updates them from the objects that changed (which the
// informers' handlers recorded) instead of listing and sorting every pod (issue 25): a read
// after one pod's change costs that change and a copy of the list. It sorts everything anew
// when it cannot know what changed: other watches (a namespace added or dropped, informers
// started afresh after an outage) or more changes than maxChanged.
type podList struct {
	mu      sync.Mutex
	watches map[*podWatch]bool
	pods    []*corev1.Pod
	slices  []*discoveryv1.EndpointSlice
}

// read returns the pods and EndpointSlices the informers of infs hold, in name order: what
// podsOf gives. A list returned is never changed afterwards (snapshot.PodCache compares the
// next list with it by position).
func (l *podList) read(infs []*podWatch) ([]*corev1.Pod, []*discoveryv1.EndpointSlice) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// What changed is taken before the stores are read: a change after this is in the stores
	// or recorded for the next read, or both (updating twice is harmless).
	type taken struct {
		w            *podWatch
		pods, slices changedNames
	}
	changes := make([]taken, len(infs))
	full := len(infs) != len(l.watches)
	for i, w := range infs {
		changes[i].w = w
		changes[i].pods, changes[i].slices = w.takeChanged()
		full = full || !l.watches[w] || changes[i].pods.all || changes[i].slices.all
	}
	if full {
		l.watches = make(map[*podWatch]bool, len(infs))
		for _, w := range infs {
			l.watches[w] = true
		}
		l.pods, l.slices = podsOf(infs)
		return l.pods, l.slices
	}
	var podNames, sliceNames []changedName
	for _, c := range changes {
		for n := range c.pods.names {
			podNames = append(podNames, changedName{n, c.w.informer.GetStore()})
		}
		for n := range c.slices.names {
			sliceNames = append(sliceNames, changedName{n, c.w.slices.GetStore()})
		}
	}
	l.pods = merge(l.pods, podNames)
	l.slices = merge(l.slices, sliceNames)
	return l.pods, l.slices
}

// changedName is an object that changed and the store that holds it now, or no longer.
type changedName struct {
	objName
	store cache.Store
}

// merge is last, sorted by name, with each changed object as its store now holds it: replaced,
// removed or inserted in its place. last is not modified; with nothing changed it is returned.
func merge[T metav1.Object](last []T, changed []changedName) []T {
	return mergeBy(last, changed, func(o T) objName { return nameOf(o) }, func(o any) (T, bool) { t, ok := o.(T); return t, ok })
}

// mergeBy is merge for objects of any type: name is an object's place in last, from the
// object a store holds (false: none to put there).
func mergeBy[T any](last []T, changed []changedName, name func(T) objName, from func(any) (T, bool)) []T {
	if len(changed) == 0 {
		return last
	}
	slices.SortFunc(changed, func(a, b changedName) int { return a.compare(b.objName) })
	out := make([]T, 0, len(last)+len(changed))
	i := 0
	for _, c := range changed {
		j := i + sort.Search(len(last)-i, func(k int) bool { return name(last[i+k]).compare(c.objName) >= 0 })
		out = append(out, last[i:j]...)
		i = j
		if i < len(last) && name(last[i]) == c.objName {
			i++ // its last version
		}
		if o, ok, _ := c.store.GetByKey(c.key()); ok {
			if t, ok := from(o); ok {
				out = append(out, t)
			}
		}
	}
	out = append(out, last[i:]...)
	return slices.Clip(out)
}

// key is the name's key in a store: "namespace/name", or "name" for a cluster-scoped object.
func (n objName) key() string {
	if n.ns == "" {
		return n.name
	}
	return n.ns + "/" + n.name
}
