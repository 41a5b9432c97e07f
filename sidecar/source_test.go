package sidecar

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
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

// TestWeakSecretsAreWarnedOf: a short secret, or a word the sidecar's messages use, is named in
// a warning at start; a strong one is not.
func TestWeakSecretsAreWarnedOf(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	warnWeakSecrets(log, config.Inputs{StatsPassword: "config"}, config.Etcd{Password: "a-long-and-random-4921"}, &config.Dataplane{Token: "services"})
	got := out.String()
	for _, want := range []string{"secret=--statistics-password", "shorter than 8", "secret=--dataplane-token", "a word the sidecar's own messages use"} {
		if !strings.Contains(got, want) {
			t.Errorf("the warnings do not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "--etcd-password") {
		t.Errorf("a strong secret was warned of:\n%s", got)
	}
}
