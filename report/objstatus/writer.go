package objstatus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// FieldManager names the sidecar in the objects' managedFields.
const FieldManager = "haproxy-sidecar"

// Defaults of Config's timings.
const (
	DefaultInterval       = 500 * time.Millisecond
	DefaultResync         = 10 * time.Minute
	DefaultPublishRefresh = 15 * time.Second
	retryMin, retryMax    = time.Second, 2 * time.Minute
)

// resources are the Gateway API kinds' resources (the dynamic client's).
var resources = map[string]schema.GroupVersionResource{
	KindGatewayClass: {Group: gatewayGroup, Version: "v1", Resource: "gatewayclasses"},
	KindGateway:      {Group: gatewayGroup, Version: "v1", Resource: "gateways"},
	KindHTTPRoute:    {Group: gatewayGroup, Version: "v1", Resource: "httproutes"},
}

// Config is what a Writer writes with, and what it follows.
type Config struct {
	Client kubernetes.Interface
	// Dynamic writes the Gateway API status (nil: Gateways and routes are left alone, with a
	// warning when the rendering declares some).
	Dynamic dynamic.Interface
	// Live is what HAProxy runs (live.Owner.State).
	Live func() live.State
	// Standby, when set, says this instance does not lead (--leader-elect): it writes nothing.
	Standby func() bool
	// HostsHave, when set, says whether every remote host has a rendering
	// (--reload=dataplane).
	HostsHave func(hash string) bool
	// Namespace and ServicesConfigMap name the services ConfigMap, which gets the live
	// annotations ("" name: none).
	Namespace, ServicesConfigMap string
	// PublishService (NAMESPACE/NAME) or PublishAddresses: the address published on Ingresses
	// and Gateways (neither: none is).
	PublishService   string
	PublishAddresses []string
	// ControllerName is the controllerName of the route status written.
	ControllerName string
	// Warn, when set, records a Warning Event on an object (the Ingress a declaration's
	// warning= is about), once HAProxy runs the rendering that declares it.
	Warn   func(obj runtime.Object, reason, message string)
	Logger *slog.Logger
	// Interval is how often what HAProxy runs is looked at; Resync how often every object
	// served is read again (what it has may have been changed by someone else);
	// PublishRefresh how often the published Service is read again. Zero: the defaults.
	Interval, Resync, PublishRefresh time.Duration
}

// Writer writes the status of the objects the live rendering declares it serves (see the
// package documentation). Run runs it.
type Writer struct {
	cfg Config
	log *slog.Logger

	hash    string            // the rendering the last round was for
	wants   wantSet           // its declarations
	done    map[Object]string // the objects whose status is what fingerprint says
	forget  map[Object]bool   // objects served before, whose status is to be taken back
	fresh   map[Object]bool   // the objects whose declaration the last rendering changed (nil: all)
	addrs   []Address         // the published addresses
	known   bool              // addrs is known
	addrsFP string            // fmt.Sprint(addrs): an Ingress's fingerprint
	prints  map[Object]string // fmt.Sprint of each route's and class's want, kept while it stays
	addrsAt time.Time         // when the Service was read
	since   string            // the annotations written: hash and time
	full    time.Time         // when every object is read again
	failed  bool              // the last round left something undone
	retryAt time.Time         // when it is tried again
	backoff time.Duration     // the wait before the next retry
	waiting string            // why nothing is written now, as logged
	logged  map[string]string // the last problem logged per object (not repeated)
	warned  map[string]bool   // the declarations' problems logged, of the last rendering
	dynWarn bool              // the missing dynamic client was warned about
	evented map[Object]string // the warning recorded as an Event per object (not repeated)
	pre     *prefetched       // the objects this round listed, not written yet
	page    int64             // the objects a list of the round returns at most (prefetchPage; tests)
	decls   declCache         // the live rendering's declaration lines, parsed
	now     func() time.Time  // the clock (tests)
}

