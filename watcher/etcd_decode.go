package watcher

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// objectKind is a resource the etcd source reads, with its place in the etcd key space.
type objectKind struct {
	Kind     string // ConfigMap, Secret, Pod (also the Kind of a snapshot.Ref)
	Resource string // configmaps, secrets, pods: the key segment after the prefix
}

var (
	configMapKind     = objectKind{Kind: "ConfigMap", Resource: "configmaps"}
	secretKind        = objectKind{Kind: "Secret", Resource: "secrets"}
	podKind           = objectKind{Kind: "Pod", Resource: "pods"}
	endpointSliceKind = objectKind{Kind: "EndpointSlice", Resource: "endpointslices"}
)

// keyPrefix is where kube-apiserver keeps a namespace's objects of this kind:
// <prefix>/<resource>/<namespace>/, ending with "/" so that namespace "lb" does not match "lb-2".
func (k objectKind) keyPrefix(prefix, namespace string) string {
	return prefix + "/" + k.Resource + "/" + namespace + "/"
}

// encryptedPrefix starts the values kube-apiserver encrypted at rest:
// k8s:enc:<provider>:v<N>:<key name>:<ciphertext>.
var encryptedPrefix = []byte("k8s:enc:")

// protobufMagic starts the values kube-apiserver stores as protobuf.
var protobufMagic = []byte("k8s\x00")

// EncryptedError is a value kube-apiserver encrypted at rest: the etcd source has no key to
// read it.
type EncryptedError struct {
	Key         string // etcd key
	Transformer string // e.g. "aescbc:v1:key1", "kms:v2:vault"
}

func (e *EncryptedError) Error() string {
	return fmt.Sprintf("etcd key %s is encrypted at rest (k8s:enc:%s); the etcd source cannot decrypt it: "+
		"read Secrets through the API server with --source=kube, or leave this resource out of the "+
		"API server's encryption configuration", e.Key, e.Transformer)
}

// transformerName returns "<provider>:<version>:<key name>" from an encrypted value (at most
// the three fields, printable characters only: the rest is ciphertext).
func transformerName(value []byte) string {
	rest := value[len(encryptedPrefix):]
	var fields []string
	for len(fields) < 3 {
		i := bytes.IndexByte(rest, ':')
		if i < 0 || i > 64 {
			break
		}
		f := string(rest[:i])
		if strings.IndexFunc(f, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
			break
		}
		fields = append(fields, f)
		rest = rest[i+1:]
	}
	if len(fields) == 0 {
		return "unknown"
	}
	return strings.Join(fields, ":")
}

// valueDecoder turns etcd values into typed objects as kube-apiserver stored them: protobuf
// ("k8s\x00" + runtime.Unknown) or JSON, decoded by client-go's scheme. It is safe for
// concurrent use.
type valueDecoder struct {
	decoder kruntime.Decoder
}

func newValueDecoder() *valueDecoder {
	return &valueDecoder{decoder: scheme.Codecs.UniversalDeserializer()}
}

// decode decodes the value stored at key (at revision modRev) as an object of kind. The
// object gets the key's namespace and name if it has none, its resourceVersion is modRev (the
// API server does not store it), and its managedFields are dropped (nothing reads them and they
// are often most of the object). Errors name the key and never quote the value.
func (d *valueDecoder) decode(kind objectKind, key, namespace, name string, value []byte, modRev int64) (kruntime.Object, error) {
	if bytes.HasPrefix(value, encryptedPrefix) {
		return nil, &EncryptedError{Key: key, Transformer: transformerName(value)}
	}
	if len(value) == 0 {
		return nil, fmt.Errorf("etcd key %s has an empty value", key)
	}
	if !bytes.HasPrefix(value, protobufMagic) && value[0] != '{' {
		return nil, fmt.Errorf("etcd key %s holds %d bytes that are neither Kubernetes protobuf (k8s\\x00...) nor JSON", key, len(value))
	}
	obj, _, err := d.decoder.Decode(value, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("etcd key %s: decoding the stored %s (%d bytes): %w", key, kind.Kind, len(value), err)
	}
	rv := strconv.FormatInt(modRev, 10)
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		if kind != configMapKind {
			break
		}
		fixMeta(&o.ObjectMeta.Namespace, &o.ObjectMeta.Name, namespace, name)
		o.ResourceVersion, o.ManagedFields = rv, nil
		return o, nil
	case *corev1.Secret:
		if kind != secretKind {
			break
		}
		fixMeta(&o.ObjectMeta.Namespace, &o.ObjectMeta.Name, namespace, name)
		o.ResourceVersion, o.ManagedFields = rv, nil
		return o, nil
	case *corev1.Pod:
		if kind != podKind {
			break
		}
		fixMeta(&o.ObjectMeta.Namespace, &o.ObjectMeta.Name, namespace, name)
		o.ResourceVersion, o.ManagedFields = rv, nil
		return o, nil
	case *discoveryv1.EndpointSlice:
		if kind != endpointSliceKind {
			break
		}
		fixMeta(&o.ObjectMeta.Namespace, &o.ObjectMeta.Name, namespace, name)
		o.ResourceVersion, o.ManagedFields = rv, nil
		return o, nil
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	return nil, fmt.Errorf("etcd key %s holds a %s (%s), not a %s", key, gvk.Kind, gvk.GroupVersion(), kind.Kind)
}

