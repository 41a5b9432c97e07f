// Command gen-scale writes a directory of manifests for scale runs: N services, each selecting
// P ready pods (as `kubectl get -o json` prints them), for `haproxy-sidecar render` or `run`.
//
//	go run ./hack/gen-scale -services 10000 -pods 10 -out /tmp/scale
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func main() {
	services := flag.Int("services", 1000, "number of services")
	pods := flag.Int("pods", 10, "ready pods per service")
	out := flag.String("out", "", "directory to write (created)")
	flag.Parse()
	if *out == "" {
		log.Fatal("-out is required")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	svcData := map[string]string{}
	var items []any
	for s := 0; s < *services; s++ {
		name := fmt.Sprintf("svc-%05d", s)
		ns := fmt.Sprintf("ns-%03d", s%100)
		b, _ := json.Marshal(map[string]any{
			"namespace": ns, "selector": map[string]string{"app": name},
			"hostnames": []string{name + ".example.com"}, "ports": []int{8080},
		})
		svcData[name] = string(b)
		for p := 0; p < *pods; p++ {
			ip := fmt.Sprintf("10.%d.%d.%d", s/250, s%250, p+1)
			items = append(items, corev1.Pod{
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
			})
		}
	}
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*out, name), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	write("services.json", corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}, Data: svcData})
	write("pods.json", map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	fmt.Printf("wrote %d services and %d pods to %s\n", *services, len(items), *out)
}
