// Package kubetest runs a real kube-apiserver and etcd on loopback for tests, through
// controller-runtime's envtest and the binaries hack/testbins.sh builds. Ports are chosen at run
// time; every process is stopped when the test ends.
//
// There is no controller-manager, scheduler or kubelet: pods are admitted without a
// ServiceAccount (the ServiceAccount admission plugin is off), stay Pending and unscheduled,
// and become ready only when a test says so (SetPodReady, through the status subresource);
// EndpointSlices are written by the test (ApplyEndpointSlice).
//
// envtest starts each process in its own process group and stops it from a test cleanup: a
// test binary killed before its cleanups run (a -timeout panic) leaves them running.
package kubetest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/etcdtest"
)

// Timeouts for starting and stopping each process, and for one API call of a helper.
const (
	StartTimeout = 60 * time.Second
	StopTimeout  = 20 * time.Second
	CallTimeout  = 30 * time.Second
)

// DefaultEtcdPrefix is kube-apiserver's default --etcd-prefix.
const DefaultEtcdPrefix = "/registry"

// EncryptionKeyName is the key name in the values of Secrets encrypted with
// Options.EncryptSecrets: they start with "k8s:enc:aescbc:v1:key1:".
const EncryptionKeyName = "key1"

// Options change how the control plane is started; the zero value is the default.
type Options struct {
	// EtcdPrefix is the API server's --etcd-prefix; empty means DefaultEtcdPrefix.
	EtcdPrefix string
	// EncryptSecrets makes the API server encrypt Secrets at rest (aescbc, key
	// EncryptionKeyName), as a cluster with encryption at rest does.
	EncryptSecrets bool
	// APIServerArgs are extra kube-apiserver flags: name (without "--") -> values.
	APIServerArgs map[string][]string
}

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as a cluster admin (system:masters).
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// EtcdURL is the client URL of the etcd the API server stores objects in (plain HTTP).
	EtcdURL string
	// EtcdPrefix is the API server's --etcd-prefix: objects are under EtcdPrefix/<resource>/.
	EtcdPrefix string
	// Kubeconfig is the path of a kubeconfig file for Config (for --kubeconfig, kubectl).
	Kubeconfig string
	// KubectlPath is the kubectl binary matching the API server.
	KubectlPath string

	t    testing.TB
	env  *envtest.Environment
	logs []string // files holding the processes' output

	mu         sync.Mutex
	namespaces map[string]bool
}

// Start runs etcd and kube-apiserver with the default Options; see StartWith.
func Start(t testing.TB) *Env {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith runs etcd and kube-apiserver and returns once the API server is ready and the
// default namespace exists. It skips the test under -short or when the binaries are missing
// (see etcdtest.BinDir). Both processes are stopped when the test ends; when the test failed,
// the end of their output is logged.
func StartWith(t testing.TB, opts Options) *Env {
	t.Helper()
	bins := etcdtest.BinDir(t, "kube-apiserver", "etcd", "kubectl")
	// controller-runtime complains on stderr after 30 s unless a logger is set; the processes'
	// output goes to files instead (logged when a test fails).
	logf.SetLogger(logr.Discard())

	work := t.TempDir()
	prefix := opts.EtcdPrefix
	if prefix == "" {
		prefix = DefaultEtcdPrefix
	}
	e := &Env{t: t, EtcdPrefix: prefix, namespaces: map[string]bool{}}

	apiLog := e.logFile(filepath.Join(work, "kube-apiserver.log"))
	etcdLog := e.logFile(filepath.Join(work, "etcd.log"))
	api := &envtest.APIServer{CertDir: mkdir(t, work, "apiserver"), Out: apiLog, Err: apiLog}
	args := api.Configure()
	args.Set("disable-admission-plugins", "ServiceAccount")
	args.Set("etcd-prefix", prefix)
	if opts.EncryptSecrets {
		args.Set("encryption-provider-config", writeEncryptionConfig(t, work))
	}
	for k, v := range opts.APIServerArgs {
		args.Set(k, v...)
	}
	// A DataDir given here is kept across Stop/Start (envtest only removes directories it
	// created), which is what StopEtcd/StartEtcd need.
	etcd := &envtest.Etcd{DataDir: mkdir(t, work, "etcd"), Out: etcdLog, Err: etcdLog}

	e.env = &envtest.Environment{
		BinaryAssetsDirectory:    bins,
		ControlPlane:             envtest.ControlPlane{APIServer: api, Etcd: etcd},
		ControlPlaneStartTimeout: StartTimeout,
		ControlPlaneStopTimeout:  StopTimeout,
	}
	cfg, err := e.env.Start()
	t.Cleanup(func() {
		if err := e.env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
		if t.Failed() {
			e.logTails()
		}
	})
	if err != nil {
		t.Fatalf("start kube-apiserver and etcd from %s: %v", bins, err)
	}
	e.Config = cfg
	e.Client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("create a clientset: %v", err)
	}
	e.EtcdURL = etcd.URL.String()
	e.KubectlPath = e.env.ControlPlane.KubectlPath
	e.Kubeconfig = filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, e.env.KubeConfig, 0o600); err != nil {
		t.Fatalf("write the kubeconfig: %v", err)
	}
	return e
}