// fixMeta gives an object the namespace and name of its key when it has none: the key is what
// the API server goes by.
func fixMeta(ns, name *string, keyNamespace, keyName string) {
	if *ns == "" {
		*ns = keyNamespace
	}
	if *name == "" {
		*name = keyName
	}
}

// decodeJob is one value to decode; obj or err is set by decodeAll, and pod when a converter
// turned the decoded pod into its template form (obj is then nil).
type decodeJob struct {
	key, namespace, name string
	value                []byte
	modRev               int64
	obj                  kruntime.Object
	pod                  *snapshot.Pod
	object               *snapshot.Object // a watched resource's
	err                  error
}

// decodeAll decodes the jobs on all CPUs but one (a page of a large list: 100,000 pods are most
// of a cold start). Decoding is allocation-bound: the CPU left is for the garbage collector, and
// measured on 2 CPUs, two decoders were slower than one.
//
// When conv is set, decoded pods are converted to their template form there too, and the
// typed pods dropped.
func (d *valueDecoder) decodeAll(kind objectKind, jobs []decodeJob, conv *snapshot.PodConverter) {
	one := func(j *decodeJob) {
		j.obj, j.err = d.decode(kind, j.key, j.namespace, j.name, j.value, j.modRev)
		if p, ok := j.obj.(*corev1.Pod); ok && conv != nil {
			j.pod, j.obj = conv.Convert(p), nil
		}
	}
	forEachJob(jobs, one)
}

// decodeWatched decodes the jobs of a watched resource on all CPUs but one (see decodeAll),
// converting each object with conv.
func (d *valueDecoder) decodeWatched(w *watched, conv *snapshot.ObjectConverter, jobs []decodeJob) {
	one := func(j *decodeJob) { j.object, j.err = d.decodeObject(w, conv, j) }
	forEachJob(jobs, one)
}

// forEachJob runs one on every job, on all CPUs but one when there are enough jobs for
// more than one worker (see decodeAll).
func forEachJob(jobs []decodeJob, one func(*decodeJob)) {
	workers := min(runtime.GOMAXPROCS(0)-1, (len(jobs)+31)/32)
	if workers <= 1 {
		for i := range jobs {
			one(&jobs[i])
		}
		return
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(jobs); i = int(next.Add(1) - 1) {
				one(&jobs[i])
			}
		})
	}
	wg.Wait()
}

// cborPrefix starts a value stored as CBOR (its self-described tag), which kube-apiserver
// writes for custom resources only behind an alpha feature gate.
var cborPrefix = []byte{0xd9, 0xd9, 0xf7}

