package config

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// Cluster is one more cluster of the kube source (--cluster, --clusters-file): its name, and
// how to reach its API server.
type Cluster struct {
	Name       string
	Kubeconfig string // "": the home cluster's way (--kubeconfig, in-cluster, $KUBECONFIG)
	Context    string // "": the kubeconfig's current context
}

// ParseCluster reads NAME=KUBECONFIG[:CONTEXT]. The context is after the first ":" of the
// part after "=" (contexts may hold ":", as EKS's ARNs do; paths seldom do).
func ParseCluster(s string) (Cluster, error) {
	name, rest, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return Cluster{}, fmt.Errorf("cluster %q: want NAME=KUBECONFIG[:CONTEXT]", s)
	}
	c := Cluster{Name: strings.TrimSpace(name)}
	c.Kubeconfig, c.Context, _ = strings.Cut(strings.TrimSpace(rest), ":")
	if err := snapshot.CheckClusterName(c.Name); err != nil {
		return Cluster{}, err
	}
	if c.Kubeconfig == "" && c.Context == "" {
		return Cluster{}, fmt.Errorf("cluster %q: name a kubeconfig file, a context (NAME=:CONTEXT), or both", s)
	}
	return c, nil
}

func (c Cluster) String() string {
	if c.Context == "" {
		return c.Name + "=" + c.Kubeconfig
	}
	return c.Name + "=" + c.Kubeconfig + ":" + c.Context
}

// ClusterList is --cluster: repeatable, or comma-separated.
type ClusterList []Cluster

func (l *ClusterList) String() string {
	out := make([]string, len(*l))
	for i, c := range *l {
		out[i] = c.String()
	}
	return strings.Join(out, ",")
}

// Set adds the comma-separated clusters of s.
func (l *ClusterList) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if strings.TrimSpace(v) == "" {
			continue
		}
		c, err := ParseCluster(v)
		if err != nil {
			return err
		}
		*l = append(*l, c)
	}
	return nil
}

// ReadClusters reads a clusters file: one NAME=KUBECONFIG[:CONTEXT] a line; blank lines and
// lines starting with # are skipped.
func ReadClusters(name string) (ClusterList, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--clusters-file: %w", err)
	}
	var out ClusterList
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c, err := ParseCluster(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// Members are the clusters besides the home one: --cluster's, then the clusters file's.
// Names are unique, and none is the home cluster's.
func (k Kube) Members() (ClusterList, error) {
	out := slices.Clone(k.Clusters)
	if k.ClustersFile != "" {
		more, err := ReadClusters(k.ClustersFile)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	seen := map[string]bool{k.ClusterName: true}
	for _, c := range out {
		if seen[c.Name] {
			return nil, fmt.Errorf("cluster %q named twice (the home cluster is --cluster-name %q)", c.Name, k.ClusterName)
		}
		seen[c.Name] = true
	}
	return out, nil
}

// MultiCluster: more than the home cluster is asked for.
func (k Kube) MultiCluster() bool { return len(k.Clusters) > 0 || k.ClustersFile != "" }
