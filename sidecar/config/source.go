package config

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// Source is where the inputs come from: a directory of manifests, the Kubernetes API, or the
// etcd behind it.
type Source struct {
	Kind        string // file, kube or etcd
	Dir         string // file
	MaxFileSize Size   // file
	Kube        Kube
	Etcd        Etcd
}

// Kube is how to reach the Kubernetes API.
type Kube struct {
	Kubeconfig string
	QPS        float64
	Burst      int
	// Several clusters: the home one (Kubeconfig's, named ClusterName) holds the load
	// balancer's namespace; the others (Clusters, ClustersFile) give pods and watched objects.
	Clusters     ClusterList
	ClustersFile string
	ClusterName  string
	// ForgetAfter: how long a cluster may be away before its objects are left out; 0: kept.
	ForgetAfter time.Duration
	// ReadWait bounds a member cluster's read inside a sync: past it, its last read stands in.
	ReadWait time.Duration
}

// Etcd is how to reach the etcd behind Kubernetes.
type Etcd struct {
	Endpoints                                 List
	Prefix, CACert, Cert, Key, User, Password string
}

func (*Source) title() string { return "Inputs: where they come from" }

func (s *Source) register(fs *flag.FlagSet) {
	choiceVar(fs, &s.Kind, "source", "file", []string{"file", "kube", "etcd"}, "where inputs come from: file (a directory of Kubernetes manifests), kube (the Kubernetes API) or etcd (the etcd behind Kubernetes, read directly)")
	fs.StringVar(&s.Dir, "dir", "", "with --source=file: `DIR`, the directory of manifests (YAML or JSON, what kubectl apply -f takes)")
	s.MaxFileSize = watcher.DefaultMaxFileSize
	fs.Var(&s.MaxFileSize, "max-file-size", "with --source=file: largest manifest file read (`SIZE`: bytes, or with KiB, MiB, GiB); a larger file is bad input, reported with its name and size, its objects held at what they were when last read")
	fs.StringVar(&s.Kube.Kubeconfig, "kubeconfig", "", "with --source=kube: kubeconfig file (default: in-cluster config, then $KUBECONFIG)")
	fs.Float64Var(&s.Kube.QPS, "kube-qps", 50, "with --source=kube: client queries per second")
	fs.IntVar(&s.Kube.Burst, "kube-burst", 100, "with --source=kube: client burst")
	fs.Var(&s.Kube.Clusters, "cluster", "with --source=kube: `NAME=KUBECONFIG[:CONTEXT]`, one more cluster whose pods (and --watch resources) the templates see, as pod.cluster NAME (repeatable, or comma-separated; NAME=:CONTEXT takes the context from the home cluster's kubeconfig). The load balancer's namespace stays in the home cluster (--kubeconfig's)")
	fs.StringVar(&s.Kube.ClustersFile, "clusters-file", "", "with --source=kube: `FILE` listing more clusters as --cluster does, one NAME=KUBECONFIG[:CONTEXT] a line (# comments)")
	fs.StringVar(&s.Kube.ClusterName, "cluster-name", "local", "with --cluster or --clusters-file: the home cluster's name (pod.cluster of its pods)")
	fs.DurationVar(&s.Kube.ForgetAfter, "cluster-forget-after", 0, "with --cluster or --clusters-file: how long a cluster may be unreachable before its pods and watched objects are left out (`DURATION`); 0: they stay at their last known state until it is back")
	fs.DurationVar(&s.Kube.ReadWait, "cluster-read-wait", watcher.DefaultMemberReadWait, "with --cluster or --clusters-file: how long a sync waits for another cluster's read (`DURATION`, more than 0); past it, that cluster's pods and watched objects as last read stand in, so that a cluster slow to list never holds the others' changes back")
	fs.Var(&s.Etcd.Endpoints, "etcd-endpoints", "with --source=etcd: comma-separated etcd client URLs (https:// for TLS)")
	fs.StringVar(&s.Etcd.Prefix, "etcd-prefix", "/registry", "with --source=etcd: kube-apiserver's --etcd-prefix")
	fs.StringVar(&s.Etcd.CACert, "etcd-cacert", "", "with --source=etcd: CA certificate of etcd's serving certificate (kubeadm: /etc/kubernetes/pki/etcd/ca.crt)")
	fs.StringVar(&s.Etcd.Cert, "etcd-cert", "", "with --source=etcd: client certificate etcd's --client-cert-auth requires (re-read when it changes)")
	fs.StringVar(&s.Etcd.Key, "etcd-key", "", "with --source=etcd: private key of --etcd-cert")
	fs.StringVar(&s.Etcd.User, "etcd-username", "", "with --source=etcd: user, when etcd authentication is on and the certificate's CN is not the user")
	fs.StringVar(&s.Etcd.Password, "etcd-password", "", "with --source=etcd: password of --etcd-username")
}

