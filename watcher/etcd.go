package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// Defaults of EtcdConfig.
const (
	DefaultEtcdPrefix           = "/registry"
	DefaultEtcdDialTimeout      = 5 * time.Second
	DefaultEtcdRequestTimeout   = 30 * time.Second
	DefaultEtcdWatchdogInterval = 10 * time.Second
	DefaultEtcdPageSize         = 1000
	DefaultEtcdMaxBackoff       = 10 * time.Second
)

// EtcdConfig configures the etcd source. Endpoints is required; empty fields take the defaults
// above, or snapshot's defaults for object names.
type EtcdConfig struct {
	// Endpoints are etcd client URLs (https:// for TLS).
	Endpoints []string
	// Prefix is kube-apiserver's --etcd-prefix; default "/registry".
	Prefix string
	// CACert, Cert and Key are PEM files: the CA that signed etcd's serving certificate, and
	// the client certificate and key etcd's --client-cert-auth requires (kubeadm:
	// /etc/kubernetes/pki/etcd/ca.crt and a client certificate that CA signed). The client
	// certificate is read again when its files change.
	CACert, Cert, Key string
	// Username and Password authenticate to etcd when its authentication is on and the user
	// is not the client certificate's common name.
	Username, Password string

	// Namespace is the load balancer's namespace; default "lb".
	Namespace string
	// ServicesConfigMap names the namespaces whose pods (or EndpointSlices, for services that
	// name a Kubernetes Service) are read; default "services".
	ServicesConfigMap string
	// PeersNamespace, when set, is a namespace whose pods are read whatever the services name:
	// the HAProxy replicas' (--peers).
	PeersNamespace string
	// The other objects the snapshot reads in Namespace (defaults as in package snapshot;
	// ConfigSecret is optional). An undecodable one is reported by Objects.
	ConfigConfigMap, CertificatesConfigMap, KeysSecret, ConfigSecret string
	// CertificateSelector is a label selector for TLS Secrets in Namespace that are
	// certificates too (as --certificate-selector); empty: none. Other Secrets are dropped.
	CertificateSelector string
	// TLSSecretNamespaces are the namespaces whose TLS Secrets are read too
	// (--tls-secret-namespaces): the keys under <prefix>/secrets/NAMESPACE/ of each (or under
	// <prefix>/secrets/ for every namespace). A Secret of another type is dropped, before it
	// is decoded when it is stored as protobuf (its type is read from the bytes).
	TLSSecretNamespaces snapshot.Namespaces
	// Watch are the watched resources (--watch): each is listed and watched under the prefix
	// kube-apiserver stores it at (see etcdPath), decoded whatever its type (protobuf through
	// client-go's scheme for built-ins, JSON for custom resources), and returned in
	// Objects.Resources.
	Watch watchspec.List

	// DialTimeout bounds connecting (and authenticating with a password); default 5s.
	DialTimeout time.Duration
	// RequestTimeout bounds one page of a list; default 30s.
	RequestTimeout time.Duration
	// WatchdogInterval: after this long without a word on the watch stream the source asks
	// etcd for a progress notification, and if none comes within another interval the watch
	// is deemed stalled, reported down and restarted; default 10s.
	WatchdogInterval time.Duration
	// PodConverter, when set, converts pods to their template form as they are decoded, and
	// the typed pods are dropped: Objects returns ConvertedPods instead of Pods. A fraction of
	// the memory for a large cluster (the converter shares equal parts between pods), and
	// Build converts nothing.
	PodConverter *snapshot.PodConverter
	// PageSize is the number of keys per page of a list; default 1000.
	PageSize int64
	// MaxBackoff bounds the wait between retries while etcd is unreachable; default 10s.
	MaxBackoff time.Duration

	// OnState, when set, is told whether etcd is being followed (up once the lists succeed)
	// or not, and why (an outage: a failed list, a stalled watch, etcd not answering the
	// probe), on every change. It must not block. Meanwhile Objects keeps returning the last
	// objects read.
	OnState StateFunc
	// Logger gets outages, recoveries, re-lists and undecodable values; nil: slog.Default().
	Logger *slog.Logger
}

