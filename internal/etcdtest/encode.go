package etcdtest

import (
	"bytes"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// Encoding is how an object is written to etcd.
type Encoding int

const (
	// Protobuf is kube-apiserver's default: "k8s\x00" + a protobuf runtime.Unknown.
	Protobuf Encoding = iota
	// JSON is what kube-apiserver writes with --storage-media-type=application/json.
	JSON
)

// Encode serializes obj (a ConfigMap, Secret, Pod or EndpointSlice) as kube-apiserver stores
// it: in its group's version (core/v1, discovery/v1),
// with no resourceVersion (etcd's ModRevision stands for it), and with a uid and
// creationTimestamp, which the API server sets on create, filled in when missing.
func Encode(obj runtime.Object, enc Encoding) ([]byte, error) {
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	m.SetResourceVersion("")
	if m.GetUID() == "" {
		m.SetUID(types.UID(fmt.Sprintf("%s-%s-%s", resourceOf(obj), m.GetNamespace(), m.GetName())))
	}
	if ts := m.GetCreationTimestamp(); ts.IsZero() {
		m.SetCreationTimestamp(metav1.Unix(1700000000, 0))
	}
	var s runtime.Encoder
	switch enc {
	case Protobuf:
		s = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	case JSON:
		s = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	default:
		return nil, fmt.Errorf("encode: unknown encoding %d", enc)
	}
	kinds, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(s, kinds[0].GroupVersion()).Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("encode %T %s/%s: %w", obj, m.GetNamespace(), m.GetName(), err)
	}
	return buf.Bytes(), nil
}

func resourceOf(obj runtime.Object) string {
	switch obj.(type) {
	case *corev1.ConfigMap:
		return "configmaps"
	case *corev1.Secret:
		return "secrets"
	case *corev1.Pod:
		return "pods"
	case *discoveryv1.EndpointSlice:
		return "endpointslices"
	}
	return ""
}

// Key is where kube-apiserver keeps obj under prefix: prefix/<resource>/<namespace>/<name>.
func Key(prefix string, obj runtime.Object) (string, error) {
	res := resourceOf(obj)
	if res == "" {
		return "", fmt.Errorf("no etcd key for a %T", obj)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	return prefix + "/" + res + "/" + m.GetNamespace() + "/" + m.GetName(), nil
}

// PutObject encodes obj as the API server would and writes it at its key under prefix; it
// returns the revision of the write (the object's resourceVersion).
func (s *Server) PutObject(prefix string, obj runtime.Object, enc Encoding) int64 {
	s.t.Helper()
	key, err := Key(prefix, obj)
	if err != nil {
		s.t.Fatal(err)
	}
	value, err := Encode(obj, enc)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.Put(key, value)
}

// DeleteObject removes obj's key under prefix and returns the revision of the deletion.
func (s *Server) DeleteObject(prefix string, obj runtime.Object) int64 {
	s.t.Helper()
	key, err := Key(prefix, obj)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.Delete(key)
}
