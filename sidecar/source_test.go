package sidecar

import (
	"bytes"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/config"
)

// TestWatchedResourcesReachTheSnapshot: the resources of --watch are what the snapshot reads.
func TestWatchedResourcesReachTheSnapshot(t *testing.T) {
	cfg, err := config.ParseRun([]string{"--watch", "ingresses.v1.networking.k8s.io;selector=team=a,tier!=db", "--watch", "nodes.v1"},
		"", func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	bo, err := snapshotOptions(cfg.Inputs)
	if err != nil || len(bo.Resources) != 2 {
		t.Errorf("the snapshot options do not have the resources: %v %v", bo.Resources, err)
	}
}
