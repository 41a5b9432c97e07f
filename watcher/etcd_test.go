package watcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/etcdtest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// etcdWait bounds every wait for the source to see a change.
const etcdWait = 30 * time.Second

// etcdLogs keeps what the source logs (and passes it to t.Log) so tests can look for messages.
type etcdLogs struct {
	t    *testing.T
	mu   sync.Mutex
	buf  bytes.Buffer
	done bool
}

func (l *etcdLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if !l.done {
		l.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (l *etcdLogs) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), s)
}

// etcdRun is an etcd source running in the background for a test.
type etcdRun struct {
	t       *testing.T
	src     *Etcd
	logs    *etcdLogs
	changes chan struct{}
	mu      sync.Mutex
	ups     []bool
	upc     chan struct{}
}

// runEtcd starts the source; it is stopped, and Run's result checked, when the test ends.
func runEtcd(t *testing.T, cfg EtcdConfig) *etcdRun {
	t.Helper()
	r := &etcdRun{t: t, logs: &etcdLogs{t: t}, changes: make(chan struct{}, 1), upc: make(chan struct{}, 1)}
	cfg.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.WatchdogInterval == 0 {
		// Short enough for the tests, long enough that a loaded machine does not make a
		// healthy stream look stalled; the outage tests use 400 ms.
		cfg.WatchdogInterval = 2 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 3 * time.Second
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 500 * time.Millisecond
	}
	cfg.OnState = func(up bool, _ error) {
		r.mu.Lock()
		r.ups = append(r.ups, up)
		r.mu.Unlock()
		notify(r.upc)
	}
	src, err := NewEtcd(cfg)
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	r.src = src
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, func() { notify(r.changes) }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v, want context.Canceled", err)
			}
		case <-time.After(etcdWait):
			t.Errorf("Run did not return within %s of the end of its context", etcdWait)
		}
		r.logs.mu.Lock()
		r.logs.done = true
		r.logs.mu.Unlock()
		if r.logs.contains("an event was missed") {
			t.Error("the source missed a watch event")
		}
	})
	return r
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// objects calls Objects with a deadline.
func (r *etcdRun) objects() (*snapshot.Objects, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.src.Objects(ctx)
}

// waitFor calls Objects after every change notification (and at least every 200 ms) until ok
// accepts the result, or fails the test after etcdWait.
func (r *etcdRun) waitFor(what string, ok func(*snapshot.Objects, error) bool) *snapshot.Objects {
	r.t.Helper()
	deadline := time.NewTimer(etcdWait)
	defer deadline.Stop()
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	var (
		objs *snapshot.Objects
		err  error
	)
	for {
		objs, err = r.objects()
		if ok(objs, err) {
			return objs
		}
		select {
		case <-r.changes:
		case <-poll.C:
		case <-deadline.C:
			r.t.Fatalf("waited %s for %s; last Objects: %s, error %v", etcdWait, what, describe(objs), err)
		}
	}
}

// waitUp waits until OnUp has reported up (or down) since the start of the test.
func (r *etcdRun) waitUp(up bool) {
	r.t.Helper()
	deadline := time.NewTimer(etcdWait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		n := len(r.ups)
		last := n > 0 && r.ups[n-1]
		r.mu.Unlock()
		if n > 0 && last == up {
			return
		}
		select {
		case <-r.upc:
		case <-deadline.C:
			r.t.Fatalf("OnUp(%v) not called within %s; calls: %v", up, etcdWait, r.upCalls())
		}
	}
}

// waitLog waits until the source has logged s.
func (r *etcdRun) waitLog(s string) {
	r.t.Helper()
	deadline := time.Now().Add(etcdWait)
	for !r.logs.contains(s) {
		if time.Now().After(deadline) {
			r.t.Fatalf("the source did not log %q within %s", s, etcdWait)
		}
		select {
		case <-r.upc:
		case <-time.After(100 * time.Millisecond): // poll the log
		}
	}
}

func (r *etcdRun) upCalls() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.ups...)
}

