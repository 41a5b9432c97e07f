package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// Clusters is the kube source over several clusters (--cluster): Home, the cluster of the
// load balancer's namespace (its ConfigMaps and Secrets: the services, the templates, the
// certificates), and Members, whose pods and watched objects join the home cluster's, every
// pod and object carrying its cluster's name (Kube.Cluster). Each cluster is followed on its
// own: one that goes away is reported alone (OnCluster, and OnState naming it) and its objects
// stay as last read, or are left out once it has been away for ForgetAfter, while the other
// clusters' changes go on; when it is back its informers list afresh (Kube.follow).
type Clusters struct {
	Home    *Kube
	Members []*Kube
	// ForgetAfter, when positive, is how long a cluster may be away before its pods and
	// watched objects are left out (the home cluster's ConfigMaps and Secrets stay); zero:
	// they stay at their last known state until it is back.
	ForgetAfter time.Duration
	// MemberReadWait bounds a member cluster's read inside a sync (--cluster-read-wait), so
	// that a cluster slow to list a namespace never holds the others' changes back: its last
	// objects stand in meanwhile. Zero: DefaultMemberReadWait.
	MemberReadWait time.Duration
	// OnStoodIn, when set, is told each time a member's last read stood in for a read that did
	// not end within MemberReadWait or failed (cluster_read_stood_in_total{cluster}).
	OnStoodIn func(cluster string)
	// OnState is told whether every cluster is followed, and else which are not and why.
	OnState StateFunc
	// OnCluster is told, for each cluster, whether it is followed (source_up{cluster}).
	OnCluster func(cluster string, up bool)
	Logger    *slog.Logger

	mu      sync.Mutex
	changed func()
	away    map[string]awayCluster
	last    map[string]*snapshot.Objects // each member's last read
}

type awayCluster struct {
	since time.Time
	why   error
}

// DefaultMemberReadWait is MemberReadWait when not set.
const DefaultMemberReadWait = 3 * time.Second

func (c *Clusters) memberReadWait() time.Duration {
	if c.MemberReadWait > 0 {
		return c.MemberReadWait
	}
	return DefaultMemberReadWait
}

// NewClusters makes the source of home and members (each with its Cluster name set, the
// members Member) and has each report its state through it. OnState, OnCluster, ForgetAfter
// and Logger are to be set before Run.
func NewClusters(home *Kube, members []*Kube) *Clusters {
	c := &Clusters{Home: home, Members: members, away: map[string]awayCluster{}, last: map[string]*snapshot.Objects{}}
	for _, k := range c.all() {
		k.OnState = c.stateOf(k.Cluster)
	}
	return c
}

func (c *Clusters) all() []*Kube { return append([]*Kube{c.Home}, c.Members...) }

// Names are the clusters' names, the home cluster's first.
func (c *Clusters) Names() []string {
	var out []string
	for _, k := range c.all() {
		out = append(out, k.Cluster)
	}
	return out
}

// Run follows every cluster until ctx ends; a cluster that cannot be watched at all (its
// configuration) stops them all with its error.
func (c *Clusters) Run(ctx context.Context, changed func()) error {
	c.mu.Lock()
	c.changed = changed
	c.mu.Unlock()
	all := c.all()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(all))
	for _, k := range all {
		go func() {
			err := k.Run(runCtx, c.notify)
			if err != nil && runCtx.Err() == nil {
				err = fmt.Errorf("cluster %s: %w", k.Cluster, err)
			}
			errs <- err
		}()
	}
	var first error
	for range all {
		if err := <-errs; first == nil && runCtx.Err() == nil {
			first = err
			cancel()
		}
	}
	if first != nil {
		return first
	}
	return ctx.Err()
}

func (c *Clusters) notify() {
	c.mu.Lock()
	changed := c.changed
	c.mu.Unlock()
	if changed != nil {
		changed()
	}
}

// stateOf is the StateFunc of one cluster: it keeps which clusters are away, and tells
// OnCluster and OnState.
func (c *Clusters) stateOf(cluster string) StateFunc {
	return func(up bool, why error) {
		c.mu.Lock()
		was, wasAway := c.away[cluster]
		if up {
			delete(c.away, cluster)
		} else {
			if !wasAway {
				was.since = time.Now()
			}
			was.why = why
			c.away[cluster] = was
		}
		overall := c.awayLocked()
		c.mu.Unlock()
		if c.OnCluster != nil {
			c.OnCluster(cluster, up)
		}
		if c.OnState != nil {
			c.OnState(overall == nil, overall)
		}
		if !up && !wasAway && c.ForgetAfter > 0 {
			time.AfterFunc(c.ForgetAfter, c.notify) // a sync then leaves its objects out
		}
	}
}

