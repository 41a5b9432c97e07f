package watcher

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// informerSet is one generation of the kube source's informers. Run starts one; when the API
// server answers again after an outage, a new one replaces it (see follow): client-go's
// reflectors, having failed for a while, wait up to a minute before they try again, while new
// ones list at once.
type informerSet struct {
	ctx       context.Context // the set's life: pod watches started later live under it
	cancel    context.CancelFunc
	factories []factory
	cms       cache.SharedIndexInformer
	secrets   []cache.SharedIndexInformer
	tls       []*tlsWatch
	res       []*resourceWatch
	podNS     map[string]*podWatch // by namespace; changed under Kube.mu
	// handled are the registrations of the handlers of cms and secrets: synced once the
	// handlers have been given every object of the informers' first lists (see AwaitFirstLists).
	handled []cache.ResourceEventHandlerRegistration
}

// factory is an informer factory, typed or dynamic.
type factory interface {
	Start(stop <-chan struct{})
	Shutdown()
}

// newInformerSet makes the informers of the load balancer's namespace (ConfigMaps, the Secrets
// it needs), of the TLS Secret namespaces and of the watched resources; start starts them.
func (k *Kube) newInformerSet(ctx context.Context) (*informerSet, error) {
	ctx, cancel := context.WithCancel(ctx)
	set := &informerSet{ctx: ctx, cancel: cancel, podNS: map[string]*podWatch{}}
	var tls []*tlsWatch
	var tlsFactories []informers.SharedInformerFactory
	if !k.Member { // a member cluster gives pods and watched objects only
		if err := k.addNamespaceInformers(set); err != nil {
			cancel()
			return nil, err
		}
		var err error
		if tls, tlsFactories, err = k.watchTLSSecrets(k.handler()); err != nil {
			cancel()
			return nil, err
		}
	}
	res, dynFactories, err := k.watchResources()
	if err != nil {
		cancel()
		return nil, err
	}
	set.tls, set.res = tls, res
	for _, f := range tlsFactories {
		set.factories = append(set.factories, f)
	}
	for _, f := range dynFactories {
		set.factories = append(set.factories, f)
	}
	return set, nil
}

// addNamespaceInformers adds the informers of the ConfigMaps of the namespace and of the
// Secrets it needs: the keys and config Secrets by name, the certificates by label.
func (k *Kube) addNamespaceInformers(set *informerSet) error {
	factory := func(tweak func(*metav1.ListOptions)) informers.SharedInformerFactory {
		opts := []informers.SharedInformerOption{informers.WithNamespace(k.Namespace), informers.WithTransform(stripManagedFields)}
		if tweak != nil {
			opts = append(opts, informers.WithTweakListOptions(tweak))
		}
		f := informers.NewSharedInformerFactoryWithOptions(k.Client, 0, opts...)
		set.factories = append(set.factories, f)
		return f
	}
	set.cms = factory(nil).Core().V1().ConfigMaps().Informer()
	if err := k.follows(set, set.cms, "configmaps"); err != nil {
		return err
	}
	addSecrets := func(what string, tweak func(*metav1.ListOptions)) error {
		inf := factory(tweak).Core().V1().Secrets().Informer()
		set.secrets = append(set.secrets, inf)
		return k.follows(set, inf, what)
	}
	for _, name := range []string{k.KeysSecret, k.ConfigSecret} {
		if name == "" {
			continue
		}
		sel := fields.OneTermEqualSelector("metadata.name", name).String()
		if err := addSecrets("secret "+name, func(o *metav1.ListOptions) { o.FieldSelector = sel }); err != nil {
			return err
		}
	}
	if k.CertificateSelector != "" {
		sel := k.CertificateSelector
		if err := addSecrets("secrets "+sel, func(o *metav1.ListOptions) { o.LabelSelector = sel }); err != nil {
			return err
		}
	}
	return nil
}

// follows makes inf call notify on its events, and watchFailed on its failures.
func (k *Kube) follows(set *informerSet, inf cache.SharedIndexInformer, what string) error {
	if err := inf.SetWatchErrorHandler(k.watchFailed(what)); err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(k.handler())
	if err != nil {
		return err
	}
	set.handled = append(set.handled, reg)
	return nil
}