func describe(o *snapshot.Objects) string {
	if o == nil {
		return "nil"
	}
	var parts []string
	for _, cm := range o.ConfigMaps {
		parts = append(parts, "ConfigMap "+cm.Namespace+"/"+cm.Name+"@"+cm.ResourceVersion)
	}
	for _, s := range o.Secrets {
		parts = append(parts, "Secret "+s.Namespace+"/"+s.Name)
	}
	for _, p := range o.Pods {
		parts = append(parts, fmt.Sprintf("Pod %s/%s ready=%v", p.Namespace, p.Name, snapshot.PodReady(p)))
	}
	return "[" + strings.Join(parts, ", ") + "] revision " + o.Revision
}

func findPod(o *snapshot.Objects, ns, name string) *corev1.Pod {
	if o == nil {
		return nil
	}
	for _, p := range o.Pods {
		if p.Namespace == ns && p.Name == name {
			return p
		}
	}
	return nil
}

func findConfigMap(o *snapshot.Objects, ns, name string) *corev1.ConfigMap {
	if o == nil {
		return nil
	}
	for _, cm := range o.ConfigMaps {
		if cm.Namespace == ns && cm.Name == name {
			return cm
		}
	}
	return nil
}

// readyPods returns "ns/name" of the ready pods, typed or converted, sorted as Objects sorts
// them.
func readyPods(o *snapshot.Objects) []string {
	var out []string
	if o == nil {
		return nil
	}
	for _, p := range o.Pods {
		if snapshot.PodReady(p) {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	for _, p := range o.ConvertedPods {
		if p.Ready() {
			out = append(out, p.Namespace()+"/"+p.Name())
		}
	}
	return out
}

// readyPodIP returns the IP of a ready pod, typed or converted ("" if there is none).
func readyPodIP(o *snapshot.Objects, ns, name string) string {
	if p := findPod(o, ns, name); p != nil && snapshot.PodReady(p) {
		return p.Status.PodIP
	}
	if o == nil {
		return ""
	}
	for _, p := range o.ConvertedPods {
		if p.Namespace() == ns && p.Name() == name && p.Ready() {
			ip, _ := p.Object().Map()["status"].(map[string]any)["podIP"].(string)
			return ip
		}
	}
	return ""
}

// hasPod reports whether the objects hold the pod, typed or converted, ready or not.
func hasPod(o *snapshot.Objects, ns, name string) bool {
	if findPod(o, ns, name) != nil {
		return true
	}
	if o == nil {
		return false
	}
	for _, p := range o.ConvertedPods {
		if p.Namespace() == ns && p.Name() == name {
			return true
		}
	}
	return false
}

func services(entries map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}, Data: entries}
}

func shopPod(ns, name, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: app}}},
	}
}

// readyPod is a pod with the status a kubelet reports for a running, ready (or unready) pod.
func readyPod(ns, name, app, ip string, ready bool) *corev1.Pod {
	p := shopPod(ns, name, app)
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status = corev1.PodStatus{
		Phase:             corev1.PodRunning,
		PodIP:             ip,
		PodIPs:            []corev1.PodIP{{IP: ip}},
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: ready}},
	}
	return p
}

