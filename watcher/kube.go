package watcher

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
)

// Kube reads the inputs from the Kubernetes API with informers: the ConfigMaps of the
// load-balancer namespace, the Secrets it needs there (the keys Secret, the config Secret, TLS
// Secrets matching the certificate selector), and the Pods of the namespaces the services name,
// each namespace watched only while a service names it.
type Kube struct {
	Client              kubernetes.Interface
	Namespace           string
	ServicesConfigMap   string
	KeysSecret          string
	ConfigSecret        string // optional
	CertificateSelector string // label selector; empty: no TLS Secrets
	Logger              *slog.Logger

	mu       sync.Mutex
	ctx      context.Context
	changed  func()
	started  chan struct{} // closed once Run has set up the namespace informers
	events   atomic.Uint64
	cms      cache.SharedIndexInformer
	secrets  []cache.SharedIndexInformer
	podNS    map[string]*podWatch
	initOnce sync.Once
}

// podWatch watches one namespace a service names: its pods, and its EndpointSlices for
// services that name a Kubernetes Service.
type podWatch struct {
	informer cache.SharedIndexInformer
	slices   cache.SharedIndexInformer
	stop     context.CancelFunc
}

func (k *Kube) init() {
	k.initOnce.Do(func() { k.started = make(chan struct{}) })
}

// stripManagedFields keeps the caches small: nothing downstream reads managedFields.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Run starts the informers and calls changed on every event until ctx ends.
func (k *Kube) Run(ctx context.Context, changed func()) error {
	k.init()
	log := k.logger()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { k.notify() },
		UpdateFunc: func(any, any) { k.notify() },
		DeleteFunc: func(any) { k.notify() },
	}
	factory := func(tweak func(*metav1.ListOptions)) informers.SharedInformerFactory {
		opts := []informers.SharedInformerOption{informers.WithNamespace(k.Namespace), informers.WithTransform(stripManagedFields)}
		if tweak != nil {
			opts = append(opts, informers.WithTweakListOptions(tweak))
		}
		return informers.NewSharedInformerFactoryWithOptions(k.Client, 0, opts...)
	}
	var factories []informers.SharedInformerFactory
	cmf := factory(nil)
	cms := cmf.Core().V1().ConfigMaps().Informer()
	if _, err := cms.AddEventHandler(handler); err != nil {
		return err
	}
	factories = append(factories, cmf)
	var secrets []cache.SharedIndexInformer
	addSecrets := func(tweak func(*metav1.ListOptions)) error {
		f := factory(tweak)
		inf := f.Core().V1().Secrets().Informer()
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
		factories = append(factories, f)
		secrets = append(secrets, inf)
		return nil
	}
	for _, name := range []string{k.KeysSecret, k.ConfigSecret} {
		if name == "" {
			continue
		}
		sel := fields.OneTermEqualSelector("metadata.name", name).String()
		if err := addSecrets(func(o *metav1.ListOptions) { o.FieldSelector = sel }); err != nil {
			return err
		}
	}
	if k.CertificateSelector != "" {
		if _, err := labels.Parse(k.CertificateSelector); err != nil {
			return fmt.Errorf("certificate selector: %w", err)
		}
		sel := k.CertificateSelector
		if err := addSecrets(func(o *metav1.ListOptions) { o.LabelSelector = sel }); err != nil {
			return err
		}
	}
	k.mu.Lock()
	k.ctx, k.changed, k.cms, k.secrets, k.podNS = ctx, changed, cms, secrets, map[string]*podWatch{}
	k.mu.Unlock()
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	close(k.started)
	log.Info("watching the Kubernetes API", "namespace", k.Namespace)
	<-ctx.Done()
	for _, f := range factories {
		f.Shutdown()
	}
	k.mu.Lock()
	for _, w := range k.podNS {
		w.stop()
	}
	k.mu.Unlock()
	return ctx.Err()
}

func (k *Kube) notify() {
	k.events.Add(1)
	k.mu.Lock()
	changed := k.changed
	k.mu.Unlock()
	if changed != nil {
		changed()
	}
}

func (k *Kube) logger() *slog.Logger {
	if k.Logger != nil {
		return k.Logger
	}
	return slog.Default()
}

