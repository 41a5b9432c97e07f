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
// services the last Build gave (see builtService).
type PodCache struct {
	mu       sync.Mutex
	pods     map[podKey]*record.Record
	in       interner // shares equal parts between the pods converted over time
	services map[serviceKey]decodedService
	built    map[string]*builtService // by entry name
}

// builtService is a service as the last Build gave it. The next Build gives the very same
// map when neither its entry nor what it routes to changed, so that a renderer knows it
// unchanged by one comparison of pointers instead of reading it whole (issue 25).
type builtService struct {
	text   string
	sel    labels.Selector // nil: the endpoints of a Kubernetes Service
	svc    map[string]any  // with "name" and "pods"; shared by the Snapshots: never changed
	slices []clusterSlice  // a Kubernetes Service's: the EndpointSlices its "pods" were made of
}

// lastBuilt is the services of the last Build, by entry name (nil without a cache). The map
// is never changed once stored: the caller may read it without the lock.
func (c *PodCache) lastBuilt() map[string]*builtService {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.built
}

// replaceBuilt makes next the services the next Build compares with.
func (c *PodCache) replaceBuilt(next map[string]*builtService) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.built = next
}

type serviceKey struct{ name, text string }

// decodedService is a service entry as decodeService gives it; svc is cloned before use.
type decodedService struct {
	svc map[string]any
	sel labels.Selector
}

// service returns the decoded entry name, from the cache when its text is the same; with next
// (a Decode) it remembers it there for the next Decode.
func (c *PodCache) service(ref Ref, name, text string, next map[serviceKey]decodedService) (map[string]any, labels.Selector, *InputError) {
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
			return nil, nil, err
		}
		d = decodedService{svc, sel}
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
	return maps.Clone(d.svc), d.sel, nil
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

type podKey struct {
	namespace, name string
	uid             types.UID
	resourceVersion string
}

func keyOf(p *corev1.Pod) (podKey, bool) {
	if p.ResourceVersion == "" {
		return podKey{}, false
	}
	return podKey{p.Namespace, p.Name, p.UID, p.ResourceVersion}, true
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

func (c *PodCache) get(p *corev1.Pod) (*record.Record, bool) {
	if c == nil {
		return nil, false
	}
	k, ok := keyOf(p)
	if !ok {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.pods[k]
	return m, ok
}

// interner is the cache's interner; without a cache, a new one for one Build.
func (c *PodCache) interner() *interner {
	if c == nil {
		return &interner{}
	}
	return &c.in
}

// replace makes the cache hold exactly the given pods (the typed pods of the latest Build).
func (c *PodCache) replace(converted []*podEntry) {
	if c == nil {
		return
	}
	pods := make(map[podKey]*record.Record, len(converted))
	for _, e := range converted {
		if k, ok := keyOf(e.typed); ok && e.obj != nil {
			pods[k] = e.obj
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = pods
}
