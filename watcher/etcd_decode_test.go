package watcher

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/etcdtest"
)

func TestEtcdDecode(t *testing.T) {
	d := newValueDecoder()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}, Data: map[string]string{"web": "{}"}}
	pb, err := etcdtest.Encode(cm, etcdtest.Protobuf)
	if err != nil {
		t.Fatal(err)
	}
	js, err := etcdtest.Encode(cm, etcdtest.JSON)
	if err != nil {
		t.Fatal(err)
	}
	const key = "/registry/configmaps/lb/services"

	for _, tc := range []struct {
		name  string
		value []byte
	}{{"protobuf", pb}, {"JSON", js}} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := d.decode(configMapKind, key, "lb", "services", tc.value, 42)
			if err != nil {
				t.Fatal(err)
			}
			got := obj.(*corev1.ConfigMap)
			if got.ResourceVersion != "42" || got.Data["web"] != "{}" || got.ManagedFields != nil || got.Namespace != "lb" {
				t.Fatalf("decoded %+v", got)
			}
		})
	}

	t.Run("namespace and name come from the key when missing", func(t *testing.T) {
		bare := &corev1.Pod{}
		v, err := etcdtest.Encode(bare, etcdtest.Protobuf)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := d.decode(podKind, "/registry/pods/web/a", "web", "a", v, 7)
		if err != nil {
			t.Fatal(err)
		}
		if p := obj.(*corev1.Pod); p.Namespace != "web" || p.Name != "a" {
			t.Fatalf("pod %s/%s", p.Namespace, p.Name)
		}
	})

	for _, tc := range []struct {
		name  string
		kind  objectKind
		value []byte
		want  []string // in the message
	}{
		{"garbage", configMapKind, []byte("\x00\x01garbage"), []string{key, "neither Kubernetes protobuf", "9 bytes"}},
		{"truncated protobuf", configMapKind, pb[:len(pb)/2], []string{key, "decoding the stored ConfigMap"}},
		{"bad JSON", configMapKind, []byte(`{"apiVersion": "v1", "kind": "ConfigMap", "data": 1}`), []string{key, "decoding the stored ConfigMap"}},
		{"empty", configMapKind, nil, []string{key, "empty value"}},
		{"wrong kind", secretKind, pb, []string{key, "holds a ConfigMap (v1), not a Secret"}},
		{"encrypted", secretKind, []byte("k8s:enc:aescbc:v1:key1:\x8a\x11secret-bytes"), []string{key, "encrypted at rest (k8s:enc:aescbc:v1:key1)", "--source=kube"}},
		{"encrypted kms", secretKind, []byte("k8s:enc:kms:v2:vault:\n\x01\xff"), []string{"(k8s:enc:kms:v2:vault)"}},
		{"encrypted, no fields", secretKind, []byte("k8s:enc:"), []string{"(k8s:enc:unknown)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := d.decode(tc.kind, key, "lb", "services", tc.value, 1)
			if err == nil {
				t.Fatalf("decoded %T, want an error", obj)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret-bytes") || strings.Contains(err.Error(), "garbage") {
				t.Errorf("error quotes the value: %v", err)
			}
		})
	}

	t.Run("encrypted error type", func(t *testing.T) {
		_, err := d.decode(secretKind, "/registry/secrets/lb/keys", "lb", "keys", []byte("k8s:enc:secretbox:v1:k:xx"), 1)
		var enc *EncryptedError
		if !errors.As(err, &enc) || enc.Transformer != "secretbox:v1:k" || enc.Key != "/registry/secrets/lb/keys" {
			t.Fatalf("error %#v", err)
		}
	})
}

func TestEtcdKeys(t *testing.T) {
	if p := podKind.keyPrefix("/registry", "lb"); p != "/registry/pods/lb/" {
		t.Fatalf("prefix %q", p)
	}
	for key, want := range map[string]string{
		"/registry/pods/lb/a":     "a",
		"/registry/pods/lb/":      "",
		"/registry/pods/lb/a/b":   "",
		"/registry/pods/lb-2/a":   "",
		"/registry/pods/lbx":      "",
		"/registry/configmaps/lb": "",
	} {
		got, err := nameFromKey("/registry/pods/lb/", key)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("nameFromKey(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
}

// benchPod is a pod as a busy cluster stores it: labels, a container with ports, env and
// resources, status with conditions, and managedFields from kubelet and a controller.
func benchPod(i int) *corev1.Pod {
	now := metav1.NewTime(time.Unix(1700000000, 0))
	started := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              fmt.Sprintf("shop-%d", i),
			Namespace:         fmt.Sprintf("ns-%d", i%100),
			UID:               types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
			CreationTimestamp: now,
			Labels:            map[string]string{"app": "shop", "pod-template-hash": "7d9f8b6c5", "tier": "web"},
			Annotations:       map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-21T10:00:00Z"},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "shop-7d9f8b6c5", UID: "rs-uid"}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:tier":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"rs-uid\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{}}}}}`)}},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.0.0.1\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`)}},
			},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1",
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.example.com/shop:1.2.3",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:   []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "LOG_LEVEL", Value: "info"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 5},
			}},
			RestartPolicy:      corev1.RestartPolicyAlways,
			DNSPolicy:          corev1.DNSClusterFirst,
			ServiceAccountName: "default",
			SchedulerName:      "default-scheduler",
		},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			HostIP: "192.168.0.10",
			PodIP:  fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255),
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			StartTime: &now,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Started: &started, Image: "registry.example.com/shop:1.2.3",
				ImageID: "registry.example.com/shop@sha256:0123456789abcdef", ContainerID: "containerd://abcdef",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
		},
	}
}

// BenchmarkDecodePods decodes 100,000 pods stored as kube-apiserver stores them (protobuf),
// as the initial list of a large cluster does: "list" is the list path (decodeAll: all CPUs but
// one), "serial" one decoder.
func BenchmarkDecodePods(b *testing.B) {
	const n = 100_000
	jobs := make([]decodeJob, n)
	bytesTotal := 0
	for i := range jobs {
		p := benchPod(i)
		v, err := etcdtest.Encode(p, etcdtest.Protobuf)
		if err != nil {
			b.Fatal(err)
		}
		bytesTotal += len(v)
		jobs[i] = decodeJob{key: "/registry/pods/" + p.Namespace + "/" + p.Name, namespace: p.Namespace, name: p.Name, value: v, modRev: int64(i + 1)}
	}
	d := newValueDecoder()
	run := func(b *testing.B, decode func([]decodeJob)) {
		b.SetBytes(int64(bytesTotal))
		start := time.Now()
		for b.Loop() {
			decode(jobs)
		}
		elapsed := time.Since(start)
		for i := range jobs {
			if jobs[i].err != nil {
				b.Fatal(jobs[i].err)
			}
		}
		b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "objects/s")
		b.ReportMetric(float64(bytesTotal)/n, "bytes/object")
	}
	b.Run("list", func(b *testing.B) {
		run(b, func(jobs []decodeJob) { d.decodeAll(podKind, jobs, nil) })
	})
	b.Run("serial", func(b *testing.B) {
		run(b, func(jobs []decodeJob) {
			for i := range jobs {
				j := &jobs[i]
				j.obj, j.err = d.decode(podKind, j.key, j.namespace, j.name, j.value, j.modRev)
			}
		})
	})
}
