package snapshot

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// DefaultPeersPort is the port of the peers protocol when PeersOptions.Port is zero.
const DefaultPeersPort = 10000

// PeersOptions says which pods are the HAProxy replicas of this deployment, the peers of
// HAProxy's `peers` section (--peers...). The zero value is off: no peers.
type PeersOptions struct {
	Enabled   bool
	Namespace string // the replicas' namespace
	// Selector selects the replicas among the pods of Namespace; nil: the labels of the local
	// pod (Local), without the labels that differ between revisions of a workload.
	Selector labels.Selector
	Local    string // this replica's pod name: HAProxy's localpeer
	Port     int    // the port each replica's peers listener binds; 0: DefaultPeersPort
	// Cluster, with several clusters, is the home cluster's name: the replicas are its pods,
	// not another cluster's pods of the same namespace and labels.
	Cluster string
}

// Peer is one replica.
type Peer struct {
	Name  string
	IP    string
	Port  int
	Local bool // it is this replica
	Ready bool
}

// Peers are the replicas, as templates see them (`peers`).
type Peers struct {
	Enabled bool
	Local   string
	Port    int
	All     []Peer // sorted by name
}

// Value is what templates see: a dict of all (each a dict name, ip, port, local, ready),
// local (this replica's name), port and enabled.
func (p Peers) Value() map[string]any {
	all := make([]any, len(p.All))
	for i, x := range p.All {
		all[i] = map[string]any{"name": x.Name, "ip": x.IP, "port": x.Port, "local": x.Local, "ready": x.Ready}
	}
	return map[string]any{"enabled": p.Enabled, "local": p.Local, "port": p.Port, "all": all}
}

// revisionLabels differ between the pods of two revisions of one workload (a Deployment's
// ReplicaSets, a StatefulSet's revisions) or between its pods: a default selector made of the
// local pod's labels leaves them out, so that the replicas of a rollout peer with each other.
var revisionLabels = []string{
	"pod-template-hash", "controller-revision-hash", "pod-template-generation",
	"statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index",
}

// podRunning reports whether a pod is a replica that can take part: it has an IP, is not
// terminating and has not finished (ready or not yet).
func podRunning(p *corev1.Pod) bool {
	return p.Status.PodIP != "" && p.DeletionTimestamp == nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// peerCandidate is a running pod of the replicas' namespace.
type peerCandidate struct {
	name, ip string
	ready    bool
	labels   labels.Labels
}

// BuildPeers picks the replicas among the pods of objs. A pure function of its arguments.
func BuildPeers(objs *Objects, opts PeersOptions) Peers {
	if !opts.Enabled {
		return Peers{All: []Peer{}}
	}
	port := cmp.Or(opts.Port, DefaultPeersPort)
	out := Peers{Enabled: true, Local: opts.Local, Port: port, All: []Peer{}}
	var cands []peerCandidate
	for _, p := range objs.Pods {
		if p != nil && p.Namespace == opts.Namespace && podRunning(p) {
			cands = append(cands, peerCandidate{p.Name, p.Status.PodIP, PodReady(p), labels.Set(p.Labels)})
		}
	}
	for _, p := range objs.ConvertedPods {
		if p == nil || p.namespace != opts.Namespace || p.ip() == "" || p.cluster() != opts.Cluster {
			continue
		}
		var l labels.Labels = labels.Set(p.waiting())
		if p.ready {
			l = recordLabels{p.labels}
		}
		cands = append(cands, peerCandidate{p.name, p.ip(), p.ready, l})
	}
	sel := opts.Selector
	if sel == nil {
		sel = localSelector(cands, opts.Local)
	}
	for _, c := range cands {
		if sel.Matches(c.labels) {
			out.All = append(out.All, Peer{Name: c.name, IP: c.ip, Port: port, Local: c.name == opts.Local, Ready: c.ready})
		}
	}
	slices.SortFunc(out.All, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
	// One per name: a source gives each pod once; the first stays if not.
	out.All = slices.CompactFunc(out.All, func(a, b Peer) bool { return a.Name == b.Name })
	return out
}

// localSelector is the labels of the local pod, without revisionLabels; nothing when the local
// pod is not there (yet) or has no other labels: the local pod alone would be a lonely peer.
func localSelector(cands []peerCandidate, local string) labels.Selector {
	for _, c := range cands {
		if c.name != local {
			continue
		}
		set := labels.Set{}
		for k, v := range labelMap(c.labels) {
			if !slices.Contains(revisionLabels, k) {
				set[k] = v
			}
		}
		if len(set) == 0 {
			break
		}
		return labels.SelectorFromSet(set)
	}
	return labels.Nothing()
}

// labelMap is l as a map.
func labelMap(l labels.Labels) map[string]string {
	switch x := l.(type) {
	case labels.Set:
		return x
	case recordLabels:
		m := map[string]string{}
		if x.r != nil {
			for k, v := range x.r.All() {
				if s, ok := v.(string); ok {
					m[k] = s
				}
			}
		}
		return m
	}
	return nil
}

// recordLabels are a converted pod's metadata.labels as labels.Labels.
type recordLabels struct{ r *record.Record }

func (l recordLabels) Lookup(k string) (string, bool) {
	if l.r == nil {
		return "", false
	}
	v, _ := l.r.Get(k)
	s, ok := v.(string)
	return s, ok
}

func (l recordLabels) Has(k string) bool {
	_, ok := l.Lookup(k)
	return ok
}

func (l recordLabels) Get(k string) string {
	v, _ := l.Lookup(k)
	return v
}