// Etcd is a Source that reads the objects kube-apiserver stores in etcd, directly, as the
// original project did: the ConfigMaps and Secrets of the load balancer's namespace, the TLS
// Secrets of the TLS Secret namespaces, the Pods of the namespaces the services with a
// selector name, and the EndpointSlices of the namespaces the services naming a Kubernetes
// Service name (each watched only while a service needs it). Each key prefix is listed at one revision (paged), then watched from the next
// revision; on compaction, a cancelled watch, leader loss or a stall it is listed again, so
// no change is missed and nothing stale stays.
//
// Values are decoded as kube-apiserver stored them (protobuf or JSON). A value that cannot be
// decoded (encrypted at rest, garbage) is logged with its key and skipped; when it is one of
// the objects the snapshot reads by name (the services, config and certificates ConfigMaps,
// the keys and config Secrets), Objects also reports it as a *snapshot.InputError naming the
// object, so the pipeline keeps the last good configuration and says why. Pods, EndpointSlices
// and label-selected Secrets cannot be told apart from others without decoding them: an
// undecodable one is only logged (for the TLS Secret namespaces, the first encrypted one as a
// warning, the others at debug level).
type Etcd struct {
	cfg       EtcdConfig
	clientCfg clientv3.Config
	certSel   labels.Selector // nil: no TLS Secrets
	dec       *valueDecoder
	log       *slog.Logger
	clientLog *clientLog

	started chan struct{} // closed once Run has started the watchers
	stopped chan struct{} // closed when Run returns

	upMu       sync.Mutex
	reportedUp int // -1 never reported, 0 down, 1 up

	// lbTLS: the TLS Secrets of Namespace are read too (it is one of TLSSecretNamespaces).
	lbTLS bool
	// encryptedTLS is set once an encrypted Secret of the TLS Secret namespaces was logged
	// as a warning; the others are logged at debug level (a cluster that encrypts Secrets at
	// rest would otherwise log every Secret it has).
	encryptedTLS atomic.Bool

	converted atomic.Int64 // pods converted, for PodConverter rounds
	watched   []*watched   // the --watch resources
	objConv   snapshot.ObjectConverter
	objects   atomic.Int64 // watched objects converted, for objConv rounds

	mu         sync.Mutex
	ran        bool
	cli        *clientv3.Client
	ctx        context.Context // Run's, for pod watchers started later
	changed    func()
	wg         sync.WaitGroup
	cms        *prefixWatch
	secrets    *prefixWatch
	tlsWatches []*prefixWatch         // the TLS Secrets of the TLS Secret namespaces
	resWatches []*prefixWatch         // one per watched resource
	nsWatches  map[nsKey]*prefixWatch // pods and EndpointSlices of the namespaces the services name
	failing    map[*prefixWatch]error
	connectErr error
	probeErr   error         // etcd did not answer the last probe
	back       chan struct{} // closed when etcd answers again after an outage (see probe)
	rev        int64         // highest etcd revision seen
	// watchdog state
	watching     int       // watchers in their watch phase
	lastActivity time.Time // last response on any watch
	askedAt      time.Time // progress requested, no answer yet (zero: not asked)
}

var _ Source = (*Etcd)(nil)

// nsKey names a watch of one namespace's pods or EndpointSlices.
type nsKey struct {
	kind      objectKind
	namespace string
}

// prefixWatch follows one key prefix (a namespace's ConfigMaps, Secrets or Pods, or a watched
// resource's objects).
type prefixWatch struct {
	kind      objectKind
	namespace string
	res       *watched // a watched resource's (kind and namespace are then unused)
	// tls: the TLS Secrets of a TLS Secret namespace (of every namespace but the load
	// balancer's when namespace is "")
	tls    bool
	prefix string
	// items by etcd key; written only by the watch's own goroutine, under Etcd.mu.
	items map[string]*item
	// sorted caches items in key order for Objects; nil when items changed since.
	sorted    []sortedItem
	synced    chan struct{} // closed after the first list
	isSynced  bool
	stop      context.CancelFunc      // ends the goroutine
	stopWatch context.CancelCauseFunc // ends the current watch; nil while not watching
}

// sortedItem is an item with its key.
type sortedItem struct {
	key string
	*item
}

// sortedItems returns w's items in key order, cached until they change. Called with e.mu held.
func (w *prefixWatch) sortedItems() []sortedItem {
	if w.sorted == nil {
		w.sorted = make([]sortedItem, 0, len(w.items))
		for _, key := range slices.Sorted(maps.Keys(w.items)) {
			w.sorted = append(w.sorted, sortedItem{key, w.items[key]})
		}
	}
	return w.sorted
}

// item is the last value of a key: an object, or why there is none.
type item struct {
	modRev int64
	obj    kruntime.Object  // nil: undecodable (err), not needed (dropped), or converted (pod)
	pod    *snapshot.Pod    // with EtcdConfig.PodConverter
	object *snapshot.Object // a watched resource's object (nil when its selector drops it)
	err    error
}

// errStalled ends a watch the watchdog found silent.
var errStalled = errors.New("the watch stalled: no progress notification from etcd")

