package sidecar

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/pipeline"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// newSource is where the inputs come from; onState is told whether the source is followed.
// peersNS, when set, is the HAProxy replicas' namespace, whose pods the kube and etcd sources
// then watch whatever the services name (the file source reads every Pod).
func newSource(s config.Source, in config.Inputs, peersNS string, log *slog.Logger, onState watcher.StateFunc) (pipeline.Source, error) {
	if err := watcher.CheckWatch(in.Watch); err != nil {
		return nil, err
	}
	switch s.Kind {
	case "file":
		// Pods converted as they are decoded, and only the objects whose bytes changed decoded
		// again: memory and time for a hundred thousand pods.
		return &watcher.File{Dir: s.Dir, DefaultNamespace: in.Namespace, Logger: log, PodConverter: &snapshot.PodConverter{},
			MaxFileSize: int64(s.MaxFileSize), Watch: in.Watch,
			SecretNamespace: in.Namespace, TLSSecretNamespaces: in.TLSSecretNamespaces.Namespaces, OnState: onState}, nil
	case "kube":
		cfg, err := kubeConfig(s.Kube)
		if err != nil {
			return nil, err
		}
		if s.Kube.MultiCluster() {
			return newClusters(s.Kube, cfg, in, peersNS, log, onState)
		}
		return newKube(cfg, in, peersNS, log, onState)
	case "etcd":
		e := s.Etcd
		return watcher.NewEtcd(watcher.EtcdConfig{
			Endpoints: e.Endpoints, Prefix: e.Prefix,
			CACert: e.CACert, Cert: e.Cert, Key: e.Key,
			Username: e.User, Password: e.Password,
			Namespace: in.Namespace, ServicesConfigMap: in.ServicesConfigMap, ConfigConfigMap: in.ConfigConfigMap,
			PeersNamespace:        peersNS,
			CertificatesConfigMap: in.CertificatesConfigMap, KeysSecret: in.KeysSecret, ConfigSecret: in.ConfigSecret,
			CertificateSelector: in.CertificateSelector,
			TLSSecretNamespaces: in.TLSSecretNamespaces.Namespaces,
			PodConverter:        &snapshot.PodConverter{},
			Watch:               in.Watch,
			OnState:             onState,
			Logger:              log,
		})
	}
	return nil, fmt.Errorf("--source %q: want file, kube or etcd", s.Kind)
}

// newKube is the source of one cluster, reached through cfg.
func newKube(cfg *rest.Config, in config.Inputs, peersNS string, log *slog.Logger, onState watcher.StateFunc) (*watcher.Kube, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	var dyn dynamic.Interface
	if len(in.Watch) > 0 {
		if dyn, err = dynamic.NewForConfig(cfg); err != nil {
			return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
		}
	}
	return &watcher.Kube{
		Watch:               in.Watch,
		Dynamic:             dyn,
		Client:              client,
		Namespace:           in.Namespace,
		ServicesConfigMap:   in.ServicesConfigMap,
		KeysSecret:          in.KeysSecret,
		ConfigSecret:        in.ConfigSecret,
		CertificateSelector: in.CertificateSelector,
		TLSSecretNamespaces: in.TLSSecretNamespaces.Namespaces,
		Logger:              log,
		OnState:             onState,
		Server:              cfg.Host,
		PeersNamespace:      peersNS,
	}, nil
}

// rememberChoices has the file source keep which definition of each object defined twice is
// in use in the state directory, and take back those of the sidecar's last run: the definition
// in use before a restart stays in use (docs/inputs.md). Other sources have no such choice.
func rememberChoices(src pipeline.Source, store *generation.Store, log *slog.Logger) {
	f, ok := src.(*watcher.File)
	if !ok {
		return
	}
	c, err := loadState[watcher.Choices](store.ReadState, watcher.ChoicesFile)
	if err != nil {
		log.Warn("starting without the record of which definition of objects defined twice was in use", "file", watcher.ChoicesFile, "error", err)
	}
	f.Remembered = c
	f.OnChoices = func(c watcher.Choices) error {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		return store.WriteState(watcher.ChoicesFile, b)
	}
}

// kubeConfig connects with --kubeconfig, else in-cluster, else $KUBECONFIG / ~/.kube/config.
func kubeConfig(k config.Kube) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.Kubeconfig != "" {
		rules.ExplicitPath = k.Kubeconfig
	}
	var cfg *rest.Config
	var err error
	if k.Kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	}
	if k.Kubeconfig != "" || err != nil {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(k.QPS), k.Burst
	cfg.UserAgent = "haproxy-sidecar/" + Version
	return cfg, nil
}

