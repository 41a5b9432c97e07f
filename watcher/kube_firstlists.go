package watcher

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// AwaitFirstLists returns once the handlers of every informer have been given each object of
// its first list, those of the pod and EndpointSlice informers of the namespaces the services
// name included (it starts them, as the read would): every change notification of the
// initial lists has been made by then, so that a sync that notes what asked for it after
// this, before its read, is not asked for again by the lists it reads. client-go's informer
// HasSynced is true before its handlers have run; the handler registration's is not. An
// informer that cannot list (RBAC, a resource not served, a member cluster away) is not
// waited for: the read reports it.
func (k *Kube) AwaitFirstLists(ctx context.Context) error {
	_, err := k.awaitFirstLists(ctx, nil)
	return err
}

// awaitFirstLists is AwaitFirstLists; a Member takes the namespaces of its pods from services,
// the home cluster's ConfigMaps, which the home cluster returns.
func (k *Kube) awaitFirstLists(ctx context.Context, services []*corev1.ConfigMap) ([]*corev1.ConfigMap, error) {
	k.init()
	select {
	case <-k.started:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	set, err := k.synced(ctx)
	if err != nil {
		return nil, err
	}
	if set.cms != nil {
		services = services[:0:0]
		for _, o := range set.cms.GetStore().List() {
			services = append(services, o.(*corev1.ConfigMap))
		}
	}
	pods, _ := k.podWatches(set, services)
	err = awaitListed(ctx, "the kube source's handlers", 1,
		func(int) bool { return k.handled(set, pods) }, func(int) error { return nil })
	return services, err
}

// handled: every handler of set (and of pods, set's pod watches) has been given the objects
// of its informer's first list, or its informer cannot list.
func (k *Kube) handled(set *informerSet, pods []*podWatch) bool {
	if set.ctx.Err() != nil {
		return true // replaced after an outage: the read waits for the new informers
	}
	synced := func(regs ...cache.ResourceEventHandlerRegistration) bool {
		for _, r := range regs {
			if r != nil && !r.HasSynced() {
				return false
			}
		}
		return true
	}
	failed := func(mu *sync.Mutex, err *error) bool {
		mu.Lock()
		defer mu.Unlock()
		return *err != nil
	}
	if !synced(set.handled...) {
		return false
	}
	for _, w := range pods {
		if !synced(w.handled...) && w.forbiddenErr() == nil && !k.away() {
			return false
		}
	}
	for _, w := range set.tls {
		if !synced(w.handled) && !failed(&w.mu, &w.err) {
			return false
		}
	}
	for _, rw := range set.res {
		if !synced(rw.handled) && !failed(&rw.mu, &rw.err) {
			return false
		}
	}
	return true
}

// AwaitFirstLists is Kube.AwaitFirstLists for every cluster: the home cluster's, then the
// members' together, each member waited for no longer than its read would be (MemberReadWait).
func (c *Clusters) AwaitFirstLists(ctx context.Context) error {
	services, err := c.Home.awaitFirstLists(ctx, nil)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, m := range c.Members {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, c.memberReadWait())
			defer cancel()
			// A member slow to list is read as its read allows: its notifications then ask
			// for one more sync, which is right, as they may bring what the read missed.
			_, _ = m.awaitFirstLists(mctx, services)
		})
	}
	wg.Wait()
	return ctx.Err()
}
