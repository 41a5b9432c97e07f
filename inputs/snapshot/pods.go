package snapshot

import (
	"maps"
	"runtime"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// PodReady reports whether a pod may receive traffic: it has an IP, is not terminating, has not
// finished, every container status is ready, and no Ready condition says False.
func PodReady(p *corev1.Pod) bool {
	if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
		return false
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready {
			return false
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse {
			return false
		}
	}
	return true
}

// Pod is a pod converted for the templates ahead of Build, by a source that keeps no typed
// pods (see PodConverter and Objects.ConvertedPods). It is read-only and may be shared by
// any number of Objects and Snapshots.
//
// A hundred thousand of them are kept: the struct is 64 bytes (a size class), what few pods
// have (a cluster, waiting labels) behind one pointer. A ready pod's IP is its record's (see
// ip).
type Pod struct {
	namespace, name string // name: the bytes of its record's metadata.name when ready
	ready           bool
	obj             *record.Record // nil when not ready: Build never shows it
	labels          *record.Record // obj's metadata.labels
	rare            *podRare       // nil: no cluster, no waiting labels
}

// podRare is what a Pod has in some cases only.
type podRare struct {
	cluster string            // with several clusters (ConvertIn)
	waiting map[string]string // see Pod.ip
	ip      string            // the IP of a running pod that is not ready
}

// ip is the pod's IP when it runs, ready or not ("" otherwise): what BuildPeers needs, with
// the labels of a pod that is not ready (waiting; a ready pod's are in labels).
func (p *Pod) ip() string {
	if p.obj != nil {
		status, _ := p.obj.Field("status").(*record.Record)
		ip, _ := status.Field("podIP").(string)
		return ip
	}
	if p.rare == nil {
		return ""
	}
	return p.rare.ip
}

// cluster is the name of the pod's cluster ("" with one cluster).
func (p *Pod) cluster() string {
	if p.rare == nil {
		return ""
	}
	return p.rare.cluster
}

// setCluster sets the name of the pod's cluster; p.rare is replaced, not changed (a copy of
// a Pod shares it).
func (p *Pod) setCluster(cluster string) {
	rare := podRare{cluster: cluster}
	if p.rare != nil {
		rare.waiting, rare.ip = p.rare.waiting, p.rare.ip
	}
	p.rare = &rare
}

// waiting is the labels of a running pod that is not ready (nil otherwise).
func (p *Pod) waiting() map[string]string {
	if p.rare == nil {
		return nil
	}
	return p.rare.waiting
}

// Namespace and Name identify the pod.
func (p *Pod) Namespace() string { return p.namespace }
func (p *Pod) Name() string      { return p.name }

// Ready is PodReady of the pod it was converted from.
func (p *Pod) Ready() bool { return p.ready }

// Object is the pod as templates see it (see Snapshot.Services); nil when the pod is not
// ready. Read-only.
func (p *Pod) Object() *record.Record { return p.obj }

// PodConverter converts typed pods into Pods, sharing the parts that are equal between pods
// (labels, containers, conditions, ...) so that a hundred thousand pods fit in little memory.
// Use one per source; the zero value is ready; it is safe for concurrent use.
type PodConverter struct {
	in     interner
	shapes clusterShapes
}

// Convert converts p; a pod that is not ready is not converted (Object is nil). p is not
// changed and not kept.
func (c *PodConverter) Convert(p *corev1.Pod) *Pod {
	// The namespace as the records hold it (one string for all of its pods), not p's copy.
	ns := c.in.str(p.Namespace, hashString(p.Namespace)).(string)
	pod := &Pod{namespace: ns, name: p.Name, ready: PodReady(p)}
	if podRunning(p) && !pod.ready {
		// The labels of a pod that is not ready are kept only to select the peers.
		pod.rare = &podRare{waiting: maps.Clone(p.Labels), ip: p.Status.PodIP}
	}
	if pod.ready {
		// All of the pod's own strings copied into one (p's would be kept for them
		// otherwise); pod.name is the record's.
		pod.obj = podToMap(p, &c.in, &ownPlace{copy: true})
		meta, _ := pod.obj.Field("metadata").(*record.Record)
		if name, ok := meta.Field("name").(string); ok && name == pod.name {
			pod.name = name
		}
		pod.labels = labelsOf(pod.obj)
	}
	return pod
}

// NextRound tells the converter that a new batch starts (a new read of the source): the
// parts no pod of this batch or the last one used are no longer offered for sharing, so that
// the converter does not keep the parts of deleted pods alive.
func (c *PodConverter) NextRound() { c.in.rotate() }

// podEntry is a pod of the index: typed (from Objects.Pods, converted when a service
// selects it) or already converted (from Objects.ConvertedPods). A hundred thousand of them
// are kept between Builds: 24 bytes each, in one slice (see podIndex.entries).
type podEntry struct {
	conv    *Pod      // one a source converted, or
	typed   *typedPod // a typed pod
	pos     int32     // in its namespace's pods, when ready
	ready   bool
	removed bool // no longer given: free (or, a typed pod's, until update is done with it)
	queued  bool // of convert
}

// typedPod is a typed pod of the index, with the resourceVersion it had when given (a pod
// changed in place has another) and its template form once converted.
type typedPod struct {
	pod *corev1.Pod
	rv  string
	obj *record.Record
}

func (e *podEntry) namespace() string {
	if e.typed != nil {
		return e.typed.pod.Namespace
	}
	return e.conv.namespace
}

func (e *podEntry) name() string {
	if e.typed != nil {
		return e.typed.pod.Name
	}
	return e.conv.name
}

// object is the pod's template form: nil for a typed pod not converted yet.
func (e *podEntry) object() *record.Record {
	if e.typed != nil {
		return e.typed.obj
	}
	return e.conv.obj
}

// labelsOf returns the metadata.labels of a converted pod.
func labelsOf(pod *record.Record) *record.Record {
	meta, _ := pod.Get("metadata")
	m, _ := meta.(*record.Record)
	l, _ := m.Get("labels")
	r, _ := l.(*record.Record)
	return r
}

// podEntry is the labels.Labels of its pod.
var _ labels.Labels = (*podEntry)(nil)

func (e *podEntry) Lookup(k string) (string, bool) {
	if e.typed != nil {
		v, ok := e.typed.pod.Labels[k]
		return v, ok
	}
	v, _ := e.conv.labels.Get(k)
	s, ok := v.(string)
	return s, ok
}

func (e *podEntry) Has(k string) bool {
	_, ok := e.Lookup(k)
	return ok
}

func (e *podEntry) Get(k string) string {
	v, _ := e.Lookup(k)
	return v
}

// convert gives every typed entry of the lists (duplicates allowed) that has none its map,
// converted on all CPUs.
func (ix *podIndex) convert(lists [][]*podEntry) {
	var todo []*podEntry
	for _, pods := range lists {
		for _, e := range pods {
			if e.typed == nil || e.queued || e.typed.obj != nil {
				continue
			}
			e.queued = true
			todo = append(todo, e)
		}
	}
	if len(todo) == 0 {
		return
	}
	in := ix.cache.interner()
	in.rotate()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	workers := min(runtime.GOMAXPROCS(0), (len(todo)+63)/64)
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(todo); i = int(next.Add(1) - 1) {
				todo[i].typed.obj = podToMap(todo[i].typed.pod, in, nil)
			}
		})
	}
	wg.Wait()
	for _, e := range todo {
		e.queued = false
	}
}

// podToMap returns the pod as `kubectl get pod -o json` shows it, without managedFields:
// what runtime.DefaultUnstructuredConverter.ToUnstructured gives, as records, with equal
// parts shared through in (nil: none). place says where the pod's own strings go (see
// convState.placeOwn).
func podToMap(p *corev1.Pod, in *interner, place *ownPlace) *record.Record {
	shallow := *p
	shallow.ManagedFields = nil // often the largest part of a pod, and nobody templates it
	m, err := toUnstructured(&shallow, in, place, kv{k: "apiVersion", v: "v1"}, kv{k: "kind", v: "Pod"})
	if err == nil {
		return m
	}
	u, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(&shallow)
	if err != nil {
		// A typed Pod always converts; keep the essentials if it somehow does not.
		u = map[string]any{
			"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace},
			"status":   map[string]any{"podIP": p.Status.PodIP},
		}
	}
	u["apiVersion"] = "v1"
	u["kind"] = "Pod"
	return record.Of(nil, u).(*record.Record)
}