// TestEtcdSourceWithAPIServer: objects written by a real kube-apiserver are read by the etcd
// source straight from the API server's etcd. The API server encrypts Secrets at rest.
func TestEtcdSourceWithAPIServer(t *testing.T) {
	env := kubetest.StartWith(t, kubetest.Options{EncryptSecrets: true})
	env.ApplyConfigMap(t, services(map[string]string{"shop": `{"namespace": "web", "selector": {"app": "shop"}}`}))
	env.ApplyPod(t, shopPod("web", "shop-0", "shop"))
	env.ApplyPod(t, shopPod("other", "x-0", "shop")) // a namespace no service names
	env.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "lb"}, Data: map[string]string{"a": "b"}})

	r := runEtcd(t, EtcdConfig{Endpoints: []string{env.EtcdURL}, Prefix: env.EtcdPrefix})
	r.waitUp(true)

	t.Run("initial list", func(t *testing.T) {
		o := r.waitFor("the services and pod shop-0", func(o *snapshot.Objects, err error) bool {
			return err == nil && findConfigMap(o, "lb", "services") != nil && findPod(o, "web", "shop-0") != nil
		})
		if findPod(o, "other", "x-0") != nil {
			t.Error("a pod of a namespace no service names was read")
		}
		if findConfigMap(o, "lb", "unrelated") != nil {
			t.Error("a ConfigMap the snapshot does not read was kept")
		}
		// resourceVersion is the key's ModRevision, which is what the API server reports.
		api, err := env.Client.CoreV1().Pods("web").Get(context.Background(), "shop-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := findPod(o, "web", "shop-0"); got.ResourceVersion != api.ResourceVersion || got.UID != api.UID {
			t.Errorf("pod resourceVersion %s uid %s, API server says %s %s", got.ResourceVersion, got.UID, api.ResourceVersion, api.UID)
		}
	})

	t.Run("pod ready and unready through the status subresource", func(t *testing.T) {
		env.SetPodReady(t, "web", "shop-0", "10.0.0.10", true)
		o := r.waitFor("shop-0 ready", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-0"})
		})
		snap, err := snapshot.Build(o, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if pods := record.Plain(snap.Services[0].Field("pods")).(map[string]any); len(pods) != 1 || pods["shop-0"] == nil {
			t.Fatalf("service pods %v", pods)
		}
		env.SetPodReady(t, "web", "shop-0", "", false)
		r.waitFor("shop-0 unready", func(o *snapshot.Objects, err error) bool {
			p := findPod(o, "web", "shop-0")
			return err == nil && p != nil && !snapshot.PodReady(p) && p.Status.PodIP == "10.0.0.10"
		})
	})

	t.Run("edit services: a new namespace is watched", func(t *testing.T) {
		env.ApplyPod(t, shopPod("api", "api-0", "api"))
		env.SetPodReady(t, "api", "api-0", "10.0.1.1", true)
		drain(r.changes)
		env.ApplyConfigMap(t, services(map[string]string{
			"shop": `{"namespace": "web", "selector": {"app": "shop"}}`,
			"api":  `{"namespace": "api", "selector": {"app": "api"}}`,
		}))
		select {
		case <-r.changes:
		case <-time.After(etcdWait):
			t.Fatal("no change notification after the services ConfigMap was edited")
		}
		o := r.waitFor("api-0 through the new namespace watch", func(o *snapshot.Objects, err error) bool {
			return err == nil && findPod(o, "api", "api-0") != nil && len(findConfigMap(o, "lb", "services").Data) == 2
		})
		snap, err := snapshot.Build(o, snapshot.Options{})
		if err != nil || len(snap.Services) != 2 || snap.Services[0].Field("name") != "api" || len(record.Plain(snap.Services[0].Field("pods")).(map[string]any)) != 1 {
			t.Fatalf("snapshot %v, %v", snap, err)
		}
	})

	t.Run("a service naming a Kubernetes Service: its EndpointSlices", func(t *testing.T) {
		ready, unready := true, false
		env.ApplyEndpointSlice(t, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "db-abc", Namespace: "db", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.0.2.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
				{Addresses: []string{"10.0.2.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &unready}},
			},
		})
		env.ApplyPod(t, shopPod("db", "db-0", "db")) // pods of that namespace are not read
		env.ApplyConfigMap(t, services(map[string]string{
			"shop": `{"namespace": "web", "selector": {"app": "shop"}}`,
			"api":  `{"namespace": "api", "selector": {"app": "api"}}`,
			"db":   `{"namespace": "db", "service": "db"}`,
		}))
		o := r.waitFor("the EndpointSlice of db", func(o *snapshot.Objects, err error) bool {
			return err == nil && len(o.EndpointSlices) == 1
		})
		if hasPod(o, "db", "db-0") {
			t.Error("pods of a namespace only a Service-backed service names were read")
		}
		snap, err := snapshot.Build(o, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range snap.Services {
			if svc.Field("name") == "db" {
				if pods := record.Plain(svc.Field("pods")).(map[string]any); len(pods) != 1 || pods["ep-10-0-2-1"] == nil {
					t.Fatalf("db endpoints %v", pods)
				}
				return
			}
		}
		t.Fatal("no db service")
	})

	t.Run("a namespace no longer named is dropped", func(t *testing.T) {
		env.ApplyConfigMap(t, services(map[string]string{"api": `{"namespace": "api", "selector": {"app": "api"}}`}))
		r.waitFor("no pods of web, no EndpointSlices of db", func(o *snapshot.Objects, err error) bool {
			return err == nil && findPod(o, "web", "shop-0") == nil && findPod(o, "api", "api-0") != nil && len(o.EndpointSlices) == 0
		})
	})

	t.Run("deleted pod", func(t *testing.T) {
		env.DeletePod(t, "api", "api-0")
		r.waitFor("api-0 gone", func(o *snapshot.Objects, err error) bool {
			return err == nil && findPod(o, "api", "api-0") == nil
		})
	})

	t.Run("encrypted Secrets", func(t *testing.T) {
		// With a certificate selector every Secret is decoded for its labels.
		rs := runEtcd(t, EtcdConfig{Endpoints: []string{env.EtcdURL}, Prefix: env.EtcdPrefix, CertificateSelector: "haproxy-sidecar/certificate"})
		env.ApplySecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "helm-release", Namespace: "lb"}, Data: map[string][]byte{"x": []byte("y")}})
		env.ApplyPod(t, shopPod("api", "api-2", "api"))
		env.SetPodReady(t, "api", "api-2", "10.0.1.3", true)
		t.Run("an encrypted Secret the snapshot does not read by name is only logged", func(t *testing.T) {
			o := rs.waitFor("the services and api-2", func(o *snapshot.Objects, err error) bool {
				return err == nil && slicesEqual(readyPods(o), []string{"api/api-2"})
			})
			if len(o.Secrets) != 0 {
				t.Fatalf("secrets %v", describe(o))
			}
		})

		t.Run("the encrypted keys Secret is reported", func(t *testing.T) {
			env.ApplySecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: "lb"}, Data: map[string][]byte{"a.pem": []byte("k")}})
			var err error
			rs.waitFor("an error about the keys Secret", func(_ *snapshot.Objects, e error) bool {
				err = e
				return e != nil
			})
			var ie *snapshot.InputError
			if !errors.As(err, &ie) || ie.Stage != snapshot.StageDecode || ie.Ref != (snapshot.Ref{Kind: "Secret", Namespace: "lb", Name: "keys"}) {
				t.Fatalf("error %v, want an InputError for Secret lb/keys", err)
			}
			for _, want := range []string{"/registry/secrets/lb/keys", "k8s:enc:aescbc:v1:" + kubetest.EncryptionKeyName, "--source=kube"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if !rs.logs.contains("/registry/secrets/lb/helm-release") {
				t.Error("the undecodable helm-release Secret was not logged")
			}
		})

		t.Run("the rest keeps being followed", func(t *testing.T) {
			env.DeletePod(t, "api", "api-2")
			// Once the keys Secret is gone the objects come back, without api-2.
			ctx, cancel := context.WithTimeout(context.Background(), etcdWait)
			defer cancel()
			if err := env.Client.CoreV1().Secrets("lb").Delete(ctx, "keys", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			rs.waitFor("objects without api-2 or errors", func(o *snapshot.Objects, err error) bool {
				return err == nil && !hasPod(o, "api", "api-2") && findConfigMap(o, "lb", "services") != nil
			})
		})
	})

	t.Run("API server restart does not matter", func(t *testing.T) {
		env.StopAPIServer()
		if _, err := r.objects(); err != nil {
			t.Fatalf("Objects while the API server is down: %v", err)
		}
		env.StartAPIServer()
		env.ApplyPod(t, shopPod("api", "api-1", "api"))
		env.SetPodReady(t, "api", "api-1", "10.0.1.2", true)
		r.waitFor("api-1 after the API server restart", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"api/api-1"})
		})
		if ups := r.upCalls(); len(ups) != 1 || !ups[0] {
			t.Errorf("OnUp calls %v: the source never lost etcd", ups)
		}
	})
}

