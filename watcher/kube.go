package watcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// Kube reads the inputs from the Kubernetes API with informers: the ConfigMaps of the
// load-balancer namespace, the Secrets it needs there (the keys Secret, the config Secret, TLS
// Secrets matching the certificate selector), the TLS Secrets of the TLS Secret namespaces, and
// the Pods of the namespaces the services name, each namespace watched only while a service
// names it.
type Kube struct {
	Client              kubernetes.Interface
	Namespace           string
	ServicesConfigMap   string
	KeysSecret          string
	ConfigSecret        string // optional
	CertificateSelector string // label selector; empty: no TLS Secrets
	// TLSSecretNamespaces are followed for their TLS Secrets (--tls-secret-namespaces): an
	// informer per namespace, or one cluster-wide for every namespace, listing with the field
	// selector type=kubernetes.io/tls, so that no other Secret is sent or held.
	TLSSecretNamespaces snapshot.Namespaces
	Logger              *slog.Logger
	// Watch are the watched resources (--watch), followed with dynamic informers through
	// Dynamic (required with Watch) and returned in Objects.Resources.
	Watch   watchspec.List
	Dynamic dynamic.Interface
	// PeersNamespace, when set, is a namespace whose pods are watched whatever the services
	// name: the HAProxy replicas' (--peers).
	PeersNamespace string

	// Cluster, with several clusters (see Clusters), is this cluster's name: its pods and
	// watched objects carry it (snapshot.PodConverter.ConvertIn, ObjectConverter.InCluster).
	Cluster string
	// Member: a cluster other than the one of the load balancer's namespace, which gives only
	// pods and watched objects: no ConfigMaps, Secrets or TLS Secrets are watched there, and
	// the namespaces of its pods are those the services of the home cluster name.
	Member bool

	// OnState, when set, is told whether the API server answers, and why not (see follow).
	OnState StateFunc
	// Server is the API server's URL, for messages.
	Server string

	mu       sync.Mutex
	changed  func()
	started  chan struct{} // closed once Run has set up the namespace informers
	events   atomic.Uint64
	cur      *informerSet // the informers Objects reads; replaced after an outage
	initOnce sync.Once
	poke     chan struct{} // a list or watch failed: probe the API server now
	state    *stateReport
	objConv  snapshot.ObjectConverter
	objects  atomic.Int64 // watched objects converted, for objConv rounds
	clPods   clusterPods  // with Cluster set: the pods converted with its name
	podList  podList      // the pods and EndpointSlices of the last read, in name order
}

// resourceWatch follows one watched resource with a dynamic informer whose cache holds the
// objects converted (kubeObject): the JSON the API server sends is not kept.
type resourceWatch struct {
	w        *watched
	informer cache.SharedIndexInformer
	handled  cache.ResourceEventHandlerRegistration
	mu       sync.Mutex
	err      error      // the last list or watch error, until the informer has synced
	list     objectList // the objects of the last read, in name order
}

// tlsWatch follows the TLS Secrets of one namespace of TLSSecretNamespaces (of every namespace
// when namespace is "").
type tlsWatch struct {
	namespace string
	informer  cache.SharedIndexInformer
	handled   cache.ResourceEventHandlerRegistration
	mu        sync.Mutex
	err       error // the last list or watch error, until the informer has synced
}

// tlsSecretSelector keeps every Secret but TLS Secrets on the API server's side.
var tlsSecretSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)).String()

// podWatch watches one namespace a service names: its pods, and its EndpointSlices for
// services that name a Kubernetes Service.
type podWatch struct {
	informer cache.SharedIndexInformer
	slices   cache.SharedIndexInformer
	stop     context.CancelFunc
	handled  []cache.ResourceEventHandlerRegistration // of informer's and slices' handlers

	mu        sync.Mutex
	forbidden error // why the pods or EndpointSlices may not be listed (RBAC), until they list
	// What changed in the informers since the last read (see podList).
	changedPods, changedSlices changedNames
}