// NewEtcd checks the configuration and loads the TLS files; it does not connect (Run does,
// retrying while etcd is unreachable).
func NewEtcd(cfg EtcdConfig) (*Etcd, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd source: no endpoints")
	}
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&cfg.Prefix, DefaultEtcdPrefix)
	def(&cfg.Namespace, snapshot.DefaultNamespace)
	def(&cfg.ServicesConfigMap, snapshot.DefaultServicesConfigMap)
	def(&cfg.ConfigConfigMap, snapshot.DefaultConfigConfigMap)
	def(&cfg.CertificatesConfigMap, snapshot.DefaultCertificatesConfigMap)
	def(&cfg.KeysSecret, snapshot.DefaultKeysSecret)
	cfg.Prefix = "/" + strings.Trim(cfg.Prefix, "/")
	if cfg.Prefix == "/" {
		return nil, errors.New("etcd source: the prefix must not be empty or /")
	}
	if errs := validation.IsDNS1123Label(cfg.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("etcd source: namespace %q: %s", cfg.Namespace, strings.Join(errs, "; "))
	}
	durDef := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	durDef(&cfg.DialTimeout, DefaultEtcdDialTimeout)
	durDef(&cfg.RequestTimeout, DefaultEtcdRequestTimeout)
	durDef(&cfg.WatchdogInterval, DefaultEtcdWatchdogInterval)
	durDef(&cfg.MaxBackoff, DefaultEtcdMaxBackoff)
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultEtcdPageSize
	}
	e := &Etcd{
		cfg:        cfg,
		dec:        newValueDecoder(),
		log:        cfg.Logger,
		started:    make(chan struct{}),
		stopped:    make(chan struct{}),
		reportedUp: -1,
		nsWatches:  map[nsKey]*prefixWatch{},
		failing:    map[*prefixWatch]error{},
		back:       make(chan struct{}),
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	var err error
	if cfg.CertificateSelector != "" {
		sel, err := labels.Parse(cfg.CertificateSelector)
		if err != nil {
			return nil, fmt.Errorf("etcd source: certificate selector: %w", err)
		}
		e.certSel = sel
	}
	e.lbTLS = cfg.TLSSecretNamespaces.Has(cfg.Namespace)
	if e.watched, err = resolve(cfg.Watch); err != nil {
		return nil, fmt.Errorf("etcd source: %w", err)
	}
	e.clientLog = newClientLog(e.log)
	cc, err := clientConfig(cfg, e.clientLog.zap())
	if err != nil {
		return nil, fmt.Errorf("etcd source: %w", err)
	}
	e.clientCfg = cc
	return e, nil
}