func mkdir(t testing.TB, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("create %s: %v", dir, err)
	}
	return dir
}

func (e *Env) logFile(path string) *os.File {
	e.t.Helper()
	f, err := os.Create(path)
	if err != nil {
		e.t.Fatalf("create %s: %v", path, err)
	}
	e.t.Cleanup(func() { f.Close() })
	e.logs = append(e.logs, path)
	return f
}

// logTails logs the last lines each process wrote.
func (e *Env) logTails() {
	const keep = 40
	for _, path := range e.logs {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if len(lines) > keep {
				lines = lines[1:]
			}
		}
		f.Close()
		e.t.Logf("last lines of %s:\n%s", filepath.Base(path), strings.Join(lines, "\n"))
	}
}

func writeEncryptionConfig(t testing.TB, dir string) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatalf("encryption key: %v", err)
	}
	cfg := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - aescbc:
      keys:
      - name: %s
        secret: %s
  - identity: {}
`, EncryptionKeyName, base64.StdEncoding.EncodeToString(key))
	path := filepath.Join(dir, "encryption.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatalf("write the encryption configuration: %v", err)
	}
	return path
}

// StopAPIServer stops kube-apiserver; etcd keeps running.
func (e *Env) StopAPIServer() {
	e.t.Helper()
	if err := e.env.ControlPlane.APIServer.Stop(); err != nil {
		e.t.Fatalf("stop kube-apiserver: %v", err)
	}
}

// StartAPIServer starts kube-apiserver again on the same port with the same certificates, so
// Config, Client and Kubeconfig keep working; it returns once the API server is healthy.
func (e *Env) StartAPIServer() {
	e.t.Helper()
	if err := e.env.ControlPlane.APIServer.Start(); err != nil {
		e.t.Fatalf("restart kube-apiserver: %v", err)
	}
}

// StopEtcd stops etcd; its data directory is kept. The API server keeps running and fails
// requests until StartEtcd. It takes about 7 s while the API server is connected: etcd waits
// that long for open watch streams before it closes them.
func (e *Env) StopEtcd() {
	e.t.Helper()
	if err := e.env.ControlPlane.Etcd.Stop(); err != nil {
		e.t.Fatalf("stop etcd: %v", err)
	}
}

// StartEtcd starts etcd again on the same client URL with the same data.
func (e *Env) StartEtcd() {
	e.t.Helper()
	if err := e.env.ControlPlane.Etcd.Start(); err != nil {
		e.t.Fatalf("restart etcd: %v", err)
	}
}

func (e *Env) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), CallTimeout)
}

// Namespace creates the namespace unless it exists.
func (e *Env) Namespace(t testing.TB, name string) {
	t.Helper()
	e.mu.Lock()
	done := e.namespaces[name]
	e.mu.Unlock()
	if done {
		return
	}
	ctx, cancel := e.ctx()
	defer cancel()
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	e.mu.Lock()
	e.namespaces[name] = true
	e.mu.Unlock()
}

// Apply creates or updates ConfigMaps, Secrets, Pods, EndpointSlices and Namespaces, creating their namespace
// first. Namespaces without one get "default". A Pod that exists already gets its labels and
// annotations updated (its spec is mostly immutable); a Pod whose status has a phase or an IP
// also gets that status through the status subresource, as a kubelet would.
func (e *Env) Apply(t testing.TB, objs ...runtime.Object) {
	t.Helper()
	for _, obj := range objs {
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			e.ApplyConfigMap(t, o)
		case *corev1.Secret:
			e.ApplySecret(t, o)
		case *corev1.Pod:
			e.ApplyPod(t, o)
		case *discoveryv1.EndpointSlice:
			e.ApplyEndpointSlice(t, o)
		case *corev1.Namespace:
			e.Namespace(t, o.Name)
		default:
			t.Fatalf("kubetest: Apply does not handle %T", obj)
		}
	}
}

func defaultNamespace(m *metav1.ObjectMeta) {
	if m.Namespace == "" {
		m.Namespace = corev1.NamespaceDefault
	}
}

// clean drops what a create must not carry (an object read from a manifest or another server).
func clean(m *metav1.ObjectMeta) {
	m.ResourceVersion, m.UID, m.CreationTimestamp, m.ManagedFields = "", "", metav1.Time{}, nil
}

// ApplyConfigMap creates or replaces the ConfigMap and returns it as stored.
func (e *Env) ApplyConfigMap(t testing.TB, cm *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	cm = cm.DeepCopy()
	e.prepare(t, &cm.ObjectMeta)
	return createOrReplace(e, t, "ConfigMap", cm, e.Client.CoreV1().ConfigMaps(cm.Namespace))
}

// ApplySecret creates or replaces the Secret and returns it as stored.
func (e *Env) ApplySecret(t testing.TB, s *corev1.Secret) *corev1.Secret {
	t.Helper()
	s = s.DeepCopy()
	e.prepare(t, &s.ObjectMeta)
	return createOrReplace(e, t, "Secret", s, e.Client.CoreV1().Secrets(s.Namespace))
}

// ApplyEndpointSlice creates or replaces the EndpointSlice (there is no controller-manager to
// make them from Services) and returns it as stored.
func (e *Env) ApplyEndpointSlice(t testing.TB, s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	t.Helper()
	s = s.DeepCopy()
	e.prepare(t, &s.ObjectMeta)
	return createOrReplace(e, t, "EndpointSlice", s, e.Client.DiscoveryV1().EndpointSlices(s.Namespace))
}

// prepare readies an object's metadata for a create in this cluster: its namespace defaulted
// and created, what a create must not carry dropped.
func (e *Env) prepare(t testing.TB, m *metav1.ObjectMeta) {
	t.Helper()
	defaultNamespace(m)
	clean(m)
	e.Namespace(t, m.Namespace)
}

// typedClient is the part of a generated typed client that createOrReplace uses.
type typedClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// createOrReplace creates obj, or replaces the stored object of that name with it, retrying
// on conflicts; it returns the object as stored.
func createOrReplace[T metav1.Object](e *Env, t testing.TB, kind string, obj T, api typedClient[T]) T {
	t.Helper()
	var out T
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ctx, cancel := e.ctx()
		defer cancel()
		cur, err := api.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			out, err = api.Create(ctx, obj, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		out, err = api.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("apply %s %s/%s: %v", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return out
}

// ApplyPod creates the Pod, or updates the labels and annotations of an existing one; then,
// when p.Status has a phase or an IP, it writes that status through the status subresource.
// It returns the pod as stored.
func (e *Env) ApplyPod(t testing.TB, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	p = p.DeepCopy()
	e.prepare(t, &p.ObjectMeta)
	api := e.Client.CoreV1().Pods(p.Namespace)
	var out *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ctx, cancel := e.ctx()
		defer cancel()
		cur, err := api.Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			create := p.DeepCopy()
			create.Status = corev1.PodStatus{}
			out, err = api.Create(ctx, create, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		cur.Labels, cur.Annotations = p.Labels, p.Annotations
		out, err = api.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("apply Pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	if p.Status.Phase == "" && p.Status.PodIP == "" {
		return out
	}
	return e.updatePodStatus(t, p.Namespace, p.Name, func(cur *corev1.Pod) { cur.Status = p.Status })
}

// DeletePod deletes the pod at once (grace period 0; there is no kubelet to wait for).
func (e *Env) DeletePod(t testing.TB, namespace, name string) {
	t.Helper()
	ctx, cancel := e.ctx()
	defer cancel()
	err := e.Client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete Pod %s/%s: %v", namespace, name, err)
	}
}

// SetPodReady writes the status a kubelet would for a running pod with IP ip whose containers
// are all ready (ready) or none ready (!ready), through the status subresource. An empty ip
// keeps the pod's current one.
func (e *Env) SetPodReady(t testing.TB, namespace, name, ip string, ready bool) *corev1.Pod {
	t.Helper()
	return e.updatePodStatus(t, namespace, name, func(p *corev1.Pod) { setReady(p, ip, ready) })
}

// setReady fills p.Status as a kubelet reports a running pod.
func setReady(p *corev1.Pod, ip string, ready bool) {
	s := &p.Status
	if ip != "" {
		s.PodIP = ip
		s.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	s.Phase = corev1.PodRunning
	if s.StartTime == nil {
		now := metav1.Now()
		s.StartTime = &now
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	s.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
	}
	s.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		started := true
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name:    c.Name,
			Image:   c.Image,
			ImageID: c.Image,
			Ready:   ready,
			Started: &started,
			State:   corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

func (e *Env) updatePodStatus(t testing.TB, namespace, name string, mutate func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	api := e.Client.CoreV1().Pods(namespace)
	var out *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ctx, cancel := e.ctx()
		defer cancel()
		cur, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(cur)
		out, err = api.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update the status of Pod %s/%s: %v", namespace, name, err)
	}
	return out
}