// forbiddenErr is why w's namespace cannot be read, while its informers have not listed.
func (w *podWatch) forbiddenErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.forbidden
}

func (w *podWatch) synced() bool { return w.informer.HasSynced() && w.slices.HasSynced() }

func (k *Kube) init() {
	k.initOnce.Do(func() {
		k.started, k.poke = make(chan struct{}), make(chan struct{}, 1)
		k.state = &stateReport{fn: k.OnState, log: k.logger()}
	})
}

// stripManagedFields keeps the caches small: nothing downstream reads managedFields.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Run starts the informers and calls changed on every event until ctx ends. Meanwhile it
// probes the API server: an outage is reported (OnState, a log line) while the informers keep
// their objects, and when the API server is back the informers are started afresh (see
// follow). It returns an error only for a configuration that cannot be watched.
func (k *Kube) Run(ctx context.Context, changed func()) error {
	k.init()
	if k.CertificateSelector != "" {
		if _, err := labels.Parse(k.CertificateSelector); err != nil {
			return fmt.Errorf("certificate selector: %w", err)
		}
	}
	set, err := k.newInformerSet(ctx)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.changed, k.cur = changed, set
	k.mu.Unlock()
	set.start()
	close(k.started)
	k.logger().Info("watching the Kubernetes API", "namespace", k.Namespace)
	k.follow(ctx)
	k.mu.Lock()
	set = k.cur
	k.mu.Unlock()
	k.shutdown(set)
	return ctx.Err()
}

// handler calls notify on every event of an informer.
// objectHandler is handler for the watched objects of list, each event recorded in list for
// its next read first, except that an update that changes nothing templates see (a new
// resourceVersion alone: the echo of the sidecar's own status write on a resource watched with
// ;status=off) asks for no sync. It is recorded all the same: the next read holds the object
// the store holds, as a read of the whole store would.
func (k *Kube) objectHandler(list *objectList) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { list.record(o); k.notify() },
		UpdateFunc: func(old, cur any) {
			list.record(cur)
			o, ok1 := old.(*kubeObject)
			c, ok2 := cur.(*kubeObject)
			if ok1 && ok2 && snapshot.SameExceptVersion(o.Object, c.Object) {
				return
			}
			k.notify()
		},
		DeleteFunc: func(o any) { list.record(o); k.notify() },
	}
}

func (k *Kube) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { k.notify() },
		UpdateFunc: func(old, cur any) {
			if sameInput(old, cur) {
				return
			}
			k.notify()
		},
		DeleteFunc: func(any) { k.notify() },
	}
}

// sameInput reports whether an update of a ConfigMap or Secret changes nothing the inputs are
// read from (data, type, labels): a new resourceVersion or annotations alone, such as the
// live-config annotations the sidecar writes on its services ConfigMap after each change,
// ask for no sync.
func sameInput(old, cur any) bool {
	switch o := old.(type) {
	case *corev1.ConfigMap:
		c, ok := cur.(*corev1.ConfigMap)
		return ok && maps.Equal(o.Data, c.Data) && maps.EqualFunc(o.BinaryData, c.BinaryData, bytes.Equal) && maps.Equal(o.Labels, c.Labels)
	case *corev1.Secret:
		c, ok := cur.(*corev1.Secret)
		return ok && o.Type == c.Type && maps.EqualFunc(o.Data, c.Data, bytes.Equal) && maps.Equal(o.StringData, c.StringData) && maps.Equal(o.Labels, c.Labels)
	}
	return false
}

// watchFailed is the watch error handler of the informers that have none of their own: the
// failure is logged, and the API server probed at once (see follow). client-go retries it.
func (k *Kube) watchFailed(what string) cache.WatchErrorHandler {
	return func(_ *cache.Reflector, err error) {
		k.logger().Debug("kube source: cannot list or watch; client-go retries with backoff", "informer", what, "error", err)
		k.probeNow()
	}
}