// Run connects to etcd and follows the objects until ctx ends; it returns ctx.Err(). Outages
// are retried forever (reported through OnState and the log), never returned.
func (e *Etcd) Run(ctx context.Context, changed func()) error {
	e.mu.Lock()
	if e.ran {
		e.mu.Unlock()
		return errors.New("etcd source: Run called twice")
	}
	e.ran = true
	e.mu.Unlock()
	defer close(e.stopped)

	cli, err := e.connect(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	e.mu.Lock()
	e.cli, e.ctx, e.changed = cli, ctx, changed
	e.cms = e.startWatch(configMapKind, e.cfg.Namespace)
	e.secrets = e.startWatch(secretKind, e.cfg.Namespace)
	e.startTLSWatches()
	for _, res := range e.watched {
		w := e.startWatched(res)
		e.resWatches = append(e.resWatches, w)
		e.log.Info("etcd source: watching", "resource", res.spec.Qualified(), "prefix", w.prefix)
	}
	e.mu.Unlock()
	close(e.started)
	e.log.Info("etcd source: following etcd", "endpoints", strings.Join(e.cfg.Endpoints, ","),
		"prefix", e.cfg.Prefix, "namespace", e.cfg.Namespace)
	changed()

	e.wg.Add(1)
	go e.probe(ctx)
	e.watchdog(ctx)
	cancel()
	e.wg.Wait()
	return ctx.Err()
}

// connect creates the client. Without a password this does not wait for etcd; with one, the
// client authenticates at once, so it is retried until etcd answers.
func (e *Etcd) connect(ctx context.Context) (*clientv3.Client, error) {
	bo := backoff{min: 200 * time.Millisecond, max: e.cfg.MaxBackoff}
	for {
		cfg := e.clientCfg
		cfg.Context = ctx
		cli, err := clientv3.New(cfg)
		e.mu.Lock()
		e.connectErr = err
		e.mu.Unlock()
		if err == nil {
			return cli, nil // up is reported once the lists have succeeded
		}
		e.reportUp()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		d := bo.next()
		e.log.Warn("etcd source: cannot connect; retrying", "endpoints", strings.Join(e.cfg.Endpoints, ","), "in", d, "error", err)
		if !sleep(ctx, d) {
			return nil, ctx.Err()
		}
	}
}

// startWatch starts following a namespace's objects of a kind. Called with e.mu held.
func (e *Etcd) startWatch(kind objectKind, namespace string) *prefixWatch {
	return e.start(&prefixWatch{kind: kind, namespace: namespace, prefix: kind.keyPrefix(e.cfg.Prefix, namespace)})
}

// start starts following w. Called with e.mu held.
func (e *Etcd) start(w *prefixWatch) *prefixWatch {
	ctx, stop := context.WithCancel(e.ctx)
	w.items, w.synced, w.stop = map[string]*item{}, make(chan struct{}), stop
	e.wg.Add(1)
	go e.follow(ctx, w)
	return w
}

// startTLSWatches starts following the TLS Secrets of the TLS Secret namespaces: one prefix
// per namespace, or every Secret for all namespaces. The load balancer's namespace is read by
// e.secrets already (which then keeps its TLS Secrets too). Called with e.mu held.
func (e *Etcd) startTLSWatches() {
	tls := e.cfg.TLSSecretNamespaces
	start := func(namespace string) {
		prefix := e.cfg.Prefix + "/" + secretKind.Resource + "/"
		if namespace != "" {
			prefix = secretKind.keyPrefix(e.cfg.Prefix, namespace)
		}
		w := e.start(&prefixWatch{kind: secretKind, namespace: namespace, tls: true, prefix: prefix})
		e.tlsWatches = append(e.tlsWatches, w)
		e.log.Info("etcd source: watching TLS Secrets", "prefix", w.prefix)
	}
	if tls.All {
		start("")
		return
	}
	for _, ns := range tls.Names {
		if ns != e.cfg.Namespace {
			start(ns)
		}
	}
}

// startWatched starts following a watched resource's objects. Called with e.mu held.
func (e *Etcd) startWatched(res *watched) *prefixWatch {
	prefix := e.cfg.Prefix + "/" + res.etcdPath() + "/"
	if res.spec.Namespace != "" {
		prefix += res.spec.Namespace + "/"
	}
	ctx, stop := context.WithCancel(e.ctx)
	w := &prefixWatch{res: res, prefix: prefix, items: map[string]*item{}, synced: make(chan struct{}), stop: stop}
	e.wg.Add(1)
	go e.follow(ctx, w)
	return w
}

// current reports whether w is still one of the source's watches. Called with e.mu held.
func (e *Etcd) current(w *prefixWatch) bool {
	if w.res != nil {
		return slices.Contains(e.resWatches, w)
	}
	if w.tls {
		return slices.Contains(e.tlsWatches, w)
	}
	return w == e.cms || w == e.secrets || e.nsWatches[nsKey{w.kind, w.namespace}] == w
}

// objectName returns the namespace and name of the object a key under w's prefix holds: for a
// watched resource of every namespace, NAMESPACE/NAME (or NAME for a cluster-scoped one).
func (w *prefixWatch) objectName(key string) (namespace, name string, err error) {
	if w.tls && w.namespace == "" {
		ns, n, _ := strings.Cut(strings.TrimPrefix(key, w.prefix), "/")
		if !strings.HasPrefix(key, w.prefix) || ns == "" || n == "" || strings.Contains(n, "/") {
			return "", "", errNotObjectKey
		}
		return ns, n, nil
	}
	if w.res == nil || w.res.spec.Namespace != "" {
		name, err = nameFromKey(w.prefix, key)
		if w.res != nil {
			return w.res.spec.Namespace, name, err
		}
		return w.namespace, name, err
	}
	rest, ok := strings.CutPrefix(key, w.prefix)
	ns, n, namespaced := strings.Cut(rest, "/")
	switch {
	case !ok || rest == "" || ns == "" || strings.Contains(n, "/"):
		return "", "", errNotObjectKey
	case !namespaced:
		return "", ns, nil
	case n == "":
		return "", "", errNotObjectKey
	}
	return ns, n, nil
}

// follow lists and watches w's prefix until ctx ends: list, watch, and list again whenever the
// watch ends, backing off while etcd fails.
func (e *Etcd) follow(ctx context.Context, w *prefixWatch) {
	defer e.wg.Done()
	bo := backoff{min: 100 * time.Millisecond, max: e.cfg.MaxBackoff}
	for ctx.Err() == nil {
		rev, err := e.list(ctx, w)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, rpctypes.ErrCompacted) {
				// Compacted between two pages: not an outage, list again (after a pause, in
				// case compaction keeps outrunning a very long list).
				d := bo.next()
				e.log.Info("etcd source: history compacted while listing; listing again", "prefix", w.prefix, "in", d, "error", err)
				if !e.pause(ctx, d, &bo) {
					return
				}
				continue
			}
			e.setFailing(w, err)
			d := bo.next()
			e.log.Warn("etcd source: cannot list; retrying, the last objects read stay in use",
				"prefix", w.prefix, "in", d, "error", err)
			if !e.pause(ctx, d, &bo) {
				return
			}
			continue
		}
		e.setFailing(w, nil)
		began := time.Now()
		err = e.watch(ctx, w, rev)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errStalled) {
			e.setFailing(w, err)
		}
		if time.Since(began) < e.cfg.WatchdogInterval {
			// A watch that ends at once, again and again, must not turn into a busy loop.
			d := bo.next()
			e.log.Info("etcd source: watch ended; listing again", "prefix", w.prefix, "in", d, "reason", err)
			if !e.pause(ctx, d, &bo) {
				return
			}
		} else {
			bo.reset()
			e.log.Info("etcd source: watch ended; listing again", "prefix", w.prefix, "reason", err)
		}
	}
}

