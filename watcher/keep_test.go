package watcher

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// TestFileSourceKeepsUnchangedServices: through the file source as the sidecar runs it (a
// PodConverter) and snapshot.Build with a PodCache, a change in one file makes new maps of
// exactly the services it changed; the others are the last snapshot's very maps.
func TestFileSourceKeepsUnchangedServices(t *testing.T) {
	dir := t.TempDir()
	services := func(bHosts string) string {
		return `apiVersion: v1
kind: ConfigMap
metadata: {name: services, namespace: lb}
data:
  a: '{"namespace":"shop","selector":{"app":"a"}}'
  b: '{"namespace":"shop","selector":{"app":"b"},"hostnames":[` + bHosts + `]}'
  k: '{"namespace":"shop","service":"k"}'
`
	}
	pod := func(name, app, ip string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: shop, labels: {app: %s}}
status: {phase: Running, podIP: %s}
`, name, app, ip)
	}
	slice := func(ip string) string {
		return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: k-1, namespace: shop, labels: {kubernetes.io/service-name: k}}
addressType: IPv4
endpoints: [{addresses: [` + ip + `]}]
`
	}
	pods := func(aIP string) string {
		return strings.Join([]string{pod("a-1", "a", aIP), pod("a-2", "a", "10.0.0.2"), pod("b-1", "b", "10.0.0.3")}, "---\n")
	}
	writeFiles(t, dir, map[string]string{"services.yaml": services(`"b.example.com"`), "pods.yaml": pods("10.0.0.1"), "slice.yaml": slice("10.1.0.1")})
	f := &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t), PodConverter: &snapshot.PodConverter{},
		now: func() time.Time { return time.Now().Add(time.Hour) }}
	opts := snapshot.Options{PodCache: &snapshot.PodCache{}}
	prev, err := snapshot.Build(read(t, f), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"nothing changed", nil, nil},
		{"a pod's address changed", map[string]string{"pods.yaml": pods("10.0.0.9")}, []string{"a"}},
		{"the EndpointSlice changed", map[string]string{"slice.yaml": slice("10.1.0.2")}, []string{"k"}},
		{"a service entry edited", map[string]string{"services.yaml": services(`"b.example.com","c.example.com"`)}, []string{"b"}},
	} {
		writeFiles(t, dir, step.files)
		snap, err := snapshot.Build(read(t, f), opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, svc := range snap.Services {
			if reflect.ValueOf(svc).UnsafePointer() != reflect.ValueOf(prev.Services[i]).UnsafePointer() {
				got = append(got, svc.Field("name").(string))
			}
		}
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: new maps for %v, want %v", step.name, got, step.want)
		}
		prev = snap
	}
}
