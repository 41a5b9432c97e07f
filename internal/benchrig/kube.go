package benchrig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// kubeRequestTimeout bounds each API or etcd call of the bench.
const kubeRequestTimeout = 30 * time.Second

// Kube keeps a benchmark's objects in a real kube-apiserver (and its etcd, started from
// KUBEBUILDER_ASSETS, as the tests do), so that the sidecar reads them with --source=kube:
// objects are put by name (server-side apply), the name standing for a manifest file of the
// file mode, and removed by deleting them.
type Kube struct {
	Kubeconfig string // an admin kubeconfig of the API server

	env        *envtest.Environment
	client     dynamic.Interface
	etcd       *clientv3.Client // EndpointSlices go straight to etcd (see putEndpointSlice)
	mu         sync.Mutex
	objects    map[string][]*unstructured.Unstructured // by name
	namespaces map[string]bool
}

// resources maps the kinds the benches write to their API resources.
var resources = map[string]schema.GroupVersionResource{
	"ConfigMap":     {Version: "v1", Resource: "configmaps"},
	"Service":       {Version: "v1", Resource: "services"},
	"Namespace":     {Version: "v1", Resource: "namespaces"},
	"EndpointSlice": {Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
	"Ingress":       {Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
	"Gateway":       {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"},
	"HTTPRoute":     {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"},
	"GatewayClass":  {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"},
}

// StartKube starts kube-apiserver and etcd (their output in Dir/kube.log) with the
// CustomResourceDefinitions of the directories crds installed; Stop stops them.
func (r *Rig) StartKube(crds ...string) (*Kube, error) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return nil, errStopped
	}
	// Stop waits for this start, so that an interrupt while it runs leaves nothing behind.
	r.starting.Add(1)
	r.mu.Unlock()
	defer r.starting.Done()
	logFile, err := os.Create(filepath.Join(r.Dir, "kube.log"))
	if err != nil {
		return nil, err
	}
	k, err := startKube(r.Dir, logFile, crds, r.APIServerArgs)
	if err != nil {
		logFile.Close()
		return nil, err
	}
	r.mu.Lock()
	r.cleanups = append(r.cleanups, func() { k.stop(); logFile.Close() })
	r.mu.Unlock()
	return k, nil
}

func startKube(dir string, log io.Writer, crds []string, extra map[string][]string) (*Kube, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("a real kube-apiserver needs KUBEBUILDER_ASSETS (the directory hack/testbins.sh prints)")
	}
	logf.SetLogger(logr.Discard())
	api := &envtest.APIServer{Out: log, Err: log}
	args := api.Configure()
	args.Set("disable-admission-plugins", "ServiceAccount")
	args.Set("service-cluster-ip-range", "10.0.0.0/16") // room for the benches' Services
	for k, v := range extra {
		args.Set(k, v...)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets,
		ControlPlane:             envtest.ControlPlane{APIServer: api, Etcd: &envtest.Etcd{Out: log, Err: log}},
		CRDDirectoryPaths:        crds,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: time.Minute, ControlPlaneStopTimeout: 20 * time.Second}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // what started before the failure
		return nil, fmt.Errorf("start kube-apiserver and etcd: %w", err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	k := &Kube{env: env, Kubeconfig: filepath.Join(dir, "kubeconfig"), objects: map[string][]*unstructured.Unstructured{}, namespaces: map[string]bool{}}
	if k.client, err = dynamic.NewForConfig(cfg); err != nil {
		k.stop()
		return nil, err
	}
	if err := os.WriteFile(k.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		k.stop()
		return nil, err
	}
	if k.etcd, err = clientv3.New(clientv3.Config{Endpoints: []string{env.ControlPlane.Etcd.URL.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
		k.stop()
		return nil, err
	}
	return k, nil
}

func (k *Kube) stop() {
	if k.etcd != nil {
		k.etcd.Close()
	}
	_ = k.env.Stop()
}

// putEndpointSlice writes an EndpointSlice straight into etcd, encoded as the API server
// stores it: the API refuses loopback addresses in EndpointSlices (no pod has one), and the
// backends standing for pods listen on loopback addresses so that no traffic leaves the
// machine. The API server serves it like any other (its watch cache follows etcd), as if an
// EndpointSlice controller had written it (the e2e tests do the same).
func (k *Kube) putEndpointSlice(ctx context.Context, o *unstructured.Unstructured) error {
	var s discoveryv1.EndpointSlice
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s); err != nil {
		return err
	}
	data, err := etcdtest.Encode(&s, etcdtest.Protobuf)
	if err != nil {
		return err
	}
	key, err := etcdtest.Key("/registry", &s)
	if err != nil {
		return err
	}
	_, err = k.etcd.Put(ctx, key, string(data))
	return err
}

// Decode reads a manifest (YAML or JSON, a List's items each).
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "List" {
			items, _ := m["items"].([]any)
			for _, it := range items {
				if im, ok := it.(map[string]any); ok {
					out = append(out, &unstructured.Unstructured{Object: im})
				}
			}
			continue
		}
		out = append(out, u)
	}
}

// Put applies the objects of manifest name (workers at a time).
func (k *Kube) Put(name string, data []byte, workers int) error {
	objs, err := Decode(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return k.Apply(name, objs, workers)
}

// Apply puts objs under name, workers at a time (with one, in their order), creating their
// namespaces first: each one server-side applied, an EndpointSlice written into etcd.
func (k *Kube) Apply(name string, objs []*unstructured.Unstructured, workers int) error {
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !k.namespaces[ns] {
			n := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
			ctx, cancel := context.WithTimeout(context.Background(), kubeRequestTimeout)
			_, err := k.client.Resource(resources["Namespace"]).Create(ctx, n, metav1.CreateOptions{})
			cancel()
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: create namespace %s: %w", name, ns, err)
			}
			k.namespaces[ns] = true
		}
	}
	jobs := make(chan *unstructured.Unstructured)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range jobs {
				if err := k.applyOne(o); err != nil {
					select {
					case errs <- fmt.Errorf("%s: %s %s: %w", name, o.GetKind(), o.GetName(), err):
					default:
					}
				}
			}
		}()
	}
	for _, o := range objs {
		jobs <- o
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	k.mu.Lock()
	k.objects[name] = objs
	k.mu.Unlock()
	return nil
}

func (k *Kube) applyOne(o *unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(context.Background(), kubeRequestTimeout)
	defer cancel()
	gvr, ok := resources[o.GetKind()]
	if !ok {
		return fmt.Errorf("no resource known for kind %s", o.GetKind())
	}
	if o.GetKind() == "EndpointSlice" {
		return k.putEndpointSlice(ctx, o)
	}
	b, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = k.client.Resource(gvr).Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: "benchrig", Force: &force})
	return err
}

// Remove deletes the objects put under name.
func (k *Kube) Remove(name string) error {
	k.mu.Lock()
	objs := k.objects[name]
	delete(k.objects, name)
	k.mu.Unlock()
	for _, o := range objs {
		ctx, cancel := context.WithTimeout(context.Background(), kubeRequestTimeout)
		err := k.client.Resource(resources[o.GetKind()]).Namespace(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: delete %s %s: %w", name, o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}