// New checks cfg and returns a Writer.
func New(cfg Config) (*Writer, error) {
	if cfg.Client == nil || cfg.Live == nil {
		return nil, errors.New("objstatus: a Kubernetes client and the live state are required")
	}
	if cfg.ControllerName == "" {
		return nil, errors.New("objstatus: a controller name is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.PublishRefresh <= 0 {
		cfg.PublishRefresh = DefaultPublishRefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Writer{cfg: cfg, log: cfg.Logger.With("component", "object-status"), logged: map[string]string{}, evented: map[Object]string{}, now: time.Now, page: prefetchPage}
	w.reset()
	if len(cfg.PublishAddresses) > 0 {
		w.setAddrs(Addresses(cfg.PublishAddresses))
	}
	return w, nil
}

// reset forgets what was written: the next round reads every object (a new leader).
func (w *Writer) reset() {
	w.hash, w.wants, w.done, w.forget, w.since, w.full = "", nil, map[Object]string{}, map[Object]bool{}, "", time.Time{}
	w.prints = map[Object]string{}
}

// printed is fmt.Sprint(want), want being o's in w.wants: kept, or printed now.
func (w *Writer) printed(o Object, want Want) string {
	if p, ok := w.prints[o]; ok {
		return p
	}
	return fmt.Sprint(want)
}

// setAddrs takes the published addresses, known from now on.
func (w *Writer) setAddrs(addrs []Address) {
	w.addrs, w.known, w.addrsFP = addrs, true, fmt.Sprint(addrs)
}

// Run writes the status until ctx ends.
func (w *Writer) Run(ctx context.Context) {
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		w.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick looks at what HAProxy runs once, and writes what changed.
func (w *Writer) Tick(ctx context.Context) {
	st := w.cfg.Live()
	standby := w.cfg.Standby != nil && w.cfg.Standby()
	bundle, why := Confirmed(st, standby, w.cfg.HostsHave)
	if bundle == nil {
		if standby && w.hash != "" {
			w.reset()
		}
		if msg := why + "\x00" + st.Good.Hash(); msg != w.waiting {
			w.waiting = msg
			w.log.Debug("status on the objects waits", "why", why, "rendering", st.Good.Hash())
		}
		return
	}
	w.waiting = ""
	now := w.now()
	publishing := w.cfg.PublishService != ""
	due := bundle.Hash != w.hash || !now.Before(w.full) ||
		w.failed && !now.Before(w.retryAt) ||
		publishing && !now.Before(w.addrsAt.Add(w.cfg.PublishRefresh))
	if !due {
		return
	}
	w.round(ctx, bundle, st.LiveSince, now)
}

// round brings every object to what the rendering declares.
func (w *Writer) round(ctx context.Context, bundle *render.Bundle, since, now time.Time) {
	full := !now.Before(w.full)
	if full {
		w.done = map[Object]string{}
	}
	failed := false
	if bundle.Hash != w.hash {
		w.declared(bundle)
	}
	if w.cfg.PublishService != "" && (full || !now.Before(w.addrsAt.Add(w.cfg.PublishRefresh)) || !w.known) {
		addrs, err := w.serviceAddresses(ctx)
		w.addrsAt = now
		if err != nil {
			w.problem("Service "+w.cfg.PublishService, "read the published Service", err)
			failed = true
		} else {
			w.clear("Service " + w.cfg.PublishService)
			if !w.known || !slices.Equal(addrs, w.addrs) {
				w.log.Info("published address", "service", w.cfg.PublishService, "addresses", addressList(addrs))
			}
			w.setAddrs(addrs)
		}
	}
	written, superseded := w.writeDeclared(ctx, bundle.Hash)
	failed = failed || !written
	if superseded {
		w.log.Debug("another rendering went live: its objects are written first", "rendering", bundle.Hash)
	} else if !w.finish(ctx, bundle.Hash, since, full) {
		failed = true
	}
	if full {
		w.full = now.Add(w.cfg.Resync)
	}
	w.failed = failed
	if failed {
		w.backoff = min(max(2*w.backoff, retryMin), retryMax)
		w.retryAt = now.Add(w.backoff)
	} else {
		w.backoff = 0
	}
}

// writeDeclared writes the status of the objects whose status is not what is declared, those
// the last rendering changed first; ok is false when one could not be written. It stops
// (superseded) when another rendering has gone live meanwhile: the next round writes what that
// one changed (a route added while the status of 3,000 is written at start) before the rest.
func (w *Writer) writeDeclared(ctx context.Context, hash string) (ok, superseded bool) {
	fresh, rest := w.todo()
	defer func() { w.pre = nil }()
	ok = true
	i := 0
	// Each part listed on its own (prefetch): the few objects a change makes fresh are read
	// one by one, not reached by listing every page up to them, which the rest would then list
	// again from the first.
	for _, part := range [][]Object{fresh, rest} {
		w.pre = w.prefetch(part)
		for _, o := range part {
			if i > 0 && i%supersededEvery == 0 && w.superseded(hash) {
				return ok, true
			}
			i++
			want := w.wants.get(o)
			if err := w.write(ctx, o, want); err != nil {
				w.problem(o.String(), "write the status of "+o.String(), err)
				ok = false
				continue
			}
			w.clear(o.String())
			w.done[o] = w.fingerprint(o)
		}
	}
	return ok, false
}

// supersededEvery is how many writes are made between two looks at what HAProxy runs (at
// --kube-qps 50, under half a second).
const supersededEvery = 20

// superseded says whether a rendering other than hash is what HAProxy runs now, or this
// instance no longer leads.
func (w *Writer) superseded(hash string) bool {
	standby := w.cfg.Standby != nil && w.cfg.Standby()
	b, _ := Confirmed(w.cfg.Live(), standby, w.cfg.HostsHave)
	return standby || b != nil && b.Hash != hash
}

// finish records the declared warnings, takes back the status of the objects no longer
// served and annotates the services ConfigMap; false when something could not be done.
func (w *Writer) finish(ctx context.Context, hash string, since time.Time, full bool) bool {
	ok := w.warnObjects(ctx)
	for _, o := range slices.SortedFunc(maps.Keys(w.forget), compareObjects) {
		if err := w.takeBack(ctx, o); err != nil {
			w.problem(o.String(), "take back the status of "+o.String()+", no longer served", err)
			ok = false
			continue
		}
		w.clear(o.String())
		delete(w.forget, o)
		delete(w.done, o)
	}
	if w.cfg.ServicesConfigMap != "" {
		mark := hash + " " + since.UTC().Format(time.RFC3339)
		if full || w.since != mark {
			if err := w.annotate(ctx, hash, since); err != nil {
				w.problem("ConfigMap "+w.cfg.ServicesConfigMap, "annotate the services ConfigMap", err)
				ok = false
			} else {
				w.since = mark
			}
		}
	}
	return ok
}

// declared takes the declarations of a new rendering: what is no longer declared is to be
// taken back.
func (w *Writer) declared(bundle *render.Bundle) {
	decls, problems := w.decls.parseAt(bundle.Config)
	wants, more := collect(decls)
	warned := map[string]bool{}
	for _, p := range append(problems, more...) {
		// Once, not again with each rendering that still has it.
		if msg := p.Error(); !w.warned[msg] {
			w.log.Warn("a status declaration of the live configuration is left out", "error", p)
		}
		warned[p.Error()] = true
	}
	w.warned = warned
	for o := range w.wants {
		if _, ok := wants[o]; !ok {
			w.forget[o] = true
			delete(w.prints, o)
		}
	}
	// After none (the first rendering, a new leader's), every object is fresh: fresh stays
	// nil, not a map of them all (10,000 Ingresses: 1 MB kept until the next rendering).
	first := len(w.wants) == 0
	w.fresh = nil
	if !first {
		w.fresh = map[Object]bool{}
	}
	for o := range wants {
		delete(w.forget, o)
		want := wants.get(o)
		_, ok := w.wants[o]
		old := w.wants.get(o)
		if ok && sameWant(old, want) {
			continue // most declarations are unchanged: not printed again
		}
		kept := o.Kind == KindHTTPRoute || o.Kind == KindGatewayClass
		if first && !kept {
			continue
		}
		// Values printed alike are the same status.
		p := fmt.Sprint(want)
		if !first && (!ok || w.printed(o, old) != p) {
			w.fresh[o] = true
		}
		if kept {
			w.prints[o] = p // their fingerprint (an Ingress's is the addresses)
		}
	}
	w.wants = wants
	w.hash = bundle.Hash
}

// sameWant is reflect.DeepEqual(a, b), without its reflection and the two values it boxes:
// 3,000 routes, 6,000 allocations a rendering. A nil slice and an empty one differ, as they do
// for DeepEqual; slices the two share (Conditions kept by declCache) are equal at once.
// TestSameWant checks it against DeepEqual, and fails when Want gets a field.
func sameWant(a, b Want) bool {
	return a.Generation == b.Generation && a.Warning == b.Warning && a.WarningReason == b.WarningReason &&
		sameSlice(a.Conditions, b.Conditions, equal) && sameSlice(a.Addresses, b.Addresses, equal) &&
		sameSlice(a.Listeners, b.Listeners, func(x, y ListenerWant) bool {
			return x.Name == y.Name && x.Attached == y.Attached &&
				sameSlice(x.Conditions, y.Conditions, equal) && sameSlice(x.Kinds, y.Kinds, equal)
		}) &&
		sameSlice(a.Parents, b.Parents, func(x, y ParentWant) bool {
			return x.Parent == y.Parent && sameSlice(x.Conditions, y.Conditions, equal)
		})
}

// sameSlice is reflect.DeepEqual of two slices whose elements are compared by same.
func sameSlice[T any](a, b []T, same func(T, T) bool) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	if len(a) > 0 && &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if !same(a[i], b[i]) {
			return false
		}
	}
	return true
}

func equal[T comparable](a, b T) bool { return a == b }

// todo is what this round is to write: the objects whose status is not what is declared
// yet, those whose declaration the last rendering changed (or added) in fresh, written first;
// each part sorted.
func (w *Writer) todo() (fresh, rest []Object) {
	for o := range w.wants {
		if fp := w.fingerprint(o); fp == "" || w.done[o] == fp {
			continue
		}
		if w.fresh == nil || w.fresh[o] {
			fresh = append(fresh, o)
		} else {
			rest = append(rest, o)
		}
	}
	slices.SortFunc(fresh, compareObjects)
	slices.SortFunc(rest, compareObjects)
	return fresh, rest
}

// fingerprint is what an object's status is made of (the declaration, the published
// addresses it shows); "" when it cannot be written now (its addresses are not known). Made
// of the prints kept, not printed again: every round compares 3,000 routes' fingerprints.
func (w *Writer) fingerprint(o Object) string {
	publishing := w.cfg.PublishService != "" || len(w.cfg.PublishAddresses) > 0
	switch o.Kind {
	case KindIngress:
		if !publishing || !w.known {
			return ""
		}
		return w.addrsFP
	case KindGateway:
		if publishing && !w.known {
			return ""
		}
		return fmt.Sprint(w.wants.get(o), w.addrs) // few Gateways
	}
	return w.prints[o]
}

func (w *Writer) write(ctx context.Context, o Object, want Want) error {
	switch o.Kind {
	case KindIngress:
		return w.writeIngress(ctx, o, func(ing networkingv1.IngressLoadBalancerStatus) (networkingv1.IngressLoadBalancerStatus, bool) {
			return IngressStatus(ing, w.addrs)
		})
	case KindGateway:
		publishing := w.cfg.PublishService != "" || len(w.cfg.PublishAddresses) > 0
		return w.writeUnstructured(ctx, o, func(u *unstructured.Unstructured) (bool, error) {
			gen := want.Generation
			if gen == 0 {
				gen = u.GetGeneration()
			}
			old, _ := u.Object["status"].(map[string]any)
			st, changed := GatewayStatus(old, gen, want, publishing, w.addrs, w.now())
			if changed {
				u.Object["status"] = st
			}
			return changed, nil
		})
	case KindGatewayClass:
		return w.writeUnstructured(ctx, o, func(u *unstructured.Unstructured) (bool, error) {
			if c, _, _ := unstructured.NestedString(u.Object, "spec", "controllerName"); c != w.cfg.ControllerName {
				// Another controller's class: its status is that controller's to write.
				w.warnOnce(o.String(), "a GatewayClass the live configuration declares is another controller's: its status is left alone", "controllerName", c, "ours", w.cfg.ControllerName)
				return false, nil
			}
			gen := want.Generation
			if gen == 0 {
				gen = u.GetGeneration()
			}
			old, _ := u.Object["status"].(map[string]any)
			st, changed := GatewayClassStatus(old, gen, want.Conditions, w.now())
			if changed {
				u.Object["status"] = st
			}
			return changed, nil
		})
	case KindHTTPRoute:
		return w.writeRoute(ctx, o, want)
	}
	return nil
}

// warnObjects records the declared warnings as Warning Events on their Ingresses, each once
// (again when it changes); false when one could not be (it is retried).
func (w *Writer) warnObjects(ctx context.Context) bool {
	if w.cfg.Warn == nil {
		return true
	}
	ok := true
	// Those to record first, then sorted: every object of a rendering is declared, few warn.
	var todo []Object
	for o, want := range w.wants {
		if o.Kind == KindIngress && want != nil && want.Warning != "" && w.evented[o] != want.WarningReason+"\x00"+want.Warning {
			todo = append(todo, o)
		}
	}
	slices.SortFunc(todo, compareObjects)
	for _, o := range todo {
		want := w.wants.get(o)
		mark := want.WarningReason + "\x00" + want.Warning
		// The object itself, for its UID: kubectl describe finds its Events by it.
		ing, err := w.cfg.Client.NetworkingV1().Ingresses(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			w.problem(o.String(), "read "+o.String()+" to record its warning", err)
			ok = false
			continue
		}
		ing.TypeMeta = metav1.TypeMeta{Kind: "Ingress", APIVersion: "networking.k8s.io/v1"}
		w.cfg.Warn(ing, want.WarningReason, want.Warning)
		w.log.Info("warning recorded", "object", o.String(), "reason", want.WarningReason, "warning", want.Warning)
		w.evented[o] = mark
	}
	for o := range w.evented {
		if _, ok := w.wants[o]; !ok {
			delete(w.evented, o)
		}
	}
	return ok
}

// takeBack undoes what the sidecar wrote on an object it no longer serves: an Ingress's
// address (when it is the published one), its entries of a route's status.parents. A
// Gateway's conditions stay: its new controller writes its own.
func (w *Writer) takeBack(ctx context.Context, o Object) error {
	switch o.Kind {
	case KindIngress:
		if !w.known {
			return nil
		}
		return w.writeIngress(ctx, o, func(ing networkingv1.IngressLoadBalancerStatus) (networkingv1.IngressLoadBalancerStatus, bool) {
			return IngressForget(ing, w.addrs)
		})
	case KindHTTPRoute:
		return w.writeRoute(ctx, o, Want{})
	}
	return nil
}

func (w *Writer) writeRoute(ctx context.Context, o Object, want Want) error {
	return w.writeUnstructured(ctx, o, func(u *unstructured.Unstructured) (bool, error) {
		gen := want.Generation
		if gen == 0 {
			gen = u.GetGeneration()
		}
		parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
		refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "parentRefs")
		out, changed, problems := RouteParents(parents, refs, o.Namespace, w.cfg.ControllerName, want.Parents, gen, w.now())
		for _, p := range problems {
			w.log.Warn("a route parent the live configuration declares is left out of the route's status", "object", o.String(), "error", p)
		}
		if !changed {
			return false, nil
		}
		return true, unstructured.SetNestedSlice(u.Object, out, "status", "parents")
	})
}

