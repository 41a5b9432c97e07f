package snapshot

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, ResourceVersion: rv}}
}

func slice(name, rv string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, ResourceVersion: rv}}
}

func ids(cs []ClusterObject) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID())
	}
	return out
}

// TestChangedSince: new objects and new versions are changed; objects the source handed over
// again unchanged are not; everything is, with nothing to compare with.
func TestChangedSince(t *testing.T) {
	same := pod("same-norv", "")
	good := &Objects{Pods: []*corev1.Pod{pod("a", "1"), pod("b", "1"), same}, EndpointSlices: []*discoveryv1.EndpointSlice{slice("s", "1")}}
	now := &Objects{Pods: []*corev1.Pod{pod("a", "1"), pod("b", "2"), pod("c", "1"), same, pod("other-norv", "")},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("s", "1")}}
	if got, want := ids(now.ChangedSince(good)), []string{"pod/shop/b", "pod/shop/c", "pod/shop/other-norv"}; !slices.Equal(got, want) {
		t.Errorf("changed %q, want %q", got, want)
	}
	if got := ids(now.ChangedSince(nil)); len(got) != 6 {
		t.Errorf("with nothing to compare with: %q", got)
	}
}

// TestRevert: pods are left out; other objects go back to their good version, or out when
// there is none; the Objects given is not changed.
func TestRevert(t *testing.T) {
	good := &Objects{EndpointSlices: []*discoveryv1.EndpointSlice{slice("s", "1")}}
	now := &Objects{Pods: []*corev1.Pod{pod("a", "1"), pod("b", "1")},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("s", "2"), slice("new", "1")}}
	got, kept := now.Revert(map[string]bool{"pod/shop/a": true, "endpointslice/shop/s": true, "endpointslice/shop/new": true}, good)
	if len(got.Pods) != 1 || got.Pods[0].Name != "b" {
		t.Errorf("pods %v", got.Pods)
	}
	if len(got.EndpointSlices) != 1 || got.EndpointSlices[0].ResourceVersion != "1" || got.EndpointSlices[0].Name != "s" {
		t.Errorf("slices %v", got.EndpointSlices)
	}
	if !kept["endpointslice/shop/s"] || kept["endpointslice/shop/new"] || kept["pod/shop/a"] {
		t.Errorf("kept %v", kept)
	}
	if len(now.Pods) != 2 || len(now.EndpointSlices) != 2 || now.EndpointSlices[0].ResourceVersion != "2" {
		t.Error("Revert changed the Objects it was given")
	}
}
