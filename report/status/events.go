package status

import (
	"context"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// maxEventMessage keeps Events readable in `kubectl describe`; longer reasons are in the log.
const maxEventMessage = 1000

// KubeEvents records Kubernetes Events on the objects operators edit: a Warning on the
// ConfigMap or Secret whose content was rejected (with the key, line and reason), a Normal
// event when a change went live. client-go's correlator aggregates and rate-limits them per
// object; on top of that the same message is not repeated for an object until it changes.
type KubeEvents struct {
	// Redact, when set, is applied to every message (secrets never reach an Event).
	Redact func(string) string

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	lookup      func(snapshot.Ref) runtime.Object
	log         *slog.Logger

	mu   sync.Mutex
	last map[snapshot.Ref]string
}

// NewKubeEvents sends events as component (the reporting controller) through client. lookup
// finds the object a Ref names (for its UID) in the source's caches; it may return nil.
func NewKubeEvents(ctx context.Context, client kubernetes.Interface, component, host string, lookup func(snapshot.Ref) runtime.Object, log *slog.Logger) *KubeEvents {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &KubeEvents{
		broadcaster: b,
		recorder:    b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component, Host: host}),
		lookup:      lookup,
		log:         log,
		last:        map[snapshot.Ref]string{},
	}
}

// Event records one event on the object ref names (its Key is in the message, not the ref).
func (k *KubeEvents) Event(ref snapshot.Ref, warning bool, reason, message string) {
	ref.Key = ""
	if k.Redact != nil {
		message = k.Redact(message)
	}
	k.mu.Lock()
	dup := k.last[ref] == reason+"\x00"+message
	k.last[ref] = reason + "\x00" + message
	k.mu.Unlock()
	if dup {
		return
	}
	obj := k.object(ref)
	if obj == nil {
		k.log.Debug("no object for event", "object", ref.String(), "reason", reason)
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	if len(message) > maxEventMessage {
		message = message[:maxEventMessage-3] + "..."
	}
	k.recorder.Event(obj, typ, reason, message)
}

func (k *KubeEvents) object(ref snapshot.Ref) runtime.Object {
	if k.lookup != nil {
		if obj := k.lookup(ref); obj != nil {
			return obj
		}
	}
	if ref.Cluster != "" {
		return nil // another cluster's object: not one of the home cluster's of that name
	}
	meta := metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}
	switch ref.Kind {
	case "ConfigMap":
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"}, ObjectMeta: meta}
	case "Secret":
		return &corev1.Secret{TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}, ObjectMeta: meta}
	case "Pod":
		return &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: meta}
	}
	return nil
}

// Warn records a Warning Event on obj (an object the live configuration declares, which the
// template warns about), redacted as the others.
func (k *KubeEvents) Warn(obj runtime.Object, reason, message string) {
	if k.Redact != nil {
		message = k.Redact(message)
	}
	if len(message) > maxEventMessage {
		message = message[:maxEventMessage-3] + "..."
	}
	k.recorder.Event(obj, corev1.EventTypeWarning, reason, message)
}

// Shutdown flushes and stops the broadcaster.
func (k *KubeEvents) Shutdown() { k.broadcaster.Shutdown() }
