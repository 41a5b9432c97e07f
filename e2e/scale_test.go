package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// dumpTemplate prints every pod of every service as JSON: the whole template context of a pod.
const dumpTemplate = `{% for svc in services %}{% for name, pod in svc.pods.items() %}{{ svc.name }} {{ name }} {{ pod|tojson }}
{% endfor %}{% endfor %}`

// goldenPod is pod n of a service: most ready, some not (a container not ready, terminating,
// failed); every third one with most fields a real pod has (owner references, annotations,
// resources, probes, volumes, tolerations, times).
func goldenPod(ns, app string, n, i int) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", app, i)
	ip := fmt.Sprintf("10.%d.%d.%d", n/200, n%200, i+1)
	started := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(n) * time.Minute))
	yes := true
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID(fmt.Sprintf("uid-%d-%d", n, i)),
			Labels: map[string]string{"app": app, "tier": []string{"front", "back"}[n%2], "pod-template-hash": "5c6b7d9f"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1.0",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example.com/app:1.0"}},
		},
	}
	switch {
	case (n+i)%7 == 0:
		p.Status.ContainerStatuses[0].Ready = false
	case (n+i)%11 == 0:
		p.DeletionTimestamp = &started
	case (n+i)%13 == 0:
		p.Status.Phase = corev1.PodFailed
	}
	if (n+i)%3 == 0 {
		grace := int64(30)
		p.ResourceVersion = fmt.Sprint(1000 + n*10 + i)
		p.CreationTimestamp = started
		p.Annotations = map[string]string{"prometheus.io/port": "9090", "note": fmt.Sprintf("pod %d \"quoted\" <b>", i)}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-5c6b7d9f",
			UID: types.UID("rs-" + app), Controller: &yes, BlockOwnerDeletion: &yes}}
		p.Spec.NodeName = fmt.Sprintf("node-%d", i%3)
		p.Spec.TerminationGracePeriodSeconds = &grace
		p.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app}}}}}
		p.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &grace}}
		c := &p.Spec.Containers[0]
		c.Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
		c.Resources = corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1")},
		}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/ready", Port: intstr.FromString("http")}}, PeriodSeconds: 5}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "envoy:1.30",
			Ports: []corev1.ContainerPort{{ContainerPort: 9901, Name: "admin"}}})
		p.Status.HostIP = "192.168.0.1"
		p.Status.HostIPs = []corev1.HostIP{{IP: "192.168.0.1"}}
		p.Status.StartTime = &started
		p.Status.QOSClass = corev1.PodQOSBurstable
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady,
			Status: corev1.ConditionTrue, LastTransitionTime: started})
		p.Status.ContainerStatuses[0].RestartCount = int32(i)
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "sidecar", Ready: true,
			Started: &yes, ContainerID: fmt.Sprintf("containerd://%d%d", n, i)})
	}
	return p
}

// writeGoldenInput writes the manifests of the golden render: 60 services in 4 namespaces,
// 4 pods each (a JSON List, a typed PodList and a multi-document YAML file), services with
// selector objects and strings, a service that selects the pods of others, one without pods.
func writeGoldenInput(t *testing.T, dir string, withDump bool) {
	t.Helper()
	services := map[string]string{}
	var list, typed []*corev1.Pod
	var yamlDocs []string
	for n := range 60 {
		ns := fmt.Sprintf("ns-%d", n%4)
		app := fmt.Sprintf("svc-%02d", n)
		sel := fmt.Sprintf(`{"app":%q}`, app)
		if n%5 == 0 {
			sel = fmt.Sprintf(`"app=%s,tier in (front,back)"`, app)
		}
		services[app] = fmt.Sprintf(`{"namespace":%q,"selector":%s,"hostnames":["%s.example.com"],"ports":[8080],"ssl":%v}`, ns, sel, app, n%2 == 0)
		for i := range 4 {
			p := goldenPod(ns, app, n, i)
			switch {
			case n%10 == 3:
				b, err := yaml.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				yamlDocs = append(yamlDocs, string(b))
			case n%10 == 7:
				p.TypeMeta = metav1.TypeMeta{}
				typed = append(typed, p)
			default:
				list = append(list, p)
			}
		}
	}
	services["all-front"] = `{"namespace":"ns-1","selector":"tier=front","hostnames":["front.example.com"],"ports":[80]}`
	services["nothing"] = `{"namespace":"ns-9","selector":{"app":"none"},"hostnames":["none.example.com"],"ports":[80]}`
	write := func(name string, v any) {
		t.Helper()
		var b []byte
		var err error
		if s, ok := v.(string); ok {
			b = []byte(s)
		} else if b, err = json.MarshalIndent(v, "", "  "); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	svcYAML, err := yaml.Marshal(corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}, Data: services})
	if err != nil {
		t.Fatal(err)
	}
	write("services.yaml", string(svcYAML))
	write("pods.json", map[string]any{"apiVersion": "v1", "kind": "List", "items": list})
	write("typed.json", map[string]any{"apiVersion": "v1", "kind": "PodList", "items": typed})
	write("more-pods.yaml", strings.Join(yamlDocs, "---\n"))
	if withDump {
		cm, err := yaml.Marshal(corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "config", Namespace: "lb"}, Data: map[string]string{"template": dumpTemplate}})
		if err != nil {
			t.Fatal(err)
		}
		write("config.yaml", string(cm))
	}
}