// writeIngress reads an Ingress, changes its status.loadBalancer and writes it (the status
// subresource) when it changed; a conflict reads it again. A missing Ingress is no error.
func (w *Writer) writeIngress(ctx context.Context, o Object, change func(networkingv1.IngressLoadBalancerStatus) (networkingv1.IngressLoadBalancerStatus, bool)) error {
	api := w.cfg.Client.NetworkingV1().Ingresses(o.Namespace)
	listed := w.listedIngress(ctx, o)
	return ignoreNotFound(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// As listed this round, if it was; read again after a conflict.
		ing, err := listed, error(nil)
		if listed = nil; ing == nil {
			ing, err = api.Get(ctx, o.Name, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		lb, changed := change(ing.Status.LoadBalancer)
		if !changed {
			return nil
		}
		ing.Status.LoadBalancer = lb
		if _, err := api.UpdateStatus(ctx, ing, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return err
		}
		w.log.Info("status written", "object", o.String(), "addresses", addressList(w.addrs))
		return nil
	}))
}

// writeUnstructured does what writeIngress does, for a Gateway API object.
func (w *Writer) writeUnstructured(ctx context.Context, o Object, change func(*unstructured.Unstructured) (bool, error)) error {
	if w.cfg.Dynamic == nil {
		if !w.dynWarn {
			w.dynWarn = true
			w.log.Warn("the live configuration declares Gateway API objects, but no dynamic client is made without --watch: their status is not written", "object", o.String())
		}
		return nil
	}
	var api dynamic.ResourceInterface = w.cfg.Dynamic.Resource(resources[o.Kind])
	if o.Namespace != "" {
		api = w.cfg.Dynamic.Resource(resources[o.Kind]).Namespace(o.Namespace)
	}
	listed := w.listedUnstructured(ctx, o)
	return ignoreNotFound(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// As listed this round, if it was; read again after a conflict.
		u, err := listed, error(nil)
		if listed = nil; u == nil {
			u, err = api.Get(ctx, o.Name, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		changed, err := change(u)
		if err != nil || !changed {
			return err
		}
		if _, err := api.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return err
		}
		w.log.Info("status written", "object", o.String())
		return nil
	}))
}

