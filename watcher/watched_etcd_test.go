package watcher

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/etcdtest"
)

// TestEtcdWatchedResources runs the etcd source's watched resources against a bare etcd
// holding values as kube-apiserver writes them: Nodes (protobuf, cluster-scoped keys) and a
// custom resource (JSON, GROUP/PLURAL keys); the selector applies after decoding; values that
// are not what the resource holds are skipped and logged; a compaction while cut off is
// recovered by listing again.
func TestEtcdWatchedResources(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	proxy := srv.Proxy()
	putNode := func(name, ip string, labels map[string]string) {
		t.Helper()
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
		v, err := etcdtest.Encode(n, etcdtest.Protobuf)
		if err != nil {
			t.Fatal(err)
		}
		srv.Put(etcdPrefix+"/minions/"+name, v)
	}
	putCron := func(ns, name, spec string) {
		srv.Put(etcdPrefix+"/stable.example.com/crontabs/"+ns+"/"+name, []byte(
			`{"apiVersion":"stable.example.com/v1beta1","kind":"CronTab","metadata":{"name":"`+name+`","namespace":"`+ns+
				`","uid":"u-`+name+`","managedFields":[{"manager":"kubectl"}]},"spec":{"cronSpec":"`+spec+`"}}`))
	}
	putNode("node-1", "192.0.2.1", map[string]string{"pool": "edge"})
	putNode("node-2", "192.0.2.2", map[string]string{"pool": "batch"})
	putCron("web", "nightly", "0 3 * * *")
	putCron("other", "hourly", "0 * * * *")
	srv.Put(etcdPrefix+"/stable.example.com/crontabs/web/garbage", []byte("\x00\x01"))
	pod, err := etcdtest.Encode(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "intruder", Namespace: "web"}}, etcdtest.Protobuf)
	if err != nil {
		t.Fatal(err)
	}
	srv.Put(etcdPrefix+"/minions/intruder", pod)

	r := runEtcd(t, EtcdConfig{Endpoints: []string{proxy.Endpoint}, Prefix: etcdPrefix, WatchdogInterval: 400 * time.Millisecond,
		Watch: watchList(t, "nodes.v1;selector=pool=edge", "crontabs.v1.stable.example.com;namespace=web")})
	keys := func(o *snapshot.Objects) string { return watchedKeys(o) }
	r.waitFor("node-1 and web/nightly", func(o *snapshot.Objects, err error) bool {
		return err == nil && keys(o) == "crontabs: web/nightly; nodes: node-1"
	})
	o, _ := r.objects()
	cron := o.Resources["crontabs"][0].Record().String()
	// The watched apiVersion (the API server's None conversion), the key's revision as
	// resourceVersion, no managedFields.
	if !strings.Contains(cron, `"apiVersion":"stable.example.com/v1"`) || strings.Contains(cron, "managedFields") ||
		!strings.Contains(cron, `"resourceVersion":"`) {
		t.Errorf("the custom resource: %s", cron)
	}
	for _, want := range []string{"etcd key " + etcdPrefix + "/minions/intruder holds a Pod (v1), not a Node", "/stable.example.com/crontabs/web/garbage holds 2 bytes"} {
		r.waitLog(want)
	}

	t.Run("changes, and a compaction while cut off", func(t *testing.T) {
		putNode("node-2", "192.0.2.2", map[string]string{"pool": "edge"}) // now selected
		r.waitFor("node-2 selected", func(o *snapshot.Objects, err error) bool {
			return err == nil && keys(o) == "crontabs: web/nightly; nodes: node-1 node-2"
		})
		proxy.Cut()
		r.waitUp(false)
		srv.Delete(etcdPrefix + "/minions/node-1")
		putCron("web", "weekly", "0 0 * * 0")
		srv.Compact()
		proxy.Restore()
		r.waitUp(true)
		r.waitFor("node-1 gone, web/weekly in", func(o *snapshot.Objects, err error) bool {
			return err == nil && keys(o) == "crontabs: web/nightly web/weekly; nodes: node-2"
		})
	})
}