// decodeObject decodes the value of one object of a watched resource: a built-in through
// client-go's scheme (protobuf or JSON), a custom resource as JSON. As in decode, the key gives
// a missing namespace or name, the key's ModRevision is the resourceVersion, and managedFields
// are dropped. A custom resource stored at another version of its group than the watched one
// is given the watched apiVersion (the API server's "None" conversion); a built-in must be
// stored at the watched version.
func (d *valueDecoder) decodeObject(w *watched, conv *snapshot.ObjectConverter, j *decodeJob) (*snapshot.Object, error) {
	value := j.value
	switch {
	case bytes.HasPrefix(value, encryptedPrefix):
		return nil, &EncryptedError{Key: j.key, Transformer: transformerName(value)}
	case len(value) == 0:
		return nil, fmt.Errorf("etcd key %s has an empty value", j.key)
	case bytes.HasPrefix(value, cborPrefix):
		return nil, fmt.Errorf("etcd key %s holds CBOR, which the etcd source does not read", j.key)
	case !bytes.HasPrefix(value, protobufMagic) && value[0] != '{':
		return nil, fmt.Errorf("etcd key %s holds %d bytes that are neither Kubernetes protobuf (k8s\\x00...) nor JSON", j.key, len(value))
	}
	rv := strconv.FormatInt(j.modRev, 10)
	want := w.spec.Qualified()
	if w.builtin {
		obj, gvk, err := d.decoder.Decode(value, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("etcd key %s: decoding the stored %s (%d bytes): %w", j.key, w.kind, len(value), err)
		}
		if gvk.Group != w.spec.Group || gvk.Kind != w.kind {
			return nil, fmt.Errorf("etcd key %s holds a %s (%s), not a %s of %s", j.key, gvk.Kind, gvk.GroupVersion(), w.kind, want)
		}
		if gvk.Version != w.spec.Version {
			return nil, fmt.Errorf("etcd key %s holds a %s stored as %s: watch %s.%s instead of %s (the etcd source does not convert built-in versions)",
				j.key, gvk.Kind, gvk.GroupVersion(), w.spec.Resource, strings.TrimSuffix(gvk.Version+"."+gvk.Group, "."), want)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("etcd key %s: %w", j.key, err)
		}
		ns, name := m.GetNamespace(), m.GetName()
		fixMeta(&ns, &name, j.namespace, j.name)
		m.SetNamespace(ns)
		m.SetName(name)
		m.SetResourceVersion(rv)
		o, err := conv.FromTyped(obj, *gvk)
		if err != nil || w.spec.Status.All() {
			return o, err
		}
		return o.WithStatus(w.spec.Status.Keeps), nil // what templates do not see of it left out (;status=)
	}
	if value[0] != '{' {
		return nil, fmt.Errorf("etcd key %s holds protobuf, not the JSON custom resources are stored as: is %s a built-in resource?", j.key, want)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(value); err != nil {
		return nil, fmt.Errorf("etcd key %s: decoding the stored JSON (%d bytes): %w", j.key, len(value), err)
	}
	gvk := u.GroupVersionKind()
	if gvk.Group != w.spec.Group || (w.kind != "" && gvk.Kind != w.kind) {
		return nil, fmt.Errorf("etcd key %s holds a %s (%s), not an object of %s", j.key, gvk.Kind, gvk.GroupVersion(), want)
	}
	u.SetAPIVersion(w.spec.GroupVersion().String())
	ns, name := u.GetNamespace(), u.GetName()
	fixMeta(&ns, &name, j.namespace, j.name)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetResourceVersion(rv)
	w.spec.Status.Trim(u.Object) // what templates do not see of it (;status=)
	return conv.FromUnstructured(u.Object)
}

// errNotObjectKey is a key under a watched prefix that is not <prefix><name>.
var errNotObjectKey = errors.New("not an object key")

// nameFromKey returns the object name of a key under keyPrefix (which ends with "/").
func nameFromKey(keyPrefix, key string) (string, error) {
	name, ok := strings.CutPrefix(key, keyPrefix)
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", errNotObjectKey
	}
	return name, nil
}

// storedSecretType reads the type of a Secret kube-apiserver stored as protobuf without
// decoding it (its data stays in the bytes it came in): the value is "k8s\x00" and a
// runtime.Unknown whose raw (field 2) is the Secret, whose type is field 3. ok is false when
// the bytes do not say (JSON, encrypted, not protobuf, no type): the value is then decoded.
func storedSecretType(value []byte) (typ string, ok bool) {
	rest, found := bytes.CutPrefix(value, protobufMagic)
	if !found {
		return "", false
	}
	raw, found := protoField(rest, 2)
	if !found {
		return "", false
	}
	t, found := protoField(raw, 3)
	if !found {
		return "", false
	}
	return string(t), true
}

// protoField returns the last value of length-delimited field num of a protobuf message (the
// last one wins, as when decoding); false when the message has none or does not parse.
func protoField(msg []byte, num uint64) (value []byte, found bool) {
	for len(msg) > 0 {
		tag, n := binary.Uvarint(msg)
		if n <= 0 {
			return nil, false
		}
		msg = msg[n:]
		switch tag & 7 {
		case 0: // varint
			if _, n = binary.Uvarint(msg); n <= 0 {
				return nil, false
			}
			msg = msg[n:]
		case 1: // 64-bit
			if len(msg) < 8 {
				return nil, false
			}
			msg = msg[8:]
		case 5: // 32-bit
			if len(msg) < 4 {
				return nil, false
			}
			msg = msg[4:]
		case 2: // length-delimited
			l, n := binary.Uvarint(msg)
			if n <= 0 || l > uint64(len(msg)-n) {
				return nil, false
			}
			if tag>>3 == num {
				value, found = msg[n:n+int(l)], true
			}
			msg = msg[n+int(l):]
		default: // groups: not in Kubernetes objects
			return nil, false
		}
	}
	return value, found
}