// annotate gives the services ConfigMap the live annotations, when it does not have them.
func (w *Writer) annotate(ctx context.Context, hash string, since time.Time) error {
	api := w.cfg.Client.CoreV1().ConfigMaps(w.cfg.Namespace)
	cm, err := api.Get(ctx, w.cfg.ServicesConfigMap, metav1.GetOptions{})
	if err != nil {
		return ignoreNotFound(err)
	}
	patch, changed := LiveAnnotations(cm.Annotations, hash, since)
	if !changed {
		return nil
	}
	if _, err := api.Patch(ctx, w.cfg.ServicesConfigMap, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return ignoreNotFound(err)
	}
	w.log.Debug("services ConfigMap annotated", "configmap", w.cfg.Namespace+"/"+w.cfg.ServicesConfigMap, "live_config", hash)
	return nil
}

// serviceAddresses reads the published Service's addresses.
func (w *Writer) serviceAddresses(ctx context.Context) ([]Address, error) {
	ns, name, _ := strings.Cut(w.cfg.PublishService, "/")
	svc, err := w.cfg.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // no Service, no address
	}
	if err != nil {
		return nil, err
	}
	return ServiceAddresses(svc), nil
}

// problem logs an error of what, unless it is the one logged last for it.
func (w *Writer) problem(what, doing string, err error) {
	msg := err.Error()
	if w.logged[what] == msg {
		return
	}
	w.logged[what] = msg
	attrs := []any{"error", err}
	if apierrors.IsForbidden(err) {
		attrs = append(attrs, "hint", "the service account needs the status RBAC of docs/status.md")
	}
	w.log.Warn("could not "+doing+"; retried", attrs...)
}