// renderDir renders dir through the file source: with typed pods (the way the kube and etcd
// sources hand pods to Build), or with pods the source converts (the sidecar's file mode).
func renderDir(t *testing.T, src *watcher.File, opts snapshot.Options) []byte {
	t.Helper()
	objs, err := src.Objects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Build(objs, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := render.New(render.Options{SSLDir: "/etc/haproxy/certs"}).Render(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	return b.Config
}

// same checks output against a golden file, leaving what differs where the message says.
func same(want []byte, golden string) func(t *testing.T, got []byte) {
	return func(t *testing.T, got []byte) {
		t.Helper()
		if !bytes.Equal(got, want) {
			p := filepath.Join(t.TempDir(), golden)
			_ = os.WriteFile(p, got, 0o644)
			t.Errorf("the output differs from testdata/golden/%s: see %s", golden, p)
		}
	}
}

// TestRenderSameBytes: the pod conversion, the sharing of equal parts, the file source's
// fast JSON path and its caches change no byte of the output. The golden files were rendered
// from the same input by the code before them (commit d0b0181, `haproxy-sidecar render
// --validate=false --ssl-dir /etc/haproxy/certs`): testdata/golden/default.cfg with the
// built-in template, and testdata/golden/dump.txt with dumpTemplate (re-rendered when tojson
// became Jinja2's, with ", " and ": " separators: the same JSON values).
// To look at the input: HAPROXY_SIDECAR_GOLDEN_INPUT=DIR go test -run TestRenderSameBytes .
func TestRenderSameBytes(t *testing.T) {
	if dir := os.Getenv("HAPROXY_SIDECAR_GOLDEN_INPUT"); dir != "" {
		writeGoldenInput(t, filepath.Join(dir, "default"), false)
		writeGoldenInput(t, filepath.Join(dir, "dump"), true)
		t.Skip("wrote the input to " + dir)
	}
	wantDefault, err := os.ReadFile(filepath.Join("testdata", "golden", "default.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	wantDump, err := os.ReadFile(filepath.Join("testdata", "golden", "dump.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		dump  bool
		check func(t *testing.T, got []byte)
	}{
		{"default template", false, same(wantDefault, "default.cfg")},
		{"every pod as JSON", true, same(wantDump, "dump.txt")},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeGoldenInput(t, dir, c.dump)
			t.Run("typed pods", func(t *testing.T) {
				c.check(t, renderDir(t, &watcher.File{Dir: dir, DefaultNamespace: "lb"}, snapshot.Options{}))
			})
			t.Run("typed pods, pod cache", func(t *testing.T) {
				opts := snapshot.Options{PodCache: &snapshot.PodCache{}}
				src := &watcher.File{Dir: dir, DefaultNamespace: "lb"}
				renderDir(t, src, opts)
				c.check(t, renderDir(t, src, opts))
			})
			conv := &watcher.File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}}
			opts := snapshot.Options{PodCache: &snapshot.PodCache{}}
			t.Run("converted pods", func(t *testing.T) { c.check(t, renderDir(t, conv, opts)) })
			t.Run("converted pods, from the caches", func(t *testing.T) { c.check(t, renderDir(t, conv, opts)) })
			t.Run("after an edit, as a fresh read", func(t *testing.T) {
				p := filepath.Join(dir, "pods.json")
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				edited := bytes.Replace(data, []byte(`"ready": true`), []byte(`"ready": false`), 1)
				edited = bytes.Replace(edited, []byte(`"podIP": "10.0.1.1"`), []byte(`"podIP": "10.0.1.99"`), 1)
				if bytes.Equal(edited, data) {
					t.Fatal("the edit changed nothing")
				}
				if err := os.WriteFile(p, edited, 0o644); err != nil {
					t.Fatal(err)
				}
				got := renderDir(t, conv, opts)
				want := renderDir(t, &watcher.File{Dir: dir, DefaultNamespace: "lb"}, snapshot.Options{})
				if !bytes.Equal(got, want) {
					t.Error("after an edit, the cached read renders other bytes than a fresh one")
				}
			})
		})
	}
}

