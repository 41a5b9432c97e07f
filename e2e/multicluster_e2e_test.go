package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// awaitConfig waits until the configuration the sidecar wrote has every line of with and
// none of without (each a substring of a line).
func (e *demoEnv) awaitConfig(t *testing.T, what string, with, without []string) {
	t.Helper()
	var last string
	haproxytest.WaitFor(t, catchUpBound, func() bool {
		b, err := os.ReadFile(e.cfgPath)
		if err != nil {
			return false
		}
		last = string(b)
		for _, w := range with {
			if !strings.Contains(last, w) {
				return false
			}
		}
		for _, w := range without {
			if strings.Contains(last, w) {
				return false
			}
		}
		return true
	}, what)
}

// setWebService rewrites the web entry of the services ConfigMap (in the home cluster).
func (e *demoEnv) setWebService(t *testing.T, k *kubetest.Env, extra string) {
	t.Helper()
	e.setService(t, k, "web", fmt.Sprintf(`{"namespace": "demo", "selector": {"app": "web"}, "hostnames": ["web.localhost"], "ports": [%d]%s}`, e.port, extra))
}

// setService sets a key of the services ConfigMap (in the home cluster).
func (e *demoEnv) setService(t *testing.T, k *kubetest.Env, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubetest.CallTimeout)
	defer cancel()
	cm, err := k.Client.CoreV1().ConfigMaps("lb").Get(ctx, "services", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[key] = value
	k.ApplyConfigMap(t, cm)
}

