package snapshot

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// givenTwice is list with a pod given a second time, and now and then a nil, at random
// places: two informers' lists, or a source's gap.
func givenTwice[T any](r *rand.Rand, list []*T) []*T {
	if len(list) == 0 {
		return list
	}
	out := slices.Clone(list)
	for range 1 + r.IntN(3) {
		out = slices.Insert(out, r.IntN(len(out)+1), out[r.IntN(len(out))])
	}
	if r.IntN(4) == 0 {
		out = slices.Insert(out, r.IntN(len(out)+1), nil)
	}
	return out
}

// TestBuildThroughCachePodsGivenTwice: pods given twice, or with nils among them, are each
// one pod of the services that select them, through the cache as without one, as the pods
// change, move and go (the index has an entry for each place of its lists, and finds them by
// position).
func TestBuildThroughCachePodsGivenTwice(t *testing.T) {
	for _, convert := range []bool{false, true} {
		t.Run(fmt.Sprintf("converted=%v", convert), func(t *testing.T) {
			w := newRandWorld(3, 210)
			cache := &PodCache{}
			for step := range 200 {
				w.change()
				objs := w.objects(convert)
				if step%3 != 0 {
					objs.Pods, objs.ConvertedPods = givenTwice(w.r, objs.Pods), givenTwice(w.r, objs.ConvertedPods)
				}
				got, gotErr := Build(objs, Options{PodCache: cache})
				want, err := Build(objs, Options{})
				if fmt.Sprint(gotErr) != fmt.Sprint(err) {
					t.Fatalf("step %d: error %v, without a cache %v", step, gotErr, err)
				}
				if err == nil && plainServices(got) != plainServices(want) {
					t.Fatalf("step %d: the services differ from a Build's without a cache:\n got %s\nwant %s", step, servicePods(got), servicePods(want))
				}
			}
		})
	}
}

// TestSelectorOfNoPodRoutesToEndpoints: a service with a selector and a "service" whose
// selector selects no pod routes to the Service's endpoints, in a namespace of a few pods as
// in one of more than indexThreshold (selected through the label index).
func TestSelectorOfNoPodRoutesToEndpoints(t *testing.T) {
	for _, n := range []int{3, indexThreshold + 10} {
		var pods []*corev1.Pod
		for i := range n {
			pods = append(pods, readyPod("shop", fmt.Sprintf("p%d", i), fmt.Sprintf("10.0.0.%d", i+1), map[string]string{"app": "web"}))
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: "k-x", Labels: map[string]string{discoveryv1.LabelServiceName: "k"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.9.0.1"}}},
		}
		objs := &Objects{Pods: pods, EndpointSlices: []*discoveryv1.EndpointSlice{slice},
			ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", map[string]string{"k": `{"namespace":"shop","selector":{"app":"none"},"service":"k"}`})}}
		for _, cache := range []*PodCache{nil, {}} {
			snap, err := Build(objs, Options{PodCache: cache})
			if err != nil {
				t.Fatal(err)
			}
			if got := servicePods(snap); got != "k:shop,ep-10-9-0-1 " {
				t.Errorf("%d pods, cache %v: service k has pods %q, want its endpoints", n, cache != nil, got)
			}
		}
	}
}
