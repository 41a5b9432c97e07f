package watcher

import (
	"slices"
	"sync"

	"k8s.io/client-go/tools/cache"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// objectList keeps a watched resource's objects of the last read in name order (namespace,
// then name: the order snapshot.Assemble wants, which then checks it instead of sorting) and
// updates them from the objects that changed, which the informer's handler records, as
// podList does for the pods (issue 25): a read after one change costs that change and a copy
// of the list, not a sort of every object. It lists and sorts the store anew on its first
// read and past maxChanged changes (a relist).
type objectList struct {
	mu      sync.Mutex // held by read
	objects []*snapshot.Object
	listed  bool // objects are the last read's; else the next read lists the store

	changedMu sync.Mutex
	changed   changedNames // since the last read
}

// record notes that obj changed (added, updated or deleted) in the informer. Called by its
// handler, after its store holds the change.
func (l *objectList) record(obj any) {
	l.changedMu.Lock()
	defer l.changedMu.Unlock()
	l.changed.note(obj)
}

// read returns the objects store holds, in name order. A list returned is never changed
// afterwards (Assemble keeps it as the resource's objects).
func (l *objectList) read(store cache.Store) []*snapshot.Object {
	l.mu.Lock()
	defer l.mu.Unlock()
	// What changed is taken before the store is read: a change after this is in the store or
	// recorded for the next read, or both (updating twice is harmless).
	l.changedMu.Lock()
	changed := l.changed
	l.changed = changedNames{}
	l.changedMu.Unlock()
	if !l.listed || changed.all {
		l.objects, l.listed = objectsOf(store), true
		return l.objects
	}
	names := make([]changedName, 0, len(changed.names))
	for n := range changed.names {
		names = append(names, changedName{n, store})
	}
	l.objects = mergeBy(l.objects, names, objectNameOf, objectFrom)
	return l.objects
}

// objectsOf lists store's watched objects in name order.
func objectsOf(store cache.Store) []*snapshot.Object {
	items := store.List()
	list := make([]*snapshot.Object, 0, len(items))
	for _, it := range items {
		if o, ok := objectFrom(it); ok {
			list = append(list, o)
		}
	}
	slices.SortFunc(list, func(a, b *snapshot.Object) int { return objectNameOf(a).compare(objectNameOf(b)) })
	return slices.Clip(list)
}

func objectNameOf(o *snapshot.Object) objName { return objName{o.Namespace(), o.Name()} }

// objectFrom is the watched object an informer's store holds.
func objectFrom(it any) (*snapshot.Object, bool) {
	o, ok := it.(*kubeObject)
	if !ok || o.Object == nil {
		return nil, false
	}
	return o.Object, true
}