// TestSeveralClusters: one sidecar follows two clusters, each a real kube-apiserver with its
// own etcd. The pods of a service in both clusters are one backend, two pods of one name kept
// apart by their cluster; a service's clusters list restricts it; a cluster whose API server
// stops is reported on its own (source_up{cluster}, /readyz) while its servers stay and the
// other cluster's changes go live; once its API server is back, its changes go live.
func TestSeveralClusters(t *testing.T) {
	opts := kubetest.Options{APIServerArgs: map[string][]string{"shutdown-watch-termination-grace-period": {"1s"}}}
	east := kubetest.StartWith(t, opts)
	west := kubetest.StartWith(t, opts)
	e := newDemoEnv(t)
	objs := applyExample(t, east, e)
	west.Namespace(t, "demo")
	webPod := func(name, ip string) {
		for _, p := range objs.Pods {
			if p.Labels["app"] == "web" {
				p := p.DeepCopy()
				p.Name, p.Status.PodIP = name, ip
				p.Status.PodIPs[0].IP = ip
				west.ApplyPod(t, p)
				return
			}
		}
		t.Fatal("no web pod in the example")
	}
	// A pod of the same namespace and name as one of east's: both serve.
	webPod("web-7d9f-abcde", "127.0.0.13")

	// West is reached through a proxy the test can cut, to make changes there while the
	// sidecar cannot see them.
	westConfig, westProxy := proxiedKubeconfig(t, west)
	// North (west's API server again, through a proxy of its own) cannot be reached at start:
	// the others are served meanwhile.
	northConfig, northProxy := proxiedKubeconfig(t, west)
	northProxy.Cut()
	args := []string{"--source=kube", "--kubeconfig", east.Kubeconfig, "--namespace", "lb",
		"--cluster-name", "east", "--cluster", "west=" + westConfig, "--cluster", "north=" + northConfig}
	stop := e.startSidecar(t, args...)
	e.startHAProxy(t)
	e.waitReady(t)
	server := func(cluster, pod, ip string) string {
		return fmt.Sprintf("server %s:%s-%d %s:%d", cluster, pod, e.port, ip, e.port)
	}
	eastA, eastB := server("east", "web-7d9f-abcde", "127.0.0.11"), server("east", "web-7d9f-fghij", "127.0.0.12")
	westA := server("west", "web-7d9f-abcde", "127.0.0.13")
	e.awaitConfig(t, "one backend of both clusters' web pods", []string{eastA, eastB, westA}, nil)
	e.waitServed(t, "web.localhost", "/", "web-3") // the west pod's backend, among the others
	for _, c := range []string{"east", "west"} {
		if v := e.metric(t, `haproxy_sidecar_source_up{cluster="`+c+`"}`); v != 1 {
			t.Errorf("source_up{cluster=%q} = %v, want 1", c, v)
		}
	}
	haproxytest.WaitFor(t, reportBound, func() bool {
		code, r := e.readyz(t)
		return code == 200 && strings.Contains(r.Reason, "cluster north") && e.metric(t, `haproxy_sidecar_source_up{cluster="north"}`) == 0
	}, "north, unreachable since the start, reported on its own while the others serve (/readyz 200 naming it, source_up{cluster=north} 0)")
	northProxy.Restore()
	northA := server("north", "web-7d9f-abcde", "127.0.0.13")
	e.awaitConfig(t, "north's pods once it can be reached", []string{eastA, eastB, westA, northA}, nil)

	// A service naming a Kubernetes Service: its EndpointSlices of every cluster.
	e.setService(t, east, "svc", fmt.Sprintf(`{"namespace": "demo", "service": "api", "hostnames": ["svc.localhost"], "ports": [%d]}`, e.port))
	ready := true
	for cluster, k := range map[string]*kubetest.Env{"east": east, "west": west} {
		ip := map[string]string{"east": "10.9.0.1", "west": "10.9.0.2"}[cluster] // the API server refuses loopback endpoints
		k.ApplyEndpointSlice(t, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "api-x", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: "api-0"}}},
		})
	}
	e.awaitConfig(t, "the Service's endpoints of both clusters", []string{server("east", "api-0", "10.9.0.1"), server("west", "api-0", "10.9.0.2")}, nil)

	e.setWebService(t, east, `, "clusters": ["west"]`)
	e.awaitConfig(t, "the web service of west's pods alone", []string{westA}, []string{eastA, eastB, northA})
	e.setWebService(t, east, "")
	e.awaitConfig(t, "every cluster's pods again", []string{eastA, eastB, westA}, nil)
	e.settled(t)

	away := time.Now()
	west.StopAPIServer()
	var r readyz
	haproxytest.WaitFor(t, reportBound, func() bool {
		_, r = e.readyz(t)
		return e.metric(t, `haproxy_sidecar_source_up{cluster="west"}`) == 0 && strings.Contains(r.Reason, "cluster west")
	}, "west reported away: source_up{cluster=west} 0, /readyz naming it")
	t.Logf("west reported away after %v: %s", time.Since(away).Round(time.Millisecond), r.Reason)
	if code, r := e.readyz(t); code != 200 || !r.Ready || strings.Contains(r.Reason, "cluster east") {
		t.Errorf("/readyz %d ready %v reason %q while east is followed and HAProxy serves", code, r.Ready, r.Reason)
	}
	if v := e.metric(t, `haproxy_sidecar_source_up{cluster="east"}`); v != 1 {
		t.Errorf("source_up{cluster=east} = %v while west is away, want 1", v)
	}
	east.SetPodReady(t, "demo", "web-7d9f-fghij", "", false)
	e.awaitConfig(t, "east's change live, west's server kept", []string{eastA, westA}, []string{eastB})

	back := time.Now()
	west.StartAPIServer()
	haproxytest.WaitFor(t, catchUpBound, func() bool {
		_, r := e.readyz(t)
		return e.metric(t, `haproxy_sidecar_source_up{cluster="west"}`) == 1 && r.Reason == ""
	}, "west followed again, no reason left")
	t.Logf("west followed %v after its API server started", time.Since(back).Round(time.Millisecond))
	changed := time.Now()
	webPod("web-7d9f-zzzzz", "127.0.0.22")
	e.awaitConfig(t, "west's change live once it is back", []string{eastA, westA, server("west", "web-7d9f-zzzzz", "127.0.0.22")}, []string{eastB})
	t.Logf("west's change live %v after it was made", time.Since(changed).Round(time.Millisecond))
	westC := server("west", "web-7d9f-zzzzz", "127.0.0.22")

	// A change made in west while the sidecar cannot reach it goes live once it can.
	westProxy.Cut()
	haproxytest.WaitFor(t, reportBound, func() bool {
		return e.metric(t, `haproxy_sidecar_source_up{cluster="west"}`) == 0
	}, "west reported away again")
	west.DeletePod(t, "demo", "web-7d9f-zzzzz")
	back = time.Now()
	westProxy.Restore()
	e.awaitConfig(t, "what changed in west while away is live once it is back", []string{eastA, westA}, []string{westC})
	t.Logf("what changed in west while it was away live %v after its return", time.Since(back).Round(time.Millisecond))

	// --cluster-forget-after: a cluster away that long has its servers left out, the others'
	// stay; back, they are in again.
	stop()
	e.startSidecar(t, append(args, "--cluster-forget-after", "1s")...)
	e.awaitConfig(t, "the restarted sidecar serves both clusters", []string{eastA, westA}, nil)
	westProxy.Cut()
	e.awaitConfig(t, "west's servers left out once it has been away 1s", []string{eastA}, []string{westA})
	westProxy.Restore()
	e.awaitConfig(t, "west's servers back with west", []string{eastA, westA}, nil)
}