// probeNow asks follow to probe the API server now.
func (k *Kube) probeNow() {
	select {
	case k.poke <- struct{}{}:
	default:
	}
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
// the services name) have synced, so that a render never sees a half-filled cache. During an
// outage it keeps returning what they hold; informers started afresh after one are read once
// they have synced.
func (k *Kube) Objects(ctx context.Context) (*snapshot.Objects, error) {
	return k.objectsFor(ctx, nil)
}

// objectsFor is Objects; a Member reads the namespaces of its pods from services, the home
// cluster's ConfigMaps.
func (k *Kube) objectsFor(ctx context.Context, services []*corev1.ConfigMap) (*snapshot.Objects, error) {
	k.init()
	select {
	case <-k.started:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		set, err := k.synced(ctx)
		if err != nil {
			return nil, err
		}
		objs, err := k.read(ctx, set, services)
		if err != nil && ctx.Err() == nil && set.ctx.Err() != nil {
			continue // replaced while read: read the new informers
		}
		return objs, err
	}
}

// synced waits until the current informers of the ConfigMaps and Secrets have listed (the
// current ones: informers started afresh replace those that never could) and returns them.
func (k *Kube) synced(ctx context.Context) (*informerSet, error) {
	tick := time.NewTicker(resourcePoll)
	defer tick.Stop()
	for {
		k.mu.Lock()
		set := k.cur
		k.mu.Unlock()
		if set.baseSynced() {
			return set, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the Kubernetes caches: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// read returns what the informers of set hold; its waits end when set is replaced.
func (k *Kube) read(ctx context.Context, set *informerSet, services []*corev1.ConfigMap) (*snapshot.Objects, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(set.ctx, cancel)()
	tls, err := k.tlsSecrets(ctx, set)
	if err != nil {
		return nil, err
	}
	objs := &snapshot.Objects{}
	if set.cms != nil {
		for _, o := range set.cms.GetStore().List() {
			objs.ConfigMaps = append(objs.ConfigMaps, o.(*corev1.ConfigMap))
		}
		services = objs.ConfigMaps
	}
	// A Secret of the namespace may be in two informers (by name or label, and as a TLS
	// Secret of the namespaces): once is enough.
	seen := map[string]bool{}
	for _, inf := range slices.Concat(set.secrets, tls) {
		for _, o := range inf.GetStore().List() {
			s := o.(*corev1.Secret)
			if key := s.Namespace + "/" + s.Name; !seen[key] {
				seen[key] = true
				objs.Secrets = append(objs.Secrets, s)
			}
		}
	}
	pods, slices, unread, err := k.pods(ctx, set, services)
	if err != nil {
		return nil, err
	}
	objs.Pods, objs.EndpointSlices = pods, slices
	if k.Cluster != "" {
		objs.Pods, objs.ConvertedPods = nil, k.clPods.convert(pods, k.Cluster)
		objs.EndpointSlices, objs.ClusterEndpointSlices = nil, map[string][]*discoveryv1.EndpointSlice{k.Cluster: slices}
	}
	if objs.Resources, err = k.resources(ctx, set); err != nil {
		return nil, err
	}
	objs.Revision = strconv.FormatUint(k.events.Load(), 10)
	return objs, unread // unread: services whose namespace cannot be read, reported (SourceHolds)
}

// pods keeps pod and EndpointSlice informers for each namespace the services name, and returns
// what they hold.
func (k *Kube) pods(ctx context.Context, set *informerSet, cms []*corev1.ConfigMap) (_ []*corev1.Pod, _ []*discoveryv1.EndpointSlice, unread, err error) {
	infs, nss := k.podWatches(set, cms)
	// A namespace whose pods the sidecar may not list (RBAC) is not waited for: the services
	// naming it are reported, and every other change goes on. Other errors (the API server
	// away) are waited out, as the pods of a namespace cannot be told from none.
	var forbidden []error
	// A member cluster that is away is not waited for either: the namespaces it listed keep
	// their pods, one it never listed has none until it is back.
	err = awaitListed(ctx, "the pod caches", len(infs),
		func(i int) bool { return infs[i].synced() || infs[i].forbiddenErr() != nil || k.away() },
		func(int) error { return nil })
	if err != nil {
		return nil, nil, nil, err
	}
	readable := infs[:0:0]
	for i, w := range infs {
		if ferr := w.forbiddenErr(); ferr != nil && !w.synced() {
			forbidden = append(forbidden, k.podsForbidden(cms, nss[i], ferr)...)
			continue
		}
		if !w.synced() {
			continue // a member cluster away (above)
		}
		readable = append(readable, w)
	}
	pods, slices := k.podList.read(readable)
	return pods, slices, errors.Join(forbidden...), nil
}

// podWatches starts the pod and EndpointSlice informers of each namespace the services of cms
// name that has none yet, and stops those of the namespaces they no longer name; it returns
// the watches of the namespaces named, and those namespaces.
func (k *Kube) podWatches(set *informerSet, cms []*corev1.ConfigMap) ([]*podWatch, []string) {
	want := map[string]bool{}
	for _, cm := range cms {
		if cm.Name != k.ServicesConfigMap {
			continue
		}
		for _, v := range cm.Data {
			var svc struct {
				Namespace string `json:"namespace"`
			}
			// Bad entries are reported by snapshot.Decode; here they just name no namespace.
			if json.Unmarshal([]byte(v), &svc) == nil && svc.Namespace != "" {
				want[svc.Namespace] = true
			}
		}
	}
	if k.PeersNamespace != "" && !k.Member {
		want[k.PeersNamespace] = true
	}
	k.mu.Lock()
	var unwanted []*podWatch
	for ns, w := range set.podNS {
		if !want[ns] {
			unwanted = append(unwanted, w)
			delete(set.podNS, ns)
			k.logger().Info("stopped watching pods", "namespace", ns)
		}
	}
	var infs []*podWatch
	var nss []string
	for ns := range want {
		w := set.podNS[ns]
		if w == nil && set.ctx.Err() == nil {
			w = k.watchPods(set, ns)
			k.logger().Info("watching pods", "namespace", ns)
		}
		if w == nil {
			continue // set replaced: Objects reads the new one
		}
		infs, nss = append(infs, w), append(nss, ns)
	}
	k.mu.Unlock()
	for _, w := range unwanted {
		w.stop() // without Kube.mu: its handlers may be waiting for it
	}
	return infs, nss
}

// podsOf are the pods and EndpointSlices the informers of infs hold, in name order.
func podsOf(infs []*podWatch) ([]*corev1.Pod, []*discoveryv1.EndpointSlice) {
	var pods []*corev1.Pod
	var eps []*discoveryv1.EndpointSlice
	for _, w := range infs {
		for _, o := range w.informer.GetStore().List() {
			pods = append(pods, o.(*corev1.Pod))
		}
		for _, o := range w.slices.GetStore().List() {
			eps = append(eps, o.(*discoveryv1.EndpointSlice))
		}
	}
	slices.SortFunc(eps, byName)
	slices.SortFunc(pods, byName)
	return pods[:len(pods):len(pods)], eps[:len(eps):len(eps)]
}

// podsForbidden are the errors of the services keys that name namespace ns, whose pods the
// sidecar may not list: each says what to grant.
func (k *Kube) podsForbidden(cms []*corev1.ConfigMap, ns string, err error) []error {
	var out []error
	for _, cm := range cms {
		if cm.Name != k.ServicesConfigMap {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
			var svc struct {
				Namespace string `json:"namespace"`
			}
			if json.Unmarshal([]byte(cm.Data[key]), &svc) != nil || svc.Namespace != ns {
				continue
			}
			out = append(out, &snapshot.InputError{Stage: snapshot.StageDecode,
				Ref: snapshot.Ref{Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, Key: key},
				Err: fmt.Errorf("the pods of namespace %s cannot be read (%v): it is served without servers until the sidecar's service account may get, list and watch pods and endpointslices.discovery.k8s.io there (the chart: rbac.podNamespaces)", ns, err)})
		}
	}
	return out
}

// Lookup returns the cached object a Ref names (for Events, which name its uid so that
// `kubectl describe` shows them), or nil: the load balancer's ConfigMaps and Secrets, the pods
// and EndpointSlices of the namespaces the services name, and the watched objects.
func (k *Kube) Lookup(ref snapshot.Ref) runtime.Object {
	if ref.Cluster != k.Cluster && ref.Cluster != "" {
		return nil // another cluster's
	}
	k.mu.Lock()
	var stores []cache.Store // where an object of ref's kind may be
	var watched []cache.Store
	if set := k.cur; set != nil {
		switch ref.Kind {
		case "ConfigMap":
			if set.cms != nil {
				stores = append(stores, set.cms.GetStore())
			}
		case "Secret":
			for _, inf := range set.secrets {
				stores = append(stores, inf.GetStore())
			}
			for _, w := range set.tls {
				stores = append(stores, w.informer.GetStore())
			}
		case "Pod":
			if w := set.podNS[ref.Namespace]; w != nil {
				stores = append(stores, w.informer.GetStore())
			}
		case "EndpointSlice":
			if w := set.podNS[ref.Namespace]; w != nil {
				stores = append(stores, w.slices.GetStore())
			}
		}
		for _, w := range set.res {
			watched = append(watched, w.informer.GetStore())
		}
	}
	k.mu.Unlock()
	key := ref.Name
	if ref.Namespace != "" {
		key = ref.Namespace + "/" + ref.Name
	}
	for _, s := range stores {
		if o, ok, _ := s.GetByKey(key); ok {
			return o.(runtime.Object)
		}
	}
	for _, s := range watched {
		if o, ok, _ := s.GetByKey(key); ok {
			if x, ok := o.(*kubeObject); ok && x.Kind() == ref.Kind {
				return x.reference()
			}
		}
	}
	return nil
}

// reference is what an Event needs of the object: apiVersion, kind, namespace, name and uid.
func (o *kubeObject) reference() runtime.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(o.APIVersion())
	u.SetKind(o.Kind())
	u.SetNamespace(o.Namespace())
	u.SetName(o.Name())
	u.SetUID(types.UID(o.UID()))
	return u
}

// watchTLSSecrets makes the informers of the TLS Secrets of TLSSecretNamespaces; the
// factories are started by Run.
func (k *Kube) watchTLSSecrets(handler cache.ResourceEventHandler) ([]*tlsWatch, []informers.SharedInformerFactory, error) {
	namespaces := k.TLSSecretNamespaces.Names
	if k.TLSSecretNamespaces.All {
		namespaces = []string{metav1.NamespaceAll}
	}
	var (
		out       []*tlsWatch
		factories []informers.SharedInformerFactory
	)
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(k.Client, 0, informers.WithNamespace(ns),
			informers.WithTransform(stripManagedFields),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = tlsSecretSelector }))
		inf := f.Core().V1().Secrets().Informer()
		w := &tlsWatch{namespace: ns, informer: inf}
		if err := inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			k.logger().Warn("kube source: cannot list or watch TLS Secrets; retrying", "namespace", w.where(), "error", w.explain(err))
			k.probeNow()
		}); err != nil {
			return nil, nil, err
		}
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return nil, nil, err
		}
		w.handled = reg
		out = append(out, w)
		factories = append(factories, f)
	}
	return out, factories, nil
}