// awayLocked says which clusters are away and why, in name order; nil when none is.
func (c *Clusters) awayLocked() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.away)) {
		why := c.away[name].why
		if why == nil {
			why = errors.New("cannot be followed")
		}
		errs = append(errs, fmt.Errorf("cluster %s: %w", name, why))
	}
	return errors.Join(errs...)
}

// forgotten: cluster has been away for ForgetAfter (when set).
func (c *Clusters) forgotten(cluster string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.away[cluster]
	return ok && c.ForgetAfter > 0 && time.Since(a.since) >= c.ForgetAfter
}

// Objects returns the home cluster's objects with every member's pods and watched objects
// added: what each cluster's informers hold, or, for a member that cannot be read now, what
// it held when last read.
func (c *Clusters) Objects(ctx context.Context) (*snapshot.Objects, error) {
	objs, err := c.Home.Objects(ctx)
	if objs == nil {
		return nil, err
	}
	if c.forgotten(c.Home.Cluster) {
		objs.Pods, objs.ConvertedPods, objs.EndpointSlices, objs.ClusterEndpointSlices, objs.Resources = nil, nil, nil, nil, nil
	}
	revs := []string{c.Home.Cluster + "=" + objs.Revision}
	// Read together: one cluster slow to answer holds the others back once, not in turn.
	read := make([]*snapshot.Objects, len(c.Members))
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { read[i], errs[i] = c.member(ctx, m, objs.ConfigMaps) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, m := range c.Members {
		mo := read[i]
		if mo == nil || c.forgotten(m.Cluster) {
			continue
		}
		objs.ConvertedPods = append(objs.ConvertedPods, mo.ConvertedPods...)
		for cl, list := range mo.ClusterEndpointSlices {
			if objs.ClusterEndpointSlices == nil {
				objs.ClusterEndpointSlices = map[string][]*discoveryv1.EndpointSlice{}
			}
			objs.ClusterEndpointSlices[cl] = list
		}
		for name, list := range mo.Resources {
			if objs.Resources == nil {
				objs.Resources = map[string][]*snapshot.Object{}
			}
			objs.Resources[name] = append(objs.Resources[name], list...)
		}
		revs = append(revs, m.Cluster+"="+mo.Revision)
	}
	objs.Revision = strings.Join(revs, ",")
	objs.Home = c.Home.Cluster
	return objs, err
}

// member reads member m with the home cluster's ConfigMaps cms; when it cannot within
// MemberReadWait (or cannot at all), its last read stands, and nil when it never was read.
// The error is only ctx's.
func (c *Clusters) member(ctx context.Context, m *Kube, cms []*corev1.ConfigMap) (*snapshot.Objects, error) {
	rctx, cancel := context.WithTimeout(ctx, c.memberReadWait())
	mo, err := m.objectsFor(rctx, cms)
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if mo != nil {
		c.mu.Lock()
		c.last[m.Cluster] = mo
		c.mu.Unlock()
		if err != nil {
			c.logger().Warn("cluster read in part", "cluster", m.Cluster, "error", err)
		}
		return mo, nil
	}
	c.logger().Warn("cluster not read; its objects as last read stand in", "cluster", m.Cluster, "error", err)
	if c.OnStoodIn != nil {
		c.OnStoodIn(m.Cluster)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[m.Cluster], nil
}

func (c *Clusters) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// Lookup finds the object ref names in its cluster's caches (the home cluster's when ref
// names none).
func (c *Clusters) Lookup(ref snapshot.Ref) runtime.Object {
	for _, k := range c.all() {
		if ref.Cluster == k.Cluster || (ref.Cluster == "" && k == c.Home) {
			return k.Lookup(ref)
		}
	}
	return nil
}

// away: k is a member cluster whose API server does not answer.
func (k *Kube) away() bool { return k.Member && k.state.isDown() }

// clusterPods converts a cluster's pods with its name, each pod once per resourceVersion.
type clusterPods struct {
	mu   sync.Mutex
	conv snapshot.PodConverter
	last map[podVersion]*snapshot.Pod
}

type podVersion struct {
	uid types.UID
	rv  string
}

func (c *clusterPods) convert(pods []*corev1.Pod, cluster string) []*snapshot.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[podVersion]*snapshot.Pod, len(pods))
	out := make([]*snapshot.Pod, 0, len(pods))
	fresh := false
	for _, p := range pods {
		key := podVersion{p.UID, p.ResourceVersion}
		cp, ok := c.last[key]
		if !ok || p.ResourceVersion == "" {
			cp, fresh = c.conv.ConvertIn(p, cluster), true
		}
		next[key] = cp
		out = append(out, cp)
	}
	c.last = next
	if fresh {
		c.conv.NextRound()
	}
	return out
}
