package watcher

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// writeFiles creates files (path relative to dir -> content), with parent directories.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// names lists "Kind namespace/name" of every object, sorted.
func names(o *snapshot.Objects) []string {
	var out []string
	for _, c := range o.ConfigMaps {
		out = append(out, "ConfigMap "+c.Namespace+"/"+c.Name)
	}
	for _, s := range o.Secrets {
		out = append(out, "Secret "+s.Namespace+"/"+s.Name)
	}
	for _, p := range o.Pods {
		out = append(out, "Pod "+p.Namespace+"/"+p.Name)
	}
	for _, e := range o.EndpointSlices {
		out = append(out, "EndpointSlice "+e.Namespace+"/"+e.Name)
	}
	slices.Sort(out)
	return out
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

const multiDoc = `# the load balancer's inputs
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: services
  namespace: lb
data:
  web: '{"namespace":"shop","selector":{"app":"web"}}'
---
# only a comment
---
apiVersion: v1
kind: Namespace
metadata:
  name: lb
---
apiVersion: v1
kind: Secret
metadata:
  name: keys
  namespace: lb
data:
  a.key: aGVsbG8=
stringData:
  b.key: world
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers: [{name: web, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: shop
  labels: {app: web}
spec:
  containers: [{name: web, image: nginx}]
status:
  podIP: 10.1.0.1
`

// kubectlPod is `kubectl get pod -o yaml` output, as an operator would save it.
const kubectlPod = `apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: "2024-05-01T10:00:00Z"
  generateName: web-7d9f8-
  labels:
    app: web
    pod-template-hash: 7d9f8
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:labels:
          .: {}
          f:app: {}
    manager: kube-controller-manager
    operation: Update
    time: "2024-05-01T10:00:00Z"
  name: web-7d9f8-abcde
  namespace: shop
  ownerReferences:
  - apiVersion: apps/v1
    blockOwnerDeletion: true
    controller: true
    kind: ReplicaSet
    name: web-7d9f8
    uid: 0b7d6c1e-1111-2222-3333-444455556666
  resourceVersion: "12345"
  uid: 9a8b7c6d-1111-2222-3333-444455556666
spec:
  containers:
  - image: nginx:1.27
    imagePullPolicy: IfNotPresent
    name: web
    ports:
    - containerPort: 8080
      protocol: TCP
    resources: {}
  dnsPolicy: ClusterFirst
  nodeName: node-1
  restartPolicy: Always
  terminationGracePeriodSeconds: 30
status:
  conditions:
  - lastProbeTime: null
    lastTransitionTime: "2024-05-01T10:00:05Z"
    status: "True"
    type: Ready
  containerStatuses:
  - containerID: containerd://abc
    image: docker.io/library/nginx:1.27
    imageID: docker.io/library/nginx@sha256:abc
    lastState: {}
    name: web
    ready: true
    restartCount: 0
    started: true
    state:
      running:
        startedAt: "2024-05-01T10:00:04Z"
  hostIP: 10.0.0.1
  phase: Running
  podIP: 10.1.0.7
  podIPs:
  - ip: 10.1.0.7
  qosClass: BestEffort
  startTime: "2024-05-01T10:00:00Z"
`

func TestObjectsDecode(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		defaultNS string
		want      []string
		check     func(t *testing.T, o *snapshot.Objects)
	}{
		{
			name:  "multi-document YAML keeps ConfigMaps, Secrets and Pods",
			files: map[string]string{"lb.yaml": multiDoc},
			want:  []string{"ConfigMap lb/services", "Pod shop/web-1", "Secret lb/keys"},
			check: func(t *testing.T, o *snapshot.Objects) {
				s := o.Secrets[0]
				if string(s.Data["a.key"]) != "hello" || string(s.Data["b.key"]) != "world" {
					t.Errorf("secret data = %q, want a.key=hello and b.key=world from stringData", s.Data)
				}
				if s.StringData != nil || s.Type != corev1.SecretTypeOpaque {
					t.Errorf("stringData %v not folded or type %q not defaulted", s.StringData, s.Type)
				}
				if o.Pods[0].Status.PodIP != "10.1.0.1" {
					t.Errorf("pod IP = %q", o.Pods[0].Status.PodIP)
				}
				if got := o.ConfigMaps[0].Data["web"]; !strings.Contains(got, `"selector"`) {
					t.Errorf("services data = %q", got)
				}
			},
		},
		{
			name: "stringData wins over data",
			files: map[string]string{"s.yml": `apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: lb}
type: Opaque
data: {k: b2xk}
stringData: {k: new}
`},
			want: []string{"Secret lb/keys"},
			check: func(t *testing.T, o *snapshot.Objects) {
				if got := string(o.Secrets[0].Data["k"]); got != "new" {
					t.Errorf("k = %q, want new", got)
				}
			},
		},
		{
			name: "JSON, one object and a stream of two",
			files: map[string]string{
				"one.json": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"config","namespace":"lb"},"data":{"template":"global"}}`,
				"two.json": "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n" +
					"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"shop\"}}\n",
			},
			want: []string{"ConfigMap default/a", "ConfigMap lb/config", "Pod shop/p"},
		},
		{
			name: "kind List with items of any kind",
			files: map[string]string{"list.yaml": `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: services, namespace: lb}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: shop}