// list reads w's prefix at one revision, page by page, decodes what changed since the last
// list, and replaces w's items. It returns the revision read.
func (e *Etcd) list(ctx context.Context, w *prefixWatch) (int64, error) {
	end := clientv3.GetPrefixRangeEnd(w.prefix)
	from := w.prefix
	var rev int64
	items := make(map[string]*item, len(w.items))
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(e.cfg.PageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
		resp, err := e.cli.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			if rev != 0 && errors.Is(err, rpctypes.ErrCompacted) {
				err = fmt.Errorf("revision %d was compacted while listing: %w", rev, err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				if cause := e.clientLog.recent(e.cfg.RequestTimeout + time.Second); cause != "" {
					err = fmt.Errorf("%w (the etcd client's last errors: %s)", err, cause)
				}
			}
			return 0, fmt.Errorf("list %s: %w", w.prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		// Only this goroutine writes w.items, so it may read them without the lock.
		e.decodeInto(w, w.items, items, resp.Kvs)
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}

	e.mu.Lock()
	if !e.current(w) {
		e.mu.Unlock()
		return rev, nil
	}
	changed := !w.isSynced || !sameItems(w.items, items)
	w.items = items
	if changed {
		w.sorted = nil
	}
	if !w.isSynced {
		w.isSynced = true
		close(w.synced)
	}
	e.noteRevision(rev)
	if changed && w == e.cms {
		e.syncNamespaceWatches()
	}
	notify := e.changed
	e.mu.Unlock()
	e.log.Debug("etcd source: listed", "prefix", w.prefix, "revision", rev, "keys", len(items), "changed", changed)
	if changed {
		notify()
	}
	return rev, nil
}

// decodeInto decodes kvs into items, reusing from old the items whose key has the same
// ModRevision (so a re-list decodes only what changed).
func (e *Etcd) decodeInto(w *prefixWatch, old, items map[string]*item, kvs []*mvccpb.KeyValue) {
	var jobs []decodeJob
	for _, kv := range kvs {
		key := string(kv.Key)
		if it := old[key]; it != nil && it.modRev == kv.ModRevision {
			items[key] = it
			continue
		}
		namespace, name, err := w.objectName(key)
		if err != nil {
			continue
		}
		if !e.wanted(w, namespace, name, kv.Value) {
			items[key] = &item{modRev: kv.ModRevision}
			continue
		}
		jobs = append(jobs, decodeJob{key: key, namespace: namespace, name: name, value: kv.Value, modRev: kv.ModRevision})
	}
	e.decodeAll(w, jobs)
	for i := range jobs {
		items[jobs[i].key] = e.keep(w, &jobs[i])
	}
}

// podConverterRound is the number of pod conversions after which the converter starts a new
// round, forgetting the shared parts no pod converted since used (deleted pods' parts).
const podConverterRound = 20_000

// decodeAll decodes the jobs of w, converting pods when a PodConverter is set, and the objects
// of a watched resource.
func (e *Etcd) decodeAll(w *prefixWatch, jobs []decodeJob) {
	if w.res != nil {
		e.dec.decodeWatched(w.res, &e.objConv, jobs)
		if n := e.objects.Add(int64(len(jobs))); n/podConverterRound != (n-int64(len(jobs)))/podConverterRound {
			e.objConv.NextRound()
		}
		return
	}
	kind := w.kind
	conv := e.cfg.PodConverter
	if kind != podKind {
		conv = nil
	}
	e.dec.decodeAll(kind, jobs, conv)
	if conv != nil && len(jobs) > 0 {
		n := e.converted.Add(int64(len(jobs)))
		if n/podConverterRound != (n-int64(len(jobs)))/podConverterRound {
			conv.NextRound()
		}
	}
}

// wanted says whether an object of w, by namespace, name and stored value, is worth decoding:
// the ConfigMaps the snapshot reads, the named Secrets, the TLS Secrets when a certificate
// selector needs their labels or their namespace is a TLS Secret namespace (a Secret stored as
// protobuf says its type before it is decoded), all Pods, every object of a watched resource.
func (e *Etcd) wanted(w *prefixWatch, namespace, name string, value []byte) bool {
	if w.res != nil {
		return true
	}
	switch {
	case w.kind == configMapKind:
		return name == e.cfg.ServicesConfigMap || name == e.cfg.ConfigConfigMap || name == e.cfg.CertificatesConfigMap
	case w.tls:
		// Every namespace's watch leaves the load balancer's to e.secrets.
		return namespace != e.cfg.Namespace && maybeTLSSecret(value)
	case w.kind == secretKind:
		return e.namedSecret(name) || ((e.certSel != nil || e.lbTLS) && maybeTLSSecret(value))
	}
	return true
}

// maybeTLSSecret is false for a stored Secret whose bytes say it is not a TLS Secret.
func maybeTLSSecret(value []byte) bool {
	typ, ok := storedSecretType(value)
	return !ok || typ == string(corev1.SecretTypeTLS)
}

func (e *Etcd) namedSecret(name string) bool {
	return name == e.cfg.KeysSecret || (e.cfg.ConfigSecret != "" && name == e.cfg.ConfigSecret)
}

// keep turns a decoded job of w into an item: Secrets that are neither named nor selected nor
// TLS Secrets of a TLS Secret namespace, and watched objects their selector does not match,
// are dropped (only their revision is kept); undecodable values are logged.
func (e *Etcd) keep(w *prefixWatch, j *decodeJob) *item {
	it := &item{modRev: j.modRev, obj: j.obj, pod: j.pod, object: j.object, err: j.err}
	if j.err != nil {
		var enc *EncryptedError
		if w.tls && errors.As(j.err, &enc) && !e.encryptedTLS.CompareAndSwap(false, true) {
			e.log.Debug("etcd source: cannot decode a value; skipping it", "key", j.key, "revision", j.modRev, "error", j.err)
			return it
		}
		e.log.Warn("etcd source: cannot decode a value; skipping it", "key", j.key, "revision", j.modRev, "error", j.err)
		return it
	}
	if w.res != nil && !w.res.keep(j.object) {
		it.object = nil
	}
	if s, ok := j.obj.(*corev1.Secret); ok && !e.keepSecret(w, s) {
		it.obj = nil
	}
	return it
}

// keepSecret says whether a decoded Secret of w is one the snapshot reads.
func (e *Etcd) keepSecret(w *prefixWatch, s *corev1.Secret) bool {
	tls := s.Type == corev1.SecretTypeTLS
	if w.tls {
		return tls
	}
	return e.namedSecret(s.Name) || (tls && (e.lbTLS || (e.certSel != nil && e.certSel.Matches(labels.Set(s.Labels)))))
}

func sameItems(a, b map[string]*item) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		if y, ok := b[k]; !ok || x.modRev != y.modRev {
			return false
		}
	}
	return true
}