func (s *Source) validate() error {
	switch s.Kind {
	case "file":
		if s.Dir == "" {
			return errors.New("--source=file needs --dir")
		}
	case "kube":
		if s.Kube.MultiCluster() {
			if err := snapshot.CheckClusterName(s.Kube.ClusterName); err != nil {
				return fmt.Errorf("--cluster-name: %w", err)
			}
		}
	case "etcd":
		if len(s.Etcd.Endpoints) == 0 {
			return errors.New("--source=etcd needs --etcd-endpoints")
		}
	default:
		return fmt.Errorf("--source %q: want file, kube or etcd", s.Kind)
	}
	if s.Kind != "kube" && s.Kube.MultiCluster() {
		return errors.New("--cluster and --clusters-file need --source=kube")
	}
	if s.Kube.ForgetAfter < 0 {
		return errors.New("--cluster-forget-after: want a duration of 0 or more")
	}
	if s.Kube.ReadWait <= 0 {
		return errors.New("--cluster-read-wait: want a duration more than 0")
	}
	return nil
}

// Inputs says which objects are the inputs and what templates may see of the environment.
type Inputs struct {
	Namespace             string
	ServicesConfigMap     string
	ConfigConfigMap       string
	CertificatesConfigMap string
	KeysSecret            string
	TemplateKey           string
	ConfigSecret          string
	CertificateSelector   string
	TLSSecretNamespaces   Namespaces
	Watch                 watchspec.List
	EnvAllow, EnvSecret   string
	StatsPassword         string
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

func (*Inputs) title() string { return "Inputs: which objects, what templates see" }

func (in *Inputs) register(fs *flag.FlagSet) {
	fs.StringVar(&in.Namespace, "namespace", "lb", "namespace of the load balancer's ConfigMaps and Secrets; manifests without a namespace belong to it")
	fs.StringVar(&in.ServicesConfigMap, "services-configmap", "services", "ConfigMap whose keys are services (JSON: namespace, selector, hostnames, ports, ...)")
	fs.StringVar(&in.ConfigConfigMap, "config-configmap", "config", "ConfigMap holding the templates; absent: the built-in default template")
	fs.StringVar(&in.CertificatesConfigMap, "certificates-configmap", "certificates", "ConfigMap of PEM certificates, paired by key name with --keys-secret")
	fs.StringVar(&in.KeysSecret, "keys-secret", "keys", "Secret of PEM private keys for the certificates ConfigMap")
	fs.StringVar(&in.TemplateKey, "template-key", "template", "key of the main template in the config ConfigMap; other keys can be included by name")
	fs.StringVar(&in.ConfigSecret, "config-secret", "", "take the templates from this Secret (same keys as the config ConfigMap) instead: the GitOps flow where a tool syncs haproxy.cfg into a Secret; a template without tags is a raw haproxy.cfg")
	fs.StringVar(&in.CertificateSelector, "certificate-selector", "haproxy-sidecar/certificate", "label selector for TLS Secrets (type kubernetes.io/tls) in the namespace that are certificates too; empty: none (not applied to --tls-secret-namespaces)")
	fs.Var(&in.TLSSecretNamespaces, "tls-secret-namespaces", "`NAMESPACES`: comma-separated namespaces, or * for all, whose TLS Secrets (type kubernetes.io/tls, labelled or not) are certificates too, named NAMESPACE.NAME: the Secrets Ingresses and Gateway listeners name (needs get, list and watch on their secrets)")
	fs.Var(&in.Watch, "watch", watchUsage)
	fs.StringVar(&in.EnvAllow, "env-allow", "", "comma-separated environment variables templates may read as env.NAME (NAME_* allows a prefix)")
	fs.StringVar(&in.EnvSecret, "env-secret", "", "like --env-allow, for values that are secret: templates may read them, and every log line, /readyz answer and Event shows them as [REDACTED]; a rendered line holding anything made of them is never quoted")
	fs.StringVar(&in.StatsPassword, "statistics-password", "", "password of the stats page (stats.password); a template that uses it while unset fails")
}

func (in *Inputs) validate() error {
	if err := watcher.CheckWatch(in.Watch); err != nil {
		return err
	}
	return nil
}
