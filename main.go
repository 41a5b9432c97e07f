// Command haproxy-sidecar keeps HAProxy configured from Kubernetes objects: it renders pongo2
// (Jinja-style) templates into haproxy.cfg and a certificate directory, validates the result
// with haproxy -c, and reloads HAProxy gracefully, confirming every reload.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/haproxy-sidecar/haproxy-sidecar/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/dataplane"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/validate"
	"github.com/haproxy-sidecar/haproxy-sidecar/pipeline"
	"github.com/haproxy-sidecar/haproxy-sidecar/redact"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/status"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
	"github.com/haproxy-sidecar/haproxy-sidecar/watchspec"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const topUsage = `haproxy-sidecar keeps HAProxy configured from Kubernetes objects.

It reads the "services" ConfigMap, certificate ConfigMaps and Secrets, the pods the services
select and a Jinja-style template (the "config" ConfigMap), renders haproxy.cfg and a
certificate directory, validates them with haproxy -c, and reloads HAProxy gracefully through
its master CLI socket, confirming each reload. Bad input never reaches HAProxy.

Usage:
  haproxy-sidecar run      [flags]   watch the inputs and keep HAProxy configured
  haproxy-sidecar render   [flags]   render once into --out DIR (preview a template change)
  haproxy-sidecar validate [flags]   render and validate once, write nothing; exit 1 if invalid
  haproxy-sidecar version

Run "haproxy-sidecar <command> --help" for the flags; every flag has an environment twin.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, topUsage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	mem := applyMemoryDefaults(os.Getenv, "/sys/fs/cgroup")
	var err error
	switch cmd {
	case "run":
		err = runCmd(args, mem)
	case "render":
		err = renderCmd(args, false)
	case "validate":
		err = renderCmd(args, true)
	case "version", "--version", "-version":
		fmt.Println("haproxy-sidecar", version)
	case "help", "--help", "-help", "-h":
		fmt.Print(topUsage)
	default:
		fmt.Fprintf(os.Stderr, "haproxy-sidecar: unknown command %q\n\n%s", cmd, topUsage)
		os.Exit(2)
	}
	if err != nil {
		exitf(1, "%v", err)
	}
}

// watchUsage is --watch's help.
const watchUsage = "`RESOURCE[;OPTION...]`: a Kubernetes resource templates see as resources.PLURAL (repeatable;\n" +
	"the environment variable takes several, comma-separated). RESOURCE is kubectl's fully qualified form:\n" +
	"ingresses.v1.networking.k8s.io, endpointslices.v1.discovery.k8s.io, nodes.v1 (core group), a custom resource's\n" +
	"crontabs.v1.stable.example.com. Options, separated by ;:\n" +
	"  namespace=NS       only the objects of namespace NS\n" +
	"  selector=SELECTOR  only the objects whose labels match (team=a,tier!=db)\n" +
	"  index=[NAME=]label:KEY or index=[NAME=]field:PATH  a lookup by a label's or a field's value (by_NAME; NAME defaults\n" +
	"                     to the key's last part: label:kubernetes.io/service-name is by_service_name)\n" +
	"  kind=KIND          the objects' kind, for a custom resource in file mode whose kind is not the plural's\n" +
	"  as=NAME            the name in the templates instead of the plural (two resources with one plural need it)\n" +
	"Templates read resources.PLURAL.all (the objects as kubectl get -o json shows them, sorted by namespace, then\n" +
	"name), resources.PLURAL.by_name[\"NAMESPACE/NAME\"] (or [\"NAME\"] for cluster-scoped objects) and\n" +
	"resources.PLURAL.by_NAME[\"NAMESPACE/VALUE\"] (the list of objects with that value). Example:\n" +
	"--watch 'endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name'. With --source=kube the\n" +
	"service account needs get, list and watch on each resource"

// options are the flags shared by every command.
type options struct {
	source       string
	dir          string
	maxFileSize  sizeFlag
	namespace    string
	servicesCM   string
	configCM     string
	certsCM      string
	keysSecret   string
	templateKey  string
	configSecret string
	kubeconfig   string
	// --source=etcd; onSourceUp feeds the source_up gauge
	onSourceUp                                                    func(up bool)
	etcdEndpoints                                                 commaList
	etcdPrefix, etcdCA, etcdCert, etcdKey, etcdUser, etcdPassword string
	kubeQPS                                                       float64
	kubeBurst                                                     int
	podName                                                       string
	leaderElect                                                   bool
	leNamespace                                                   string
	leName                                                        string
	leLease                                                       time.Duration
	leRenew                                                       time.Duration
	leRetry                                                       time.Duration
	certSelector                                                  string
	tlsNamespaces                                                 namespacesFlag // --tls-secret-namespaces
	envAllow                                                      string
	envSecret                                                     string
	statsPass                                                     string
	haproxyBin                                                    string
	sslDir                                                        string
	mapsDir, filesDir                                             string
	validate                                                      bool
	logLevel                                                      string
	logFormat                                                     string
	renderTimeout                                                 time.Duration
	renderMaxOutput                                               sizeFlag
	watch                                                         watchspec.List // --watch

	// run
	haproxyConfig string
	stateDir      string
	reloadMode    string
	masterSocket  string
	reloadCommand string
	reloadTimeout time.Duration
	probeInterval time.Duration
	wait          waitFlag
	metricsAddr   string
	pprof         bool
	memory        memorySettings // what main set of the Go runtime's memory settings, for the log
	healthAddr    string

	// runtime API (runtime_api.go)
	runtimeAPI        bool
	runtimeSocket     string
	minReloadInterval time.Duration

	// --reload=dataplane
	dataplaneURLs                                            dataplane.URLs
	dataplaneUser, dataplanePassword, dataplanePasswordFile  string
	dataplaneToken, dataplaneCA, dataplaneCert, dataplaneKey string
	spiffeSocket, dataplaneSPIFFEID, dataplaneSSLDir         string
	dataplaneMapsDir, dataplaneFilesDir                      string

	// render
	out string

	// red redacts secrets from everything the sidecar says (set by the commands).
	red *redact.Redactor
}

func (o *options) register(fs *flag.FlagSet, cmd string) {
	fs.StringVar(&o.source, "source", "file", "where inputs come from: file (a directory of Kubernetes manifests), kube (the Kubernetes API) or etcd (the etcd behind Kubernetes, read directly)")
	fs.StringVar(&o.dir, "dir", "", "with --source=file: `DIR`, the directory of manifests (YAML or JSON, what kubectl apply -f takes)")
	o.maxFileSize = watcher.DefaultMaxFileSize
	fs.Var(&o.maxFileSize, "max-file-size", "with --source=file: largest manifest file read (`SIZE`: bytes, or with KiB, MiB, GiB); a larger file is bad input, reported with its name and size, its objects held at what they were when last read")
	fs.StringVar(&o.namespace, "namespace", "lb", "namespace of the load balancer's ConfigMaps and Secrets; manifests without a namespace belong to it")
	fs.StringVar(&o.servicesCM, "services-configmap", "services", "ConfigMap whose keys are services (JSON: namespace, selector, hostnames, ports, ...)")
	fs.StringVar(&o.configCM, "config-configmap", "config", "ConfigMap holding the templates; absent: the built-in default template")
	fs.StringVar(&o.certsCM, "certificates-configmap", "certificates", "ConfigMap of PEM certificates, paired by key name with --keys-secret")
	fs.StringVar(&o.keysSecret, "keys-secret", "keys", "Secret of PEM private keys for the certificates ConfigMap")
	fs.StringVar(&o.templateKey, "template-key", "template", "key of the main template in the config ConfigMap; other keys can be included by name")
	fs.StringVar(&o.configSecret, "config-secret", "", "take the templates from this Secret (same keys as the config ConfigMap) instead: the GitOps flow where a tool syncs haproxy.cfg into a Secret; a template without tags is a raw haproxy.cfg")
	fs.Var(&o.etcdEndpoints, "etcd-endpoints", "with --source=etcd: comma-separated etcd client URLs (https:// for TLS)")
	fs.StringVar(&o.etcdPrefix, "etcd-prefix", "/registry", "with --source=etcd: kube-apiserver's --etcd-prefix")
	fs.StringVar(&o.etcdCA, "etcd-cacert", "", "with --source=etcd: CA certificate of etcd's serving certificate (kubeadm: /etc/kubernetes/pki/etcd/ca.crt)")
	fs.StringVar(&o.etcdCert, "etcd-cert", "", "with --source=etcd: client certificate etcd's --client-cert-auth requires (re-read when it changes)")
	fs.StringVar(&o.etcdKey, "etcd-key", "", "with --source=etcd: private key of --etcd-cert")
	fs.StringVar(&o.etcdUser, "etcd-username", "", "with --source=etcd: user, when etcd authentication is on and the certificate's CN is not the user")
	fs.StringVar(&o.etcdPassword, "etcd-password", "", "with --source=etcd: password of --etcd-username")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "with --source=kube: kubeconfig file (default: in-cluster config, then $KUBECONFIG)")
	fs.Float64Var(&o.kubeQPS, "kube-qps", 50, "with --source=kube: client queries per second")
	fs.IntVar(&o.kubeBurst, "kube-burst", 100, "with --source=kube: client burst")
	fs.StringVar(&o.certSelector, "certificate-selector", "haproxy-sidecar/certificate", "label selector for TLS Secrets (type kubernetes.io/tls) in the namespace that are certificates too; empty: none (not applied to --tls-secret-namespaces)")
	fs.Var(&o.tlsNamespaces, "tls-secret-namespaces", "`NAMESPACES`: comma-separated namespaces, or * for all, whose TLS Secrets (type kubernetes.io/tls, labelled or not) are certificates too, named NAMESPACE.NAME: the Secrets Ingresses and Gateway listeners name (needs get, list and watch on their secrets)")
	fs.StringVar(&o.envAllow, "env-allow", "", "comma-separated environment variables templates may read as env.NAME (NAME_* allows a prefix)")
	fs.StringVar(&o.envSecret, "env-secret", "", "like --env-allow, for values that are secret: templates may read them, and every log line, /readyz answer and Event shows them as [REDACTED]")
	fs.StringVar(&o.statsPass, "statistics-password", "", "password of the stats page (stats.password); a template that uses it while unset fails")
	fs.StringVar(&o.haproxyBin, "haproxy-bin", "haproxy", "haproxy binary used for validation (haproxy -c)")
	fs.StringVar(&o.sslDir, "ssl-dir", "", "certificate directory templates see as ssldir (run: default DIR(--haproxy-config)/certs, made a symlink into the live generation; an existing directory is kept as the adopted generation; not used with --reload=dataplane; render: --out/certs)")
	fs.StringVar(&o.mapsDir, "maps-dir", "", "directory of the map files (config keys NAME.map) templates see as mapsdir (run: default DIR(--haproxy-config)/maps, made a symlink into the live generation; an existing directory is kept as the adopted generation; not used with --reload=dataplane; render: --out/maps)")
	fs.StringVar(&o.filesDir, "files-dir", "", "directory of the other files (config keys files.NAME, files.NAME.j2) templates see as filesdir (run: default DIR(--haproxy-config)/files, made a symlink into the live generation; an existing directory is kept as the adopted generation; not used with --reload=dataplane; render: --out/files)")
	fs.BoolVar(&o.validate, "validate", true, "validate with haproxy -c before anything goes live (render: when haproxy is installed)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json")
	fs.DurationVar(&o.renderTimeout, "render-timeout", render.DefaultTimeout, "time budget of one render: a template still running after it is rejected (a loop that never ends) and held back")
	o.renderMaxOutput = sizeFlag(render.DefaultMaxOutput)
	fs.Var(&o.renderMaxOutput, "render-max-output", "`SIZE` budget of one render (64MiB, 1GiB or bytes): a larger haproxy.cfg, or a larger value built on the way, is rejected and held back")
	fs.Var(&o.watch, "watch", watchUsage)
	switch cmd {
	case "run":
		fs.StringVar(&o.haproxyConfig, "haproxy-config", "", "the file HAProxy was started with (-f), default "+defaultHAProxyConfig+"; made a symlink into the live generation (an existing file is kept as the adopted generation); not used with --reload=dataplane")
		fs.StringVar(&o.stateDir, "state-dir", "", "where generations are kept (default DIR(--haproxy-config)/.haproxy-sidecar; with --reload=dataplane, where everything local is kept: default $XDG_STATE_HOME/haproxy-sidecar/dataplane, else ~/.local/state/haproxy-sidecar/dataplane)")
		fs.StringVar(&o.reloadMode, "reload", "master-socket", "how to reload HAProxy: master-socket, dataplane (the HAProxy Data Plane API of remote hosts), command or none")
		fs.StringVar(&o.masterSocket, "master-socket", "/var/run/haproxy/master.sock", "HAProxy master CLI socket (haproxy -W -S PATH,level,admin)")
		fs.StringVar(&o.reloadCommand, "reload-command", "", "with --reload=command: command run through sh -c to reload HAProxy; exit 0 means loaded")
		fs.DurationVar(&o.reloadTimeout, "reload-timeout", 30*time.Second, "how long a reload may take to be confirmed")
		fs.DurationVar(&o.probeInterval, "probe-interval", 2*time.Second, "how often HAProxy is asked (master socket) whether it runs: haproxy_sidecar_haproxy_up, /readyz 503 while it is down, and the live configuration made sure of when it comes back")
		o.registerRuntime(fs)
		fs.Var(&o.dataplaneURLs, "dataplane-url", "with --reload=dataplane: a host's Data Plane API, https://lb1:5555/v3 (repeatable or comma-separated; without /v2 or /v3 the version is asked)")
		fs.StringVar(&o.dataplaneUser, "dataplane-username", "", "Data Plane API basic authentication user")
		fs.StringVar(&o.dataplanePassword, "dataplane-password", "", "Data Plane API basic authentication password (prefer --dataplane-password-file)")
		fs.StringVar(&o.dataplanePasswordFile, "dataplane-password-file", "", "file holding the Data Plane API password, re-read at every request")
		fs.StringVar(&o.dataplaneToken, "dataplane-token", "", "bearer token for the Data Plane API, instead of basic authentication")
		fs.StringVar(&o.dataplaneCA, "dataplane-ca", "", "CA certificate(s) of the Data Plane API servers (default: system roots); re-read when it changes")
		fs.StringVar(&o.dataplaneCert, "dataplane-cert", "", "client certificate for mutual TLS with the Data Plane API; re-read when it changes")
		fs.StringVar(&o.dataplaneKey, "dataplane-key", "", "private key of --dataplane-cert")
		fs.StringVar(&o.spiffeSocket, "spiffe-socket", "", "SPIFFE Workload API address (unix:///path or a path), used with --dataplane-spiffe-id (default $SPIFFE_ENDPOINT_SOCKET)")
		fs.StringVar(&o.dataplaneSPIFFEID, "dataplane-spiffe-id", "", "mutual TLS with SPIFFE: the Data Plane API servers' SPIFFE ID, or spiffe://trust.domain to accept its members")
		fs.StringVar(&o.dataplaneSSLDir, "dataplane-ssl-dir", "", "the hosts' certificate storage directory, which templates see as ssldir (default: learned from the hosts' storage API; /etc/haproxy/ssl, the API's default, until a host stores a certificate)")
		fs.StringVar(&o.dataplaneMapsDir, "dataplane-maps-dir", "", "the hosts' map storage directory (the API's resources.maps_dir), which templates see as mapsdir (default: the directory the hosts' map storage lists at start; /etc/haproxy/maps, the API's default, when it is empty)")
		fs.StringVar(&o.dataplaneFilesDir, "dataplane-files-dir", "", "the hosts' general file storage directory (the API's general_storage_dir), which templates see as filesdir (default: the directory the hosts' general storage lists at start; /etc/haproxy/general, the API's default, when it is empty)")
		o.wait = waitFlag{200 * time.Millisecond, 2 * time.Second}
		fs.Var(&o.wait, "wait", "`MIN:MAX`: render after MIN without changes, but never later than MAX after the first")
		fs.StringVar(&o.metricsAddr, "metrics-addr", ":9090", "address of /metrics (Prometheus); empty: off")
		fs.StringVar(&o.healthAddr, "health-addr", ":8080", "address of /healthz and /readyz; empty: off")
		fs.BoolVar(&o.pprof, "pprof", false, "also serve Go's profiles (/debug/pprof/) on --metrics-addr, to see where memory and CPU go")
		fs.StringVar(&o.podName, "pod-name", "", "this instance's name: Events' host and the leader-election identity (default: the host name)")
		fs.BoolVar(&o.leaderElect, "leader-elect", false, "with --source=kube: only the leader applies; others render and validate as hot standbys (for one controller pushing to remote HAProxy hosts)")
		fs.StringVar(&o.leNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default --namespace)")
		fs.StringVar(&o.leName, "leader-election-id", "haproxy-sidecar", "name of the leader-election Lease")
		fs.DurationVar(&o.leLease, "leader-election-lease-duration", 15*time.Second, "how long a leader's lease lasts without renewal")
		fs.DurationVar(&o.leRenew, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it steps down")
		fs.DurationVar(&o.leRetry, "leader-election-retry-period", 2*time.Second, "how often candidates try to acquire or renew the lease")
	case "render":
		fs.StringVar(&o.out, "out", "", "directory to write haproxy.cfg, certs/, maps/ and files/ into (required)")
	}
}

// renderOptions are the render budgets given by the flags.
func (o *options) renderOptions(sslDir string) render.Options {
	return render.Options{SSLDir: sslDir, Timeout: o.renderTimeout, MaxOutput: int(o.renderMaxOutput)}
}

func parse(cmd string, args []string, summary string) (*options, error) {
	o, err := parseOptions(cmd, args, summary, os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	return o, err
}

// parseOptions reads a command's flags, then fills the ones not given from their environment
// twins.
func parseOptions(cmd string, args []string, summary string, getenv func(string) string, output io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(output)
	o.register(fs, cmd)
	fs.Usage = usage(fs, summary)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s: unexpected arguments %q", cmd, fs.Args())
	}
	if err := applyEnv(fs, getenv); err != nil {
		return nil, err
	}
	return o, nil
}

// redactor knows the secret values the options give: the stats password, the Data Plane API
// credentials, the environment values marked secret. Certificate keys are added as they are
// read (the pipeline).
func (o *options) redactor() *redact.Redactor {
	r := &redact.Redactor{}
	r.Set("stats", o.statsPass)
	dp := []string{o.dataplanePassword, o.dataplaneToken}
	if o.dataplanePasswordFile != "" {
		if b, err := os.ReadFile(o.dataplanePasswordFile); err == nil {
			dp = append(dp, strings.TrimSpace(string(b)))
		}
	}
	r.Set("dataplane", dp...)
	var env []string
	for _, v := range allowedEnv(o.envSecret, os.Environ()) {
		env = append(env, v)
	}
	r.Set("env", env...)
	r.Set("etcd", o.etcdPassword)
	return r
}

// secretOnChange returns a function that registers a secret value of group with the
// redactor whenever it changes (a password file re-read at each request, say).
func (o *options) secretOnChange(group string) func(string) {
	var (
		mu   sync.Mutex
		last string
	)
	return func(v string) {
		mu.Lock()
		defer mu.Unlock()
		if v != last && o.red != nil {
			last = v
			o.red.Set(group, v)
		}
	}
}

// logger logs to w in the format the options ask for, with every secret red knows redacted.
func (o *options) logger(w io.Writer, red *redact.Redactor) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	hopts := &slog.HandlerOptions{Level: lvl}
	switch o.logFormat {
	case "text":
		return slog.New(red.Handler(slog.NewTextHandler(w, hopts))), nil
	case "json":
		return slog.New(red.Handler(slog.NewJSONHandler(w, hopts))), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", o.logFormat)
}

func (o *options) newSource(log *slog.Logger) (pipeline.Source, error) {
	if err := watcher.CheckWatch(o.watch); err != nil {
		return nil, err
	}
	switch o.source {
	case "file":
		if o.dir == "" {
			return nil, errors.New("--source=file needs --dir")
		}
		// Pods converted as they are decoded, and only the objects whose bytes changed decoded
		// again: memory and time for a hundred thousand pods.
		return &watcher.File{Dir: o.dir, DefaultNamespace: o.namespace, Logger: log, PodConverter: &snapshot.PodConverter{},
			MaxFileSize: int64(o.maxFileSize), Watch: o.watch,
			SecretNamespace: o.namespace, TLSSecretNamespaces: o.tlsNamespaces.Namespaces}, nil
	case "kube":
		client, err := o.kubeClient()
		if err != nil {
			return nil, err
		}
		var dyn dynamic.Interface
		if len(o.watch) > 0 {
			cfg, err := o.kubeConfig()
			if err != nil {
				return nil, err
			}
			if dyn, err = dynamic.NewForConfig(cfg); err != nil {
				return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
			}
		}
		return &watcher.Kube{
			Watch:               o.watch,
			Dynamic:             dyn,
			Client:              client,
			Namespace:           o.namespace,
			ServicesConfigMap:   o.servicesCM,
			KeysSecret:          o.keysSecret,
			ConfigSecret:        o.configSecret,
			CertificateSelector: o.certSelector,
			TLSSecretNamespaces: o.tlsNamespaces.Namespaces,
			Logger:              log,
		}, nil
	case "etcd":
		if len(o.etcdEndpoints) == 0 {
			return nil, errors.New("--source=etcd needs --etcd-endpoints")
		}
		return watcher.NewEtcd(watcher.EtcdConfig{
			Endpoints: o.etcdEndpoints, Prefix: o.etcdPrefix,
			CACert: o.etcdCA, Cert: o.etcdCert, Key: o.etcdKey,
			Username: o.etcdUser, Password: o.etcdPassword,
			Namespace: o.namespace, ServicesConfigMap: o.servicesCM, ConfigConfigMap: o.configCM,
			CertificatesConfigMap: o.certsCM, KeysSecret: o.keysSecret, ConfigSecret: o.configSecret,
			CertificateSelector: o.certSelector,
			TLSSecretNamespaces: o.tlsNamespaces.Namespaces,
			PodConverter:        &snapshot.PodConverter{},
			Watch:               o.watch,
			OnUp:                o.onSourceUp,
			Logger:              log,
		})
	}
	return nil, fmt.Errorf("--source %q: want file, kube or etcd", o.source)
}

// templateObject is the object that holds the templates, where per-host Events go.
func (o *options) templateObject() snapshot.Ref {
	if o.configSecret != "" {
		return snapshot.Ref{Kind: "Secret", Namespace: o.namespace, Name: o.configSecret}
	}
	return snapshot.Ref{Kind: "ConfigMap", Namespace: o.namespace, Name: o.configCM}
}

// kubeClient connects with --kubeconfig, else in-cluster, else $KUBECONFIG / ~/.kube/config.
func (o *options) kubeClient() (kubernetes.Interface, error) {
	cfg, err := o.kubeConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}

// kubeConfig is the client configuration of kubeClient.
func (o *options) kubeConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	var cfg *rest.Config
	var err error
	if o.kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	}
	if o.kubeconfig != "" || err != nil {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.kubeQPS), o.kubeBurst
	cfg.UserAgent = "haproxy-sidecar/" + version
	return cfg, nil
}

func (o *options) buildOptions() (snapshot.Options, error) {
	bo := snapshot.Options{
		Namespace:             o.namespace,
		ServicesConfigMap:     o.servicesCM,
		ConfigConfigMap:       o.configCM,
		CertificatesConfigMap: o.certsCM,
		KeysSecret:            o.keysSecret,
		TemplateKey:           o.templateKey,
		ConfigSecret:          o.configSecret,
		Env:                   allowedEnv(o.envAllow+","+o.envSecret, os.Environ()),
		StatsPassword:         o.statsPass,
		StatsPasswordSet:      o.statsPass != "",
		// Pods converted once per resourceVersion, not once per render.
		PodCache:            &snapshot.PodCache{},
		Resources:           o.watch,
		TLSSecretNamespaces: o.tlsNamespaces.Namespaces,
	}
	if o.certSelector != "" {
		sel, err := labels.Parse(o.certSelector)
		if err != nil {
			return bo, fmt.Errorf("--certificate-selector: %w", err)
		}
		bo.CertificateSelector = sel
	}
	return bo, nil
}

// allowedEnv keeps the variables the operator allowed: exact names, or prefixes written NAME_*.
func allowedEnv(allow string, environ []string) map[string]string {
	env := map[string]string{}
	var names, prefixes []string
	for _, a := range strings.Split(allow, ",") {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
		case strings.HasSuffix(a, "*"):
			prefixes = append(prefixes, strings.TrimSuffix(a, "*"))
		default:
			names = append(names, a)
		}
	}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		ok := false
		for _, n := range names {
			ok = ok || k == n
		}
		for _, p := range prefixes {
			ok = ok || strings.HasPrefix(k, p)
		}
		if ok {
			env[k] = v
		}
	}
	return env
}

func (o *options) newReloader() (reload.Reloader, string, error) {
	switch o.reloadMode {
	case "master-socket":
		return &reload.MasterSocket{Path: o.masterSocket, Timeout: o.reloadTimeout}, "master-socket", nil
	case "command":
		if o.reloadCommand == "" {
			return nil, "", errors.New("--reload=command needs --reload-command")
		}
		return &reload.Command{Argv: []string{"sh", "-c", o.reloadCommand}}, "command", nil
	case "none":
		return reload.None{}, "none", nil
	}
	return nil, "", fmt.Errorf("--reload %q: want master-socket, command or none", o.reloadMode)
}

func runCmd(args []string, mem memorySettings) error {
	o, err := parse("run", args, "haproxy-sidecar run: watch the inputs and keep HAProxy configured.")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.red = o.redactor()
	log, err := o.logger(os.Stderr, o.red)
	if err != nil {
		return err
	}
	// client-go logs through klog; send that to the same structured log.
	klog.SetSlogLogger(log)
	o.memory = mem
	return o.red.Error(o.run(ctx, log))
}

// run is the sidecar until ctx ends.
func (o *options) run(ctx context.Context, log *slog.Logger) error {
	if o.red == nil {
		o.red = o.redactor()
	}
	metrics := status.NewMetrics()
	o.onSourceUp = func(up bool) {
		if up {
			metrics.SourceUp.Set(1)
		} else {
			metrics.SourceUp.Set(0)
		}
	}
	src, err := o.newSource(log)
	if err != nil {
		return err
	}
	bo, err := o.buildOptions()
	if err != nil {
		return err
	}
	cfgPath, sslDir, stateDir, err := o.localPaths(log)
	if err != nil {
		return err
	}
	// A configuration HAProxy may already run: then not reaching HAProxy is an error, not
	// "not running yet".
	_, statErr := os.Lstat(cfgPath)
	expectRunning := statErr == nil && o.reloadMode == "master-socket"
	store, err := generation.Open(cfgPath, sslDir, stateDir, generation.WithLogger(log),
		generation.WithMapsDir(o.localMapsDir()), generation.WithFilesDir(o.localFilesDir()))
	if err != nil {
		return fmt.Errorf("open generations for %s: %w", cfgPath, err)
	}
	var recorder pipeline.Recorder // Kubernetes Events, set below in the Kubernetes modes
	var reloader reload.Reloader
	var endpoint string
	ro := o.renderOptions(sslDir)
	ro.MapsDir, ro.FilesDir = store.MapsDir(), store.FilesDir()
	var rend pipeline.Renderer = render.New(ro)
	var dpMode *dataplaneMode // --reload=dataplane (dataplane_mode.go)
	if o.reloadMode == "dataplane" {
		if dpMode, err = o.startDataplane(ctx, log, store, metrics, &recorder); err != nil {
			return err
		}
		defer dpMode.Close()
		reloader, endpoint, rend = dpMode, "dataplane", dpMode
	} else if reloader, endpoint, err = o.newReloader(); err != nil {
		return err
	}
	var checker pipeline.Checker
	if o.validate {
		if !validate.Available(o.haproxyBin) {
			return fmt.Errorf("--validate is on but %q is not found; install HAProxy or pass --haproxy-bin (or --validate=false)", o.haproxyBin)
		}
		checker = validate.Checker{Binary: o.haproxyBin}
	}
	health := &status.Health{Redact: o.red.String}
	identity := o.podName
	if identity == "" {
		identity, _ = os.Hostname()
	}
	var leading atomic.Bool
	var standby func() bool
	if kube, ok := src.(*watcher.Kube); ok {
		events := status.NewKubeEvents(ctx, kube.Client, "haproxy-sidecar", identity, kube.Lookup, log)
		events.Redact = o.red.String
		defer events.Shutdown()
		recorder = events
		if o.leaderElect {
			standby = func() bool { return !leading.Load() }
		}
	} else if o.leaderElect {
		return errors.New("--leader-elect needs --source=kube")
	}
	o.watchOldWorkers(metrics)
	p, err := pipeline.New(pipeline.Config{
		Source:         src,
		Inputs:         snapshot.Builder{Options: bo},
		Renderer:       rend,
		Checker:        checker,
		Store:          store,
		Reloader:       reloader,
		Endpoint:       endpoint,
		ReloaderCounts: endpoint == "dataplane",
		WaitMin:        o.wait.min,
		WaitMax:        o.wait.max,
		Metrics:        metrics,
		Health:         health,
		Recorder:       recorder,
		Standby:        standby,
		Logger:         log,

		Runtime:           o.newRuntime(sslDir, store.MapsDir(), log),
		MinReloadInterval: o.minReloadInterval,
		AfterSync:         trimMemory,
		KeepInputs:        true,
		Redactor:          o.red,
		ExpectRunning:     expectRunning,
		ProbeInterval:     o.probeInterval,
	})
	if err != nil {
		return err
	}
	if dpMode != nil {
		dpMode.onChange(p.Changed) // a learned certificate directory renders again
	}
	if err := serveHTTP(ctx, log, o.metricsAddr, o.healthAddr, o.pprof, metrics, health); err != nil {
		return err
	}
	if o.leaderElect {
		kube := src.(*watcher.Kube)
		ns := o.leNamespace
		if ns == "" {
			ns = o.namespace
		}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: o.leName},
				Client:     kube.Client.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
			},
			LeaseDuration:   o.leLease,
			RenewDeadline:   o.leRenew,
			RetryPeriod:     o.leRetry,
			ReleaseOnCancel: true,
			Name:            o.leName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					log.Info("leading: applying from now on", "identity", identity)
					leading.Store(true)
					p.Changed()
				},
				OnStoppedLeading: func() {
					log.Info("no longer leading: standby", "identity", identity)
					leading.Store(false)
				},
				OnNewLeader: func(id string) { log.Info("leader", "identity", id) },
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		// Run campaigns again after losing the lease, until ctx ends.
		go func() {
			for ctx.Err() == nil {
				le.Run(ctx)
			}
		}()
	}
	attrs := []any{"version", version, "source", o.source, "dir", o.dir, "haproxy_config", cfgPath,
		"ssl_dir", sslDir, "maps_dir", store.MapsDir(), "files_dir", store.FilesDir(), "state_dir", store.StateDir(), "reload", o.reloadMode, "wait", o.wait.String()}
	log.Info("starting", append(attrs, o.memory.attrs()...)...)
	return p.Run(ctx)
}

// serveHTTP serves /metrics and the health endpoints, on one listener if the addresses match.
func serveHTTP(ctx context.Context, log *slog.Logger, metricsAddr, healthAddr string, profiles bool, m *status.Metrics, h *status.Health) error {
	muxes := map[string]*http.ServeMux{}
	mux := func(addr string) *http.ServeMux {
		if muxes[addr] == nil {
			muxes[addr] = http.NewServeMux()
		}
		return muxes[addr]
	}
	if metricsAddr != "" {
		mux(metricsAddr).Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
		if profiles {
			mx := mux(metricsAddr)
			mx.HandleFunc("/debug/pprof/", pprof.Index)
			mx.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mx.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mx.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mx.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
	}
	if healthAddr != "" {
		h.Register(mux(healthAddr))
	}
	for addr, mx := range muxes {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		srv := &http.Server{Handler: mx, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server", "addr", addr, "error", err)
			}
		}()
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		log.Info("serving", "addr", ln.Addr().String())
	}
	return nil
}

// renderCmd renders once: into --out (render) or into a temporary directory that is removed
// afterwards (validate).
func renderCmd(args []string, checkOnly bool) error {
	summary := "haproxy-sidecar render: read the inputs once, render haproxy.cfg, certs/, maps/ and files/ into --out DIR, and\nvalidate them with haproxy -c when HAProxy is installed. Exit status 1 on any error."
	cmd := "render"
	if checkOnly {
		cmd = "validate"
		summary = "haproxy-sidecar validate: read the inputs once, render and validate with haproxy -c; write\nnothing. Exit status 0: valid; 1: invalid (the reason is printed)."
	}
	o, err := parse(cmd, args, summary)
	if err != nil {
		return err
	}
	o.red = o.redactor()
	log, err := o.logger(os.Stderr, o.red)
	if err != nil {
		return err
	}
	if err := o.renderOnce(log, checkOnly); err != nil {
		return o.red.Error(err)
	}
	return nil
}

// renderOnce is the render and validate commands once the options are read.
func (o *options) renderOnce(log *slog.Logger, checkOnly bool) error {
	var err error
	out := o.out
	if checkOnly {
		if out, err = os.MkdirTemp("", "haproxy-sidecar-validate-"); err != nil {
			return err
		}
		defer os.RemoveAll(out)
	} else if out == "" {
		return errors.New("render needs --out DIR")
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	sslDir := o.sslDir
	if sslDir == "" {
		sslDir = filepath.Join(out, "certs")
	}
	if sslDir, err = filepath.Abs(sslDir); err != nil {
		return err
	}
	ro := o.renderOptions(sslDir)
	for _, d := range []struct {
		given, name string
		dst         *string
	}{{o.mapsDir, generation.MapsDirName, &ro.MapsDir}, {o.filesDir, generation.FilesDirName, &ro.FilesDir}} {
		if *d.dst = d.given; d.given == "" {
			*d.dst = filepath.Join(out, d.name)
		}
		if *d.dst, err = filepath.Abs(*d.dst); err != nil {
			return err
		}
	}
	src, err := o.newSource(log)
	if err != nil {
		return err
	}
	bo, err := o.buildOptions()
	if err != nil {
		return err
	}
	// The kube and etcd sources fill their caches in Run: run it until the objects are read.
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = src.Run(ctx, func() {}) }()
	objs, err := src.Objects(ctx)
	cancel()
	<-ran
	ctx = context.Background()
	if err != nil {
		return err
	}
	snap, err := snapshot.Build(objs, bo)
	if err != nil {
		return err
	}
	bundle, err := render.New(ro).Render(ctx, snap)
	if err == nil {
		o.red.Set("certificate-keys", certKeyLines(bundle.Certificates)...)
	}
	if err != nil {
		return err
	}
	cfgFile := filepath.Join(out, "haproxy.cfg")
	if err := writeBundle(cfgFile, sslDir, ro.MapsDir, ro.FilesDir, bundle); err != nil {
		return err
	}
	if o.validate {
		if !validate.Available(o.haproxyBin) {
			if checkOnly {
				return fmt.Errorf("cannot validate: %q not found (install HAProxy or pass --haproxy-bin)", o.haproxyBin)
			}
			log.Warn("haproxy not found: rendered without validation", "haproxy_bin", o.haproxyBin)
		} else if err := (validate.Checker{Binary: o.haproxyBin}).Check(ctx, cfgFile); err != nil {
			return &snapshot.InputError{Stage: snapshot.StageValidate, Ref: snap.TemplateRef,
				Err: fmt.Errorf("haproxy -c rejected the rendered configuration: %w", err)}
		}
	}
	if checkOnly {
		fmt.Printf("valid: %d services, %d certificates, hash %s\n", len(snap.Services), len(snap.Certificates), bundle.Hash[:12])
	} else {
		fmt.Printf("wrote %s and %d certificate(s) to %s\n", cfgFile, len(bundle.Certificates), sslDir)
		if len(bundle.Maps)+len(bundle.Files) > 0 {
			fmt.Printf("wrote %d map file(s) to %s and %d file(s) to %s\n", len(bundle.Maps), ro.MapsDir, len(bundle.Files), ro.FilesDir)
		}
	}
	return nil
}

// renderer gives the render package the pipeline's Renderer shape.
// certKeyLines are the private key lines of the certificates, for the redactor.
func certKeyLines(certs map[string][]byte) []string {
	var out []string
	for _, pem := range certs {
		out = append(out, redact.KeyLines(pem)...)
	}
	return out
}

func writeBundle(cfgFile, sslDir, mapsDir, filesDir string, b *render.Bundle) error {
	if err := os.MkdirAll(filepath.Dir(cfgFile), 0o755); err != nil {
		return err
	}
	for dir, files := range map[string]map[string][]byte{mapsDir: b.Maps, filesDir: b.Files} {
		if len(files) == 0 {
			continue
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		}
	}
	if err := os.MkdirAll(sslDir, 0o700); err != nil {
		return err
	}
	for name, pem := range b.Certificates {
		if err := os.WriteFile(filepath.Join(sslDir, name+".pem"), pem, 0o600); err != nil {
			return fmt.Errorf("write certificate %s: %w", name, err)
		}
	}
	if err := os.WriteFile(cfgFile, b.Config, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", cfgFile, err)
	}
	return nil
}

// namespacesFlag is --tls-secret-namespaces: comma-separated namespaces or *; repeating the
// flag adds to it.
type namespacesFlag struct {
	snapshot.Namespaces
	raw []string
}

func (n *namespacesFlag) Set(s string) error {
	v, err := snapshot.ParseNamespaces(strings.Join(append(append([]string{}, n.raw...), s), ","))
	if err != nil {
		return err
	}
	n.Namespaces, n.raw = v, append(n.raw, s)
	return nil
}
