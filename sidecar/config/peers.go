package config

import (
	"errors"
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
)

// Peers are the HAProxy replicas of this deployment, which templates see as `peers` for
// HAProxy's peers section (stick tables shared by the replicas).
type Peers struct {
	Enabled bool
	// Selector selects the replicas' pods ("": the labels of this sidecar's own pod, found with
	// --source=kube or etcd).
	Selector string
	// Namespace is the replicas' namespace ("": $POD_NAMESPACE, else --namespace).
	Namespace string
	Port      int
	// Name is this replica's pod name, HAProxy's localpeer ("": --pod-name, else $POD_NAME,
	// else the host name).
	Name string
}

func (*Peers) title() string { return "Peers: the HAProxy replicas, for shared stick tables" }

func (p *Peers) register(fs *flag.FlagSet) {
	fs.BoolVar(&p.Enabled, "peers", false, "follow the HAProxy replicas of this deployment (the running pods --peers-selector selects), which templates see as `peers` for a peers section; off, `peers.all` is empty")
	fs.StringVar(&p.Selector, "peers-selector", "", "label `SELECTOR` of the replicas' pods (turns --peers on; default: the labels of this sidecar's pod, $POD_NAME in $POD_NAMESPACE, without pod-template-hash and the like; required with --source=file)")
	fs.StringVar(&p.Namespace, "peers-namespace", "", "namespace of the replicas' pods (default $POD_NAMESPACE, else --namespace)")
	fs.IntVar(&p.Port, "peers-port", 10000, "the port of the peers protocol on each replica (`peers.port`, each peer's `port`)")
	fs.StringVar(&p.Name, "peer-name", "", "this replica's pod name, HAProxy's localpeer (`peers.local`; default --pod-name, else $POD_NAME, else the host name)")
}

func (p *Peers) validate() error {
	if p.Port <= 0 || p.Port > 65535 {
		return fmt.Errorf("--peers-port %d: want 1 to 65535", p.Port)
	}
	if p.Selector != "" {
		if _, err := labels.Parse(p.Selector); err != nil {
			return fmt.Errorf("--peers-selector: %w", err)
		}
	}
	return nil
}

// On reports whether the replicas are followed: --peers, or a --peers-selector.
func (p *Peers) On() bool { return p.Enabled || p.Selector != "" }

// fromDownwardAPI fills the pod name and namespace not given from POD_NAME and POD_NAMESPACE
// (the downward API's usual names).
func (p *Peers) fromDownwardAPI(getenv func(string) string) {
	if p.Name == "" {
		p.Name = getenv("POD_NAME")
	}
	if p.Namespace == "" {
		p.Namespace = getenv("POD_NAMESPACE")
	}
}

// checkPeers checks the peers against the source: without a selector, the default is the labels
// of this sidecar's own pod, which the kube and etcd sources read (the replicas' namespace) and a
// directory of manifests does not have.
func checkPeers(p Peers, source string) error {
	if p.On() && p.Selector == "" && source == "file" {
		return errors.New("--peers with --source=file needs --peers-selector (the default, this pod's labels, is read with --source=kube or etcd)")
	}
	return nil
}
