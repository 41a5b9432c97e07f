package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
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

// kubeStore keeps the bench's manifests as objects of a real kube-apiserver (and its etcd,
// started here from KUBEBUILDER_ASSETS, as the tests do), so that the sidecar reads them with
// --source=kube: each manifest file of the file mode is put as its objects (server-side
// apply), and removed by deleting them.
type kubeStore struct {
	env        *envtest.Environment
	client     dynamic.Interface
	etcd       *clientv3.Client // EndpointSlices go straight to etcd (see putEndpointSlice)
	kubeconfig string
	mu         sync.Mutex
	objects    map[string][]*unstructured.Unstructured // by manifest name
	namespaces map[string]bool
}

// resources maps the kinds the bench writes to their API resources.
var resources = map[string]schema.GroupVersionResource{
	"ConfigMap":     {Version: "v1", Resource: "configmaps"},
	"Service":       {Version: "v1", Resource: "services"},
	"Namespace":     {Version: "v1", Resource: "namespaces"},
	"EndpointSlice": {Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
	"Ingress":       {Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
}

func startKube(dir string, log io.Writer) (*kubeStore, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, fmt.Errorf("--source=kube needs KUBEBUILDER_ASSETS (the directory hack/testbins.sh prints)")
	}
	logf.SetLogger(logr.Discard())
	api := &envtest.APIServer{Out: log, Err: log}
	args := api.Configure()
	args.Set("disable-admission-plugins", "ServiceAccount")
	args.Set("service-cluster-ip-range", "10.0.0.0/16") // room for the bench's Services
	env := &envtest.Environment{BinaryAssetsDirectory: assets,
		ControlPlane:             envtest.ControlPlane{APIServer: api, Etcd: &envtest.Etcd{Out: log, Err: log}},
		ControlPlaneStartTimeout: time.Minute, ControlPlaneStopTimeout: 20 * time.Second}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start kube-apiserver and etcd: %w", err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	k := &kubeStore{env: env, kubeconfig: filepath.Join(dir, "kubeconfig"), objects: map[string][]*unstructured.Unstructured{}, namespaces: map[string]bool{}}
	if k.client, err = dynamic.NewForConfig(cfg); err != nil {
		k.stop()
		return nil, err
	}
	if err := os.WriteFile(k.kubeconfig, env.KubeConfig, 0o600); err != nil {
		k.stop()
		return nil, err
	}
	if k.etcd, err = clientv3.New(clientv3.Config{Endpoints: []string{env.ControlPlane.Etcd.URL.String()}, DialTimeout: 5 * time.Second}); err != nil {
		k.stop()
		return nil, err
	}
	return k, nil
}

func (k *kubeStore) stop() {
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
func (k *kubeStore) putEndpointSlice(ctx context.Context, o *unstructured.Unstructured) error {
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

// decode reads a manifest (YAML or JSON, a List's items each).
func decode(data []byte) ([]*unstructured.Unstructured, error) {
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

// put applies the objects of manifest name (workers at a time).
func (k *kubeStore) put(name string, data []byte, workers int) error {
	objs, err := decode(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	ctx := context.Background()
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !k.namespaces[ns] {
			n := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
			if _, err := k.client.Resource(resources["Namespace"]).Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			k.namespaces[ns] = true
		}
	}
	jobs := make(chan *unstructured.Unstructured)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range jobs {
				gvr, ok := resources[o.GetKind()]
				if !ok {
					errs <- fmt.Errorf("%s: kind %s", name, o.GetKind())
					continue
				}
				if o.GetKind() == "EndpointSlice" {
					if err := k.putEndpointSlice(ctx, o); err != nil {
						select {
						case errs <- fmt.Errorf("%s: EndpointSlice %s: %w", name, o.GetName(), err):
						default:
						}
					}
					continue
				}
				b, err := o.MarshalJSON()
				if err == nil {
					_, err = k.client.Resource(gvr).Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, b,
						metav1.PatchOptions{FieldManager: "bench-ingress", Force: ptrTrue()})
				}
				if err != nil {
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

// remove deletes the objects manifest name put.
func (k *kubeStore) remove(name string) error {
	k.mu.Lock()
	objs := k.objects[name]
	delete(k.objects, name)
	k.mu.Unlock()
	for _, o := range objs {
		err := k.client.Resource(resources[o.GetKind()]).Namespace(o.GetNamespace()).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: delete %s %s: %w", name, o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

func ptrTrue() *bool { t := true; return &t }