// where names the namespace w follows, for messages.
func (w *tlsWatch) where() string {
	if w.namespace == "" {
		return "every namespace"
	}
	return w.namespace
}

// explain says what a list or watch error of w means.
func (w *tlsWatch) explain(err error) error {
	if apierrors.IsForbidden(err) {
		grant := "a Role in namespace " + w.namespace + " (see examples/kubernetes/rbac-tls.yaml)"
		if w.namespace == "" {
			grant = "a ClusterRole (see examples/kubernetes/rbac-tls-all.yaml)"
		}
		return fmt.Errorf("not allowed to list and watch the Secrets of %s (--tls-secret-namespaces): give the sidecar's service account get, list and watch on secrets through %s: %w",
			w.where(), grant, err)
	}
	return err
}

// tlsSecrets returns the informers of the TLS Secrets once each has listed; one that cannot
// list (RBAC forbids) is an error naming the namespace, not a wait: the last configuration
// keeps serving, and no certificate goes missing because its namespace could not be read.
func (k *Kube) tlsSecrets(ctx context.Context, set *informerSet) ([]cache.SharedIndexInformer, error) {
	tls := set.tls
	if len(tls) == 0 {
		return nil, nil
	}
	err := awaitListed(ctx, "the TLS Secrets", len(tls),
		func(i int) bool { return tls[i].informer.HasSynced() },
		func(i int) error {
			w := tls[i]
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.err == nil {
				return nil
			}
			return fmt.Errorf("kube source: TLS Secrets of %s: %w", w.where(), w.explain(w.err))
		})
	if err != nil {
		return nil, err
	}
	out := make([]cache.SharedIndexInformer, 0, len(tls))
	for _, w := range tls {
		out = append(out, w.informer)
	}
	return out, nil
}

