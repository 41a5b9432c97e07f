package snapshot

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodCache keeps the template form of the pods of the last Build, so that the next Build
// converts only the pods that changed. A pod is the same when its namespace, name, UID and
// resourceVersion are; pods without a resourceVersion (hand-written manifests) are never
// cached. The zero value is ready; it is safe for concurrent use.
//
// The cached maps are shared between Snapshots: they must be treated as read-only.
type PodCache struct {
	mu   sync.Mutex
	pods map[podKey]map[string]any
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

func (c *PodCache) get(p *corev1.Pod) (map[string]any, bool) {
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

// replace makes the cache hold exactly the given pods (those of the latest Build).
func (c *PodCache) replace(converted map[*corev1.Pod]map[string]any) {
	if c == nil {
		return
	}
	pods := make(map[podKey]map[string]any, len(converted))
	for p, m := range converted {
		if k, ok := keyOf(p); ok && m != nil {
			pods[k] = m
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = pods
}