func (w *Writer) clear(what string) { delete(w.logged, what) }

// warnOnce logs msg about what, unless it is what was logged last about it.
func (w *Writer) warnOnce(what, msg string, attrs ...any) {
	if w.logged[what] == msg {
		return
	}
	w.logged[what] = msg
	w.log.Warn(msg, append([]any{"object", what}, attrs...)...)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// compareObjects orders objects as their String forms compare, without making them: sorting
// the 10,000 objects of a rendering made two strings per comparison.
func compareObjects(a, b Object) int {
	pa, pb := a.stringParts(), b.stringParts()
	i, j, oi, oj := 0, 0, 0, 0
	for {
		for i < len(pa) && oi == len(pa[i]) {
			i, oi = i+1, 0
		}
		for j < len(pb) && oj == len(pb[j]) {
			j, oj = j+1, 0
		}
		switch {
		case i == len(pa) && j == len(pb):
			return 0
		case i == len(pa):
			return -1
		case j == len(pb):
			return 1
		}
		if ca, cb := pa[i][oi], pb[j][oj]; ca != cb {
			return cmp.Compare(ca, cb)
		}
		oi, oj = oi+1, oj+1
	}
}

// stringParts are the pieces String joins.
func (o Object) stringParts() [5]string {
	if o.Namespace == "" {
		return [5]string{o.Kind, " ", o.Name}
	}
	return [5]string{o.Kind, " ", o.Namespace, "/", o.Name}
}

func addressList(addrs []Address) []string {
	var out []string
	for _, a := range addrs {
		out = append(out, a.IP+a.Hostname)
	}
	return out
}
