package snapshot

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// PodCache keeps, between Builds, the pod index of the last Build (see podIndex): the pods it
// was given with their template form, by namespace and label, and the services it gave with
// the pods each selects. The next Build updates it from the pods that changed (by identity
// and resourceVersion; a changed object is a new one), so that only those are converted and
// only the services they concern are made again. Pods without a resourceVersion (hand-written
// manifests) are converted again at each Build. Builds through one cache take turns at the
// index; each compares it with the objects it is given, so that a Build of other objects (a
// candidate's tests, a trial) gives what a Build without a cache gives, and only makes the
// next one update from those. The zero value is ready; it is safe for concurrent use.
//
// The cached records are shared between Snapshots: they must be treated as read-only.
//
// It also keeps the service entries of the last Decode decoded, by name and text.
type PodCache struct {
	turn sync.Mutex // held by the Build that has the index
	mu   sync.Mutex
	in   interner                      // shares equal parts between the pods converted over time
	conv ObjectConverter               // converts the service entries (key lists, equal parts shared)
	held map[serviceKey]decodedService // other versions asked for since the last Decode
	// The entries of the services ConfigMap at lastRef as the last Decode had them, sorted
	// by name, each decoded: what the next Decode reuses of those whose text is the same, and
	// the inputs it gives again when every entry is (sameEntries). Two slices, not a map by
	// name and a copy of the inputs: 64 bytes a service instead of 310 (issue 25).
	names   []string
	entries []decodedEntry // names[i]'s
	lastRef Ref
	index   *podIndex // of the last Build
	// The watched resources the last Assemble gave, by their --watch value: the next reuses
	// those whose objects did not change, and patches the lookups of those of which a few did
	// (resourceFrom). Read-only, shared by the Snapshots.
	resources map[string]Resource
}

// lastResources are the watched resources of the last Assemble through c (none without c).
func (c *PodCache) lastResources() map[string]Resource {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resources
}

// keepResources makes res the resources the next Assemble through c may reuse. An Assemble of
// other objects (a candidate's tests, a trial) replaces them too: the next one then makes again
// what differs from those, and reuses nothing that is not the same.
func (c *PodCache) keepResources(res map[string]Resource) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resources = res
}

// builtService is a service as a Build gave it. The next Build gives the very same record
// when neither its entry nor what it routes to changed, so that a renderer knows it unchanged
// by one comparison of pointers instead of reading it whole (issue 25).
type builtService struct {
	text   string
	sel    labels.Selector // nil: the endpoints of a Kubernetes Service
	entry  *record.Record  // the entry decoded (its "pods" null), shared with the cache
	svc    *record.Record  // entry with its "pods"; shared by the Snapshots (nil until finish)
	slices []clusterSlice  // a Kubernetes Service's: the EndpointSlices its "pods" were made of
}

// take gives the Build the pod index of the last Build through the cache, updated to the
// given pods, or one made anew (the first Build, or when updating it would cost more). The
// Build gives it back with put; until then other Builds through the cache wait.
func (c *PodCache) take(typed []*corev1.Pod, converted []*Pod) *podIndex {
	if c == nil {
		return newPodIndex(typed, converted, nil, nil)
	}
	c.turn.Lock()
	c.mu.Lock()
	ix := c.index
	c.mu.Unlock()
	if ix != nil && ix.update(typed, converted) {
		return ix
	}
	return newPodIndex(typed, converted, c, ix)
}

// put makes ix the index the next Build updates, and lets it take it.
func (c *PodCache) put(ix *podIndex) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.index = ix
	c.mu.Unlock()
	c.turn.Unlock()
}

type serviceKey struct{ name, text string }

// decodedService is a service entry as decodeService gives it, as a record (serviceRecord),
// and the entry's Input Hash. Read-only.
type decodedService struct {
	svc  *record.Record
	sel  labels.Selector
	hash string
}

// decodedEntry is an entry of the services ConfigMap, decoded: d (its hash alone when it
// does not decode), or why not.
type decodedEntry struct {
	text string
	d    decodedService
	err  *InputError
}

// input is the entry as an Input, name at keyRef.
func (e *decodedEntry) input(keyRef Ref, name string) Input {
	return Input{Kind: KindService, Name: name, Ref: keyRef, Hash: e.d.hash, Err: e.err, Text: e.text}
}

// decodeEntry decodes entry name of the services ConfigMap, at keyRef, through c's converter;
// last is the last Decode's entry of that name when there is one (nil: none), whose decoding
// serves again when its text is the same.
func (c *PodCache) decodeEntry(keyRef Ref, name, text string, last *decodedEntry) decodedEntry {
	if last != nil && last.err == nil && last.text == text {
		return decodedEntry{text: text, d: last.d} // text: this Decode's, not to keep the last's
	}
	d, err := c.decode(keyRef, name, text)
	if err != nil {
		return decodedEntry{text: text, d: decodedService{hash: contentHash(text)}, err: err}
	}
	return decodedEntry{text: text, d: d}
}