func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// TestEtcdSourceSameAsFile: the same manifests read from a directory and from the etcd a real
// API server wrote them to render to the same bytes.
func TestEtcdSourceSameAsFile(t *testing.T) {
	file := &File{Dir: "../examples/local", DefaultNamespace: "lb"}
	fromFile, err := file.Objects(context.Background())
	if err != nil {
		t.Fatalf("file source: %v", err)
	}
	env := kubetest.Start(t)
	for _, cm := range fromFile.ConfigMaps {
		env.ApplyConfigMap(t, cm)
	}
	for _, s := range fromFile.Secrets {
		env.ApplySecret(t, s)
	}
	for _, p := range fromFile.Pods {
		env.ApplyPod(t, p) // with its status, through the status subresource
	}
	// Pods converted by the source (as main wires it), typed from the file source.
	r := runEtcd(t, EtcdConfig{Endpoints: []string{env.EtcdURL}, Prefix: env.EtcdPrefix,
		CertificateSelector: "haproxy-sidecar/certificate", PodConverter: &snapshot.PodConverter{}})
	fromEtcd := r.waitFor("every object of examples/local", func(o *snapshot.Objects, err error) bool {
		return err == nil && o != nil && len(o.ConfigMaps) == len(fromFile.ConfigMaps) &&
			len(o.Secrets) == len(fromFile.Secrets) && len(o.ConvertedPods) == len(fromFile.Pods)
	})

	opts := snapshot.Options{StatsPassword: "s3cret", StatsPasswordSet: true, Env: map[string]string{}}
	renderBytes := func(name string, objs *snapshot.Objects) []byte {
		t.Helper()
		snap, err := snapshot.Build(objs, opts)
		if err != nil {
			t.Fatalf("%s: build: %v", name, err)
		}
		b, err := render.New(render.Options{SSLDir: "/x"}).Render(context.Background(), snap)
		if err != nil {
			t.Fatalf("%s: render: %v", name, err)
		}
		if len(snap.Services) == 0 || len(snap.Certificates) == 0 {
			t.Fatalf("%s: %d services, %d certificates: the example should have both", name, len(snap.Services), len(snap.Certificates))
		}
		return b.Config
	}
	a, b := renderBytes("file", fromFile), renderBytes("etcd", fromEtcd)
	if !bytes.Equal(a, b) {
		t.Fatalf("the renders differ:\n--- file\n%s\n--- etcd\n%s", a, b)
	}
	if !bytes.Contains(a, []byte("127.0.0.11")) {
		t.Fatalf("the render has no server of the example's ready pods:\n%s", a)
	}
}