// watchResources makes a dynamic informer for each watched resource (objectHandler asks for
// the syncs), converting objects as they arrive; the factories are started by Run.
func (k *Kube) watchResources() ([]*resourceWatch, []factory, error) {
	if len(k.Watch) == 0 {
		return nil, nil, nil
	}
	if k.Dynamic == nil {
		return nil, nil, errors.New("kube source: watched resources need a dynamic client")
	}
	ws, err := resolve(k.Watch)
	if err != nil {
		return nil, nil, fmt.Errorf("kube source: %w", err)
	}
	var (
		out       []*resourceWatch
		factories []factory
	)
	for _, w := range ws {
		spec := w.spec
		// No indexers: the objects are read by key and listed whole (objectList), never by
		// namespace; a factory's informer would keep a namespace index of every key (2 MB at
		// 10,000 Ingresses, Services and EndpointSlices).
		inf := dynamicinformer.NewFilteredDynamicInformer(k.Dynamic, spec.GVR(), spec.Namespace, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
			o.LabelSelector = spec.Selector
		}).Informer()
		f := &soloInformer{informer: inf}
		rw := &resourceWatch{w: w, informer: inf}
		if err := inf.SetTransform(k.convert(w, inf.GetStore())); err != nil {
			return nil, nil, err
		}
		if err := inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			rw.mu.Lock()
			rw.err = err
			rw.mu.Unlock()
			k.logger().Warn("kube source: cannot list or watch a watched resource; retrying", "resource", spec.Qualified(), "error", explainWatchError(w, err))
			k.probeNow()
		}); err != nil {
			return nil, nil, err
		}
		if rw.handled, err = inf.AddEventHandler(k.objectHandler(&rw.list)); err != nil {
			return nil, nil, err
		}
		out = append(out, rw)
		factories = append(factories, f)
	}
	return out, factories, nil
}

