package kubetest

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEnv(t *testing.T) {
	env := StartWith(t, Options{EncryptSecrets: true, EtcdPrefix: "/k8s"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{env.EtcdURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	defer etcd.Close()
	etcdValue := func(t *testing.T, key string) []byte {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		resp, err := etcd.Get(rctx, env.EtcdPrefix+key)
		if err != nil {
			t.Fatalf("etcd get %s: %v", key, err)
		}
		if len(resp.Kvs) != 1 {
			t.Fatalf("etcd has no key %s%s", env.EtcdPrefix, key)
		}
		return resp.Kvs[0].Value
	}

	t.Run("configmap create and update", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}, Data: map[string]string{"a": "1"}}
		first := env.ApplyConfigMap(t, cm)
		cm.Data["a"] = "2"
		second := env.ApplyConfigMap(t, cm)
		if first.UID != second.UID || second.Data["a"] != "2" {
			t.Fatalf("update: uid %s -> %s, data %v", first.UID, second.UID, second.Data)
		}
		if env.EtcdPrefix != "/k8s" {
			t.Fatalf("EtcdPrefix %q", env.EtcdPrefix)
		}
		if v := etcdValue(t, "/configmaps/lb/services"); !bytes.HasPrefix(v, []byte("k8s\x00")) {
			t.Fatalf("etcd value does not start with the protobuf magic: %q", v[:min(len(v), 16)])
		}
	})

	t.Run("pod readiness through the status subresource", func(t *testing.T) {
		env.ApplyPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "shop-0", Namespace: "web", Labels: map[string]string{"app": "shop"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "shop"}}},
		})
		p := env.SetPodReady(t, "web", "shop-0", "10.1.2.3", true)
		if p.Status.PodIP != "10.1.2.3" || !podReady(p) {
			t.Fatalf("after SetPodReady(true): ip %q, status %+v", p.Status.PodIP, p.Status.Conditions)
		}
		p = env.SetPodReady(t, "web", "shop-0", "", false)
		if p.Status.PodIP != "10.1.2.3" || podReady(p) || p.Status.ContainerStatuses[0].Ready {
			t.Fatalf("after SetPodReady(false): ip %q, status %+v", p.Status.PodIP, p.Status)
		}
		etcdValue(t, "/pods/web/shop-0")
		env.DeletePod(t, "web", "shop-0")
		if _, err := env.Client.CoreV1().Pods("web").Get(ctx, "shop-0", metav1.GetOptions{}); err == nil {
			t.Fatal("the pod is still there after DeletePod")
		}
	})

	t.Run("endpointslice", func(t *testing.T) {
		ready := true
		es := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "shop-x", Namespace: "web", Labels: map[string]string{discoveryv1.LabelServiceName: "shop"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.2.3"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		}
		env.Apply(t, es)
		es.Endpoints[0].Addresses[0] = "10.1.2.4"
		got := env.ApplyEndpointSlice(t, es)
		if got.Endpoints[0].Addresses[0] != "10.1.2.4" {
			t.Fatalf("endpoints %+v", got.Endpoints)
		}
		etcdValue(t, "/endpointslices/web/shop-x")
	})

	t.Run("kubeconfig", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, env.KubectlPath, "--kubeconfig", env.Kubeconfig,
			"get", "configmap", "services", "-n", "lb", "-o", "jsonpath={.data.a}").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "2" {
			t.Fatalf("kubectl get: %v: %s", err, out)
		}
	})

	t.Run("secrets encrypted at rest", func(t *testing.T) {
		env.ApplySecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: "lb"}, Data: map[string][]byte{"k": []byte("v")}})
		want := "k8s:enc:aescbc:v1:" + EncryptionKeyName + ":"
		if v := etcdValue(t, "/secrets/lb/keys"); !bytes.HasPrefix(v, []byte(want)) {
			t.Fatalf("secret value starts with %q, want %q", v[:min(len(v), len(want))], want)
		}
	})

	t.Run("API server restart", func(t *testing.T) {
		env.StopAPIServer()
		short, scancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := env.Client.CoreV1().ConfigMaps("lb").Get(short, "services", metav1.GetOptions{})
		scancel()
		if err == nil {
			t.Fatal("the API server still answers after StopAPIServer")
		}
		env.StartAPIServer()
		cm, err := env.Client.CoreV1().ConfigMaps("lb").Get(ctx, "services", metav1.GetOptions{})
		if err != nil || cm.Data["a"] != "2" {
			t.Fatalf("after restart: %v, %v", err, cm)
		}
	})

	t.Run("etcd restart keeps the data", func(t *testing.T) {
		env.StopEtcd()
		short, scancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := etcd.Get(short, env.EtcdPrefix+"/configmaps/lb/services")
		scancel()
		if err == nil {
			t.Fatal("etcd still answers after StopEtcd")
		}
		env.StartEtcd()
		etcdValue(t, "/configmaps/lb/services")
		// The API server reconnects by itself.
		deadline := time.Now().Add(30 * time.Second)
		for {
			cm, err := env.Client.CoreV1().ConfigMaps("lb").Get(ctx, "services", metav1.GetOptions{})
			if err == nil && cm.Data["a"] == "2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the API server did not get back to etcd: %v", err)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(100 * time.Millisecond): // poll interval, not synchronisation
			}
		}
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