// writeScale writes what hack/gen-scale writes: services svc-NNNNN in 100 namespaces, each
// selecting podsPer ready pods, in services.json and pods.json (a List, as `kubectl get -o
// json` prints it).
func writeScale(tb testing.TB, dir string, services, podsPer int) {
	tb.Helper()
	svcData := map[string]string{}
	items := make([]any, 0, services*podsPer)
	for s := range services {
		name := fmt.Sprintf("svc-%05d", s)
		ns := fmt.Sprintf("ns-%03d", s%100)
		svcData[name] = fmt.Sprintf(`{"hostnames":["%s.example.com"],"namespace":%q,"ports":[8080],"selector":{"app":%q}}`, name, ns, name)
		for p := range podsPer {
			ip := fmt.Sprintf("10.%d.%d.%d", s/250, s%250, p+1)
			items = append(items, corev1.Pod{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, p), Namespace: ns,
					UID: types.UID(fmt.Sprintf("uid-%d-%d", s, p)), Labels: map[string]string{"app": name, "pod-template-hash": "5c6b7d9f"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1.0",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
					Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
					ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example.com/app:1.0"}}},
			})
		}
	}
	for name, v := range map[string]any{
		"services.json": corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}, Data: svcData},
		"pods.json": map[string]any{"apiVersion": "v1", "kind": "List", "items": items},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkScale is what the sidecar does in file mode for 1,000 and 10,000 services x 10
// ready pods with the default template: the first read (decode, convert, build, render), and
// a read after one pod changed (the file rewritten, one pod's readiness flipped). live-MB is
// the heap the sidecar keeps between reads.
func BenchmarkScale(b *testing.B) {
	for _, services := range []int{1000, 10000} {
		dir := b.TempDir()
		writeScale(b, dir, services, 10)
		pods := filepath.Join(dir, "pods.json")
		data, err := os.ReadFile(pods)
		if err != nil {
			b.Fatal(err)
		}
		flipped := bytes.Replace(data, []byte(`"ready":true`), []byte(`"ready":false`), 1)
		sync := func(b *testing.B, src *watcher.File, opts snapshot.Options, r *render.Renderer) {
			objs, err := src.Objects(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			snap, err := snapshot.Build(objs, opts)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.Render(context.Background(), snap); err != nil {
				b.Fatal(err)
			}
		}
		newSidecar := func() (*watcher.File, snapshot.Options, *render.Renderer) {
			return &watcher.File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}},
				snapshot.Options{PodCache: &snapshot.PodCache{}}, render.New(render.Options{SSLDir: "/etc/haproxy/certs"})
		}
		b.Run(fmt.Sprintf("services=%d/first", services), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				src, opts, r := newSidecar()
				sync(b, src, opts, r)
			}
		})
		b.Run(fmt.Sprintf("services=%d/one-pod-changed", services), func(b *testing.B) {
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.HeapAlloc
			src, opts, r := newSidecar()
			sync(b, src, opts, r)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				content := data
				if i%2 == 0 {
					content = flipped
				}
				if err := os.WriteFile(pods, content, 0o644); err != nil {
					b.Fatal(err)
				}
				i++
				b.StartTimer()
				sync(b, src, opts, r)
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapAlloc-before)/(1<<20), "live-MB")
			runtime.KeepAlive(src)
			runtime.KeepAlive(opts)
		})
		if err := os.WriteFile(pods, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
