// Package scalepods is the shape of the scale runs' services and pods (docs/performance.md's
// 10,000 services x 10 pods): hack/gen-scale writes them, and the tests that measure what a
// pod costs hold the same.
package scalepods

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Service is service s's name and namespace.
func Service(s int) (name, namespace string) {
	return fmt.Sprintf("svc-%05d", s), fmt.Sprintf("ns-%03d", s%100)
}

// Pod is ready pod p of service s, as `kubectl get -o json` prints it.
func Pod(s, p int) corev1.Pod {
	name, ns := Service(s)
	ip := fmt.Sprintf("10.%d.%d.%d", s/250, s%250, p+1)
	return corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", name, p), Namespace: ns,
			UID:    types.UID(fmt.Sprintf("uid-%d-%d", s, p)),
			Labels: map[string]string{"app": name, "pod-template-hash": "5c6b7d9f"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1.0",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example.com/app:1.0"}},
		},
	}
}