- apiVersion: v1
  kind: List
  items:
  - apiVersion: v1
    kind: Secret
    metadata: {name: keys, namespace: lb}
`},
			want: []string{"ConfigMap lb/services", "Secret lb/keys"},
		},
		{
			name: "typed list whose items carry no kind (API list output)",
			files: map[string]string{"pods.json": `{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"9"},
"items":[{"metadata":{"name":"a","namespace":"shop"},"status":{"podIP":"10.0.0.1"}},
         {"metadata":{"name":"b","namespace":"shop"}}]}`},
			want: []string{"Pod shop/a", "Pod shop/b"},
		},
		{
			name:  "kubectl get -o yaml output",
			files: map[string]string{"pod.yaml": kubectlPod},
			want:  []string{"Pod shop/web-7d9f8-abcde"},
			check: func(t *testing.T, o *snapshot.Objects) {
				p := o.Pods[0]
				if !snapshot.PodReady(p) || p.Status.PodIP != "10.1.0.7" || len(p.ManagedFields) != 1 {
					t.Errorf("pod not decoded in full: ready %v, IP %q", snapshot.PodReady(p), p.Status.PodIP)
				}
			},
		},
		{
			name:      "objects without namespace land in DefaultNamespace",
			files:     map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: other}\n"},
			defaultNS: "lb",
			want:      []string{"ConfigMap lb/services", "ConfigMap other/x"},
		},
		{
			name: "subdirectories; hidden and non-manifest files skipped",
			files: map[string]string{
				"a/b/deep.yml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep, namespace: lb}\n",
				".hidden.yaml":        "not: [valid",
				".git/config.yaml":    "not: [valid",
				"a/.swp/x.yaml":       "not: [valid",
				"README.md":           "# hi",
				"notes.txt":           "not: [valid",
				"a/services.yaml.bak": "not: [valid",
			},
			want: []string{"ConfigMap lb/deep"},
		},
		{
			name: "CRLF line endings and an unknown kind",
			files: map[string]string{"w.yaml": "apiVersion: example.com/v1\r\nkind: Widget\r\nmetadata: {name: w}\r\n---\r\n" +
				"apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: services\r\n  namespace: lb\r\n"},
			want: []string{"ConfigMap lb/services"},
		},
		{
			name:  "empty directory",
			files: map[string]string{},
			want:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			f := &File{Dir: dir, DefaultNamespace: tt.defaultNS, Logger: testLogger(t)}
			o, err := f.Objects(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := names(o); !slices.Equal(got, tt.want) {
				t.Errorf("objects = %v, want %v", got, tt.want)
			}
			if len(o.Revision) != 16 {
				t.Errorf("revision = %q", o.Revision)
			}
			if tt.check != nil {
				tt.check(t, o)
			}
		})
	}
}

func TestObjectsErrors(t *testing.T) {
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services, namespace: lb}\n"
	tests := []struct {
		name    string
		files   map[string]string
		file    string
		line    int
		col     int
		reasons []string
		secrets []string // must not appear in the message
	}{
		{
			name:    "invalid YAML in the second document",
			files:   map[string]string{"lb.yaml": cm + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n"},
			file:    "lb.yaml",
			line:    8,
			reasons: []string{"invalid YAML"},
		},
		{
			name:    "bad indentation",
			files:   map[string]string{"sub/x.yml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n namespace: lb\n"},
			file:    "sub/x.yml",
			line:    4, // where the YAML parser sees the mapping break
			reasons: []string{"invalid YAML"},
		},
		{
			name:    "duplicate key",
			files:   map[string]string{"d.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: a, k: b}\n"},
			file:    "d.yaml",
			line:    4,
			reasons: []string{"invalid YAML", `"k"`},
		},
		{
			name:    "invalid document separator",
			files:   map[string]string{"s.yaml": cm + "--- nonsense\n" + cm},
			file:    "s.yaml",
			line:    4,
			reasons: []string{"invalid YAML", "separator"},
		},
		{
			name:    "invalid JSON",
			files:   map[string]string{"x.json": "{\"apiVersion\": \"v1\",\n \"kind\": \"ConfigMap\",,\n}"},
			file:    "x.json",
			line:    2,
			col:     22,
			reasons: []string{"invalid JSON", "invalid character ','"},
		},
		{
			name:    "truncated JSON",
			files:   map[string]string{"x.json": "{\"apiVersion\": \"v1\",\n"},
			file:    "x.json",
			line:    1,
			reasons: []string{"invalid JSON", "unexpected end"},
		},
		{
			name:    "unknown field",
			files:   map[string]string{"lb.yaml": cm + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: config}\ndat: {}\n"},
			file:    "lb.yaml",
			line:    5,
			reasons: []string{"decoding the ConfigMap", `unknown field "dat"`},
		},
		{
			name:    "wrong type",
			files:   map[string]string{"lb.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config}\ndata: [a, b]\n"},
			file:    "lb.yaml",
			line:    1,
			reasons: []string{"decoding the ConfigMap"},
		},
		{
			name:    "no kind",
			files:   map[string]string{"k.yaml": "apiVersion: v1\nmetadata: {name: x}\ndata: {password: hunter2}\n"},
			file:    "k.yaml",
			line:    1,
			reasons: []string{"no kind"},
			secrets: []string{"hunter2"},
		},
		{
			name:    "no apiVersion",
			files:   map[string]string{"k.yaml": "kind: Secret\nmetadata: {name: x}\nstringData: {password: hunter2}\n"},
			file:    "k.yaml",
			line:    1,
			reasons: []string{"the Secret has no apiVersion"},
			secrets: []string{"hunter2"},
		},
		{
			name:    "not an object",
			files:   map[string]string{"l.yaml": "- a\n- b\n"},
			file:    "l.yaml",
			line:    1,
			reasons: []string{"not an object"},
		},
		{
			name:    "Secret data not base64",
			files:   map[string]string{"s.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: keys}\ndata: {k: 'hunter2!!'}\n"},
			file:    "s.yaml",
			line:    1,
			reasons: []string{"decoding the Secret", "base64"},
			secrets: []string{"hunter2"},
		},
		{
			name:    "no name",
			files:   map[string]string{"n.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: lb}\n"},
			file:    "n.yaml",
			line:    1,
			reasons: []string{"no metadata.name"},
		},
		{
			name: "defined twice",
			files: map[string]string{
				"a.yaml": cm,
				"b.yaml": "# copy\n" + cm,
			},
			file:    "b.yaml",
			line:    1,
			reasons: []string{"ConfigMap lb/services is defined twice: first in a.yaml line 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			_, err := (&File{Dir: dir, Logger: testLogger(t)}).Objects(context.Background())
			var ie *snapshot.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v is not an InputError", err)
			}
			if want := (snapshot.Ref{Kind: "File", Name: tt.file}); ie.Ref != want || ie.Stage != snapshot.StageDecode {
				t.Errorf("stage %q ref %#v, want decode %#v", ie.Stage, ie.Ref, want)
			}
			if ie.Line != tt.line || (tt.col != 0 && ie.Col != tt.col) {
				t.Errorf("position line %d column %d, want line %d column %d (%v)", ie.Line, ie.Col, tt.line, tt.col, err)
			}
			for _, r := range tt.reasons {
				if !strings.Contains(err.Error(), r) {
					t.Errorf("message %q does not contain %q", err, r)
				}
			}
			for _, s := range tt.secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("message %q reveals %q", err, s)
				}
			}
		})
	}
}

func TestObjectsAllErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": "a: [", "b/c.json": "{", "ok.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
	_, err := (&File{Dir: dir}).Objects(context.Background())
	var files []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		files = append(files, e.(*snapshot.InputError).Ref.Name)
	}
	if want := []string{"a.yaml", "b/c.json"}; !slices.Equal(files, want) {
		t.Errorf("errors for %v, want %v", files, want)
	}
}

func TestObjectsReadFailures(t *testing.T) {
	_, err := (&File{Dir: filepath.Join(t.TempDir(), "missing")}).Objects(context.Background())
	var ie *snapshot.InputError
	if err == nil || errors.As(err, &ie) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing directory: error %v, want a not-exist read failure", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": "{}"})
	if _, err := (&File{Dir: dir}).Objects(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: error %v", err)
	}
}

func TestObjectsRevision(t *testing.T) {
	dir := t.TempDir()
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata: {k: %s}\n"
	rev := func(f *File) string {
		t.Helper()
		o, err := f.Objects(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return o.Revision
	}
	f := &File{Dir: dir}
	writeFiles(t, dir, map[string]string{"a.yaml": strings.Replace(cm, "%s", "one", 1)})
	r1, r1again := rev(f), rev(f)
	writeFiles(t, dir, map[string]string{"a.yaml": strings.Replace(cm, "%s", "two", 1)})
	r2 := rev(f)
	if err := os.Rename(filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	r3 := rev(f)
	r4 := rev(&File{Dir: dir, DefaultNamespace: "lb"})
	if r1 != r1again || r1 == r2 || r2 == r3 || r3 == r4 {
		t.Errorf("revisions: same content %s %s, edited %s, renamed %s, other default namespace %s", r1, r1again, r2, r3, r4)
	}
}

// TestObjectsConfigMapVolume reads a directory laid out as the kubelet lays out a ConfigMap
// volume: each object once, through the top-level links, nothing from ..data or the
// timestamped directory.
func TestObjectsConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	vol := newVolume(t, dir, map[string]string{
		"services.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services, namespace: lb}\n",
		"certs/keys.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: keys, namespace: lb}\n",
	})
	_ = vol
	o, err := (&File{Dir: dir, Logger: testLogger(t)}).Objects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(o), []string{"ConfigMap lb/services", "Secret lb/keys"}; !slices.Equal(got, want) {
		t.Errorf("objects = %v, want %v", got, want)
	}
}

// TestFileEndpointSlices: EndpointSlice manifests (as `kubectl get endpointslices -o yaml`
// prints them) back services that name a Kubernetes Service, as in the kube source.
func TestFileEndpointSlices(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"services.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: services}
data:
  shop: '{"namespace": "shop", "service": "shop"}'
`,
		"slices.yaml": `apiVersion: v1
kind: List
items:
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata:
    name: shop-abc12
    namespace: shop
    labels: {kubernetes.io/service-name: shop}
  addressType: IPv4
  ports: [{name: http, port: 8080, protocol: TCP}]
  endpoints:
  - addresses: [10.0.3.1]
    conditions: {ready: true}
    targetRef: {kind: Pod, name: shop-0, namespace: shop}
    nodeName: node-1
  - addresses: [10.0.3.2]
    conditions: {ready: false}
    targetRef: {kind: Pod, name: shop-1, namespace: shop}
`,
	})
	for _, conv := range []*snapshot.PodConverter{nil, {}} {
		f := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: conv}
		o, errs := readDir(t, f)
		if errs != nil {
			t.Fatal(errs)
		}
		if got := names(o); !slices.Equal(got, []string{"ConfigMap lb/services", "EndpointSlice shop/shop-abc12"}) {
			t.Fatalf("objects %q", got)
		}
		snap, err := snapshot.Build(o, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pods := record.Plain(snap.Services[0].Field("pods")).(map[string]any)
		if len(pods) != 1 || pods["shop-0"] == nil {
			t.Fatalf("pods %v, want the ready endpoint shop-0 only", pods)
		}
		if ip := pods["shop-0"].(map[string]any)["status"].(map[string]any)["podIP"]; ip != "10.0.3.1" {
			t.Errorf("podIP %v, want 10.0.3.1", ip)
		}
	}
}

// TestDecodedIsSmall: every object the file source keeps has a decoded record, which is also
// its entry in the cache, and a job in its file's entry (a hundred thousand pods, a hundred
// thousand of each): the record stays in the 32-byte size class, what a watched object adds
// being behind a pointer, and the job is three pointers.
func TestDecodedIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(decoded{}); n > 32 {
		t.Errorf("a decoded record takes %d bytes, want at most 32", n)
	}
	if n := unsafe.Sizeof(job{}); n > 24 {
		t.Errorf("a job takes %d bytes, want at most 24", n)
	}
	// A first read holds a pending decode for each item of a List until its end.
	if n := unsafe.Sizeof(pending{}); n > 144 {
		t.Errorf("a pending decode takes %d bytes, want at most 144", n)
	}
	// Where the value of a data key is: the services ConfigMap's ten thousand are kept.
	if n := unsafe.Sizeof(keyPos{}); n > 32 {
		t.Errorf("a data key's position takes %d bytes, want at most 32", n)
	}
}
