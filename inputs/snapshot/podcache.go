package snapshot

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// PodCache keeps the template form of the pods of the last Build, so that the next Build
// converts only the pods that changed. A pod is the same when its namespace, name, UID and
// resourceVersion are; pods without a resourceVersion (hand-written manifests) are never
// cached. The zero value is ready; it is safe for concurrent use.
//
// The cached maps are shared between Snapshots: they must be treated as read-only.
//
// It also keeps the service entries of the last Build decoded, by name and text, and the
// pod index of the last Build, with the services it gave (see podIndex and builtService).
type PodCache struct {
	mu       sync.Mutex
	pods     map[podName]*cachedPod
	round    uint64   // of lookup, to find the pods a Build no longer has
	in       interner // shares equal parts between the pods converted over time
	services map[serviceKey]decodedService
	index    *podIndex // of the last Build, while no Build holds it
}

// builtService is a service as a Build gave it. The next Build gives the very same map when
// neither its entry nor what it routes to changed, so that a renderer knows it unchanged by
// one comparison of pointers instead of reading it whole (issue 25).
type builtService struct {
	text   string
	sel    labels.Selector // nil: the endpoints of a Kubernetes Service
	svc    map[string]any  // with "name" and "pods"; shared by the Snapshots: never changed
	slices []clusterSlice  // a Kubernetes Service's: the EndpointSlices its "pods" were made of
}

// take gives the Build the pod index of the last Build through the cache, updated to the
// given pods, or one made anew when there is none (another Build holds it) or updating it
// would cost more. The Build gives it back with put: one Build at a time holds an index.
func (c *PodCache) take(typed []*corev1.Pod, converted []*Pod) *podIndex {
	var ix *podIndex
	if c != nil {
		c.mu.Lock()
		ix, c.index = c.index, nil
		c.mu.Unlock()
	}
	if ix != nil && ix.update(typed, converted) {
		return ix
	}
	return newPodIndex(typed, converted, c)
}

// put makes ix the index the next Build updates.
func (c *PodCache) put(ix *podIndex) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index = ix
}

type serviceKey struct{ name, text string }

// decodedService is a service entry as decodeService gives it, and the entry's Input Hash;
// svc is cloned before use.
type decodedService struct {
	svc  map[string]any
	sel  labels.Selector
	hash string
}

// service returns the decoded entry name (a map of its own), from the cache when its text is
// the same; with next (a Decode) it remembers it there for the next Decode.
func (c *PodCache) service(ref Ref, name, text string, next map[serviceKey]decodedService) (map[string]any, labels.Selector, *InputError) {
	d, err := c.decoded(ref, name, text, next)
	if err != nil {
		return nil, nil, err
	}
	return maps.Clone(d.svc), d.sel, nil
}

// decoded is service without the clone: d.svc is read-only.
func (c *PodCache) decoded(ref Ref, name, text string, next map[serviceKey]decodedService) (decodedService, *InputError) {
	k := serviceKey{name, text}
	var (
		d  decodedService
		ok bool
	)
	if c != nil {
		c.mu.Lock()
		d, ok = c.services[k]
		c.mu.Unlock()
	}
	if !ok {
		svc, sel, err := decodeService(ref, []byte(text))
		if err != nil {
			return d, err
		}
		d = decodedService{svc, sel, contentHash(text)}
		if next == nil && c != nil {
			// A version other than the current one (a held service at its last good
			// version): kept until the next Decode replaces the entries.
			c.mu.Lock()
			if c.services == nil {
				c.services = map[serviceKey]decodedService{}
			}
			c.services[k] = d
			c.mu.Unlock()
		}
	}
	if next != nil {
		next[k] = d
	}
	return d, nil
}

// replaceServices makes the cache hold exactly the given entries.
func (c *PodCache) replaceServices(next map[serviceKey]decodedService) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.services = next
}

// podName is a pod's place in the cache: one version of each pod is kept.
type podName struct{ namespace, name string }

// cachedPod is the version of a pod the cache holds, with its template form.
type cachedPod struct {
	uid             types.UID
	resourceVersion string
	obj             *record.Record
	round           uint64 // the last lookup that found it
}

// Len is the number of pods cached.
func (c *PodCache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pods)
}

// lookup gives every typed entry whose pod is the cached version (same UID and
// resourceVersion) its template form, under one lock; it returns the others, and the round
// to give keep.
func (c *PodCache) lookup(typed []*podEntry) (todo []*podEntry, round uint64) {
	if c == nil {
		return typed, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.round++
	for _, e := range typed {
		p := e.typed
		if cp := c.pods[podName{p.Namespace, p.Name}]; cp != nil && p.ResourceVersion != "" &&
			cp.resourceVersion == p.ResourceVersion && cp.uid == p.UID {
			e.obj, cp.round = cp.obj, c.round
			continue
		}
		todo = append(todo, e)
	}
	return todo, c.round
}

// keep makes the cache hold exactly the typed pods of the latest Build (typed, of which todo
// were converted anew in round): the new versions take their pods' places, and the pods no
// longer there (gone, or not ready) are deleted, so that a Build where a few pods changed
// writes a few entries instead of a new map of a hundred thousand.
func (c *PodCache) keep(typed, todo []*podEntry, round uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pods == nil {
		c.pods = make(map[podName]*cachedPod, len(typed))
	}
	for _, e := range todo {
		if p := e.typed; p.ResourceVersion != "" && e.obj != nil {
			c.pods[podName{p.Namespace, p.Name}] = &cachedPod{p.UID, p.ResourceVersion, e.obj, round}
		}
	}
	n := 0
	for _, e := range typed {
		if e.typed.ResourceVersion != "" && e.obj != nil {
			n++
		}
	}
	if len(c.pods) == n {
		return
	}
	// Some pods cached are not among typed: those this round did not find or put. (Another
	// Build through the cache meanwhile may lose entries here: only a conversion more.)
	for k, cp := range c.pods {
		if cp.round != round {
			delete(c.pods, k)
		}
	}
}

// add puts the typed entries converted in round in the cache, beside the pods it has.
func (c *PodCache) add(todo []*podEntry, round uint64) {
	if c == nil || len(todo) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pods == nil {
		c.pods = map[podName]*cachedPod{}
	}
	for _, e := range todo {
		if p := e.typed; p.ResourceVersion != "" && e.obj != nil {
			c.pods[podName{p.Namespace, p.Name}] = &cachedPod{p.UID, p.ResourceVersion, e.obj, round}
		}
	}
}

// forget drops the typed pods gone from the Build's pods, each at the version it had, unless
// the lookup of round found that version (the same pod as a new object).
func (c *PodCache) forget(gone []*genPod, round uint64) {
	if c == nil || len(gone) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, gp := range gone {
		p := gp.e.typed
		k := podName{p.Namespace, p.Name}
		if cp := c.pods[k]; cp != nil && cp.uid == p.UID && cp.resourceVersion == gp.rv && cp.round != round {
			delete(c.pods, k)
		}
	}
}

// interner is the cache's interner; without a cache, a new one for one Build.
func (c *PodCache) interner() *interner {
	if c == nil {
		return &interner{}
	}
	return &c.in
}
