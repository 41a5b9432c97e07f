package snapshot

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

func TestServiceBackedByEndpointSlices(t *testing.T) {
	yes, no := true, false
	node, zone, portName := "node-1", "zone-a", "http"
	port := int32(8080)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "web", Name: "shop-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "shop"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "shop-1"}, NodeName: &node, Zone: &zone},
			{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &no},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "shop-2"}},
			{Addresses: []string{"10.0.0.3"}}, // ready unset counts as ready; no pod behind it
		},
	}
	other := slice.DeepCopy()
	other.Labels[discoveryv1.LabelServiceName] = "other"
	other.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.9.9.9"}}}
	objs := &Objects{
		ConfigMaps:     []*corev1.ConfigMap{configMap("lb", "services", map[string]string{"shop": `{"namespace": "web", "service": "shop", "ports": [8080]}`})},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice, other},
	}
	snap, err := Build(objs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pods := record.Plain(snap.Services[0].Field("pods")).(map[string]any)
	if len(pods) != 2 {
		t.Fatalf("pods = %v, want shop-1 and the pod-less endpoint", pods)
	}
	p := pods["shop-1"].(map[string]any)
	if ip := p["status"].(map[string]any)["podIP"]; ip != "10.0.0.1" {
		t.Errorf("shop-1 podIP = %v", ip)
	}
	ep := p["endpoint"].(map[string]any)
	if ep["zone"] != "zone-a" || ep["nodeName"] != "node-1" || p["spec"].(map[string]any)["nodeName"] != "node-1" {
		t.Errorf("shop-1 endpoint = %v", ep)
	}
	if _, ok := pods["ep-10-0-0-3"]; !ok {
		t.Errorf("endpoint without a pod missing: %v", pods)
	}

	t.Run("a service name that is not a Service name is rejected", func(t *testing.T) {
		objs := &Objects{ConfigMaps: []*corev1.ConfigMap{configMap("lb", "services", map[string]string{"shop": `{"namespace": "web", "service": "Not_Valid"}`})}}
		_, err := Build(objs, Options{})
		inputError(t, err, Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services", Key: "shop"}, "service", "Not_Valid")
	})
}
