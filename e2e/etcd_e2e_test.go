package e2e

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// TestEtcdSourceEndToEnd: objects written by a real kube-apiserver are read by the sidecar
// straight from its etcd (--source=etcd), and HAProxy serves them.
func TestEtcdSourceEndToEnd(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	applyExample(t, k, e)
	e.startSidecar(t, "--source=etcd", "--etcd-endpoints", k.EtcdURL, "--etcd-prefix", k.EtcdPrefix)
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	if v := e.metric(t, "haproxy_sidecar_source_up"); v != 1 {
		t.Errorf("source_up = %v, want 1", v)
	}

	cm, err := k.Client.CoreV1().ConfigMaps("lb").Get(context.Background(), "services", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["shop"] = fmt.Sprintf(`{"namespace": "demo", "selector": {"app": "api"}, "hostnames": ["shop.localhost"], "ports": [%d]}`, e.port)
	k.ApplyConfigMap(t, cm)
	e.waitServed(t, "shop.localhost", "/", "api-1")

	k.SetPodReady(t, "demo", "api-5c6b-pqrst", "127.0.0.22", true)
	e.waitServed(t, "shop.localhost", "/", "api-2")
}
