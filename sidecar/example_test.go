package sidecar

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

var update = flag.Bool("update", false, "rewrite the golden files of the tests that have them")

// TestExampleRendersAsBefore: examples/local renders the same bytes, its binds set, empty
// and unset alike (its defaults were written pongo2's way, default:"...", before they were
// written Jinja2's, default("...", true): an empty value takes the default in both).
func TestExampleRendersAsBefore(t *testing.T) {
	t.Setenv("STATS_BIND", "127.0.0.1:9404")
	t.Setenv("HTTP_BIND", "")
	os.Unsetenv("HTTPS_BIND")
	out := t.TempDir()
	_, err := runOnce(t, "render", "--dir", "../examples/local", "--out", out, "--validate=false",
		"--ssl-dir", "/etc/haproxy/certs", "--maps-dir", "/etc/haproxy/maps", "--files-dir", "/etc/haproxy/files",
		"--env-allow", "STATS_BIND,HTTP_BIND,HTTPS_BIND", "--statistics-password", "example-password")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "examples-local.cfg")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("examples/local renders differently from %s (-update rewrites it):\n%s", golden, got)
	}
}

// TestValidateTakesHAProxyConfig: validate --haproxy-config renders with the directories run
// would use beside it, and prints the hash run would make live there.
func TestValidateTakesHAProxyConfig(t *testing.T) {
	hash := func(args ...string) string {
		t.Helper()
		out, err := runOnce(t, "validate", append([]string{"--dir", "../examples/local", "--validate=false"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`hash ([0-9a-f]{12})`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no hash in %q", out)
		}
		return m[1]
	}
	beside := hash("--haproxy-config", "/srv/lb/haproxy.cfg")
	if dirs := hash("--ssl-dir", "/srv/lb/certs", "--maps-dir", "/srv/lb/maps", "--files-dir", "/srv/lb/files"); beside != dirs {
		t.Errorf("--haproxy-config /srv/lb/haproxy.cfg: hash %s; the directories beside it given one by one: %s", beside, dirs)
	}
	if def := hash(); def == beside {
		t.Errorf("the hash beside /srv/lb/haproxy.cfg is the default's (beside %s): %s", config.DefaultHAProxyConfig, def)
	}
}

// validateExample runs `validate` on an example as a config ConfigMap in a directory of its own
// (with haproxy -c); it returns the directory, the example and validate's output, and fails the
// test when validate does.
func validateExample(t *testing.T, name string) (dir string, raw []byte, out string) {
	t.Helper()
	dir = t.TempDir()
	raw, err := os.ReadFile("../examples/templates/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runOnce(t, "validate", "--dir", dir, "--haproxy-bin", haproxytest.Binary(t))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return dir, raw, out
}

// TestPeersExampleTests: examples/templates/peers.yaml's tests in the config pass (the peers
// section of the replicas the test names, localpeer, the stick tables using it, haproxy -c).
func TestPeersExampleTests(t *testing.T) {
	dir, raw, out := validateExample(t, "peers.yaml")
	for _, want := range []string{"test peers: ok\n", "test not-among-peers: ok\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate does not say %q:\n%s", want, out)
		}
	}
	// A test that cannot pass fails validate: they are run, not skipped.
	broken := strings.Replace(string(raw), `contains: "localpeer haproxy-b"`, `contains: "localpeer haproxy-a"`, 1)
	if broken == string(raw) {
		t.Fatal("no localpeer assertion to break")
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runOnce(t, "validate", "--dir", dir, "--haproxy-bin", haproxytest.Binary(t)); err == nil || !strings.Contains(err.Error(), "test peers") {
		t.Errorf("validate with a failing test: %v, want the test peers named\n%s", err, out)
	}
}

// TestRenderWithPeers: render takes the --peers flags as run does: the example renders the
// peers section of the Pods in the directory that the selector picks, this one local.
func TestRenderWithPeers(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	raw, err := os.ReadFile("../examples/templates/peers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pods := ""
	for i, name := range []string{"haproxy-a", "haproxy-b", "web-1"} {
		app := "haproxy"
		if name == "web-1" {
			app = "web"
		}
		pods += fmt.Sprintf("---\napiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: lb, labels: {app: %s}}\nstatus: {phase: Running, podIP: 10.1.0.%d}\n", name, app, i+1)
	}
	for name, text := range map[string]string{"config.yaml": string(raw), "pods.yaml": pods} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := runOnce(t, "render", "--dir", dir, "--out", out, "--validate=false",
		"--peers-selector", "app=haproxy", "--peer-name", "haproxy-b", "--peers-port", "7000"); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(out, "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	want := "  localpeer haproxy-b\n\n# The replicas: one peer line each; this replica's (peers.local) is the one HAProxy binds.\npeers mypeers\n  peer haproxy-a 10.1.0.1:7000\n  peer haproxy-b 10.1.0.2:7000\n\n"
	if !strings.Contains(string(cfg), want) {
		t.Errorf("no peers section of haproxy-a and haproxy-b in:\n%s", cfg)
	}
}

// TestMulticlusterExampleTests: examples/templates/multicluster.yaml's tests in the config pass
// (one backend of every cluster's pods, one per cluster, a service's clusters list, haproxy
// -c), and they see the clusters: without the cluster of a pod the test fails.
func TestMulticlusterExampleTests(t *testing.T) {
	dir, raw, out := validateExample(t, "multicluster.yaml")
	if !strings.Contains(out, "test every-cluster: ok\n") {
		t.Errorf("validate does not say the test passed:\n%s", out)
	}
	// The west cluster's pods moved to east: the per-cluster backends change, the test fails.
	broken := strings.Replace(string(raw), "      west:\n", "      east2:\n", 1)
	if broken == string(raw) {
		t.Fatal("no west cluster to rename")
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runOnce(t, "validate", "--dir", dir, "--haproxy-bin", haproxytest.Binary(t)); err == nil || !strings.Contains(err.Error(), "test every-cluster") {
		t.Errorf("validate with the clusters renamed: %v, want the test every-cluster named\n%s", err, out)
	}
}