// snapshotOptions say which objects are the inputs and what templates see.
func snapshotOptions(in config.Inputs) (snapshot.Options, error) {
	bo := snapshot.Options{
		Namespace:             in.Namespace,
		ServicesConfigMap:     in.ServicesConfigMap,
		ConfigConfigMap:       in.ConfigConfigMap,
		CertificatesConfigMap: in.CertificatesConfigMap,
		KeysSecret:            in.KeysSecret,
		TemplateKey:           in.TemplateKey,
		ConfigSecret:          in.ConfigSecret,
		Env:                   in.Env(),
		SecretEnv:             in.SecretEnvNames(),
		StatsPassword:         in.StatsPassword,
		StatsPasswordSet:      in.StatsPassword != "",
		// Pods converted once per resourceVersion, not once per render.
		PodCache:            &snapshot.PodCache{},
		Resources:           in.Watch,
		TLSSecretNamespaces: in.TLSSecretNamespaces.Namespaces,
	}
	if in.CertificateSelector != "" {
		sel, err := labels.Parse(in.CertificateSelector)
		if err != nil {
			return bo, fmt.Errorf("--certificate-selector: %w", err)
		}
		bo.CertificateSelector = sel
	}
	return bo, nil
}

// peersOptions say which pods are the HAProxy replicas (--peers...): the namespace defaults
// to the load balancer's, this replica's name to the host's; with several clusters, they are
// the home cluster's pods.
func peersOptions(p config.Peers, namespace string, src config.Source) (snapshot.PeersOptions, error) {
	if !p.On() {
		return snapshot.PeersOptions{}, nil
	}
	po := snapshot.PeersOptions{Enabled: true, Namespace: p.Namespace, Local: p.Name, Port: p.Port}
	if src.Kind == "kube" && src.Kube.MultiCluster() {
		po.Cluster = src.Kube.ClusterName
	}
	if po.Namespace == "" {
		po.Namespace = namespace
	}
	if po.Local == "" {
		name, err := os.Hostname()
		if err != nil {
			return po, fmt.Errorf("--peer-name not given, $POD_NAME not set, and no host name: %w", err)
		}
		po.Local = name
	}
	if p.Selector != "" {
		sel, err := labels.Parse(p.Selector)
		if err != nil {
			return po, fmt.Errorf("--peers-selector: %w", err)
		}
		po.Selector = sel
	}
	return po, nil
}

// manifests reads the objects of the templates' tests as the file source reads a file.
func manifests(in config.Inputs) func(name string, data []byte) (*snapshot.Objects, error) {
	return func(name string, data []byte) (*snapshot.Objects, error) {
		return watcher.DecodeManifests(name, data, in.Namespace, in.Watch)
	}
}

// templateObject is the object that holds the templates, where per-host Events go.
func templateObject(in config.Inputs) snapshot.Ref {
	if in.ConfigSecret != "" {
		return snapshot.Ref{Kind: "Secret", Namespace: in.Namespace, Name: in.ConfigSecret}
	}
	return snapshot.Ref{Kind: "ConfigMap", Namespace: in.Namespace, Name: in.ConfigConfigMap}
}

// newClusters is the kube source over the home cluster (cfg, named --cluster-name) and the
// clusters of --cluster and --clusters-file.
func newClusters(k config.Kube, cfg *rest.Config, in config.Inputs, peersNS string, log *slog.Logger, onState watcher.StateFunc) (*watcher.Clusters, error) {
	members, err := k.Members()
	if err != nil {
		return nil, err
	}
	home, err := newKube(cfg, in, peersNS, log.With("cluster", k.ClusterName), nil)
	if err != nil {
		return nil, err
	}
	home.Cluster = k.ClusterName
	var kubes []*watcher.Kube
	for _, m := range members {
		mcfg, err := memberConfig(k, m)
		if err != nil {
			return nil, err
		}
		mk, err := newKube(mcfg, in, "", log.With("cluster", m.Name), nil)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", m.Name, err)
		}
		mk.Cluster, mk.Member = m.Name, true
		kubes = append(kubes, mk)
	}
	c := watcher.NewClusters(home, kubes)
	c.ForgetAfter, c.MemberReadWait, c.OnState, c.Logger = k.ForgetAfter, k.ReadWait, onState, log
	return c, nil
}

// memberConfig connects to cluster m: its kubeconfig (else the home cluster's kubeconfig
// file, $KUBECONFIG or ~/.kube/config) and its context (else the file's current one).
func memberConfig(k config.Kube, m config.Cluster) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = cmp.Or(m.Kubeconfig, k.Kubeconfig)
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: m.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: kubernetes client config: %w", m.Name, err)
	}
	cfg.QPS, cfg.Burst = float32(k.QPS), k.Burst
	cfg.UserAgent = "haproxy-sidecar/" + Version
	return cfg, nil
}