// Objects returns what the informers hold, once they (and the pod informers of every namespace
// the services name) have synced, so that a render never sees a half-filled cache.
func (k *Kube) Objects(ctx context.Context) (*snapshot.Objects, error) {
	k.init()
	select {
	case <-k.started:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	k.mu.Lock()
	cms, secrets := k.cms, k.secrets
	k.mu.Unlock()
	synced := []cache.InformerSynced{cms.HasSynced}
	for _, s := range secrets {
		synced = append(synced, s.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("wait for the Kubernetes caches: %w", ctx.Err())
	}
	objs := &snapshot.Objects{}
	for _, o := range cms.GetStore().List() {
		objs.ConfigMaps = append(objs.ConfigMaps, o.(*corev1.ConfigMap))
	}
	seen := map[string]bool{}
	for _, inf := range secrets {
		for _, o := range inf.GetStore().List() {
			s := o.(*corev1.Secret)
			if !seen[s.Name] {
				seen[s.Name] = true
				objs.Secrets = append(objs.Secrets, s)
			}
		}
	}
	pods, slices, err := k.pods(ctx, objs.ConfigMaps)
	if err != nil {
		return nil, err
	}
	objs.Pods, objs.EndpointSlices = pods, slices
	objs.Revision = strconv.FormatUint(k.events.Load(), 10)
	return objs, nil
}

// pods keeps pod and EndpointSlice informers for each namespace the services name, and returns
// what they hold.
func (k *Kube) pods(ctx context.Context, cms []*corev1.ConfigMap) ([]*corev1.Pod, []*discoveryv1.EndpointSlice, error) {
	want := map[string]bool{}
	for _, cm := range cms {
		if cm.Name != k.ServicesConfigMap {
			continue
		}
		for _, v := range cm.Data {
			var svc struct {
				Namespace string `json:"namespace"`
			}
			// Bad entries are reported by snapshot.Build; here they just name no namespace.
			if json.Unmarshal([]byte(v), &svc) == nil && svc.Namespace != "" {
				want[svc.Namespace] = true
			}
		}
	}
	k.mu.Lock()
	for ns, w := range k.podNS {
		if !want[ns] {
			w.stop()
			delete(k.podNS, ns)
			k.logger().Info("stopped watching pods", "namespace", ns)
		}
	}
	var synced []cache.InformerSynced
	var infs []*podWatch
	for ns := range want {
		w := k.podNS[ns]
		if w == nil {
			wctx, stop := context.WithCancel(k.ctx)
			f := informers.NewSharedInformerFactoryWithOptions(k.Client, 0,
				informers.WithNamespace(ns), informers.WithTransform(stripManagedFields))
			handler := cache.ResourceEventHandlerFuncs{
				AddFunc:    func(any) { k.notify() },
				UpdateFunc: func(old, cur any) { k.notify() },
				DeleteFunc: func(any) { k.notify() },
			}
			inf := f.Core().V1().Pods().Informer()
			_, _ = inf.AddEventHandler(handler)
			slices := f.Discovery().V1().EndpointSlices().Informer()
			_, _ = slices.AddEventHandler(handler)
			f.Start(wctx.Done())
			w = &podWatch{informer: inf, slices: slices, stop: func() { stop(); f.Shutdown() }}
			k.podNS[ns] = w
			k.logger().Info("watching pods", "namespace", ns)
		}
		synced = append(synced, w.informer.HasSynced, w.slices.HasSynced)
		infs = append(infs, w)
	}
	k.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, nil, fmt.Errorf("wait for the pod caches: %w", ctx.Err())
	}
	var pods []*corev1.Pod
	var slices []*discoveryv1.EndpointSlice
	for _, w := range infs {
		for _, o := range w.informer.GetStore().List() {
			pods = append(pods, o.(*corev1.Pod))
		}
		for _, o := range w.slices.GetStore().List() {
			slices = append(slices, o.(*discoveryv1.EndpointSlice))
		}
	}
	sort.Slice(slices, func(i, j int) bool {
		if slices[i].Namespace != slices[j].Namespace {
			return slices[i].Namespace < slices[j].Namespace
		}
		return slices[i].Name < slices[j].Name
	})
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	return pods, slices, nil
}

// Lookup returns the cached object a Ref names (for Events), or nil.
func (k *Kube) Lookup(ref snapshot.Ref) runtime.Object {
	k.mu.Lock()
	cms, secrets := k.cms, k.secrets
	k.mu.Unlock()
	key := ref.Namespace + "/" + ref.Name
	switch ref.Kind {
	case "ConfigMap":
		if cms != nil {
			if o, ok, _ := cms.GetStore().GetByKey(key); ok {
				return o.(runtime.Object)
			}
		}
	case "Secret":
		for _, inf := range secrets {
			if o, ok, _ := inf.GetStore().GetByKey(key); ok {
				return o.(runtime.Object)
			}
		}
	}
	return nil
}
