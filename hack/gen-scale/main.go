// Command gen-scale writes a directory of manifests for scale runs: N services, each selecting
// P ready pods (as `kubectl get -o json` prints them), for `haproxy-sidecar render` or `run`.
//
//	go run ./hack/gen-scale -services 10000 -pods 10 -out /tmp/scale
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/scalepods"
)

func main() {
	services := flag.Int("services", 1000, "number of services")
	pods := flag.Int("pods", 10, "ready pods per service")
	out := flag.String("out", "", "directory to write (created)")
	unrelatedMB := flag.Int("unrelated-mb", 0, "also write unrelated.json (or .yaml): about this many MB of Deployments, a kind the sidecar reads and ignores")
	unrelatedYAML := flag.Bool("unrelated-yaml", false, "write the unrelated manifest as multi-document YAML instead of a JSON List")
	unrelatedList := flag.Bool("unrelated-yaml-list", false, "write the unrelated manifest as one YAML document, a List (as kubectl get -o yaml prints it)")
	unrelatedKind := flag.String("unrelated-kind", "deployment", "what the unrelated manifest holds: deployment (a kind the sidecar ignores) or pod (pods no service selects, which the sidecar reads and keeps)")
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
		name, ns := scalepods.Service(s)
		b, _ := json.Marshal(map[string]any{
			"namespace": ns, "selector": map[string]string{"app": name},
			"hostnames": []string{name + ".example.com"}, "ports": []int{8080},
		})
		svcData[name] = string(b)
		for p := 0; p < *pods; p++ {
			items = append(items, scalepods.Pod(s, p))
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
	if *unrelatedMB > 0 {
		name, err := writeUnrelated(*out, int64(*unrelatedMB)<<20, *unrelatedYAML, *unrelatedList, *unrelatedKind == "pod")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("wrote %s (%d MB of %ss)\n", name, *unrelatedMB, *unrelatedKind)
	}
}

// writeUnrelated writes about size bytes of Deployments (or Pods no service selects) in dir: a
// JSON List as `kubectl get -o json` prints it, multi-document YAML, or a YAML List as
// `kubectl get -o yaml` prints it (list). It returns the file's name.
func writeUnrelated(dir string, size int64, yaml, list, pods bool) (string, error) {
	name := "unrelated.json"
	if yaml || list {
		name = "unrelated.yaml"
	}
	fh, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	defer fh.Close()
	w := bufio.NewWriterSize(fh, 1<<20)
	asJSON, asYAML := deploymentJSON, deploymentYAML
	if pods {
		asJSON, asYAML = podJSON, podYAML
	}
	switch {
	case list:
		// Each document an item: "- " before its first line, two spaces before the others.
		fmt.Fprint(w, "apiVersion: v1\nkind: List\nitems:\n")
		body := strings.TrimSuffix(strings.TrimPrefix(asYAML, "---\n"), "\n")
		asYAML = "- " + strings.ReplaceAll(body, "\n", "\n  ") + "\n"
		yaml = true
	case !yaml:
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"List","items":[`)
	}
	for i, n := 0, int64(0); n < size; i++ {
		var k int
		if yaml {
			k, _ = fmt.Fprintf(w, asYAML, i, i, i, i, i)
		} else {
			if i > 0 {
				w.WriteByte(',')
			}
			k, _ = fmt.Fprintf(w, asJSON, i, i, i, i, i)
		}
		n += int64(k)
	}
	if !yaml {
		fmt.Fprint(w, "]}\n")
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return name, fh.Close()
}

// One Deployment, or one ready Pod (name, labels and image numbered), as JSON and as a YAML
// document.
const (
	podJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"app-%06d","namespace":"other","uid":"uid-other-%06d","labels":{"app":"app-%06d","team":"platform","tier":"backend"}},` +
		`"spec":{"nodeName":"node-%d","containers":[{"name":"app","image":"registry.example.com/app:%d","ports":[{"containerPort":8080,"name":"http"}],"env":[{"name":"MODE","value":"production"},{"name":"LOG_LEVEL","value":"info"}],` +
		`"resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"cpu":"1","memory":"512Mi"}}}]},` +
		`"status":{"phase":"Running","podIP":"10.200.0.1","podIPs":[{"ip":"10.200.0.1"}],"conditions":[{"type":"Ready","status":"True"}],"containerStatuses":[{"name":"app","ready":true,"image":"registry.example.com/app:1.0"}]}}`
	podYAML = `---
apiVersion: v1
kind: Pod
metadata:
  name: app-%06d
  namespace: other
  uid: uid-other-%06d
  labels: {app: app-%06d, team: platform, tier: backend}
spec:
  nodeName: node-%d
  containers:
  - name: app
    image: registry.example.com/app:%d
    ports: [{containerPort: 8080, name: http}]
    env:
    - {name: MODE, value: production}
    - {name: LOG_LEVEL, value: info}
    resources:
      requests: {cpu: 100m, memory: 128Mi}
      limits: {cpu: "1", memory: 512Mi}
status:
  phase: Running
  podIP: 10.200.0.1
  conditions: [{type: Ready, status: "True"}]
  containerStatuses: [{name: app, ready: true, image: "registry.example.com/app:1.0"}]
`
	deploymentJSON = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"app-%06d","namespace":"other","labels":{"app":"app-%06d","team":"platform","tier":"backend"}},` +
		`"spec":{"replicas":3,"selector":{"matchLabels":{"app":"app-%06d"}},"template":{"metadata":{"labels":{"app":"app-%06d"}},"spec":{"containers":[{"name":"app",` +
		`"image":"registry.example.com/app:%d","ports":[{"containerPort":8080,"name":"http"}],"env":[{"name":"MODE","value":"production"},{"name":"LOG_LEVEL","value":"info"}],` +
		`"resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"cpu":"1","memory":"512Mi"}},"readinessProbe":{"httpGet":{"path":"/healthz","port":"http"}}}]}}}}`
	deploymentYAML = `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%06d
  namespace: other
  labels: {app: app-%06d, team: platform, tier: backend}
spec:
  replicas: 3
  selector:
    matchLabels: {app: app-%06d}
  template:
    metadata:
      labels: {app: app-%06d}
    spec:
      containers:
      - name: app
        image: registry.example.com/app:%d
        ports: [{containerPort: 8080, name: http}]
        env:
        - {name: MODE, value: production}
        - {name: LOG_LEVEL, value: info}
        resources:
          requests: {cpu: 100m, memory: 128Mi}
          limits: {cpu: "1", memory: 512Mi}
        readinessProbe:
          httpGet: {path: /healthz, port: http}
`
)