// watchPods starts the pod and EndpointSlice informers of namespace ns in set. Called with
// Kube.mu held (or set not shared yet).
func (k *Kube) watchPods(set *informerSet, ns string) *podWatch {
	wctx, stop := context.WithCancel(set.ctx)
	f := informers.NewSharedInformerFactoryWithOptions(k.Client, 0,
		informers.WithNamespace(ns), informers.WithTransform(stripManagedFields))
	inf := f.Core().V1().Pods().Informer()
	slices := f.Discovery().V1().EndpointSlices().Informer()
	w := &podWatch{informer: inf, slices: slices, stop: func() { stop(); f.Shutdown() }}
	for what, i := range map[string]cache.SharedIndexInformer{"pods " + ns: inf, "endpointslices " + ns: slices} {
		isPods := i == inf
		failed := k.watchFailed(what)
		_ = i.SetWatchErrorHandler(func(r *cache.Reflector, err error) { // errors only once started
			failed(r, err)
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				w.mu.Lock()
				first := w.forbidden == nil
				w.forbidden = err
				w.mu.Unlock()
				if first {
					k.logger().Warn("kube source: cannot list the pods of a namespace the services name; their services are served without servers meanwhile", "namespace", ns, "error", err)
					k.notify() // the sync waiting for this namespace goes on without it
					go k.awaitGrant(wctx, set, ns, w)
				}
			}
		})
		if reg, err := i.AddEventHandler(k.podHandler(w, isPods)); err == nil { // errors only once stopped
			w.handled = append(w.handled, reg)
		}
	}
	f.Start(wctx.Done())
	set.podNS[ns] = w
	return w
}

// awaitGrant asks, every few seconds, whether the pods and EndpointSlices of ns can be listed
// now; once they can, w's informers are replaced by new ones, which list at once. Left alone,
// client-go's reflectors would try again only after their backoff, up to a minute after the
// grant.
func (k *Kube) awaitGrant(ctx context.Context, set *informerSet, ns string, w *podWatch) {
	one := metav1.ListOptions{Limit: 1}
	for delay := time.Second; ; delay = min(2*delay, 5*time.Second) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		if _, err := k.Client.CoreV1().Pods(ns).List(ctx, one); err != nil {
			continue
		}
		if _, err := k.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, one); err != nil {
			continue
		}
		k.mu.Lock()
		current := set.podNS[ns] == w && set.ctx.Err() == nil
		if current {
			k.watchPods(set, ns)
		}
		k.mu.Unlock()
		if current {
			// Stopped without Kube.mu: its handlers may be waiting for it.
			w.stop()
			k.logger().Info("kube source: the pods of the namespace can be listed now", "namespace", ns)
		}
		k.notify()
		return
	}
}

func (set *informerSet) start() {
	for _, f := range set.factories {
		f.Start(set.ctx.Done())
	}
}

// shutdown stops set's informers; what they hold stays readable.
func (k *Kube) shutdown(set *informerSet) {
	set.cancel()
	for _, f := range set.factories {
		f.Shutdown()
	}
	k.mu.Lock()
	pods := set.podNS
	set.podNS = map[string]*podWatch{}
	k.mu.Unlock()
	for _, w := range pods {
		w.stop()
	}
}

// baseSynced: the ConfigMaps and Secrets of the namespace have listed.
func (set *informerSet) baseSynced() bool {
	if set.cms != nil && !set.cms.HasSynced() {
		return false
	}
	for _, s := range set.secrets {
		if !s.HasSynced() {
			return false
		}
	}
	return true
}

// listed: every informer of set has listed, or (TLS Secrets, watched resources) failed to
// in a way Objects reports (RBAC, a resource not served). Called with Kube.mu held.
func (set *informerSet) listed() bool {
	if !set.baseSynced() {
		return false
	}
	for _, w := range set.podNS {
		if !w.informer.HasSynced() || !w.slices.HasSynced() {
			return false
		}
	}
	for _, w := range set.tls {
		w.mu.Lock()
		failed := w.err != nil
		w.mu.Unlock()
		if !w.informer.HasSynced() && !failed {
			return false
		}
	}
	for _, rw := range set.res {
		rw.mu.Lock()
		failed := rw.err != nil
		rw.mu.Unlock()
		if !rw.informer.HasSynced() && !failed {
			return false
		}
	}
	return true
}

// podHandler records each event of one of w's informers (pods or EndpointSlices) for the next
// read (see podList), then calls notify.
func (k *Kube) podHandler(w *podWatch, pods bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.record(o, pods); k.notify() },
		UpdateFunc: func(_, o any) { w.record(o, pods); k.notify() },
		DeleteFunc: func(o any) { w.record(o, pods); k.notify() },
	}
}