// etcdPrefix is where the etcdtest-based tests write objects, as an API server with
// --etcd-prefix=/kubernetes.io would.
const etcdPrefix = "/kubernetes.io"

// TestEtcdSourceOutages runs against a bare etcd holding objects encoded exactly as the API
// server encodes them: etcd killed and restarted, a client cut off while others write and
// compact, a silently stalled connection, garbage values.
func TestEtcdSourceOutages(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	proxy := srv.Proxy()
	put := func(obj interface{}) int64 {
		t.Helper()
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			return srv.PutObject(etcdPrefix, o, etcdtest.Protobuf)
		case *corev1.Pod:
			return srv.PutObject(etcdPrefix, o, etcdtest.Protobuf)
		}
		t.Fatalf("put %T", obj)
		return 0
	}
	put(services(map[string]string{"shop": `{"namespace": "web", "selector": {"app": "shop"}}`}))
	put(readyPod("web", "shop-0", "shop", "10.0.0.1", true))
	put(readyPod("web", "shop-1", "shop", "10.0.0.2", true))

	// Pages of two keys: every list is paged.
	r := runEtcd(t, EtcdConfig{Endpoints: []string{proxy.Endpoint}, Prefix: etcdPrefix, PageSize: 2,
		CertificateSelector: "haproxy-sidecar/certificate", PodConverter: &snapshot.PodConverter{},
		WatchdogInterval: 400 * time.Millisecond})
	r.waitUp(true)
	r.waitFor("shop-0 and shop-1", func(o *snapshot.Objects, err error) bool {
		return err == nil && slicesEqual(readyPods(o), []string{"web/shop-0", "web/shop-1"})
	})

	t.Run("only the Secrets the snapshot reads are kept", func(t *testing.T) {
		secret := func(name string, labels map[string]string) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lb", Labels: labels},
				Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}}
		}
		srv.PutObject(etcdPrefix, secret("keys", nil), etcdtest.Protobuf)
		srv.PutObject(etcdPrefix, secret("site", map[string]string{"haproxy-sidecar/certificate": "true"}), etcdtest.Protobuf)
		srv.PutObject(etcdPrefix, secret("unrelated", map[string]string{"app": "x"}), etcdtest.Protobuf)
		o := r.waitFor("the keys and site Secrets", func(o *snapshot.Objects, err error) bool {
			return err == nil && len(o.Secrets) == 2
		})
		if o.Secrets[0].Name != "keys" || o.Secrets[1].Name != "site" {
			t.Fatalf("secrets: %s", describe(o))
		}
		for _, name := range []string{"keys", "site", "unrelated"} {
			srv.DeleteObject(etcdPrefix, secret(name, nil))
		}
		r.waitFor("no Secrets", func(o *snapshot.Objects, err error) bool { return err == nil && len(o.Secrets) == 0 })
	})

	t.Run("etcd killed and restarted", func(t *testing.T) {
		srv.Kill()
		r.waitUp(false)
		o, err := r.objects()
		if err != nil || !slicesEqual(readyPods(o), []string{"web/shop-0", "web/shop-1"}) {
			t.Fatalf("Objects during the outage: %s, %v; want the last objects", describe(o), err)
		}
		srv.Restart()
		r.waitUp(true)
		put(readyPod("web", "shop-2", "shop", "10.0.0.3", true))
		srv.DeleteObject(etcdPrefix, shopPod("web", "shop-1", "shop"))
		r.waitFor("shop-2 in, shop-1 out", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-0", "web/shop-2"})
		})
	})

	t.Run("compaction while cut off", func(t *testing.T) {
		proxy.Cut()
		r.waitUp(false)
		// Changes the source cannot see, then history compacted past them: the watch cannot
		// resume, only a new list can tell that shop-0 went away.
		srv.DeleteObject(etcdPrefix, shopPod("web", "shop-0", "shop"))
		put(readyPod("web", "shop-2", "shop", "10.0.0.3", false))
		put(readyPod("web", "shop-3", "shop", "10.0.0.4", true))
		srv.Compact()
		proxy.Restore()
		r.waitUp(true)
		o := r.waitFor("shop-3 only", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-3"})
		})
		if hasPod(o, "web", "shop-0") {
			t.Fatal("the pod deleted during the cut is still there")
		}
		if !r.logs.contains("listing again") {
			t.Error("no re-list was logged")
		}
	})

	t.Run("compaction while the client reconnects by itself", func(t *testing.T) {
		// A watchdog too slow to notice: the etcd client resumes its watch from the last
		// revision it saw, etcd answers that it was compacted, and the source lists again.
		p2 := srv.Proxy()
		r2 := runEtcd(t, EtcdConfig{Endpoints: []string{p2.Endpoint}, Prefix: etcdPrefix, WatchdogInterval: time.Hour})
		r2.waitFor("shop-3", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-3"})
		})
		p2.Cut()
		srv.DeleteObject(etcdPrefix, shopPod("web", "shop-3", "shop"))
		put(readyPod("web", "shop-2", "shop", "10.0.0.3", true))
		srv.Compact()
		p2.Restore()
		o := r2.waitFor("shop-2 only", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-2"})
		})
		if hasPod(o, "web", "shop-3") {
			t.Fatal("the pod deleted during the cut is still there")
		}
		if !r2.logs.contains("compacted") {
			t.Error("the compaction was not logged")
		}
		// Put back what the next subtests expect.
		srv.DeleteObject(etcdPrefix, shopPod("web", "shop-2", "shop"))
		put(readyPod("web", "shop-3", "shop", "10.0.0.4", true))
	})

	t.Run("silently stalled connection", func(t *testing.T) {
		proxy.Stall()
		r.waitUp(false)
		put(readyPod("web", "shop-4", "shop", "10.0.0.5", true))
		proxy.Restore()
		r.waitUp(true)
		r.waitFor("shop-4", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-3", "web/shop-4"})
		})
		if !r.logs.contains("no answer on the watch stream") {
			t.Error("the watchdog did not report the stall")
		}
	})

	t.Run("garbage values", func(t *testing.T) {
		srv.Put(etcdPrefix+"/pods/web/broken", []byte("\x00\xffnot an object"))
		srv.Put(etcdPrefix+"/configmaps/lb/config", []byte("k8s:enc:aesgcm:v1:k:\x01\x02"))
		var err error
		o := r.waitFor("an error about the config ConfigMap", func(_ *snapshot.Objects, e error) bool {
			err = e
			return e != nil
		})
		var ie *snapshot.InputError
		if o != nil || !errors.As(err, &ie) || ie.Ref != (snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}) {
			t.Fatalf("Objects %s, error %v; want an InputError for ConfigMap lb/config", describe(o), err)
		}
		r.waitLog(etcdPrefix + "/pods/web/broken") // the pods are watched apart from the ConfigMaps
		// Fixed: the garbage pod is only logged, the others are fine.
		srv.Delete(etcdPrefix + "/configmaps/lb/config")
		put(readyPod("web", "shop-5", "shop", "10.0.0.6", true))
		r.waitFor("shop-5 and no error", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-3", "web/shop-4", "web/shop-5"})
		})
	})

	t.Run("a burst of changes", func(t *testing.T) {
		for i := range 20 {
			put(readyPod("web", "burst", "shop", fmt.Sprintf("10.0.9.%d", i), i%2 == 0))
			if i == 10 {
				srv.DeleteObject(etcdPrefix, shopPod("web", "burst", "shop"))
			}
		}
		put(readyPod("web", "burst", "shop", "10.0.9.99", true))
		r.waitFor("the burst's last state", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/burst", "web/shop-3", "web/shop-4", "web/shop-5"}) &&
				readyPodIP(o, "web", "burst") == "10.0.9.99"
		})
		srv.DeleteObject(etcdPrefix, shopPod("web", "burst", "shop"))
		r.waitFor("burst gone", func(o *snapshot.Objects, err error) bool {
			return err == nil && !hasPod(o, "web", "burst")
		})
	})

	t.Run("started while etcd is down", func(t *testing.T) {
		srv.Kill()
		r3 := runEtcd(t, EtcdConfig{Endpoints: []string{srv.Endpoint}, Prefix: etcdPrefix, WatchdogInterval: 400 * time.Millisecond})
		r3.waitUp(false)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if o, err := r3.src.Objects(ctx); err == nil {
			t.Fatalf("Objects before anything was read: %s", describe(o))
		}
		srv.Restart()
		r3.waitFor("the pods once etcd is up", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-3", "web/shop-4", "web/shop-5"})
		})
		r3.waitUp(true)
		if ups := r3.upCalls(); ups[0] {
			t.Errorf("OnUp calls %v: up reported before etcd was reached", ups)
		}
	})
}

