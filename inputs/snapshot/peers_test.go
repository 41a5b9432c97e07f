package snapshot

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// replicas are three HAProxy pods of a Deployment's two revisions, one not ready yet, one
// terminating, one finished, and a pod of another app.
func replicas() []*corev1.Pod {
	lb := func(name, ip, hash string) *corev1.Pod {
		return readyPod(ns, name, ip, map[string]string{"app": "haproxy", "pod-template-hash": hash})
	}
	notReady := lb("haproxy-c", "10.0.0.3", "new")
	notReady.Status.ContainerStatuses[0].Ready = false
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	terminating := lb("haproxy-d", "10.0.0.4", "old")
	terminating.DeletionTimestamp = &metav1.Time{}
	done := lb("haproxy-e", "10.0.0.5", "old")
	done.Status.Phase = corev1.PodSucceeded
	noIP := lb("haproxy-f", "", "new")
	return []*corev1.Pod{
		lb("haproxy-b", "10.0.0.2", "new"), notReady, terminating, done, noIP,
		lb("haproxy-a", "10.0.0.1", "old"),
		readyPod(ns, "web-1", "10.0.1.1", map[string]string{"app": "web"}),
		readyPod("other", "haproxy-x", "10.0.2.1", map[string]string{"app": "haproxy"}),
	}
}

func TestBuildPeers(t *testing.T) {
	want := []Peer{
		{Name: "haproxy-a", IP: "10.0.0.1", Port: 10000, Ready: true},
		{Name: "haproxy-b", IP: "10.0.0.2", Port: 10000, Ready: true, Local: true},
		{Name: "haproxy-c", IP: "10.0.0.3", Port: 10000},
	}
	opts := PeersOptions{Enabled: true, Namespace: ns, Local: "haproxy-b"}
	typed := &Objects{Pods: replicas()}
	var conv PodConverter
	converted := &Objects{}
	for _, p := range replicas() {
		converted.ConvertedPods = append(converted.ConvertedPods, conv.Convert(p))
	}
	for name, objs := range map[string]*Objects{"typed": typed, "converted": converted} {
		t.Run(name, func(t *testing.T) {
			// Default selector: the local pod's labels but pod-template-hash, so both
			// revisions are peers.
			got := BuildPeers(objs, opts)
			if !got.Enabled || got.Local != "haproxy-b" || got.Port != 10000 || !reflect.DeepEqual(got.All, want) {
				t.Errorf("default selector: got %+v, want %+v", got, want)
			}
			withSel := opts
			withSel.Selector = labels.SelectorFromSet(labels.Set{"pod-template-hash": "old"})
			withSel.Port = 7000
			got = BuildPeers(objs, withSel)
			if len(got.All) != 1 || got.All[0].Name != "haproxy-a" || got.All[0].Port != 7000 || got.All[0].Local {
				t.Errorf("selector pod-template-hash=old: got %+v, want haproxy-a alone on port 7000", got.All)
			}
			absent := opts
			absent.Local = "haproxy-z"
			if got := BuildPeers(objs, absent); len(got.All) != 0 {
				t.Errorf("local pod absent, no selector: got %+v, want no peers", got.All)
			}
		})
	}
	off := BuildPeers(typed, PeersOptions{Namespace: ns, Local: "haproxy-b"})
	if off.Enabled || len(off.All) != 0 || off.All == nil {
		t.Errorf("off: got %+v, want enabled false and an empty list", off)
	}
	v := off.Value()
	if v["enabled"] != false || v["local"] != "" || len(v["all"].([]any)) != 0 {
		t.Errorf("off: value %v", v)
	}
}