// soloInformer runs one informer made without a factory, as a factory would (Start, then
// Shutdown waits for it to stop).
type soloInformer struct {
	informer cache.SharedIndexInformer
	once     sync.Once
	wg       sync.WaitGroup
}

func (s *soloInformer) Start(stop <-chan struct{}) {
	s.once.Do(func() {
		s.wg.Go(func() { s.informer.Run(stop) })
	})
}

// Shutdown waits for the informer to stop; its stop channel must be closed first (the set's
// context, cancelled by Kube.shutdown before).
func (s *soloInformer) Shutdown() { s.wg.Wait() }

// kubeObject is a watched object in an informer's cache: converted for the templates, with the
// metadata the informer needs (its key, and the resourceVersion that tells an update).
type kubeObject struct{ *snapshot.Object }

func (o *kubeObject) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: o.Namespace(), Name: o.Name(), ResourceVersion: o.ResourceVersion()}
}

// convert is the informer transform of a watched resource: the object as the API server sent
// it becomes a snapshot.Object (a conversion of one already converted is itself). An update
// that changes nothing but the resourceVersion (the echo of a status write, with ;status=off)
// keeps the values of the version store holds (snapshot.Echo).
func (k *Kube) convert(w *watched, store cache.Store) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		if u.GetAPIVersion() == "" {
			u.SetAPIVersion(w.spec.GroupVersion().String())
		}
		if u.GetKind() == "" && w.kind != "" {
			u.SetKind(w.kind)
		}
		w.spec.Status.Trim(u.Object) // what templates do not see of it (;status=)
		o, err := k.objConv.FromUnstructured(u.Object)
		if err != nil {
			return nil, fmt.Errorf("convert %s %s/%s: %w", w.spec.Qualified(), u.GetNamespace(), u.GetName(), err)
		}
		if n := k.objects.Add(1); n%podConverterRound == 0 {
			k.objConv.NextRound()
		}
		o = k.objConv.InCluster(o, k.Cluster)
		if old, ok, _ := store.GetByKey(o.Key()); ok {
			if old, ok := old.(*kubeObject); ok {
				o = snapshot.Echo(old.Object, o)
			}
		}
		return &kubeObject{o}, nil
	}
}