// sameSeen reports whether a new version of a key changes nothing the inputs see: a watched
// object whose resourceVersion alone moved (the echo of the sidecar's status write, with
// ;status=off), a ConfigMap or Secret whose annotations alone changed (sameInput).
func sameSeen(old, cur *item) bool {
	switch {
	case old == nil || cur == nil || old.err != nil || cur.err != nil:
		return false
	case old.object != nil || cur.object != nil:
		return snapshot.SameExceptVersion(old.object, cur.object)
	case old.obj != nil && cur.obj != nil:
		return sameInput(old.obj, cur.obj)
	}
	return false
}

// watch follows w's prefix from rev+1 until the watch ends, and says why.
func (e *Etcd) watch(ctx context.Context, w *prefixWatch, rev int64) error {
	// Every watch has the same metadata (WithRequireLeader), so they share one gRPC stream,
	// which one progress request covers.
	wctx, cancel := context.WithCancelCause(clientv3.WithRequireLeader(ctx))
	defer cancel(nil)
	e.mu.Lock()
	w.stopWatch = cancel
	e.watching++
	if e.watching == 1 {
		e.lastActivity, e.askedAt = time.Now(), time.Time{}
	}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		w.stopWatch = nil
		e.watching--
		e.mu.Unlock()
	}()

	ch := e.cli.Watch(wctx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1),
		clientv3.WithPrevKV(), clientv3.WithProgressNotify(), clientv3.WithFragment())
	for {
		select {
		case <-wctx.Done():
			return context.Cause(wctx)
		case resp, ok := <-ch:
			if !ok {
				if wctx.Err() != nil {
					return context.Cause(wctx)
				}
				return errors.New("the watch channel closed")
			}
			e.touch()
			if resp.CompactRevision != 0 {
				return fmt.Errorf("etcd compacted its history up to revision %d: %w", resp.CompactRevision, rpctypes.ErrCompacted)
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch cancelled: %w", err)
			}
			if resp.Canceled {
				return errors.New("watch cancelled by etcd")
			}
			if resp.IsProgressNotify() {
				e.mu.Lock()
				e.noteRevision(resp.Header.Revision)
				e.mu.Unlock()
				continue
			}
			e.apply(w, resp.Events, resp.Header.Revision)
		}
	}
}

// apply applies one watch response's events to w.
func (e *Etcd) apply(w *prefixWatch, events []*clientv3.Event, rev int64) {
	// The last event of each key wins (a response may hold several for one key); the first
	// one's previous value is what the store holds.
	last := make(map[string]*clientv3.Event, len(events))
	prev := make(map[string]int64, len(events))
	for _, ev := range events {
		key := string(ev.Kv.Key)
		if _, seen := last[key]; !seen && ev.PrevKv != nil {
			prev[key] = ev.PrevKv.ModRevision
		}
		last[key] = ev
	}
	var jobs []decodeJob
	deletes := map[string]bool{}
	placeholders := map[string]*item{}
	for key, ev := range last {
		namespace, name, err := w.objectName(key)
		switch {
		case err != nil:
		case ev.Type == clientv3.EventTypeDelete:
			deletes[key] = true
		case !e.wanted(w, namespace, name, ev.Kv.Value):
			placeholders[key] = &item{modRev: ev.Kv.ModRevision}
		default:
			jobs = append(jobs, decodeJob{key: key, namespace: namespace, name: name, value: ev.Kv.Value, modRev: ev.Kv.ModRevision})
		}
	}
	e.decodeAll(w, jobs)

	e.mu.Lock()
	if !e.current(w) {
		e.mu.Unlock()
		return
	}
	// The previous values say what the store should have held: a mismatch means an event was
	// missed (it cannot happen with a correct watch; the new values are applied anyway).
	for key, p := range prev {
		if it := w.items[key]; it != nil && it.modRev != p {
			e.log.Warn("etcd source: an event was missed; applying the latest value", "key", key,
				"held revision", it.modRev, "previous revision", p)
		}
	}
	changed := false
	for key := range deletes {
		if _, ok := w.items[key]; ok {
			delete(w.items, key)
			changed = true
		}
	}
	for key, it := range placeholders {
		if old := w.items[key]; old != nil && (old.obj != nil || old.pod != nil || old.object != nil || old.err != nil) {
			changed = true // an object no longer wanted goes
		}
		w.items[key] = it
		w.sorted = nil
	}
	for i := range jobs {
		it := e.keep(w, &jobs[i])
		old := w.items[jobs[i].key]
		if old != nil && old.object != nil && it.object != nil {
			// An echo takes the held values, which the renderer computed with; sameSeen then
			// compares them by identity rather than the whole object once more.
			it.object = snapshot.Echo(old.object, it.object)
		}
		changed = changed || !sameSeen(old, it)
		w.items[jobs[i].key] = it
	}
	if changed || len(jobs) > 0 {
		w.sorted = nil // the new versions are what the next read gives, a sync or not
	}
	e.noteRevision(rev)
	podsChanged := changed && w == e.cms
	if podsChanged {
		e.syncNamespaceWatches()
	}
	notify := e.changed
	e.mu.Unlock()
	if podsChanged {
		e.reportUp() // a failing pod watch may be gone
	}
	if changed {
		notify()
	}
}

