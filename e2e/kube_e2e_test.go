package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// applyExample creates the objects of the demo directory through the real API server, pods
// with the status their manifests show (there is no kubelet).
func applyExample(t *testing.T, k *kubetest.Env, e *demoEnv) *snapshot.Objects {
	t.Helper()
	objs, err := (&watcher.File{Dir: e.dir, DefaultNamespace: "lb"}).Objects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	k.Namespace(t, "lb")
	k.Namespace(t, "demo")
	for _, cm := range objs.ConfigMaps {
		k.ApplyConfigMap(t, cm.DeepCopy())
	}
	for _, s := range objs.Secrets {
		k.ApplySecret(t, s.DeepCopy())
	}
	for _, p := range objs.Pods {
		k.ApplyPod(t, p.DeepCopy())
	}
	return objs
}

func tlsPair(t *testing.T, cn string) (certPEM, keyPEM []byte) { return testcert.Pair(t, cn) }

func servedCertificate(addr, serverName string) (string, error) {
	return testcert.ServedCN(addr, serverName)
}

// TestKubernetesSourceEndToEnd runs the sidecar against a real kube-apiserver: the operator's
// objects are created with API calls, pods become ready through the status subresource, and
// HAProxy serves real backends.
func TestKubernetesSourceEndToEnd(t *testing.T) {
	// Terminate open watches at shutdown, so the restart below does not wait for them.
	k := kubetest.StartWith(t, kubetest.Options{APIServerArgs: map[string][]string{
		"shutdown-watch-termination-grace-period": {"1s"}}})
	e := newDemoEnv(t)
	fileObjs := applyExample(t, k, e)
	e.startSidecar(t, "--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb")
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	e.waitServed(t, "api.localhost", "/v1/x", "api-1")

	t.Run("render and validate read the API once and stop", func(t *testing.T) {
		out := t.TempDir()
		if err := renderOnce([]string{"--source=kube", "--kubeconfig", k.Kubeconfig, "--out", out}, false); err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(out + "/haproxy.cfg")
		if err != nil || !strings.Contains(string(cfg), "127.0.0.11:") {
			t.Fatalf("rendered config (%v):\n%s", err, cfg)
		}
		if err := renderOnce([]string{"--source=kube", "--kubeconfig", k.Kubeconfig}, true); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the same objects render the same bytes through the file and kube sources", func(t *testing.T) {
		src := &watcher.Kube{Client: k.Client, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys",
			CertificateSelector: "haproxy-sidecar/certificate"}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go src.Run(ctx, func() {})
		kubeObjs, err := src.Objects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := render.New(render.Options{SSLDir: "/etc/haproxy/certs"})
		bundle := func(objs *snapshot.Objects) *render.Bundle {
			snap, err := snapshot.Build(objs, snapshot.Options{Env: map[string]string{"HTTP_BIND": "x"}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := r.Render(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		fromFile, fromKube := bundle(fileObjs), bundle(kubeObjs)
		if !bytes.Equal(fromFile.Config, fromKube.Config) || fromFile.Hash != fromKube.Hash {
			t.Errorf("file and kube sources render differently:\n--- file\n%s\n--- kube\n%s", fromFile.Config, fromKube.Config)
		}
	})

	t.Run("backends follow pods scaling up and down", func(t *testing.T) {
		k.ApplyPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f-zzzzz", Namespace: "demo", Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "demo-backend"}}},
		})
		k.SetPodReady(t, "demo", "web-7d9f-zzzzz", "127.0.0.13", true)
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			_, body, _, _ := e.get("web.localhost", "/")
			return strings.HasPrefix(body, "web-3")
		}, "the new ready pod gets traffic")
		k.SetPodReady(t, "demo", "web-7d9f-zzzzz", "", false)
		e.settled(t)
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			for i := 0; i < 9; i++ {
				if _, body, _, _ := e.get("web.localhost", "/"); strings.HasPrefix(body, "web-3") {
					return false
				}
			}
			return true
		}, "the unready pod gets no traffic")
	})

	t.Run("a labelled TLS Secret is served over TLS", func(t *testing.T) {
		cert, key := tlsPair(t, "tls.localhost")
		k.ApplySecret(t, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "tls-localhost", Namespace: "lb", Labels: map[string]string{"haproxy-sidecar/certificate": "true"}},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"tls.crt": cert, "tls.key": key},
		})
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			cn, err := servedCertificate(os.Getenv("HTTPS_BIND"), "tls.localhost")
			return err == nil && cn == "tls.localhost"
		}, "HAProxy presents the Secret's certificate")
	})

	t.Run("a broken template gets a Warning Event with the line, the old config keeps serving", func(t *testing.T) {
		live := e.settled(t)
		cm, err := k.Client.CoreV1().ConfigMaps("lb").Get(context.Background(), "config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		good := cm.Data["template"]
		cm.Data["template"] = strings.Replace(good, "{%- for service in services %}", "{%- for service in %}", 1)
		k.ApplyConfigMap(t, cm)
		var msg string
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			evs, err := k.Client.CoreV1().Events("lb").List(context.Background(), metav1.ListOptions{
				FieldSelector: "involvedObject.kind=ConfigMap,involvedObject.name=config,type=Warning"})
			if err != nil || len(evs.Items) == 0 {
				return false
			}
			msg = evs.Items[len(evs.Items)-1].Message
			return true
		}, "a Warning Event on the config ConfigMap")
		if !strings.Contains(msg, `key "template" line`) {
			t.Errorf("event message %q does not give the key and line", msg)
		}
		if _, r := e.readyz(t); r.LiveConfig != live.LiveConfig {
			t.Errorf("live config changed from %s to %s", live.LiveConfig, r.LiveConfig)
		}
		e.waitServed(t, "web.localhost", "/", "web-")

		cm.Data["template"] = good
		k.ApplyConfigMap(t, cm)
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, r := e.readyz(t)
			return r.LastError == ""
		}, "recovery once the template is fixed")
	})

	t.Run("a service naming a Kubernetes Service gets its ready endpoints from EndpointSlices", func(t *testing.T) {
		// The API server refuses loopback addresses in EndpointSlices, and no traffic may leave
		// loopback: this checks what the kube source and the snapshot make of the slices
		// (TEST-NET addresses, never handed to HAProxy).
		yes, no := true, false
		_, err := k.Client.DiscoveryV1().EndpointSlices("demo").Create(context.Background(), &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "api-svc-1", Namespace: "demo", Labels: map[string]string{discoveryv1.LabelServiceName: "api-svc"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"192.0.2.10"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes},
					TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "api-x", Namespace: "demo"}},
				{Addresses: []string{"192.0.2.11"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		src := &watcher.Kube{Client: k.Client, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys"}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go src.Run(ctx, func() {})
		var pods map[string]any
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			objs, err := src.Objects(ctx)
			if err != nil {
				return false
			}
			for i, cm := range objs.ConfigMaps {
				if cm.Name == "services" {
					cm = cm.DeepCopy()
					cm.Data = map[string]string{"apisvc": `{"namespace": "demo", "service": "api-svc", "ports": [80]}`}
					objs.ConfigMaps[i] = cm
				}
			}
			snap, err := snapshot.Build(objs, snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			pods = record.Plain(snap.Services[0].Field("pods")).(map[string]any)
			return len(pods) > 0
		}, "the kube source sees the EndpointSlice")
		if len(pods) != 1 || pods["api-x"] == nil {
			t.Fatalf("endpoints = %v, want only the ready api-x", pods)
		}
		if ip := pods["api-x"].(map[string]any)["status"].(map[string]any)["podIP"]; ip != "192.0.2.10" {
			t.Errorf("api-x podIP = %v", ip)
		}
	})

	t.Run("the sidecar recovers from an API server restart and catches up", func(t *testing.T) {
		k.StopAPIServer()
		k.StartAPIServer()
		cm, err := k.Client.CoreV1().ConfigMaps("lb").Get(context.Background(), "services", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["shop"] = fmt.Sprintf(`{"namespace": "demo", "selector": {"app": "api"}, "hostnames": ["shop.localhost"], "ports": [%d]}`, e.port)
		k.ApplyConfigMap(t, cm)
		e.waitServed(t, "shop.localhost", "/", "api-1")
	})
}

// TestLeaderElection: two sidecars with --leader-elect; one applies, the other stands by
// (rendering and validating); stop the leader and the other takes over.
func TestLeaderElection(t *testing.T) {
	k := kubetest.Start(t)
	a := newDemoEnv(t)
	applyExample(t, k, a)
	b := a.instance(t)
	le := []string{"--source=kube", "--kubeconfig", k.Kubeconfig, "--leader-elect",
		"--leader-election-lease-duration", "2s", "--leader-election-renew-deadline", "1s", "--leader-election-retry-period", "100ms"}
	stopA := a.startSidecar(t, append(le, "--pod-name", "a")...)
	a.startHAProxy(t)
	a.waitReady(t)
	b.startSidecar(t, append(le, "--pod-name", "b")...)
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r := b.readyz(t)
		return r.Ready && r.Standby
	}, "b is a ready hot standby")
	if _, err := os.Lstat(b.cfgPath); !os.IsNotExist(err) {
		t.Fatalf("the standby wrote %s (%v)", b.cfgPath, err)
	}
	if _, r := a.readyz(t); r.Standby || r.LiveConfig == "" {
		t.Fatalf("a is not the live leader: %+v", r)
	}

	stopA()
	// b's HAProxy is not running (a's holds the ports): b writes its configuration and says
	// that HAProxy will load it when it starts.
	haproxytest.WaitFor(t, 15*time.Second, func() bool {
		_, r := b.readyz(t)
		return !r.Standby && r.Written != ""
	}, "b takes over")
	if _, err := os.Stat(b.cfgPath); err != nil {
		t.Fatalf("the new leader wrote no configuration: %v", err)
	}
}

// TestKubernetesToDataPlaneHosts is the controller mode: inputs from the Kubernetes API, the
// configuration pushed to a remote host through the (stand-in) Data Plane API, and each host's
// outcome as an Event on the config ConfigMap.
func TestKubernetesToDataPlaneHosts(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	applyExample(t, k, e)
	host := dataplanetest.Start(t, dataplanetest.Options{RuntimeReconnect: 300 * time.Millisecond}) // the demo has no stats socket
	e.startSidecar(t, "--source=kube", "--kubeconfig", k.Kubeconfig, "--reload=dataplane", "--state-dir", t.TempDir(),
		"--dataplane-url", host.URL, "--dataplane-ssl-dir", host.StorageDir)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	haproxytest.WaitFor(t, 15*time.Second, func() bool {
		evs, err := k.Client.CoreV1().Events("lb").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=ConfigMap,involvedObject.name=config,reason=HostSuccess"})
		return err == nil && len(evs.Items) > 0 && strings.Contains(evs.Items[0].Message, host.URL)
	}, "a HostSuccess Event naming the host on the config ConfigMap")
}