// lastEntries are the entries of the last Decode and their names (read-only).
func (c *PodCache) lastEntries() ([]string, []decodedEntry) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.names, c.entries
}

// decoded returns the entry name at the version text decoded (read-only): the last Decode's
// when it has that text, else another version asked for since (a held service at its last
// good version), kept until the next Decode.
func (c *PodCache) decoded(ref Ref, name, text string) (decodedService, *InputError) {
	k := serviceKey{name, text}
	if c != nil {
		c.mu.Lock()
		names, entries := c.names, c.entries
		d, ok := c.held[k]
		c.mu.Unlock()
		if i, found := slices.BinarySearch(names, name); found && entries[i].err == nil && entries[i].text == text {
			return entries[i].d, nil
		}
		if ok {
			return d, nil
		}
	}
	d, err := c.decode(ref, name, text)
	if err != nil {
		return decodedService{}, err
	}
	if c != nil {
		c.mu.Lock()
		if c.held == nil {
			c.held = map[serviceKey]decodedService{}
		}
		c.held[k] = d
		c.mu.Unlock()
	}
	return d, nil
}

// entryNames is the keys of data sorted: the last Decode's when they are the same keys (the
// slice is shared: read-only).
func (c *PodCache) entryNames(data map[string]string) []string {
	if c != nil {
		c.mu.Lock()
		names := c.names
		c.mu.Unlock()
		same := len(names) == len(data)
		for _, n := range names {
			if !same {
				break
			}
			_, same = data[n]
		}
		if same {
			return names
		}
	}
	return slices.Sorted(maps.Keys(data))
}

// sameEntries appends to out the inputs the last Decode made of the services ConfigMap when
// data has the same entries, each of the same text, at the same ref; else it returns false.
func (c *PodCache) sameEntries(ref Ref, data map[string]string, out []Input) ([]Input, bool) {
	if c == nil {
		return out, false
	}
	c.mu.Lock()
	names, entries, lastRef := c.names, c.entries, c.lastRef
	if entries != nil {
		c.held = nil // as at every Decode
	}
	c.mu.Unlock()
	if entries == nil || lastRef != ref || len(entries) != len(data) {
		return out, false
	}
	for i := range entries {
		if text, ok := data[names[i]]; !ok || text != entries[i].text {
			return out, false
		}
	}
	for i, name := range names {
		keyRef := ref
		keyRef.Key = name
		out = append(out, entries[i].input(keyRef, name))
	}
	return out, true
}

// decodedAll ends a Decode of the services ConfigMap at ref: entries are its entries, by
// names; the other versions are dropped.
func (c *PodCache) decodedAll(ref Ref, names []string, entries []decodedEntry) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names, c.entries, c.lastRef, c.held = names, entries, ref, nil
}

// podName is a pod's namespace and name.
type podName struct{ namespace, name string }

// Len is the number of typed pods with a resourceVersion whose template form the cache
// holds.
func (c *PodCache) Len() int {
	if c == nil {
		return 0
	}
	c.turn.Lock()
	defer c.turn.Unlock()
	c.mu.Lock()
	ix := c.index
	c.mu.Unlock()
	if ix == nil {
		return 0
	}
	n := 0
	for i := range ix.entries {
		if tp := ix.entries[i].typed; tp != nil && !ix.entries[i].removed && tp.pod.ResourceVersion != "" && tp.obj != nil {
			n++
		}
	}
	return n
}

// decode decodes entry name and converts it (serviceRecord) through c's converter.
func (c *PodCache) decode(ref Ref, name, text string) (decodedService, *InputError) {
	m, sel, err := decodeService(ref, []byte(text))
	if err != nil {
		return decodedService{}, err
	}
	svc, cerr := serviceRecord(c.serviceConverter(), m, name)
	if cerr != nil { // not expected: decodeService gives JSON values only
		return decodedService{}, &InputError{Stage: StageDecode, Ref: ref, Err: cerr}
	}
	return decodedService{svc, sel, contentHash(text)}, nil
}

// serviceConverter is the cache's converter of the service entries; without a cache, none
// (nothing shared: each record has its own key list).
func (c *PodCache) serviceConverter() *ObjectConverter {
	if c == nil {
		return nil
	}
	return &c.conv
}

// interner is the cache's interner; without a cache, a new one for one Build.
func (c *PodCache) interner() *interner {
	if c == nil {
		return &interner{}
	}
	return &c.in
}