// syncNamespaceWatches watches the pods of every namespace a service with a selector names,
// and the EndpointSlices of every namespace a service naming a Kubernetes Service names, and
// stops the other watches. While the services ConfigMap cannot be decoded, the current set
// stays. Called with e.mu held.
func (e *Etcd) syncNamespaceWatches() {
	it := e.cms.items[e.cms.prefix+e.cfg.ServicesConfigMap]
	if it != nil && it.obj == nil {
		return
	}
	want := map[nsKey]bool{}
	if it != nil {
		want = serviceNamespaces(it.obj.(*corev1.ConfigMap))
	}
	if e.cfg.PeersNamespace != "" {
		want[nsKey{podKind, e.cfg.PeersNamespace}] = true
	}
	for _, k := range sortedKeys(e.nsWatches) {
		if w := e.nsWatches[k]; !want[k] {
			w.stop()
			delete(e.nsWatches, k)
			delete(e.failing, w)
			e.log.Info("etcd source: stopped watching", "kind", k.kind.Kind, "namespace", k.namespace)
		}
	}
	for _, k := range sortedKeys(want) {
		if e.nsWatches[k] == nil {
			w := e.startWatch(k.kind, k.namespace)
			e.nsWatches[k] = w
			e.log.Info("etcd source: watching", "kind", k.kind.Kind, "namespace", k.namespace, "prefix", w.prefix)
		}
	}
}

// sortedKeys orders namespace watches by namespace, pods before EndpointSlices.
func sortedKeys[V any](m map[nsKey]V) []nsKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b nsKey) int {
		if c := strings.Compare(a.namespace, b.namespace); c != 0 {
			return c
		}
		switch {
		case a.kind == b.kind:
			return 0
		case a.kind == podKind:
			return -1
		}
		return 1
	})
}

// serviceNamespaces returns the watches the services need: the pods of the namespace of a
// service with a selector, the EndpointSlices of the namespace of a service naming a
// Kubernetes Service (and no selector), as snapshot.Decode reads them. Bad entries are
// reported by Decode; here they need nothing (nor does an invalid namespace name, which could
// not be a key segment).
func serviceNamespaces(cm *corev1.ConfigMap) map[nsKey]bool {
	out := map[nsKey]bool{}
	for _, v := range cm.Data {
		var svc struct {
			Namespace string          `json:"namespace"`
			Selector  json.RawMessage `json:"selector"`
			Service   json.RawMessage `json:"service"`
		}
		if json.Unmarshal([]byte(v), &svc) != nil || len(validation.IsDNS1123Label(svc.Namespace)) > 0 {
			continue
		}
		kind := podKind
		if svc.Service != nil && svc.Selector == nil {
			kind = endpointSliceKind
		}
		out[nsKey{kind, svc.Namespace}] = true
	}
	return out
}

// noteRevision records the highest revision seen. Called with e.mu held.
func (e *Etcd) noteRevision(rev int64) {
	e.rev = max(e.rev, rev)
}

func (e *Etcd) touch() {
	e.mu.Lock()
	e.lastActivity = time.Now()
	e.mu.Unlock()
}

// watchdog asks etcd for a progress notification when every watch has been silent for an
// interval, and restarts the watches (re-listing) when the answer does not come within another
// one: the stream stalled (etcd #8980) or etcd is gone.
func (e *Etcd) watchdog(ctx context.Context) {
	interval := e.cfg.WatchdogInterval
	tick := time.NewTicker(interval / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		e.mu.Lock()
		switch {
		case e.watching == 0:
			e.askedAt = time.Time{}
		case !e.askedAt.IsZero() && e.lastActivity.After(e.askedAt):
			e.askedAt = time.Time{} // answered
		case !e.askedAt.IsZero() && now.Sub(e.askedAt) >= interval:
			e.askedAt = time.Time{}
			e.lastActivity = now
			stops := e.watchStops()
			e.mu.Unlock()
			e.log.Warn("etcd source: no answer on the watch stream; restarting the watches", "waited", interval)
			for _, stop := range stops {
				stop(errStalled)
			}
			continue
		case e.askedAt.IsZero() && now.Sub(e.lastActivity) >= interval:
			e.askedAt = now
			e.mu.Unlock()
			rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), interval)
			if err := e.cli.RequestProgress(rctx); err != nil && ctx.Err() == nil {
				e.log.Debug("etcd source: progress request failed", "error", err)
			}
			cancel()
			continue
		}
		e.mu.Unlock()
	}
}

// watchStops returns the cancel functions of the running watches. Called with e.mu held.
func (e *Etcd) watchStops() []context.CancelCauseFunc {
	var out []context.CancelCauseFunc
	for _, w := range e.watches() {
		if w.stopWatch != nil {
			out = append(out, w.stopWatch)
		}
	}
	return out
}

