package snapshot

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const ns = DefaultNamespace

func configMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       data,
	}
}

func secret(namespace, name string, typ corev1.SecretType, lbls map[string]string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: lbls},
		Type:       typ,
		Data:       data,
	}
}

// readyPod is a running pod with every container ready.
func readyPod(namespace, name, ip string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name, Labels: lbls,
			UID:           types.UID("uid-" + name),
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "nginx:1.27",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "nginx:1.27"}},
		},
	}
}

// inputError asserts that err is (or holds first) an *InputError at stage decode with ref, and
// that its message contains every reason.
func inputError(t *testing.T, err error, ref Ref, reasons ...string) *InputError {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one about %v", ref)
	}
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T) is not an *InputError", err, err)
	}
	if ie.Stage != StageDecode {
		t.Errorf("stage = %q, want %q", ie.Stage, StageDecode)
	}
	if ie.Ref != ref {
		t.Errorf("ref = %#v, want %#v (error: %v)", ie.Ref, ref, err)
	}
	for _, r := range reasons {
		if !strings.Contains(ie.Error(), r) {
			t.Errorf("message %q does not contain %q", ie.Error(), r)
		}
	}
	return ie
}

// noKeyMaterial fails if msg holds any piece of the base64 body of a PEM key.
func noKeyMaterial(t *testing.T, msg string, keys ...[]byte) {
	t.Helper()
	for _, k := range keys {
		for _, line := range strings.Split(string(k), "\n") {
			if line == "" || strings.HasPrefix(line, "-----") {
				continue
			}
			for i := 0; i+12 <= len(line); i += 12 {
				if strings.Contains(msg, line[i:i+12]) {
					t.Fatalf("message contains key material %q: %s", line[i:i+12], msg)
				}
			}
		}
	}
}