// TestEtcdSourceTLS: etcd with client-certificate authentication and authorization on, the
// source's user (the certificate's common name) holding only a read role on the prefixes it
// reads, as docs/etcd.md tells operators to set up.
func TestEtcdSourceTLS(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{TLS: true})
	srv.PutObject(etcdPrefix, services(map[string]string{"shop": `{"namespace": "web", "selector": {"app": "shop"}}`}), etcdtest.Protobuf)
	srv.PutObject(etcdPrefix, readyPod("web", "shop-0", "shop", "10.0.0.1", true), etcdtest.JSON)
	readable := []string{etcdPrefix + "/configmaps/lb/", etcdPrefix + "/secrets/lb/", etcdPrefix + "/pods/"}
	srv.EnableAuth("rootpw", etcdtest.ClientCommonName, "", readable...)
	srv.AddReadUser("sidecar", "s3cret", readable...)

	t.Run("client certificate", func(t *testing.T) {
		r := runEtcd(t, EtcdConfig{Endpoints: []string{srv.Endpoint}, Prefix: etcdPrefix,
			CACert: srv.Certs.CA, Cert: srv.Certs.ClientCert, Key: srv.Certs.ClientKey})
		r.waitFor("shop-0 over TLS", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-0"})
		})
		srv.PutObject(etcdPrefix, readyPod("web", "shop-1", "shop", "10.0.0.2", true), etcdtest.Protobuf)
		r.waitFor("shop-1 through the watch", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-0", "web/shop-1"})
		})
		if ups := r.upCalls(); len(ups) == 0 || !ups[len(ups)-1] {
			t.Errorf("OnUp calls %v, want up", ups)
		}
	})

	t.Run("user name and password", func(t *testing.T) {
		cert, key := srv.Certs.NewClientCert(t, "nobody") // a certificate whose CN has no role
		r := runEtcd(t, EtcdConfig{Endpoints: []string{srv.Endpoint}, Prefix: etcdPrefix,
			CACert: srv.Certs.CA, Cert: cert, Key: key, Username: "sidecar", Password: "s3cret"})
		r.waitFor("shop-0 and shop-1 as user sidecar", func(o *snapshot.Objects, err error) bool {
			return err == nil && slicesEqual(readyPods(o), []string{"web/shop-0", "web/shop-1"})
		})
	})

	t.Run("no client certificate", func(t *testing.T) {
		r := runEtcd(t, EtcdConfig{Endpoints: []string{srv.Endpoint}, Prefix: etcdPrefix, CACert: srv.Certs.CA, RequestTimeout: time.Second})
		// Under TLS 1.3 the refusal comes after the handshake: the client sees "certificate
		// required" on some attempts and "broken pipe" on others, so the message is not checked.
		r.waitUp(false)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if o, err := r.src.Objects(ctx); err == nil {
			t.Fatalf("Objects without access to etcd: %s", describe(o))
		}
	})

	t.Run("a user without a role on the prefix", func(t *testing.T) {
		cert, key := srv.Certs.NewClientCert(t, "stranger")
		r := runEtcd(t, EtcdConfig{Endpoints: []string{srv.Endpoint}, Prefix: etcdPrefix, CACert: srv.Certs.CA, Cert: cert, Key: key})
		r.waitUp(false)
		r.waitLog("permission denied")
	})
}

func TestNewEtcdErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  EtcdConfig
		want string
	}{
		{"no endpoints", EtcdConfig{}, "no endpoints"},
		{"root prefix", EtcdConfig{Endpoints: []string{"http://x"}, Prefix: "/"}, "prefix"},
		{"bad namespace", EtcdConfig{Endpoints: []string{"http://x"}, Namespace: "a/b"}, "namespace"},
		{"cert without key", EtcdConfig{Endpoints: []string{"http://x"}, Cert: "c.pem"}, "give both"},
		{"missing CA", EtcdConfig{Endpoints: []string{"https://x"}, CACert: "/nonexistent/ca.crt"}, "CA certificate"},
		{"bad selector", EtcdConfig{Endpoints: []string{"http://x"}, CertificateSelector: "a in ("}, "selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewEtcd(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewEtcd: %v, want an error about %q", err, tc.want)
			}
		})
	}
	t.Run("prefix normalised", func(t *testing.T) {
		e, err := NewEtcd(EtcdConfig{Endpoints: []string{"http://x"}, Prefix: "registry/"})
		if err != nil || e.cfg.Prefix != "/registry" {
			t.Fatalf("%v %+v", err, e)
		}
	})
}