// watches returns every current watch: ConfigMaps, Secrets, the TLS Secrets of the TLS Secret
// namespaces, then pods and EndpointSlices by namespace, then the watched resources (none
// before Run has started them). Called with e.mu held.
func (e *Etcd) watches() []*prefixWatch {
	if e.cms == nil {
		return nil
	}
	out := append([]*prefixWatch{e.cms, e.secrets}, e.tlsWatches...)
	for _, k := range sortedKeys(e.nsWatches) {
		out = append(out, e.nsWatches[k])
	}
	return append(out, e.resWatches...)
}

// setFailing records whether w's last attempt failed, and reports the change of state.
func (e *Etcd) setFailing(w *prefixWatch, err error) {
	e.mu.Lock()
	if err == nil {
		delete(e.failing, w)
	} else if e.current(w) {
		e.failing[w] = err
	}
	e.mu.Unlock()
	e.reportUp()
}

// reportUp tells OnState and the log when the source goes down or comes back.
func (e *Etcd) reportUp() {
	e.upMu.Lock()
	defer e.upMu.Unlock()
	e.mu.Lock()
	err := e.connectErr
	if err == nil {
		err = e.probeErr
	}
	for _, w := range e.watches() {
		if err == nil {
			err = e.failing[w]
		}
	}
	e.mu.Unlock()
	up := 0
	if err == nil {
		up = 1
	}
	if up == e.reportedUp {
		return
	}
	first := e.reportedUp == -1
	e.reportedUp = up
	switch {
	case up == 1 && !first:
		e.log.Info("etcd source: following etcd again")
	case up == 0:
		e.log.Warn("etcd source: cannot follow etcd; the last objects read stay in use", "error", err)
	}
	if e.cfg.OnState != nil {
		if err != nil {
			err = fmt.Errorf("etcd source: cannot follow etcd at %s: %w", strings.Join(e.cfg.Endpoints, ","), err)
		}
		e.cfg.OnState(up == 1, err)
	}
}

// Objects returns the objects last read, once every current watch has listed its prefix (so a
// render never sees a namespace's pods half-read). During an outage it keeps returning the
// last objects. An undecodable object the snapshot reads by name is a *snapshot.InputError
// (joined with errors.Join when there are several); objects are shared and read-only.
func (e *Etcd) Objects(ctx context.Context) (*snapshot.Objects, error) {
	select {
	case <-e.started:
	case <-e.stopped:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		e.mu.Lock()
		if e.cms == nil {
			e.mu.Unlock()
			return nil, errors.New("etcd source: stopped before it could read etcd")
		}
		var wait *prefixWatch
		for _, w := range e.watches() {
			if !w.isSynced {
				wait = w
				break
			}
		}
		if wait == nil {
			objs, err := e.collect()
			e.mu.Unlock()
			return objs, err
		}
		e.mu.Unlock()
		select {
		case <-wait.synced:
		case <-e.stopped:
			return nil, fmt.Errorf("etcd source: stopped before it could list %s", wait.prefix)
		case <-ctx.Done():
			return nil, fmt.Errorf("etcd source: waiting for the list of %s: %w", wait.prefix, ctx.Err())
		}
	}
}

// collect builds Objects from the items, sorted by key. Called with e.mu held.
func (e *Etcd) collect() (*snapshot.Objects, error) {
	objs := &snapshot.Objects{Revision: strconv.FormatInt(e.rev, 10)}
	var errs []error
	for _, w := range e.watches() {
		if w.res != nil {
			if objs.Resources == nil {
				objs.Resources = map[string][]*snapshot.Object{}
			}
			list := objs.Resources[w.res.spec.Name()]
			for _, it := range w.sortedItems() {
				if it.object != nil {
					list = append(list, it.object)
				}
			}
			objs.Resources[w.res.spec.Name()] = list
			continue
		}
		for _, it := range w.sortedItems() {
			key := it.key
			switch o := it.obj.(type) {
			case *corev1.ConfigMap:
				objs.ConfigMaps = append(objs.ConfigMaps, o)
			case *corev1.Secret:
				objs.Secrets = append(objs.Secrets, o)
			case *corev1.Pod:
				objs.Pods = append(objs.Pods, o)
			case *discoveryv1.EndpointSlice:
				objs.EndpointSlices = append(objs.EndpointSlices, o)
			case nil:
				if it.pod != nil {
					objs.ConvertedPods = append(objs.ConvertedPods, it.pod)
				}
				if it.err != nil && !w.tls && (w.kind == configMapKind || w.kind == secretKind) {
					name, _ := nameFromKey(w.prefix, key)
					if e.wanted(w, w.namespace, name, nil) && (w.kind != secretKind || e.namedSecret(name)) {
						errs = append(errs, &snapshot.InputError{Stage: snapshot.StageDecode,
							Ref: snapshot.Ref{Kind: w.kind.Kind, Namespace: w.namespace, Name: name}, Err: it.err})
					}
				}
			}
		}
	}
	switch len(errs) {
	case 0:
		return objs, nil
	case 1:
		return nil, errs[0]
	}
	return nil, errors.Join(errs...)
}

// backoff doubles a wait from min to max.
type backoff struct{ min, max, cur time.Duration }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
