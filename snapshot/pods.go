package snapshot

import (
	"runtime"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
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

// indexThreshold is the number of ready pods in a namespace above which selection goes through
// a label index instead of testing every pod.
const indexThreshold = 64

// podIndex holds the ready pods by namespace, and converts each selected pod to its JSON form
// once however many services select it.
type podIndex struct {
	byNamespace map[string]*namespacePods
	converted   map[*corev1.Pod]map[string]any
	cache       *PodCache // may be nil
}

type namespacePods struct {
	pods    []*corev1.Pod
	byLabel map[string][]int32 // "key\x00value" -> indexes into pods; built on first use
}

func newPodIndex(pods []*corev1.Pod, cache *PodCache) *podIndex {
	ix := &podIndex{
		cache:       cache,
		byNamespace: map[string]*namespacePods{},
		converted:   map[*corev1.Pod]map[string]any{},
	}
	for _, p := range pods {
		if p == nil || !PodReady(p) {
			continue
		}
		ns := ix.byNamespace[p.Namespace]
		if ns == nil {
			ns = &namespacePods{}
			ix.byNamespace[p.Namespace] = ns
		}
		ns.pods = append(ns.pods, p)
	}
	return ix
}

// selectPods returns the ready pods of namespace that sel matches.
func (ix *podIndex) selectPods(namespace string, sel labels.Selector) []*corev1.Pod {
	ns := ix.byNamespace[namespace]
	if ns == nil {
		return nil
	}
	candidates := ns.candidates(sel)
	var out []*corev1.Pod
	if candidates == nil {
		for _, p := range ns.pods {
			if sel.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		}
		return out
	}
	for _, i := range candidates {
		if p := ns.pods[i]; sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// candidates narrows the pods to test with the most selective equality requirement of sel;
// nil means test them all.
func (ns *namespacePods) candidates(sel labels.Selector) []int32 {
	if len(ns.pods) <= indexThreshold {
		return nil
	}
	reqs, ok := sel.Requirements()
	if !ok || len(reqs) == 0 {
		return nil
	}
	if ns.byLabel == nil {
		ns.byLabel = map[string][]int32{}
		for i, p := range ns.pods {
			for k, v := range p.Labels {
				key := k + "\x00" + v
				ns.byLabel[key] = append(ns.byLabel[key], int32(i))
			}
		}
	}
	var (
		best  []int32
		found bool
	)
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		// A pod has one value per key, so the lists for different values are disjoint.
		var c []int32
		for _, v := range r.ValuesUnsorted() {
			c = append(c, ns.byLabel[r.Key()+"\x00"+v]...)
		}
		if !found || len(c) < len(best) {
			best, found = c, true
		}
	}
	if !found {
		return nil
	}
	if best == nil {
		best = []int32{} // nothing can match; not "test them all"
	}
	return best
}

// convert fills ix.converted for pods (duplicates allowed): from the cache when a pod is
// unchanged since the last Build, else converted on all CPUs. It then leaves in the cache
// exactly the pods of this Build.
func (ix *podIndex) convert(pods []*corev1.Pod) {
	var todo []*corev1.Pod
	for _, p := range pods {
		if _, ok := ix.converted[p]; ok {
			continue
		}
		if m, ok := ix.cache.get(p); ok {
			ix.converted[p] = m
			continue
		}
		ix.converted[p] = nil // placeholder: dedupes todo
		todo = append(todo, p)
	}
	out := make([]map[string]any, len(todo))
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	workers := min(runtime.GOMAXPROCS(0), (len(todo)+63)/64)
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(todo); i = int(next.Add(1) - 1) {
				out[i] = podToMap(todo[i])
			}
		})
	}
	wg.Wait()
	for i, p := range todo {
		ix.converted[p] = out[i]
	}
	ix.cache.replace(ix.converted)
}

// podToMap returns the pod as `kubectl get pod -o json` shows it, without managedFields.
func podToMap(p *corev1.Pod) map[string]any {
	shallow := *p
	shallow.ManagedFields = nil // often the largest part of a pod, and nobody templates it
	m, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(&shallow)
	if err != nil {
		// A typed Pod always converts; keep the essentials if it somehow does not.
		m = map[string]any{
			"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace},
			"status":   map[string]any{"podIP": p.Status.PodIP},
		}
	}
	m["apiVersion"] = "v1"
	m["kind"] = "Pod"
	return m
}