// explainWatchError says what a list or watch error of a watched resource means.
func explainWatchError(w *watched, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the API server does not serve %s (kubectl api-resources lists what it serves; a custom resource needs its CustomResourceDefinition): %w", w.spec.Qualified(), err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("not allowed to list and watch %s: give the sidecar's service account get, list and watch on resource %q of API group %q (see examples/kubernetes/rbac.yaml): %w",
			w.spec.Qualified(), w.spec.Resource, w.spec.Group, err)
	}
	return err
}

// awaitListed waits until each of n informers has listed (synced); one whose list failed
// (listErr) ends the wait with its error rather than a wait forever: the last configuration
// keeps serving while the operator fixes what the error names.
func awaitListed(ctx context.Context, what string, n int, synced func(int) bool, listErr func(int) error) error {
	tick := time.NewTicker(resourcePoll)
	defer tick.Stop()
	for {
		pending := false
		for i := range n {
			if synced(i) {
				continue
			}
			if err := listErr(i); err != nil {
				return err
			}
			pending = true
		}
		if !pending {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// resourcePoll is how often Objects looks whether the watched resources' informers have synced
// or failed.
const resourcePoll = 20 * time.Millisecond

// resources returns the objects of the watched resources once every informer has listed; an
// informer that cannot list (a resource the API server does not serve, or RBAC forbids) is an
// error naming the resource, not a wait.
func (k *Kube) resources(ctx context.Context, set *informerSet) (map[string][]*snapshot.Object, error) {
	res := set.res
	if len(res) == 0 {
		return nil, nil
	}
	err := awaitListed(ctx, "the watched resources", len(res),
		func(i int) bool { return res[i].informer.HasSynced() },
		func(i int) error {
			rw := res[i]
			rw.mu.Lock()
			defer rw.mu.Unlock()
			if rw.err == nil {
				return nil
			}
			return fmt.Errorf("kube source: watch %s: %w", rw.w.spec.Qualified(), explainWatchError(rw.w, rw.err))
		})
	if err != nil {
		return nil, err
	}
	out := make(map[string][]*snapshot.Object, len(res))
	for _, rw := range res {
		out[rw.w.spec.Name()] = rw.list.read(rw.informer.GetStore())
	}
	return out, nil
}
